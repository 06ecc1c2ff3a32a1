"""``tracedoc rules explain``: a label lists the rules behind it; texts show current parameter values."""

import re

import pytest

from tracedoc.cli import main
from tracedoc.engine.rulefile import load_rules


def explain(capsys, *argv):
    code = main(["rules", "explain", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("label", ["io_bound", "small_batch_bound", "advice"])
def test_explain_a_label_lists_every_rule_that_produces_it(capsys, label):
    code, out, _ = explain(capsys, label)
    assert code == 0
    want = sorted(r.id for r in load_rules(()) if r.label == label)
    assert want
    listed = re.findall(r"^  (TD\d+) ", out, flags=re.M)
    assert listed == want
    others = {r.id for r in load_rules(()) if r.label != label}
    assert not others & set(listed)


def test_explain_renders_templates_with_parameter_values(capsys):
    code, out, _ = explain(capsys, "TD301")
    assert code == 0
    assert "{" not in out  # no raw {x:.0%} fields
    assert "below 5% of the window" in out  # stall_threshold = 0.05 formatted as the report would
    assert "<dataloader_stall_fraction>" in out  # a measured value: named, not invented
    code, out, _ = explain(capsys, "TD301", "--param", "TD301.stall_threshold=0.12")
    assert "below 12% of the window" in out and "stall_threshold = 0.12" in out and "(default 0.05)" in out
    assert "dataloader_stall_fraction > stall_threshold (= 0.12)" in out


@pytest.mark.parametrize("rule", [r.id for r in load_rules(())])
def test_no_rule_explanation_shows_a_raw_template_field(capsys, rule):
    code, out, _ = explain(capsys, rule)
    assert code == 0 and not re.search(r"\{[^}]*\}", out)


def test_unknown_rule_or_label_is_a_usage_error(capsys):
    code, _, err = explain(capsys, "io_bund")
    assert code == 2 and "io_bound" in err  # suggests the label


def test_a_trace_without_gpu_ops_is_told_what_it_holds():
    from tracedoc.engine.health import check_health

    (h,) = check_health({"has_gpu_ops": False, "profiler_range_events": 77, "runtime_calls": 1862})
    assert "CUPTI range profiler" in h.message and "77" in h.message and "1,862" in h.message
    assert "activities=[" not in h.message and h.withhold
    (h,) = check_health({"has_gpu_ops": False, "profiler_range_events": 0, "runtime_calls": 12})
    assert "12 CUDA runtime calls" in h.message and "ProfilerActivity.CUDA" in h.message
    h, *rest = check_health({"has_gpu_ops": False, "profiler_range_events": 0, "runtime_calls": 0, "steps": 5})
    assert "CPU activity only" in h.message and "GPU-side metrics were not recorded" in h.message and not rest
    assert h.code == "cpu-only-trace" and h.withhold and h.affects == () and h.confidence == "high"


def test_cupti_counters_trace_names_the_range_profiler(capsys):
    from conftest import shared_traces

    assert main(["analyze", str(shared_traces() / "kineto" / "cupti_counters.json.gz")]) == 0
    out = " ".join(capsys.readouterr().out.split())  # sentences wrap at the width
    assert "CUPTI range profiler" in out and "77 per-kernel hardware-counter records" in out
    assert "activities=[ProfilerActivity.CPU" not in out


def test_every_label_has_a_meaning_in_explain_and_in_reports(capsys):
    """Each label any rule may give says what it means, beside the label and with a rule's docs."""
    from tracedoc.labels import LABELS, MEANINGS, label_meaning

    assert set(MEANINGS) == set(LABELS)
    assert all(len(label_meaning(label)) > 10 for label in LABELS)
    given = {r.label for r in load_rules(())}
    assert given <= set(LABELS)
    for label in sorted(given):
        code, out, _ = explain(capsys, label)
        assert code == 0 and " ".join(out.split()).startswith(" ".join(f"{label}: {label_meaning(label)}".split()))
    rule = next(r for r in load_rules(()) if r.label == "straggler_bound")
    code, out, _ = explain(capsys, rule.id)
    assert f"Label straggler_bound: {label_meaning('straggler_bound')}" in out
