"""``tracedoc metrics``: every metric a report holds is listed, with its unit, better side, scope, range and
meaning, in text, JSON and Markdown; names and scopes filter it."""

from __future__ import annotations

import json

import pytest
from log_fixtures import nanogpt_karpathy
from trace_builder import TraceBuilder, training_steps

from tracedoc.api import analyze, analyze_log
from tracedoc.cli import main


def _listed(capsys, *args: str) -> dict[str, dict]:
    assert main(["metrics", "-f", "json", *args]) == 0
    doc = json.loads(capsys.readouterr().out)
    return {m["name"]: m for m in doc["metrics"]}


def _rank(path, rank: int):
    b = TraceBuilder(rank=rank, world_size=2)
    training_steps(b, steps=3, kernels=4, dataloader_us=500.0)
    return b.write(path)


def test_every_metric_in_reports_is_listed(tmp_path, capsys):
    job = tmp_path / "job"
    job.mkdir()
    for r in (0, 1):
        _rank(job / f"rank{r}.json", r)
    result = analyze(job)
    log = tmp_path / "train.log"
    log.write_text(nanogpt_karpathy(n=200))
    log_result = analyze_log(log)
    reported = {"rank": set(), "job": set(), "log": set(log_result.metrics)}
    for r in result.ranks:
        reported["rank"] |= set(r.metrics)
    assert result.job is not None
    reported["job"] = set(result.job.metrics)
    listed = _listed(capsys)
    for scope, names in reported.items():
        assert names, scope
        missing = sorted(n for n in names if n not in listed)
        assert not missing, f"{scope} metrics not listed by `tracedoc metrics`: {missing}"
    # a rank carries the job's metrics its rules read as well; each is listed under its own scope
    assert {listed[n]["scope"] for n in reported["log"]} == {"log"}
    assert {listed[n]["scope"] for n in reported["job"]} == {"job"}
    # the text table lists them too (wide enough that no name folds)
    assert main(["metrics", "--width", "400"]) == 0
    text = capsys.readouterr().out
    for names in reported.values():
        for n in names:
            assert f"\n{n} " in text, n


def test_each_entry_has_unit_direction_scope_range_and_meaning(capsys):
    listed = _listed(capsys)
    busy = listed["gpu_busy_fraction"]
    assert busy == {
        **busy,
        "unit": "fraction",
        "better": "higher",
        "scope": "rank",
        "range": "0 to 1",
        "min": 0.0,
        "max": 1.0,
    }
    assert "GPU ops" in busy["meaning"]
    step = listed["step_time_p50_ns"]
    assert (step["unit"], step["better"], step["range"], step["min"], step["max"]) == ("ns", "lower", ">= 0", 0.0, None)
    assert listed["straggler_rank"]["range"] == "any" and listed["straggler_rank"]["scope"] == "job"
    assert all(m["meaning"] and m["unit"] for m in listed.values())


def test_filters_by_name_pattern_and_scope(capsys):
    idle = _listed(capsys, "idle_")
    assert idle and all("idle_" in n for n in idle)
    frac = _listed(capsys, "*_fraction", "--scope", "job")
    assert frac and all(n.endswith("_fraction") and m["scope"] == "job" for n, m in frac.items())
    assert "comm_wait_fraction" in frac and "idle_fraction" not in frac


def test_markdown_is_one_table_row_per_metric(capsys):
    assert main(["metrics", "-f", "md", "--scope", "log"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("| metric | unit | better | scope | range | meaning |")
    listed = _listed(capsys, "--scope", "log")
    assert len(lines) == 2 + len(listed)
    assert all(line.count(" | ") >= 5 for line in lines[2:])


@pytest.mark.parametrize("args", [["no_such_metric"], ["--scope", "log", "gpu_busy"]])
def test_a_name_matching_nothing_is_a_usage_error(capsys, args):
    assert main(["metrics", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no metric" in err and "tracedoc metrics" in err
