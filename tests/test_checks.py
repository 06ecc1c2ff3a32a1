"""Invariants on every result: an impossible number is replaced by null and reported as a bug."""

import json
import math

import pytest

from trace_builder import TraceBuilder, training_steps
from tracedoc.api import analyze
from tracedoc.checks import BUG_PREFIX, bounds_of, check_rank, violations_in
from tracedoc.model.record import replace


@pytest.fixture
def result(tmp_path):
    b = TraceBuilder()
    training_steps(b, steps=3)
    return analyze(b.write(tmp_path / "t.json"))


def bugs(rank) -> list[str]:
    return [w for w in rank.warnings if w.startswith(BUG_PREFIX)]


def test_a_healthy_result_has_no_violations(result):
    rank = result.ranks[0]
    assert bugs(rank) == []
    assert violations_in(result.to_dict()["ranks"][0]) == []
    assert check_rank(rank) == []


@pytest.mark.parametrize(
    "name, value, what",
    [
        ("gpu_busy_fraction", -1.54, "outside [0, 1]"),
        ("cpu_launch_overhead_fraction", 136.0, "outside [0, 1]"),
        ("kernel_median_ns", -250, "negative"),
        ("kernel_count", -1, "negative"),
        ("est_occupancy_mean", 250.0, "outside [0, 100]"),
        ("gap_p95_ns", math.nan, "not a finite number"),
        ("step_time_mean_ns", math.inf, "not a finite number"),
    ],
)
def test_an_impossible_metric_becomes_null_with_a_bug_report(result, name, value, what):
    rank = result.ranks[0]
    rank.metrics[name] = value
    found = check_rank(rank)
    assert len(found) == 1 and f"metrics.{name} = " in found[0] and what in found[0]
    assert rank.metrics[name] is None
    assert found[0] in rank.warnings
    assert "bug in tracedoc" in found[0]


def test_evidence_rows_are_checked_by_column_meaning(result):
    rank = result.ranks[0]
    top = rank.evidence["top_kernels"]
    top[0] = replace(top[0], share=-1.54, total_ns=-5)
    rank.per_step[0]["end_ns"] = rank.per_step[0]["start_ns"] - 1
    causes = rank.evidence["idle_causes"]
    causes[0] = replace(causes[0], fraction=math.nan)
    found = check_rank(rank)
    joined = "\n".join(found)
    assert len(found) == 4, joined
    assert "evidence.top_kernels[0].share = -1.54 is outside [0, 1]" in joined
    assert "evidence.top_kernels[0].total_ns = -5 is negative" in joined
    assert "per_step[0].end_ns" in joined and "before its start_ns" in joined
    assert "evidence.idle_causes[0].fraction = nan is not a finite number" in joined
    assert rank.evidence["top_kernels"][0].share is None and rank.per_step[0]["end_ns"] is None


def test_a_violation_is_visible_in_every_output_and_json_stays_valid(result):
    from tracedoc.render import render_html, render_md, render_text

    rank = result.ranks[0]
    rank.metrics["idle_fraction"] = math.inf
    check_rank(rank)
    text = result.to_json()
    doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))
    assert doc["ranks"][0]["metrics"]["idle_fraction"] is None
    assert any(w.startswith(BUG_PREFIX) for w in doc["ranks"][0]["warnings"])
    for out in (render_text(result), render_md(result), render_html(result)):
        assert BUG_PREFIX in out


def test_bounds_follow_names():
    assert bounds_of("comm_overlap_fraction") == (0.0, 1.0)
    assert bounds_of("share") == (0.0, 1.0)
    assert bounds_of("gap_ns") == (0.0, math.inf)
    assert bounds_of("message_bytes_p50") == (0.0, math.inf)
    assert bounds_of("start_ns") is None and bounds_of("end_ns") is None  # timestamps may be any sign
    assert bounds_of("name") is None


def test_metric_bounds_follow_units_except_where_the_meaning_allows_more():
    from tracedoc.checks import metric_bounds

    assert metric_bounds("mfu") == (0.0, 1.0)  # measured FLOP/s above the peak would be a counting bug
    assert metric_bounds("gpu_busy_fraction") == (0.0, 1.0)
    assert metric_bounds("formula_mfu") == (0.0, math.inf)  # a config that does not describe the trace
    assert metric_bounds("kernel_count") == (0.0, math.inf)


def test_the_shipped_example_passes(tmp_path):
    from tracedoc.cli import example_path

    res = analyze(example_path())
    assert all(bugs(r) == [] for r in res.ranks)
    assert violations_in(res.to_dict()["ranks"][0]) == []


def test_job_metrics_are_checked_like_rank_metrics():
    """The job view's metrics have ranges in the metric table too: a wait share above 1 cannot be."""
    from tracedoc.checks import check_job, metric_bounds
    from tracedoc.job.view import JobView

    assert metric_bounds("straggler_wait_fraction") == (0.0, 1.0)
    assert metric_bounds("straggler_wait_ms_per_step") == (0.0, math.inf)
    view = JobView(
        ranks_used=[0, 1],
        metrics={"straggler_wait_fraction": 1.285, "straggler_count": 1, "comm_top_collective": "all_reduce"},
    )
    found = check_job(view)
    assert len(found) == 1 and "job: metrics.straggler_wait_fraction = 1.285 is outside [0, 1]" in found[0]
    assert view.metrics["straggler_wait_fraction"] is None and view.metrics["straggler_count"] == 1
    assert found[0] in view.issues
