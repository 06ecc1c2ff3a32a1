"""Findings that earn their place: minor findings listed apart, the verdict naming labels that matter,
no communication cards on a single GPU, launch-queue delays explained, warnings printed once."""

from tracedoc import analyze
from tracedoc.model.record import replace
from tracedoc.cli import example_path, main
from tracedoc.render.text import render_text
from tracedoc.render.findingview import MIN_IMPACT_FRACTION
from tracedoc.render.viewmodel import build_report


def with_impacts(result, impacts, shares=None):
    """The result with its findings' impact fractions (the predicted gain) replaced by rule id, and with
    ``shares`` the cause's share of the step today beside a replayed prediction (none without)."""
    shares = shares or {}
    v = result.focus.verdict

    def what_if(f):
        if f.rule_id not in impacts:
            return f.what_if
        w = {
            "step_ms_before": 10.0,
            "step_ms_after": 10.0 * (1 - impacts[f.rule_id]),
            "gain_ms": 10.0 * impacts[f.rule_id],
            "method": "critical-path replay over 3 steps",
        }
        return {**w, "share_fraction": shares[f.rule_id]} if f.rule_id in shares else w

    focus = result.focus
    focus.verdict = v.with_findings(
        [replace(f, impact_fraction=impacts.get(f.rule_id, f.impact_fraction), what_if=what_if(f)) for f in v.findings]
    )
    return result


def test_findings_under_the_minimum_impact_are_minor_and_leave_the_verdict():
    result = analyze(example_path())
    v = result.focus.verdict
    assert "io_bound" in v.labels
    top = next(f for f in v.findings if f.label == "io_bound")
    with_impacts(result, {top.rule_id: MIN_IMPACT_FRACTION / 2})
    view = build_report(result).ranks[0]
    assert top.rule_id in [f.rule_id for f in view.minor_findings]
    assert top.rule_id not in [f.rule_id for f in view.findings]
    assert "io_bound" not in view.verdict.labels  # the verdict names only labels that matter
    text = render_text(result)
    assert "minor (under 2% of the step): " + top.rule_id in text
    md = result.to_markdown()
    assert "**Minor findings** (each under 2% of the step)" in md
    html = result.to_html()
    n = len(view.minor_findings)
    assert n >= 1 and f"Minor findings ({n}, each under 2% of the step)" in html


def test_a_cause_with_a_large_share_is_minor_when_the_replay_predicts_little_gain():
    """A label needs a predicted gain: a cause that takes a quarter of the step today but whose fix the
    replay says gains nothing (it is off the critical path) is minor, with its share and the prediction
    shown beside it."""
    result = analyze(example_path())
    top = next(f for f in result.focus.verdict.findings if f.label == "io_bound")
    with_impacts(result, {top.rule_id: 0.0}, shares={top.rule_id: 0.25})
    view = build_report(result).ranks[0]
    assert top.rule_id in [f.rule_id for f in view.minor_findings] and "io_bound" not in view.verdict.labels
    assert "if fixed: step 10 ms" in result.to_markdown()  # the minor list shows the replay's prediction
    with_impacts(result, {top.rule_id: 0.05}, shares={top.rule_id: 0.25})  # a 5% gain earns the label
    view = build_report(result).ranks[0]
    assert top.rule_id in [f.rule_id for f in view.findings] and "io_bound" in view.verdict.labels


def test_findings_at_the_minimum_stay_in_the_list():
    result = analyze(example_path())
    top = result.focus.verdict.findings[0]
    with_impacts(result, {top.rule_id: MIN_IMPACT_FRACTION})
    view = build_report(result).ranks[0]
    assert top.rule_id in [f.rule_id for f in view.findings]
    assert top.rule_id not in [f.rule_id for f in view.minor_findings]
    assert all(f.minor for f in view.minor_findings) and not any(f.minor for f in view.findings)


def test_single_gpu_run_shows_no_communication_columns(capsys):
    assert main(["analyze", example_path()]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if line.startswith("GPU busy"))
    assert "comm" not in header and "overlap" not in header
    view = build_report(analyze(example_path())).ranks[0]
    assert not {"comm", "exposed_comm", "comm_overlap"} & {i.key for i in view.summary}


def test_long_launch_delay_is_explained_as_queue_depth():
    result = analyze(example_path())
    result.focus.metrics["launch_delay_p50_ns"] = 77_100_000
    assert "launch delay p50 77.1 ms (time kernels wait in the launch queue" in " ".join(render_text(result).split())
    result.focus.metrics["launch_delay_p50_ns"] = 20_000
    assert "launch queue" not in render_text(result)


def test_a_warning_printed_at_load_is_not_repeated_in_the_body(capsys):
    result = analyze(example_path())
    result.focus.warnings.append("a reader warning")
    from tracedoc.render.console import TextOptions

    assert "warning: a reader warning" in render_text(result)
    assert "a reader warning" not in render_text(result, options=TextOptions(warnings_shown=True))
