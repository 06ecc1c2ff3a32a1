"""Every shipped rule with ``scope = "log"``: its fixtures fire and do not fire on a healthy training-log
baseline; trace rules never run on log metrics and log rules never on trace metrics; the scope field
is validated."""

from __future__ import annotations

import pytest

from tracedoc.engine import evaluate, load_rules, load_ruleset
from tracedoc.engine.rulefile import RuleError, apply_test_case, load_rule_file, rule_files
from tracedoc.logs.registry import LOG_METRICS
from tracedoc.resources import data_dir

ALL_RULES = load_rules()
RULESET = load_ruleset()
LOG_RULES = [r for r in ALL_RULES if r.scope == "log"]

# A healthy run: 10,000 steps of 0.5 s, loss falling, steady throughput, consistent config.
BASELINE: dict = dict.fromkeys(LOG_METRICS)
BASELINE.update(
    {
        "log_points": 1000,
        "log_first_step": 10,
        "log_last_step": 10_000,
        "step_time_p50_s": 0.5,
        "loss_logged": True,
        "loss_nonfinite_count": 0,
        "grad_norm_nonfinite_count": 0,
        "nan_iterations": 0,
        "skipped_iterations": 0,
        "skipped_iteration_fraction": 0.0,
        "precision": "bf16",
        "loss_spike_count": 0,
        "loss_spike_persistent_count": 0,
        "grad_norm_spike_count": 0,
        "divergence": False,
        "lr_schedule": "warm-up to step 500, then cosine decay",
        "lr_jump_count": 0,
        "throughput_logged": True,
        "throughput_unit": "tokens/s",
        "throughput_p10": 48_000.0,
        "throughput_p50": 50_000.0,
        "throughput_p90": 51_000.0,
        "throughput_dip_count": 0,
        "throughput_dip_lost_fraction": 0.0,
        "gpu_util_logged": True,
        "gpu_util_mean_percent": 97.0,
        "low_gpu_util_fraction": 0.0,
        "low_gpu_util_episode_count": 0,
        "config_source": "args.json",
        "config_world_size": 16,
        "parallel_mismatch": False,
        "parallel_text": "TP 2 x PP 2 x CP 1 x DP 4 = 16 == world size 16",
        "batch_mismatch": False,
        "batch_text": "global batch 64 is a multiple of micro 2 x DP 4 = 8",
        "tp_divisibility_problem": False,
        "tp_divisibility_text": "sizes divide",
        "bf16_unsupported": False,
        "gpu_name": "NVIDIA H100 80GB HBM3",
    }
)
EVIDENCE = {
    name: [{"row": i} for i in range(20)]
    for name in (
        "anomalies",
        "nan_steps",
        "loss_spikes",
        "throughput_dips",
        "periodic_stalls",
        "loss_bumps",
        "skip_groups",
        "lr_schedule",
        "config_checks",
    )
}


def _cases(kind: str):
    for rule in LOG_RULES:
        for i, case in enumerate(rule.tests.get(kind, ())):
            yield pytest.param(rule.id, case, id=f"{rule.id}-{kind}{i}")


def test_the_log_labels_have_rules():
    assert {"unstable_training", "throughput_regression", "periodic_stall", "config_error"} <= {
        r.label for r in LOG_RULES
    }


@pytest.mark.parametrize("rule_id, case", list(_cases("fires")))
def test_log_rule_fires(rule_id, case):
    metrics = apply_test_case(BASELINE, case)
    verdict = evaluate(metrics, EVIDENCE, 0.5e9, ruleset=RULESET, scope="log")
    fired = {f.rule_id: f for f in verdict.findings}
    assert rule_id in fired, f"{rule_id} did not fire on {case}; fired: {sorted(fired)}"
    f = fired[rule_id]
    assert f.message and "{" not in f.message and f.fixes and f.expect
    if f.impact_fraction is not None:
        assert f.impact_ms_per_step == pytest.approx(f.impact_fraction * 500.0)


@pytest.mark.parametrize("rule_id, case", list(_cases("ok")))
def test_log_rule_near_miss(rule_id, case):
    metrics = apply_test_case(BASELINE, case)
    verdict = evaluate(metrics, EVIDENCE, 0.5e9, ruleset=RULESET, scope="log")
    assert rule_id not in {f.rule_id for f in verdict.findings}


def test_healthy_log_baseline_has_no_finding():
    verdict = evaluate(BASELINE, EVIDENCE, 0.5e9, ruleset=RULESET, scope="log")
    assert verdict.findings == [] and verdict.health == []


def test_scopes_do_not_cross():
    # a log rule that would fire on everything does not run on trace metrics, and vice versa
    trace_metrics = {"gpu_busy_fraction": 0.1, "has_gpu_ops": True, "steps": 10, "step_time_mean_ns": 1e8}
    trace_verdict = evaluate(trace_metrics, {}, 1e8, ruleset=RULESET)
    assert not {f.rule_id for f in trace_verdict.findings} & {r.id for r in LOG_RULES}
    log_verdict = evaluate(
        apply_test_case(BASELINE, {"parallel_mismatch": True}), EVIDENCE, 0.5e9, ruleset=RULESET, scope="log"
    )
    assert {f.rule_id for f in log_verdict.findings} == {"TD701"}


def _write_rule(tmp_path, **fields):
    lines = []
    for k, v in fields.items():
        lines.append(f"{k} = {v!r}".replace("'", '"') if isinstance(v, str) else f"{k} = {str(v).lower()}")
    body = (
        "\n".join(lines)
        + """
[[fixes]]
text = "do something"
[docs]
what_it_detects = "x"
why_it_matters = "y"
references = ["z"]
"""
    )
    (tmp_path / "X900-test-rule.toml").write_text(body)


def test_scope_is_validated(tmp_path):
    base = dict(id="X900", name="test-rule", title="t", label="config_error", severity="error", message="m", expect="e")
    _write_rule(tmp_path, scope="logs", when="parallel_mismatch == True", **base)
    with pytest.raises(RuleError, match="unknown scope 'logs'.*did you mean 'log'"):
        load_rules([tmp_path], builtin=False)
    _write_rule(tmp_path, scope="log", when="gpu_busy_fraction < 0.5", **base)
    with pytest.raises(RuleError, match="unknown name 'gpu_busy_fraction'"):
        load_rules([tmp_path], builtin=False)
    _write_rule(tmp_path, when="parallel_mismatch == True", **base)  # no scope: a trace rule
    with pytest.raises(RuleError, match="unknown name 'parallel_mismatch'"):
        load_rules([tmp_path], builtin=False)
    _write_rule(tmp_path, scope="log", when="parallel_mismatch == True", **base)
    (rule,) = load_rules([tmp_path], builtin=False)
    assert rule.scope == "log"


def test_every_log_rule_file_is_documented():
    for path in rule_files(data_dir("rules")):
        rule = load_rule_file(path)
        if rule.scope == "log":
            assert rule.requires_gpu is False, f"{rule.id}: a log rule must not wait for a GPU verdict"
            assert rule.docs["references"]


def test_every_log_metric_has_a_producer(tmp_path):
    """The log analyses and the config checks write every registered log metric (None where not
    measurable), so that a rule never reads a name nothing produces."""
    import json

    from tracedoc.logs.analysis import analyze_series
    from tracedoc.logs.config import check_config
    from tracedoc.logs.reader import read_log

    path = tmp_path / "l.jsonl"
    path.write_text(
        "".join(
            json.dumps({"step": i, "loss": 2.0, "grad_norm": 1.0, "lr": 1e-4, "tokens_per_sec": 1e3, "gpu_util": 90})
            + "\n"
            for i in range(1, 200)
        )
    )
    series = read_log(path)
    produced = set(analyze_series(series).metrics)
    produced |= set(check_config({}, [])[0]) | {"grad_clip_value", "grad_clip_fraction"}  # the last two: report.py
    assert produced == set(LOG_METRICS)


def test_each_anomaly_kind_names_a_shipped_log_rule():
    """The log analyses name rule ids in one table (``ANOMALY_RULES``): each one a shipped log rule, and a
    different rule for each kind but NaN (the loss and the gradient norm, both TD601)."""
    from tracedoc.logs.registry import ANOMALY_RULES

    log_ids = {r.id for r in LOG_RULES}
    assert set(ANOMALY_RULES.values()) <= log_ids, set(ANOMALY_RULES.values()) - log_ids
    assert len(set(ANOMALY_RULES.values())) == len(ANOMALY_RULES)


def test_an_anomaly_row_names_the_rule_the_table_gives(tmp_path, monkeypatch):
    """Renaming a rule changes the anomaly rows through the table alone: the NaN losses of a JSON Lines
    log carry the id the table holds, whatever it is."""
    import json

    import tracedoc
    from tracedoc.logs import registry

    monkeypatch.setitem(registry.ANOMALY_RULES, "nan", "TD691")
    rows = [{"step": i, "loss": 5.0 - 0.01 * i} for i in range(200)]
    rows += [{"step": 200 + i, "loss": float("nan")} for i in range(5)]
    log = tmp_path / "train.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    result = tracedoc.analyze_log(str(log), jobs=1)
    assert [(a["kind"], a["rule"]) for a in result.anomalies] == [("nan", "TD691")]
