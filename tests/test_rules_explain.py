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
