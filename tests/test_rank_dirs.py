"""Directories of rank files: a bad file costs only its rank, and two files claiming one rank are named."""

from __future__ import annotations

import json

import pytest

from trace_builder import TraceBuilder, training_steps
from tracedoc.api import analyze
from tracedoc.cli import main
from tracedoc.errors import TraceError
from tracedoc.render import render_html, render_md, render_text
from tracedoc.result import AnalysisResult


def write_rank(path, rank: int, compress: bool = False):
    b = TraceBuilder(rank=rank, world_size=4)
    training_steps(b, steps=3, kernels=4)
    return b.write(path, compress=compress)


@pytest.fixture
def job_dir(tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    write_rank(d / "rank0.json", 0)
    write_rank(d / "rank1.json", 1)
    (d / "rank2.json").write_bytes(b"")
    (d / "rank3.json.gz").write_bytes(b"\x1f\x8b\x08\x00" + bytes(range(200)))
    return d


def test_bad_rank_files_cost_only_their_ranks(job_dir):
    with pytest.warns(UserWarning) as caught:
        res = analyze(job_dir, jobs=2)
    assert [r.rank for r in res.ranks] == [0, 1]
    assert set(res.failed) == {str(job_dir / "rank2.json"), str(job_dir / "rank3.json.gz")}
    assert "is empty" in res.failed[str(job_dir / "rank2.json")]
    assert "gzip" in res.failed[str(job_dir / "rank3.json.gz")]
    doc = json.loads(res.to_json())
    errors = {i["path"]: i.get("error") for i in doc["inputs"]}
    assert errors[str(job_dir / "rank0.json")] is None and "is empty" in errors[str(job_dir / "rank2.json")]
    assert "not analysed: rank2.json" in render_text(res)
    # one record, shown everywhere: the job view lists it and uses only the ranks read
    assert "failed" not in doc["job"] and doc["job"]["ranks_used"] == [0, 1]
    assert "not analysed: rank3.json.gz" in render_md(res) and "not analysed: rank3.json.gz" in render_html(res)
    assert AnalysisResult.from_dict(doc).failed == res.failed
    said = "\n".join(str(w.message) for w in caught)
    assert "rank file not analysed, the other 2 were" in said and "rank3.json.gz" in said


def test_cli_reports_bad_ranks_and_succeeds(job_dir, capsys):
    rc = main(["analyze", str(job_dir), "--format", "json", "--no-progress", "-j", "2"])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "tracedoc: warning: " in cap.err and "rank2.json" in cap.err and "Traceback" not in cap.err
    assert len(json.loads(cap.out)["ranks"]) == 2


def test_a_directory_of_only_bad_ranks_is_one_error(tmp_path):
    d = tmp_path / "bad"
    d.mkdir()
    (d / "rank0.json").write_bytes(b"")
    (d / "rank1.json.gz").write_bytes(b"\x1f\x8b garbage")
    with pytest.raises(TraceError, match=r"no rank file could be read \(2 tried\)"):
        analyze(d, jobs=2)


def test_two_files_claiming_one_rank_are_named(tmp_path):
    d = tmp_path / "dup"
    d.mkdir()
    a = write_rank(d / "rank0.json", 0)
    b = write_rank(d / "rank_0.json.gz", 0, compress=True)
    write_rank(d / "rank1.json", 1)
    res = analyze(d, jobs=2)
    dup = [r for r in res.ranks if r.rank == 0]
    assert len(dup) == 2
    for r, other in zip(dup, reversed(dup)):
        w = next(w for w in r.warnings if "claims rank 0" in w)
        assert other.source in w
    assert str(a) in {r.source for r in dup} and str(b) in {r.source for r in dup}
    assert not any("claims rank" in w for r in res.ranks if r.rank == 1 for w in r.warnings)
