"""The analysis registry: who produces each metric and evidence table, that every analysis keeps to
its declaration, that rules cite only what some analysis produces, and the memcpy evidence."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tracedoc.job.view import JOB_EVIDENCE, JOB_METRICS
from trace_builder import TraceBuilder

import tracedoc
from tracedoc.analyses import analyze_trace
from tracedoc.analyses.core import pipeline, registry
from tracedoc.analyses.core.registry import EVIDENCE, METRICS, ContractError, Produced, analysis
from tracedoc.engine import RuleError, load_rules
from tracedoc.engine.rulefile import load_rule_file
from tracedoc.model.evidence import plain_rows

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

RULES_DIR = Path(__file__).resolve().parents[1] / "rules"
RULE_FILES = sorted(RULES_DIR.glob("*.toml"))


@pytest.fixture
def scratch_registry():
    """Register test analyses, and remove them (and what they claimed) afterwards."""
    pipeline.register_all()
    before = dict(registry.ANALYSES)
    producers = {kind: dict(names) for kind, names in registry.PRODUCERS.items()}
    yield
    registry.ANALYSES.clear()
    registry.ANALYSES.update(before)
    for kind, names in producers.items():
        registry.PRODUCERS[kind].clear()
        registry.PRODUCERS[kind].update(names)


def _trace(tmp_path):
    b = TraceBuilder()
    b.step(1, 1000.0, 2000.0)
    b.kernel("k", 1100.0, 100.0, op="aten::mm")
    return tracedoc.load(b.write(tmp_path / "t.json"))


def test_every_metric_and_evidence_table_has_one_producer():
    """Every rank metric of the metric table has its analysis (the model-formula ones too, given
    --model); the job view produces the job scope's, of which a lone rank measures its top collective."""
    declared = set(pipeline.declared("metrics"))
    job_only = set(JOB_METRICS) - {"comm_top_collective"}
    assert not declared & job_only
    assert declared | job_only == set(METRICS)
    assert registry.PRODUCERS["metrics"]["formula_mfu"] == "flops.estimate.model_estimate"
    assert set(pipeline.declared("evidence")) == set(EVIDENCE)


def _rule_names(path: Path) -> tuple[set[str], set[str]]:
    """Metrics a rule reads (condition, impact, message, fixes, expectation, test cases) and the
    evidence tables it lists, read from the file itself."""
    with path.open("rb") as fh:
        raw = tomllib.load(fh)
    rule = load_rule_file(path)
    metrics = set(rule.metrics_used)
    for cases in raw.get("tests", {}).values():
        for case in cases:
            metrics |= {k for k in case if k != "unset"} | set(case.get("unset", ()))
    return metrics, {item["table"] for item in raw.get("evidence", [])}


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.stem)
def test_every_name_a_rule_uses_is_produced_by_an_analysis(path):
    metrics, tables = _rule_names(path)
    assert metrics, "a rule reads at least one metric"
    if load_rule_file(path).scope == "log":  # training-log rules: tests/test_log_rules.py checks the producers
        from tracedoc.engine.rulefile import LOG_EVIDENCE_TABLES
        from tracedoc.logs.registry import LOG_METRICS

        assert not metrics - set(LOG_METRICS) and not tables - set(LOG_EVIDENCE_TABLES)
        return
    assert not metrics - set(pipeline.declared("metrics")) - set(JOB_METRICS), "metrics nothing produces"
    assert not tables - set(pipeline.declared("evidence")) - set(JOB_EVIDENCE), "evidence tables nothing produces"


def test_rules_citing_copies_name_the_memcpy_table():
    cited = {p.stem.split("-")[0] for p in RULE_FILES if "memcpy" in _rule_names(p)[1]}
    assert {"TD302", "TD303", "TD503"} <= cited


def test_engine_refuses_evidence_no_analysis_produces(tmp_path):
    text = (RULES_DIR / "TD303-pageable-memcpy.toml").read_text()
    (tmp_path / "TD999-copies-again.toml").write_text(
        text.replace('id = "TD303"', 'id = "TD999"')
        .replace('name = "pageable-memcpy"', 'name = "copies-again"')
        .replace('table = "memcpy"', 'table = "memcpy_by_stream"')
    )
    with pytest.raises(RuleError) as exc:
        load_rules([tmp_path])
    assert "unknown evidence table 'memcpy_by_stream'" in str(exc.value)
    assert "no analysis produces it" in str(exc.value)


def test_an_undeclared_output_is_a_bug(scratch_registry, tmp_path):
    @analysis(provides=("probe_value",))
    def probe(trace, inputs):
        return Produced(values={"probe_value": 1}, metrics={"kernel_count": 3})

    with pytest.raises(ContractError, match="undeclared metrics kernel_count"):
        pipeline.run_analyses(_trace(tmp_path), metrics=(), evidence=(), values=("probe_value",))


def test_a_missing_declared_output_is_a_bug(scratch_registry, tmp_path):
    @analysis(provides=("probe_a", "probe_b"))
    def probe(trace, inputs):
        return Produced(values={"probe_a": 1})

    with pytest.raises(ContractError, match="declared values probe_b not returned"):
        pipeline.run_analyses(_trace(tmp_path), metrics=(), evidence=(), values=("probe_a",))


def test_an_analysis_sees_only_what_it_declares_it_needs(scratch_registry, tmp_path):
    @analysis(needs=("window",), provides=("probe_len",))
    def probe(trace, inputs):
        return Produced(values={"probe_len": inputs["step_spans"]})  # not declared

    with pytest.raises(KeyError):
        pipeline.run_analyses(_trace(tmp_path), metrics=(), evidence=(), values=("probe_len",))


def test_two_producers_of_one_name_are_refused(scratch_registry):
    with pytest.raises(ContractError, match="produced by both"):

        @analysis(produces=("kernel_count",))
        def probe(trace, inputs):
            return Produced()


def test_only_what_is_asked_for_runs(scratch_registry, tmp_path):
    ran = []

    @analysis(needs=("window",), provides=("probe_costly",), on_demand=True)
    def probe(trace, inputs):
        ran.append(True)
        return Produced(values={"probe_costly": inputs["window"].length_ns})

    names = [a.name for a in pipeline.plan(metrics=("kernel_count",))]
    assert names == [
        "gputime.backlog.pre_window_backlog",
        "gputime.window.steps_and_window",
        "kernels.stats.kernel_statistics",
    ]
    assert "probe_costly" not in pipeline.default_request()["values"]
    trace = _trace(tmp_path)
    analyze_trace(trace)
    assert not ran  # on demand: not part of a full run
    out = pipeline.run_analyses(trace, metrics=(), evidence=(), values=("probe_costly",))
    assert ran and out.values["probe_costly"] == 1_000_000  # the step, 1 ms to 2 ms


def test_subset_leaves_other_metrics_unset(tmp_path):
    r = analyze_trace(_trace(tmp_path), metrics=("kernel_count",), evidence=())
    assert r.metrics["kernel_count"] == 1
    assert analyze_trace(_trace(tmp_path)).metrics["tensor_core_fraction"] == 0.0  # "k" is no Tensor Core kernel
    assert r.metrics["tensor_core_fraction"] is None and "top_kernels" not in r.evidence
    assert set(r.metrics) == set(METRICS)


def copy_heavy() -> TraceBuilder:
    """Two 10 ms steps; each has 2 pageable and 1 pinned HtoD copy from the input pipeline, 9 ms of
    GEMMs (10 kernels, enough GPU ops for a verdict), and the first a synchronous pageable DtoH copy
    of the loss."""
    b = TraceBuilder()
    for i, s in enumerate((1_000_000.0, 1_010_000.0)):
        b.step(i + 1, s, s + 10_000.0)
        b.memcpy(s + 100, 100.0, src="Pageable", nbytes=1 << 20, op="aten::copy_")
        b.memcpy(s + 300, 100.0, src="Pageable", nbytes=1 << 20, op="aten::copy_")
        b.memcpy(s + 500, 50.0, src="Pinned", nbytes=2 << 20, op="aten::to")
        for k in range(10):
            b.kernel("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", s + 600 + k * 900.0, 900.0, op="aten::mm")
        if i == 0:
            b.memcpy(
                s + 9_700,
                200.0,
                direction="DtoH",
                src="Device",
                dst="Pageable",
                nbytes=1 << 20,
                op="aten::_local_scalar_dense",
                launch_name="cudaMemcpy",
                launch_at=s + 9_650,
                launch_dur=260.0,
            )
    return b


def test_memcpy_evidence_on_pageable_h2d_copies(tmp_path):
    result = tracedoc.analyze(copy_heavy().write(tmp_path / "copies.pt.trace.json"))
    rank = result.ranks[0]
    # by hand: HtoD = 4 x 100 us of 1 MiB (pageable) + 2 x 50 us of 2 MiB (pinned)
    htod_ns, htod_bytes = 4 * 100_000 + 2 * 50_000, 4 * (1 << 20) + 2 * (2 << 20)
    assert plain_rows(rank.evidence["memcpy"]) == [
        {
            "copy_kind": "HtoD",
            "count": 6,
            "total_ns": htod_ns,
            "bytes": htod_bytes,
            "achieved_gbps": pytest.approx(htod_bytes / htod_ns),
            "pageable_count": 4,
            "pinned_count": 2,
            "ops": ["aten::copy_ (4)", "aten::to (2)"],
            "calls": ["cudaMemcpyAsync (6)"],
        },
        {
            "copy_kind": "DtoH",
            "count": 1,
            "total_ns": 200_000,
            "bytes": 1 << 20,
            "achieved_gbps": pytest.approx((1 << 20) / 200_000),
            "pageable_count": 1,
            "pinned_count": 0,
            "ops": ["aten::_local_scalar_dense (1)"],
            "calls": ["cudaMemcpy (1)"],
        },
    ]
    assert rank.metrics["pageable_memcpy_count"] == 5
    findings = {f.rule_id: f for f in result.verdicts[0].findings}
    assert findings["TD303"].evidence["memcpy"] == rank.evidence["memcpy"]


def test_memcpy_evidence_without_copies_is_empty(tmp_path):
    assert analyze_trace(_trace(tmp_path)).evidence["memcpy"] == []
