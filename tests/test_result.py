"""A saved report is a value: ``tracedoc analyze -f json`` loads back (``tracedoc.result.load``) into an
equal ``AnalysisResult``, for every shared trace, the built-in example and a directory of ranks."""

import gzip
import json
from pathlib import Path

import pytest

import tracedoc
from conftest import MISSING_REASON, TRACES, shared_names
from trace_builder import TraceBuilder
from tracedoc.cli import example_path, main
from tracedoc.engine import Finding, HealthMessage, Verdict
from tracedoc.errors import TraceError
from tracedoc.render import render_html, render_md, render_text
from tracedoc.result import SCHEMA_NAME, AnalysisResult, load


def _shared(kind: str, pattern: str) -> list:
    names = [n for n in shared_names(kind, pattern) if "expected" not in n and "gpu_metrics" not in n]
    return names or [pytest.param("-", marks=pytest.mark.skip(reason=MISSING_REASON))]


def assert_round_trips(result: AnalysisResult, tmp_path: Path) -> AnalysisResult:
    path = tmp_path / "report.json"
    result.save(path)
    saved = json.loads(path.read_text())
    loaded = load(path)
    assert loaded.to_dict() == saved  # every field read back, nothing added
    assert AnalysisResult.from_dict(json.loads(loaded.to_json())) == loaded  # a value: equal after another trip
    for mine, theirs in zip(result.ranks, loaded.ranks):
        assert isinstance(theirs.verdict, Verdict)
        assert all(isinstance(f, Finding) for f in theirs.verdict.findings)
        assert all(isinstance(h, HealthMessage) for h in theirs.verdict.health)
        assert theirs.verdict.labels == mine.verdict.labels
        assert theirs.window == mine.window
    return loaded


@pytest.mark.parametrize("name", _shared("kineto", "*.json*"))
def test_kineto_report_round_trips(name, tmp_path):
    assert_round_trips(tracedoc.analyze(TRACES / "kineto" / name), tmp_path)


@pytest.mark.parametrize("name", _shared("nsys", "*.sqlite"))
def test_nsys_report_round_trips(name, tmp_path):
    assert_round_trips(tracedoc.analyze(TRACES / "nsys" / name), tmp_path)


def test_example_report_from_the_cli_round_trips_and_renders_the_same(tmp_path, capsys):
    out = tmp_path / "example.json"
    # the format comes from the extension; the HTML timeline needs the excerpts --timeline keeps
    assert main(["analyze", "--example", "-o", str(out), "--timeline"]) == 0
    loaded = load(out)
    assert loaded.to_dict() == json.loads(out.read_text())
    fresh = tracedoc.analyze(example_path())
    fresh.command = loaded.command
    # A report rendered from the saved JSON is the report rendered from the analysis.
    assert render_md(loaded) == render_md(fresh)
    assert render_html(loaded) == render_html(fresh)
    assert render_text(loaded) == render_text(fresh)
    lean = tmp_path / "lean.json"
    assert main(["analyze", "--example", "-o", str(lean)]) == 0  # without the timeline: text and md the same
    lean_loaded = load(lean)
    assert render_md(lean_loaded) == render_md(fresh) and render_text(lean_loaded) == render_text(fresh)


def test_directory_report_keeps_its_job_table(tmp_path):
    for rank, busy_us in ((0, 30.0), (1, 60.0)):
        b = TraceBuilder(rank=rank, world_size=2)
        b.step(1, 0.0, 100.0)
        b.kernel("k", 10.0, busy_us, launch_at=5.0)
        b.write(tmp_path / f"rank{rank}.pt.trace.json.gz")
    result = tracedoc.analyze(tmp_path, jobs=1)
    assert result.job is not None and [row.rank for row in result.job.ranks] == [0, 1]
    # busy = kernel length / window (first step start to the end of its GPU work: 100 µs)
    assert [round(row.gpu_busy_fraction, 3) for row in result.job.ranks] == [0.3, 0.6]
    (tmp_path / "out").mkdir()
    loaded = assert_round_trips(result, tmp_path / "out")
    assert loaded.job == result.job


def test_load_rejects_what_is_not_a_report(tmp_path):
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"traceEvents": []}))
    with pytest.raises(TraceError, match="not a tracedoc report"):
        load(trace)
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"schema": SCHEMA_NAME, "schema_version": 99}))
    with pytest.raises(TraceError, match="schema version 99"):
        load(newer)
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"schema": SCHEMA_NAME, "schema_version": 1, "inputs": []}))
    with pytest.raises(TraceError, match="missing or malformed"):
        load(broken)
    with pytest.raises(TraceError, match="not valid JSON"):
        (tmp_path / "x.json").write_text("{")
        load(tmp_path / "x.json")


V1_JOB = Path(__file__).resolve().parent / "gold" / "reports" / "v1_job.json.gz"
# the last layout of version 1: the rank table with the matched-step columns, the job view's alignment
V1_JOB_LAST = Path(__file__).resolve().parent / "gold" / "reports" / "v1_job_last.json.gz"


def test_a_saved_report_loads_back_equal_to_the_result(tmp_path):
    """``load_report(p) == result``: the saved model holds everything, and nothing it cannot read back."""
    result = tracedoc.analyze(example_path())
    result.save(tmp_path / "r.json")
    assert tracedoc.load_report(tmp_path / "r.json") == result
    lean = tmp_path / "lean.json"  # what -f json writes: no timeline; everything else
    lean.write_text(result.to_json(timeline=False))
    assert tracedoc.load_report(lean) == AnalysisResult.from_dict(result.to_dict(timeline=False))


def test_a_report_of_the_previous_schema_version_loads_through_the_migration():
    """A CI baseline written by the release before (schema 1, a 4-rank job with a straggler): one rank
    table in ns, and the rank shown is the straggler, by the one focus rule."""
    old = json.loads(gzip.decompress(V1_JOB.read_bytes()))
    assert old["schema_version"] == 1 and old["job"]["focus_index"] == 0 and old["job"]["straggler_ranks"] == [3]
    loaded = load(V1_JOB)
    assert loaded.schema_version == 2
    by_rank = {row.rank: row for row in loaded.job.ranks}
    for v1_row in old["job"]["rank_table"]:
        row = by_rank[v1_row["rank"]]
        assert row.wait_ns_per_step == pytest.approx(v1_row["wait_ms_per_step"] * 1e6)
        assert row.lateness_ns_per_step == pytest.approx(v1_row["lateness_ms_per_step"] * 1e6)
        assert row.step_time_p50_ns == pytest.approx(v1_row["step_p50_ms"] * 1e6)
        assert row.straggler == v1_row["straggler"]
    assert loaded.focus.rank == 3 and loaded.focus_reason.startswith("the straggler")
    assert "rank 3" in render_text(loaded) and loaded.to_dict()["job"]["ranks"][3]["straggler"] is True
    again = AnalysisResult.from_dict(json.loads(loaded.to_json()))
    assert again == loaded  # once migrated, a value like any other


@pytest.mark.parametrize("version", [0, None, "1", 3])
def test_a_report_of_another_schema_version_fails_in_one_line_naming_it(tmp_path, capsys, version):
    doc = json.loads(gzip.decompress(V1_JOB.read_bytes()))
    doc["schema_version"] = version
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceError) as exc:
        load(path)
    assert f"is a report of schema version {version!r}; this tracedoc reads versions 1 to 2" in exc.value.message()
    assert main(["diff", str(path), str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"schema version {version!r}" in err and "Traceback" not in err


def test_a_report_of_the_last_version_1_layout_loads_with_every_column_in_ns():
    """The release before this schema wrote version 1 with more rank-table columns (medians over the
    matched steps): each reads back in ns, the view's alignment and confidence with it."""
    old = json.loads(gzip.decompress(V1_JOB_LAST.read_bytes()))
    assert old["schema_version"] == 1 and "alignment" in old["job"] and old["job"]["straggler_ranks"] == [3]
    loaded = load(V1_JOB_LAST)
    assert loaded.job.focus_rank is None and loaded.focus.rank == 3  # the one focus rule
    assert loaded.job.alignment == old["job"]["alignment"] and loaded.job.not_a_job is None
    assert loaded.job.stragglers[0]["confidence"] == old["job"]["stragglers"][0]["confidence"]
    by_rank = {row.rank: row for row in loaded.job.ranks}
    for v1_row in old["job"]["rank_table"]:
        row = by_rank[v1_row["rank"]]
        assert row.matched_steps == v1_row["matched_steps"] > 0
        for ms, ns in (
            ("matched_step_p50_ms", "matched_step_p50_ns"),
            ("wait_ms_per_step", "wait_ns_per_step"),
            ("lateness_ms_per_step", "lateness_ns_per_step"),
            ("dataloader_ms_per_step", "dataloader_ns_per_step"),
        ):
            assert getattr(row, ns) == pytest.approx(v1_row[ms] * 1e6), ns
        for same in ("wait_fraction", "lateness_fraction", "comm_wait_fraction", "arrived_last_fraction", "straggler"):
            assert getattr(row, same) == v1_row[same], same
    assert AnalysisResult.from_dict(loaded.to_dict()) == loaded
