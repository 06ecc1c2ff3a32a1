"""Rules engine: load-time validation, the restricted evaluator, parameters, ranking, health,
scenario verdicts and the CLI wiring."""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path

import pytest

from tracedoc.engine import (
    ExprError,
    ParamError,
    RuleError,
    collect_params,
    compile_expr,
    evaluate,
    load_rules,
    load_ruleset,
    rules_version,
)
from tracedoc.cli.ruleoptions import add_engine_options, fail_on_exit_code
from tracedoc.cli.rules import register
from tracedoc.engine.params import parse_assignments, parse_value
from tracedoc.engine.rulefile import load_rule_file
from tracedoc.engine.template import compile_template

from test_rules import BASELINE

NUMS = {"a": "num", "b": "num", "flag": "bool", "name": "str"}

MINIMAL_RULE = """
id = "{id}"
name = "{name}"
title = "A test rule"
label = "io_bound"
severity = "warning"
when = "{when}"
impact = "dataloader_stall_fraction"
message = "stall {{dataloader_stall_fraction:.0%}} (threshold {{limit:.0%}})"
expect = "stall below {{limit:.0%}}"

[params.limit]
default = 0.05
unit = "fraction"
justification = "test"

[[fixes]]
text = "fix it"

[docs]
what_it_detects = "x"
why_it_matters = "y"
references = ["z"]
"""


def write_rule(directory: Path, rid: str = "XX001", name: str = "test-rule",
               when: str = "dataloader_stall_fraction > limit", text: str | None = None) -> Path:  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{rid}-{name}.toml"
    path.write_text(text if text is not None else MINIMAL_RULE.format(id=rid, name=name, when=when))
    return path


def metrics(**overrides):
    out = dict(BASELINE)
    out.update(overrides)
    return out


# --- the expression language ------------------------------------------------------------------


@pytest.mark.parametrize(
    "source, message",
    [
        ("__import__('os')", "call to '__import__' is not allowed"),
        ("a.real > 1", "attribute access is not allowed"),
        ("a[0] > 1", "subscripts are not allowed"),
        ("(lambda: 1)()", "only calls to min, max and abs"),
        ("[x for x in a]", "comprehensions are not allowed"),
        ("open('f')", "call to 'open' is not allowed"),
        ("a if b else 1", "conditional expressions are not allowed"),
        ("a ** 2 > 1", "operator Pow is not allowed"),
        ("a == None", "is None"),
        ("a > 'x'", "cannot compare a num value with a str value"),
        ("name + 1 > 0", "arithmetic needs numbers"),
        ("aa > 1", "unknown name 'aa' (did you mean 'a'?)"),
        ("a >", "syntax error"),
        ("min(a)", "at least 2"),
        ("max(a=1, b=2)", "keyword"),
        ("a is 1", "may only compare with None"),
        ("(x := 1)", "assignment expressions"),
        ("b'x' == b'y'", "literal"),
    ],
)
def test_unsafe_or_invalid_expressions_are_rejected(source, message):
    with pytest.raises(ExprError, match=None) as exc:
        compile_expr(source, NUMS)
    assert message in str(exc.value)


def test_three_valued_logic_with_none():
    e = compile_expr("a > 1", NUMS)
    assert e.holds({"a": 2}) and not e.holds({"a": None}) and not e.holds({})
    assert not compile_expr("not (a > 1)", NUMS).holds({"a": None})  # unknown stays unknown
    assert compile_expr("a > 1 or b > 1", NUMS).holds({"a": None, "b": 2})
    assert not compile_expr("a > 1 and b > 1", NUMS).holds({"a": None, "b": 2})
    assert compile_expr("a is None", NUMS).holds({"a": None})
    assert compile_expr("a / b is None", NUMS).holds({"a": 1, "b": 0})  # division by zero: unknown
    assert compile_expr("min(a, b) + abs(a - b) == max(a, b)", NUMS).holds({"a": 3, "b": 5})
    assert not compile_expr("a > 1", NUMS).holds({"a": float("nan")})
    assert compile_expr("flag == False", NUMS).holds({"flag": False})
    assert not compile_expr("flag == False", NUMS).holds({"flag": None})
    assert compile_expr('name != "nccl"', NUMS).holds({"name": "gloo"})


def test_templates_render_unknown_as_na_and_reject_bad_specs():
    t = compile_template("x {a:.0%} of {b / a:.1f}", NUMS)
    assert t.render({"a": 0.5, "b": 2}) == "x 50% of 4.0"
    assert t.render({"a": None, "b": 2}) == "x n/a of n/a"
    with pytest.raises(ExprError, match="format spec"):
        compile_template("{name:.0%}", NUMS)
    with pytest.raises(ExprError, match="attribute access"):
        compile_template("{a.__class__}", NUMS)
    with pytest.raises(ExprError, match="conversions"):
        compile_template("{a!r}", NUMS)


# --- rule-file validation -----------------------------------------------------------------------


def test_unknown_metric_names_file_field_and_suggestion(tmp_path):
    write_rule(tmp_path, when="dataloader_stal_fraction > limit")
    with pytest.raises(RuleError) as exc:
        load_rules([tmp_path])
    text = str(exc.value)
    assert "XX001-test-rule.toml: when" in text
    assert "unknown name 'dataloader_stal_fraction'" in text
    assert "did you mean 'dataloader_stall_fraction'" in text


def test_unknown_param_name_suggests(tmp_path):
    write_rule(tmp_path, when="dataloader_stall_fraction > limt")
    with pytest.raises(RuleError, match="did you mean 'limit'"):
        load_rules([tmp_path])


@pytest.mark.parametrize(
    "when, message",
    [
        ("__import__('os').system('true')", "attribute access is not allowed"),
        ("__import__('os')", "call to '__import__' is not allowed"),
        ("dataloader_stall_fraction.real > limit", "attribute access is not allowed"),
        ("[m for m in steps]", "comprehensions are not allowed"),
        ("eval('1') > 0", "call to 'eval' is not allowed"),
    ],
)
def test_unsafe_conditions_fail_at_load_time(tmp_path, when, message):
    write_rule(tmp_path, when=when.replace('"', "'"))
    with pytest.raises(RuleError, match="when") as exc:
        load_rules([tmp_path])
    assert message in str(exc.value)


def test_duplicate_ids_name_both_files(tmp_path):
    write_rule(tmp_path / "a", rid="XX001", name="first-rule")
    write_rule(tmp_path / "b", rid="XX001", name="second-rule")
    with pytest.raises(RuleError) as exc:
        load_rules([tmp_path / "a", tmp_path / "b"])
    assert "duplicate rule id 'XX001'" in str(exc.value)
    assert "XX001-first-rule.toml" in str(exc.value) and "XX001-second-rule.toml" in str(exc.value)


def test_user_rule_may_not_reuse_a_shipped_id(tmp_path):
    write_rule(tmp_path, rid="TD301", name="my-stall")
    with pytest.raises(RuleError, match="duplicate rule id 'TD301'"):
        load_rules([tmp_path])


def test_missing_fields_bad_types_and_typos_are_all_reported(tmp_path):
    text = MINIMAL_RULE.format(id="XX001", name="test-rule", when="dataloader_stall_fraction > limit")
    text = text.replace('severity = "warning"', 'severity = "fatal"').replace('label = "io_bound"', 'label = "io_bund"')
    text = text.replace('title = "A test rule"', "title = 3\nwhem = 'x'")
    text = text.replace('[[fixes]]\ntext = "fix it"\n', "")
    text = text.replace("default = 0.05", "default = [1]")
    write_rule(tmp_path, text=text)
    with pytest.raises(RuleError) as exc:
        load_rules([tmp_path])
    problems = dict(exc.value.problems)
    keys = {k.split(": ", 1)[1] for k in problems}
    assert {"title", "whem", "label", "severity", "fixes", "params.limit.default"} <= keys, problems
    text = str(exc.value)
    assert "unknown label 'io_bund' (did you mean 'io_bound'?)" in text
    assert "unknown field 'whem' (did you mean 'when'?)" in text
    assert "missing required field" in text


def test_impact_must_be_numeric_and_evidence_table_known(tmp_path):
    text = MINIMAL_RULE.format(id="XX001", name="test-rule", when="dataloader_stall_fraction > limit")
    text = text.replace('impact = "dataloader_stall_fraction"', 'impact = "steps > 1"')
    text += '\n[[evidence]]\ntable = "top_gap"\nrows = 5\n'
    write_rule(tmp_path, text=text)
    with pytest.raises(RuleError) as exc:
        load_rules([tmp_path])
    assert "expected a numeric expression" in str(exc.value)
    assert "unknown evidence table 'top_gap' (did you mean 'top_gaps'?)" in str(exc.value)


def test_invalid_toml_and_missing_dir(tmp_path):
    (tmp_path / "XX001-bad.toml").write_text("id = ")
    with pytest.raises(RuleError, match="not valid TOML"):
        load_rules([tmp_path])
    with pytest.raises(RuleError, match="rule directory does not exist"):
        load_rules([tmp_path / "nope"])


def test_user_rules_dir_is_loaded_and_evaluated(tmp_path):
    write_rule(tmp_path, rid="XX001", name="my-stall", when="dataloader_stall_fraction > limit")
    rules = load_rules([tmp_path])
    assert "XX001" in {r.id for r in rules}
    verdict = evaluate(metrics(dataloader_stall_fraction=0.2), {}, 1e8, ruleset=load_ruleset(rule_dirs=[tmp_path]))
    assert "XX001" in {f.rule_id for f in verdict.findings}


# --- parameters -----------------------------------------------------------------------------------


def test_param_override_by_id_and_name_changes_firing_and_message():
    m = metrics(dataloader_stall_fraction=0.08)
    assert "TD301" in {f.rule_id for f in evaluate(m, {}, 1e8).findings}
    for key in ("TD301.stall_threshold", "dataloader-stall.stall_threshold", "td301.stall_threshold"):
        assert "TD301" not in {f.rule_id for f in evaluate(m, {}, 1e8, ruleset=load_ruleset({key: 0.1})).findings}
    verdict = evaluate(m, {}, 1e8, ruleset=load_ruleset({"TD301.stall_threshold": 0.07}))
    finding = next(f for f in verdict.findings if f.rule_id == "TD301")
    assert "threshold 7%" in finding.message and finding.params == {"stall_threshold": 0.07}


def test_nested_param_tables_are_accepted():
    m = metrics(dataloader_stall_fraction=0.08)
    verdict = evaluate(m, {}, 1e8, ruleset=load_ruleset({"TD301": {"stall_threshold": 0.1}}))
    assert "TD301" not in {f.rule_id for f in verdict.findings}


@pytest.mark.parametrize(
    "params, message",
    [
        ({"TD999.stall_threshold": 0.1}, "no rule 'TD999'"),
        ({"dataloader-stal.stall_threshold": 0.1}, "did you mean 'dataloader-stall'"),
        ({"TD301.stall_treshold": 0.1}, "did you mean 'stall_threshold'"),
        ({"TD301.stall_threshold": "high"}, "expected a number"),
        ({"TD301.stall_threshold": True}, "expected a number"),
    ],
)
def test_bad_param_overrides(params, message):
    with pytest.raises(ParamError, match=message):
        evaluate(BASELINE, {}, 1e8, ruleset=load_ruleset(params))


def test_parse_param_assignments():
    assert parse_assignments(["TD301.stall_threshold=0.1", "TD103.short_kernel_us=20", "a.b=10%", "x.y=true"]) == {
        "TD301.stall_threshold": 0.1, "TD103.short_kernel_us": 20, "a.b": pytest.approx(0.1), "x.y": True}  # fmt: skip
    assert parse_value("gloo") == "gloo"
    with pytest.raises(ParamError, match="RULE.param=value"):
        parse_assignments(["stall_threshold=0.1"])


def test_pyproject_params_found_walking_up_and_cli_wins(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text(
        textwrap.dedent("""
        [project]
        name = "x"
        [tool.tracedoc.params]
        TD301.stall_threshold = 0.2
        "host-launch-starvation".short_kernel_us = 40.0
    """)
    )
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    params = collect_params([])
    assert params == {"TD301.stall_threshold": 0.2, "host-launch-starvation.short_kernel_us": 40.0}
    assert collect_params(["TD301.stall_threshold=0.3"])["TD301.stall_threshold"] == 0.3
    # an alias on the command line beats the file's id key
    params = collect_params(["dataloader-stall.stall_threshold=0.01"])
    verdict = evaluate(metrics(dataloader_stall_fraction=0.05), {}, 1e8, ruleset=load_ruleset(params))
    finding_ids = {f.rule_id for f in verdict.findings}
    assert "TD301" in finding_ids
    default = evaluate(metrics(dataloader_stall_fraction=0.15), {}, 1e8, ruleset=load_ruleset(collect_params([])))
    assert "TD301" not in {f.rule_id for f in default.findings}


def test_pyproject_without_tool_table_is_skipped(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.tracedoc.params]\nTD301.stall_threshold = 0.2\n")
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "pyproject.toml").write_text("[project]\nname = 'y'\n")
    monkeypatch.chdir(inner)
    assert collect_params([]) == {"TD301.stall_threshold": 0.2}


# --- evaluation: ranking, None, health --------------------------------------------------------------


def test_findings_ranked_by_impact_with_ms_per_step():
    m = metrics(gpu_busy_fraction=0.5, compute_fraction=0.45, idle_fraction=0.5, dataloader_stall_fraction=0.1,
                idle_dataloader_fraction=0.1, idle_sync_fraction=0.25, sync_calls=40, exposed_comm_fraction=0.15,
                comm_fraction=0.2, comm_overlap_fraction=0.25, world_size=8, backend="nccl")  # fmt: skip
    verdict = evaluate(m, {}, 200e6)
    ids = [f.rule_id for f in verdict.findings]
    assert ids.index("TD501") < ids.index("TD201") < ids.index("TD301")
    assert verdict.labels[:3] == ["sync_bound", "comm_bound", "io_bound"]
    top = verdict.findings[0]
    assert top.impact_fraction == pytest.approx(0.25) and top.impact_ms_per_step == pytest.approx(50.0)
    assert "compute_bound" not in verdict.labels


def test_step_time_defaults_to_the_reports_step_and_none_gives_no_ms():
    m = metrics(dataloader_stall_fraction=0.2)
    f = next(f for f in evaluate(m, {}).findings if f.rule_id == "TD301")
    assert f.impact_ms_per_step == pytest.approx(20.0)  # the report's step is the median: 100 ms
    m.update(step_time_p50_ns=None, steps=0)  # no step time: the window (1 s) stands for the step, as a rank's
    verdict = evaluate(m, {})
    f = next(f for f in verdict.findings if f.rule_id == "TD301")
    assert f.impact_ms_per_step == pytest.approx(200.0) and verdict.step_time_ns == 1e9
    m["window_ns"] = None  # no step time and no window: no ms
    f = next(f for f in evaluate(m, {}).findings if f.rule_id == "TD301")
    assert f.impact_ms_per_step is None and f.impact_fraction == pytest.approx(0.2)


def test_the_reports_step_is_the_median_else_the_window():
    from tracedoc.model.reportstep import report_step

    assert report_step(100.0, 1000, 10) == (100.0, "steps")
    assert report_step(100.0, 1000, 0) == (100.0, "iterations")  # a loop's iterations without step spans
    assert report_step(None, 1000, 1) == (1000.0, "window")  # one step after a backlog has no step time
    assert report_step(0, 0, 0) == (None, None)


def test_none_metrics_never_fire_or_raise():
    all_none = dict.fromkeys(BASELINE)
    all_none["has_gpu_ops"] = True
    verdict = evaluate(all_none, {}, None)
    assert verdict.findings == []
    assert verdict.confidence == "medium"  # no steps known
    verdict = evaluate({"has_gpu_ops": True, "steps": 5}, None, None)  # missing keys are None
    assert verdict.findings == []


def test_numpy_values_are_accepted():
    np = pytest.importorskip("numpy")
    m = metrics(dataloader_stall_fraction=np.float64(0.3), steps=np.int64(10), dataloader_multiprocess=np.bool_(False),
                comm_overlap_fraction=float("nan"))  # fmt: skip
    verdict = evaluate(m, {}, np.float64(1e8))
    assert verdict.top_label == "io_bound"
    assert any("num_workers=0" in fix for fix in verdict.findings[0].fixes)


def test_no_gpu_activity_withholds_the_verdict():
    m = metrics(has_gpu_ops=False, gpu_busy_fraction=0.0, compute_fraction=0.0, idle_fraction=1.0,
                dataloader_stall_fraction=0.5, launch_link_fraction=None)  # fmt: skip
    verdict = evaluate(m, {}, 1e8)
    assert verdict.findings == [] and verdict.labels == []
    assert verdict.withheld and "no GPU" in verdict.withheld
    assert [h.code for h in verdict.health] == ["no-gpu-activity"]
    assert verdict.health[0].level == "error" and verdict.confidence == "low"
    d = verdict.to_dict()
    assert d["withheld"] and d["findings"] == [] and d["health"][0]["withhold"] is True


@pytest.mark.parametrize(
    "overrides, code, confidence",
    [
        ({"steps": 0}, "no-steps", "medium"),
        ({"steps": 2}, "few-steps", "medium"),
        ({"launch_link_fraction": 0.7}, "missing-launch-links", "medium"),
        ({"launch_link_fraction": 0.2}, "missing-launch-links", "low"),
        (
            {
                "graph_launches": 40,
                "graph_kernels": 0,
                "gpu_busy_fraction": 0.6,
                "compute_fraction": 0.58,
                "idle_fraction": 0.4,
                "idle_other_fraction": 0.05,
            },
            "cuda-graph-under-recording",
            "low",
        ),
        ({"graph_launches": 40, "graph_kernels": 0}, "cuda-graph-under-recording", "medium"),
        ({"truncated": True}, "truncated-trace", "medium"),
        ({"clock_anomaly": True}, "clock-anomaly", "low"),
    ],
)
def test_health_checks_lower_confidence(overrides, code, confidence):
    verdict = evaluate(metrics(**overrides), {}, 1e8)
    assert code in [h.code for h in verdict.health]
    assert verdict.confidence == confidence
    assert verdict.withheld is None
    assert verdict.labels in (["compute_bound"], [])  # still evaluated, with lowered confidence


def test_graph_launches_with_kernels_recorded_are_healthy():
    verdict = evaluate(metrics(graph_launches=40, graph_kernels=41_960), {}, 1e8)
    assert verdict.health == [] and verdict.confidence == "high"


def test_finding_confidence_only_drops_for_affected_metrics():
    m = metrics(launch_link_fraction=0.3, dataloader_stall_fraction=0.2, idle_sync_fraction=0.2)
    by_id = {f.rule_id: f for f in evaluate(m, {}, 1e8).findings}
    assert by_id["TD501"].confidence == "low"  # idle_sync depends on launch links
    assert by_id["TD301"].confidence == "high"  # DataLoader stall does not


def test_evidence_rows_are_attached_and_truncated():
    evidence = {"dataloader": [{"name": f"dl{i}"} for i in range(30)], "per_step": [{"step": 1}]}
    f = next(
        f for f in evaluate(metrics(dataloader_stall_fraction=0.2), evidence, 1e8).findings if f.rule_id == "TD301"
    )
    assert len(f.evidence["dataloader"]) == 10 and f.evidence["per_step"] == [{"step": 1}]
    assert f.evidence["idle_causes"] == []


def test_to_dict_is_json_serialisable():
    import json

    verdict = evaluate(metrics(dataloader_stall_fraction=0.2, truncated=True), {"dataloader": [{"name": "x"}]}, 1e8)
    d = json.loads(json.dumps(verdict.to_dict()))
    assert d["labels"][0] == "io_bound" and d["confidence"] == "medium"
    assert d["findings"][0]["rule_id"] == "TD301" and d["findings"][0]["impact_ms_per_step"] == pytest.approx(20.0)
    assert {"schema_version", "labels", "confidence", "withheld", "health", "findings", "step_time_ns"} <= set(d)


# --- scenarios: the right top label, and nothing false on a healthy run --------------------------------

SCENARIOS = {
    "dataloader_starved": (dict(
        gpu_busy_fraction=0.62, compute_fraction=0.6, idle_fraction=0.38, idle_dataloader_fraction=0.33,
        idle_other_fraction=0.02, dataloader_fraction=0.36, dataloader_stall_fraction=0.33,
        dataloader_multiprocess=False), "io_bound"),
    "exposed_allreduce": (dict(
        gpu_busy_fraction=0.97, compute_fraction=0.62, comm_fraction=0.5, exposed_comm_fraction=0.33,
        comm_overlap_fraction=0.34, world_size=16, backend="nccl", gpu_count=1), "comm_bound"),
    "thousand_tiny_kernels": (dict(
        gpu_busy_fraction=0.4, compute_fraction=0.39, idle_fraction=0.6, idle_host_launch_fraction=0.42,
        idle_launch_latency_fraction=0.12, idle_short_launch_fraction=0.52, idle_other_fraction=0.04,
        kernel_count=100_000, kernel_median_ns=4_000,
        kernels_under_10us_fraction=0.9, launches_per_ms=120.0, blocks_per_sm_mean=0.3,
        cpu_launch_overhead_fraction=0.7), "small_batch_bound"),
    "item_per_step_sync": (dict(
        gpu_busy_fraction=0.68, compute_fraction=0.66, idle_fraction=0.32, idle_sync_fraction=0.27,
        idle_host_launch_fraction=0.03, sync_fraction=0.3, sync_calls=100, sync_memcpy_count=100), "sync_bound"),
    "pageable_h2d_copy": (dict(
        gpu_busy_fraction=0.85, compute_fraction=0.48, memcpy_fraction=0.37, h2d_fraction=0.36,
        exposed_h2d_fraction=0.35, pageable_memcpy_fraction=0.36, pageable_memcpy_count=200, idle_fraction=0.15,
        idle_other_fraction=0.1),
        "h2d_copy_bound"),
    "fp32_matmuls": (dict(tensor_core_fraction=0.0, tc_eligible_non_tc_fraction=0.7), "low_tensor_core_use"),
    "memory_full": (dict(memory_peak_fraction=0.97), "memory_pressure"),
    "healthy_compute_bound": ({}, "compute_bound"),
}  # fmt: skip


@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_top_label(name):
    overrides, label = SCENARIOS[name]
    verdict = evaluate(metrics(**overrides), {}, 1e8)
    assert verdict.top_label == label, [(f.rule_id, f.label, f.impact_fraction) for f in verdict.findings]
    assert verdict.findings[0].fixes


def test_healthy_run_has_no_false_label_or_warning():
    verdict = evaluate(BASELINE, {}, 1e8)
    assert verdict.labels == ["compute_bound"]
    assert all(f.severity == "info" for f in verdict.findings)
    assert verdict.confidence == "high"


def test_compute_bound_is_suppressed_by_any_other_verdict():
    verdict = evaluate(metrics(memory_peak_fraction=0.95), {}, 1e8)
    assert verdict.labels == ["memory_pressure"]
    # advice does not suppress it
    verdict = evaluate(metrics(uses_data_parallel=True, gpu_count=2), {}, 1e8)
    assert verdict.labels == ["compute_bound"] and "TD202" in {f.rule_id for f in verdict.findings}


# --- CLI wiring ----------------------------------------------------------------------------------------


def _parser():
    parser = argparse.ArgumentParser(prog="tracedoc")
    sub = parser.add_subparsers(dest="command")
    analyze = sub.add_parser("analyze")
    analyze.add_argument("path")
    add_engine_options(analyze)
    register(sub)
    return parser


def test_engine_options_parse():
    args = _parser().parse_args(["analyze", "t.json", "--rules", "a", "--rules", "b",
                                 "--param", "TD301.stall_threshold=0.1", "--fail-on", "Warning"])  # fmt: skip
    assert args.rules == ["a", "b"] and args.param == ["TD301.stall_threshold=0.1"] and args.fail_on == "warning"
    with pytest.raises(SystemExit):
        _parser().parse_args(["analyze", "t.json", "--fail-on", "io_bund"])


def test_fail_on_exit_code():
    io = evaluate(metrics(dataloader_stall_fraction=0.2), {}, 1e8)  # TD301 warning
    healthy = evaluate(BASELINE, {}, 1e8)  # TD400 info
    assert fail_on_exit_code(io, "io_bound") == 3
    assert fail_on_exit_code(io, "warning") == 3
    assert fail_on_exit_code(io, "error") == 0
    assert fail_on_exit_code(io, "comm_bound") == 0
    assert fail_on_exit_code(healthy, "warning") == 0
    assert fail_on_exit_code(healthy, "info") == 3
    assert fail_on_exit_code(healthy, None) == 0


def test_rules_list_and_explain(capsys):
    args = _parser().parse_args(["rules"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    for rid in ("TD101", "TD301", "TD400", "TD510"):
        assert rid in out
    args = _parser().parse_args(["rules", "explain", "dataloader-stall"])
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "What it detects" in out and "stall_threshold = 0.05 [fraction]" in out and "num_workers" in out
    args = _parser().parse_args(["rules", "explain", "TD31"])
    assert args.func(args) == 2
    assert "did you mean 'TD301'" in capsys.readouterr().err


def test_rules_list_reports_bad_user_rules(tmp_path, capsys):
    write_rule(tmp_path, when="nope > 1")
    args = _parser().parse_args(["rules", "--rules", str(tmp_path)])
    assert args.func(args) == 1
    assert "unknown name 'nope'" in capsys.readouterr().err


def test_rules_version_is_stable_and_content_based(tmp_path):
    assert rules_version() == rules_version() and rules_version().startswith("sha256:")
    write_rule(tmp_path)
    assert rules_version([tmp_path]) != rules_version()


def test_shipped_rule_file_cache_reloads_on_change(tmp_path):
    path = write_rule(tmp_path)
    assert load_rule_file(path).title == "A test rule"
    path.write_text(path.read_text().replace("A test rule", "Changed title here"))
    assert load_rule_file(path).title == "Changed title here"


# --- pathological rule files: each a rule-file error, never a traceback or a huge allocation ---------


@pytest.mark.parametrize(
    "when, message",
    [
        ("not " * 3000 + "dataloader_stall_fraction > limit", "longer than the 4,000 allowed"),
        ("not " * 900 + "dataloader_stall_fraction > limit", "nested more than 64 levels"),
        ("- " * 1500 + "limit > 0", "nested more than 64 levels"),
        ("-" * 3900 + "limit > 0", "nested too deeply to parse"),
        ("not " * 100 + "dataloader_stall_fraction > limit", "nested more than 64 levels"),
        (" + ".join(["limit"] * 100_000) + " > 1", "longer than the 4,000 allowed"),
        ("min(" + ",".join(["1"] * 1500) + ") > limit", "more than 1000 terms"),
    ],
    ids=["not-3000", "not-900", "minus-1500", "minus-3900", "not-100", "sum-100000", "min-1500"],
)
def test_oversized_conditions_are_rule_file_errors(tmp_path, when, message):
    write_rule(tmp_path, when=when)
    with pytest.raises(RuleError, match=message) as exc:
        load_rules([tmp_path])
    assert "XX001-test-rule.toml: when" in str(exc.value)
    assert len(str(exc.value)) < 1000  # the message quotes the start of the expression, not all of it


def test_a_real_sized_condition_still_loads(tmp_path):
    write_rule(tmp_path, when=" and ".join(["dataloader_stall_fraction > limit"] * 30))
    assert any(r.id == "XX001" for r in load_rules([tmp_path]))


@pytest.mark.parametrize(
    "spec, message",
    [
        (">1500000000", "width 1,500,000,000 is more than the 200 allowed"),
        ("0>99999", "width 99,999 is more than"),
        (".100000f", "precision 100,000 is more than the 50 allowed"),
        ("x^201.2%", "width 201 is more than"),
    ],
)
def test_format_widths_and_precisions_are_bounded(tmp_path, spec, message):
    text = MINIMAL_RULE.format(id="XX001", name="test-rule", when="dataloader_stall_fraction > limit")
    text = text.replace("{dataloader_stall_fraction:.0%}", "{dataloader_stall_fraction:" + spec + "}")
    write_rule(tmp_path, text=text)
    with pytest.raises(RuleError, match=message) as exc:
        load_rules([tmp_path])
    assert "XX001-test-rule.toml: message" in str(exc.value)


def test_format_width_within_bounds_renders(tmp_path):
    from tracedoc.engine.template import compile_template

    tpl = compile_template("[{a:>12.3f}]", {"a": "num"})
    assert tpl.render({"a": 0.5}) == "[       0.500]"


@pytest.mark.parametrize("nested", ["a = " + "[" * 100_000 + "]" * 100_000, "a = " + "{b = " * 5000 + "1" + "}" * 5000])
def test_deeply_nested_toml_is_a_rule_file_error(tmp_path, nested):
    text = MINIMAL_RULE.format(id="XX001", name="test-rule", when="dataloader_stall_fraction > limit")
    write_rule(tmp_path, text=nested + "\n" + text)
    with pytest.raises(RuleError, match="TOML nested too deeply") as exc:
        load_rules([tmp_path])
    assert "XX001-test-rule.toml" in str(exc.value)


def test_non_utf8_rule_file_is_a_rule_file_error(tmp_path):
    text = MINIMAL_RULE.format(id="XX001", name="test-rule", when="dataloader_stall_fraction > limit")
    path = tmp_path / "XX001-test-rule.toml"
    path.write_bytes(text.replace("A test rule", "A t\xe9st rule").encode("latin-1"))
    with pytest.raises(RuleError, match=r"not UTF-8 text: byte 0xe9 at offset \d+ \(line 4\)") as exc:
        load_rules([tmp_path])
    assert str(path) in str(exc.value)


def test_oversized_rule_file_is_refused_before_reading(tmp_path):
    text = MINIMAL_RULE.format(id="XX001", name="test-rule", when="dataloader_stall_fraction > limit")
    write_rule(tmp_path, text=text + "# " + "x" * (2 << 20) + "\n")
    with pytest.raises(RuleError, match="larger than the 1,048,576 allowed"):
        load_rules([tmp_path])


def test_pathological_rule_file_through_the_cli(tmp_path, capsys):
    from tracedoc.cli import main

    write_rule(tmp_path, when="not " * 3000 + "dataloader_stall_fraction > limit")
    rc = main(["analyze", "--example", "--rules", str(tmp_path), "--format", "json", "--no-progress"])
    err = capsys.readouterr().err
    assert rc != 0 and err.startswith("tracedoc: error: ") and "longer than the 4,000 allowed" in err
    assert "memory" not in err and "Traceback" not in err and len(err.splitlines()) < 5


def test_an_expression_short_enough_to_skip_the_size_walk_is_always_within_the_limits():
    # compile_expr walks a tree for its depth and size only past _SMALL_CHARS characters: below that no
    # text can reach MAX_EXPR_DEPTH or MAX_EXPR_NODES. Random expressions of every construct the
    # grammar has, and the deepest chain a text that short can hold, stay inside both.
    import ast
    import random

    from tracedoc.engine import expr as E

    rng = random.Random(5)
    atoms = ["a", "1", "2.5", "'s'", "b.c", "x[0]", "f(a)", "None", "(a, b)", "[a]"]
    binary = [" + ", "-", "*", "/", " and ", " or ", "<", "<=", "==", " if a else ", "%", "**", " in "]

    def gen(d: int) -> str:
        r = rng.random()
        if d == 0 or r < 0.2:
            return rng.choice(atoms)
        if r < 0.45:
            return rng.choice(["-", "not ", "+", "~"]) + gen(d - 1)
        if r < 0.6:
            return "(" + gen(d - 1) + ")"
        if r < 0.7:
            return "f(" + gen(d - 1) + ", k=" + gen(d - 1) + ")"
        if r < 0.8:
            return gen(d - 1) + "[" + gen(d - 1) + ":" + gen(d - 1) + "]"
        return gen(d - 1) + rng.choice(binary) + gen(d - 1)

    def depth_and_nodes(node) -> tuple[int, int]:
        deepest, count, stack = 0, 0, [(node, 1)]
        while stack:
            x, d = stack.pop()
            count += 1
            deepest = max(deepest, d)
            stack.extend((c, d + 1) for c in ast.iter_child_nodes(x))
        return deepest, count

    texts = [gen(rng.randint(1, 30)) for _ in range(4_000)]
    texts += ["-" * (E._SMALL_CHARS - 1) + "a", "(" * 30 + "a" + ")" * 30, "a." * 30 + "b"]
    checked = 0
    for src in texts:
        if len(src) > E._SMALL_CHARS:
            continue
        try:
            tree = ast.parse(src, mode="eval").body
        except SyntaxError:
            continue
        depth, nodes = depth_and_nodes(tree)
        assert depth <= E.MAX_EXPR_DEPTH and nodes <= E.MAX_EXPR_NODES, src
        checked += 1
    assert checked > 1_000
