"""A saved report is a value: ``tracedoc analyze -f json`` loads back (``tracedoc.result.load``) into an
equal ``AnalysisResult``, for every shared trace, the built-in example and a directory of ranks."""

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
