"""Every shipped rule: it validates, it is documented, and its own fixtures fire and do not fire.

Fixtures live in the rule file (``[[tests.fires]]`` / ``[[tests.ok]]``) as metric overrides on the
healthy, compute-bound baseline below, semgrep/ruff style: a rule cannot ship without a case that
fires and a near miss that does not.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tracedoc.analyses.core.registry import METRICS
from tracedoc.engine import evaluate, load_rules, load_ruleset
from tracedoc.engine.rulefile import apply_test_case, load_rule_file, rule_files
from tracedoc.resources import data_dir

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

RULES_DIR = data_dir("rules")
RULE_FILES = rule_files(RULES_DIR)

# A healthy single-GPU run: 10 steps of 100 ms, GPU 95% busy with Tensor Core compute, nothing else.
# A metric not listed here (a new one) is not measured (None) in the baseline, as on a trace without it.
HEALTHY: dict = {
    "window_ns": 1_000_000_000,
    "steps": 10,
    "iterations": 10,
    "iteration_name": None,
    "step_time_mean_ns": 100_000_000,
    "step_time_p50_ns": 100_000_000,
    "step_time_p95_ns": 105_000_000,
    "gpu_busy_fraction": 0.95,
    "compute_fraction": 0.92,
    "comm_fraction": 0.0,
    "exposed_comm_fraction": 0.0,
    "comm_overlap_fraction": None,
    "memcpy_fraction": 0.01,
    "h2d_fraction": 0.01,
    "exposed_h2d_fraction": 0.0,
    "pageable_memcpy_fraction": 0.0,
    "pageable_memcpy_count": 0,
    "memset_fraction": 0.001,
    "idle_fraction": 0.05,
    "idle_dataloader_fraction": 0.005,
    "idle_host_launch_fraction": 0.01,
    "idle_sync_fraction": 0.005,
    "idle_blocked_in_sync_fraction": 0.004,
    "idle_host_late_blocked_fraction": 0.0,
    "sync_blocked_longest_call_ns": 400_000,
    "sync_blocked_longest_call_fraction": 0.1,
    "sync_blocked_longest_call": "cudaStreamSynchronize in aten::_local_scalar_dense",
    "idle_launch_latency_fraction": 0.01,
    "idle_other_fraction": 0.02,
    "dataloader_fraction": 0.02,
    "dataloader_stall_fraction": 0.005,
    "dataloader_multiprocess": True,
    "kernel_count": 20_000,
    "kernel_median_ns": 150_000,
    "kernels_under_10us_fraction": 0.2,
    "launches_per_ms": 20.0,
    "launch_delay_p50_ns": 20_000,
    "launch_delay_p95_ns": 200_000,
    "cpu_launch_overhead_fraction": 0.1,
    "blocks_per_sm_mean": 8.0,
    "est_occupancy_mean": 45.0,
    "sm_efficiency": 0.9,
    "graph_launches": 0,
    "graph_kernels": 0,
    "graph_kernel_fraction": 0.0,
    "gpu_op_count": 100_000,
    "has_host_events": True,
    "tensor_core_fraction": 0.7,
    "tensor_core_unknown_fraction": 0.05,
    "tc_eligible_non_tc_fraction": 0.02,
    "tensor_core_capable": True,
    "model_flops_per_step": 3.2e13,
    "hardware_flops_per_step": 3.2e13,
    "achieved_tflops": 140.0,
    "mfu": 0.45,
    "hfu": 0.45,
    "peak_tflops": 312.0,
    "tensor_core_mfu": 0.45,
    "flops_counted_fraction": 0.8,
    "fp32_flops_fraction": 0.01,
    "small_gemm_fraction": 0.05,
    "unfused_attention_fraction": 0.0,
    "roofline_gaps": "matmul aten::mm [64, 64] x [64, 64] bf16 at 20% of its memory roof, 1.0% of the step",
    "formula_flops_per_step": None,
    "formula_mfu": None,
    "tokens_per_s": None,
    "samples_per_s": None,
    "trace_to_formula_flops_ratio": None,
    "memory_estimate_bytes": None,
    "max_micro_batch": None,
    "sync_fraction": 0.001,
    "sync_calls": 2,
    "implicit_sync_calls": 0,
    "implicit_sync_fraction": 0.0,
    "sync_memcpy_count": 0,
    "memory_peak_allocated_bytes": 40 * 2**30,
    "memory_peak_reserved_bytes": 50 * 2**30,
    "device_memory_bytes": 80 * 2**30,
    "memory_peak_fraction": 0.625,
    "gap_max_ns": 2_000_000,
    "idle_gap_max_ns": 1_000_000,
    "idle_short_launch_fraction": 0.02,
    "idle_host_long_fraction": 0.0,
    "backlog_ns": None,
    "backlog_ops": 0,
    "launch_queue_depth_max": 40,
    "launch_blocked_calls": 0,
    "launch_blocked_fraction": 0.0,
    "launch_period_ns": 30_000.0,
    "host_gap_long_ns": 300_000,
    "gap_p95_ns": 20_000,
    "gpu_count": 1,
    "compute_capability": 8.0,
    "world_size": 1,
    "backend": None,
    "uses_data_parallel": False,
    "has_gpu_ops": True,
    "launch_link_fraction": 1.0,
    "truncated": False,
    "profiler_range_events": 0,
    "runtime_calls": 100,
    "clock_anomaly": False,
    # a single trace: no job view
    "job_ranks": None,
    "collectives_matched": None,
    "job_step_time_p50_ns": None,
    "comm_wait_fraction": None,
    "rank_comm_wait_fraction": None,
    "comm_top_collective": None,
    "comm_busbw_gbps": None,
    "link_busbw_gbps": None,
    "straggler_count": None,
    "straggler_rank": None,
    "straggler_confidence": None,
    "straggler_cause": None,
    "straggler_cause_ms_per_step": None,
    "straggler_wait_ms_per_step": None,
    "straggler_wait_fraction": None,
    "straggler_arrived_last_fraction": None,
    "straggler_explained_fraction": None,
}
BASELINE: dict = {**dict.fromkeys(METRICS), **HEALTHY}

EVIDENCE = {
    name: [{"row": i} for i in range(20)]
    for name in ("top_gaps", "top_kernels", "top_operators", "idle_causes", "per_step", "collectives",
                 "sync_calls", "implicit_syncs", "sync_blocked_calls", "launch", "idle_other_cpu_ops", "memcpy",
                 "memory_top_allocs", "dataloader", "flops_summary", "flops_by_op_class",
                 "host_late_cpu_ops", "host_late_python", "launch_queue",
                 "flops_by_kernel_class", "roofline_below_roof", "job_ranks", "job_collectives", "straggler_cause",
                 "job_disagreements", "host_operators")
}  # fmt: skip

ALL_RULES = load_rules()
RULESET = load_ruleset()


def _cases(kind: str):
    for path in RULE_FILES:
        rule = load_rule_file(path)
        if rule.scope != "trace":  # log rules run on log metrics: tests/test_log_rules.py
            continue
        for i, case in enumerate(rule.tests.get(kind, ())):
            yield pytest.param(rule.id, case, id=f"{rule.id}-{kind}{i}")


def test_baseline_covers_every_metric():
    assert set(BASELINE) == set(METRICS)
    assert not set(HEALTHY) - set(METRICS), "a metric the table no longer has"


def test_there_are_rules():
    assert len(RULE_FILES) >= 10


@pytest.mark.parametrize("path", RULE_FILES, ids=lambda p: p.stem)
def test_rule_file_is_valid_and_documented(path: Path):
    rule = load_rule_file(path)
    assert path.stem == f"{rule.id}-{rule.name}", "file name is <id>-<name>.toml"
    assert rule.tests.get("fires"), "at least one [[tests.fires]] case"
    assert rule.tests.get("ok"), "at least one [[tests.ok]] near miss"
    for key in ("what_it_detects", "why_it_matters", "references"):
        assert rule.docs[key]
    for param in rule.params.values():
        assert param.justification and param.unit
        used = rule.message.names | rule.when.names | (rule.impact.names if rule.impact else frozenset())
        assert param.name in used, f"parameter {param.name} is never used"
    with path.open("rb") as fh:
        raw = tomllib.load(fh)
    thresholds_in_message = [p for p in rule.params if "{" + p in raw["message"]]
    assert thresholds_in_message or not rule.params, "the message shows a threshold"


@pytest.mark.parametrize("rule_id, case", list(_cases("fires")))
def test_rule_fires(rule_id: str, case: dict):
    metrics = apply_test_case(BASELINE, case)
    verdict = evaluate(metrics, EVIDENCE, metrics["step_time_mean_ns"], ruleset=RULESET)
    fired = {f.rule_id: f for f in verdict.findings}
    assert rule_id in fired, f"{rule_id} did not fire on {case}; fired: {sorted(fired)}"
    finding = fired[rule_id]
    assert finding.message and "{" not in finding.message
    assert finding.fixes, "at least one fix applies"
    assert finding.expect
    if finding.impact_fraction is not None:
        assert 0.0 <= finding.impact_fraction <= 1.0
        assert finding.impact_ms_per_step == pytest.approx(finding.impact_fraction * 100.0)
    rule = next(r for r in ALL_RULES if r.id == rule_id)
    for spec in rule.evidence:
        assert len(finding.evidence[spec.table]) == min(spec.rows, 20)


@pytest.mark.parametrize("rule_id, case", list(_cases("ok")))
def test_rule_near_miss_does_not_fire(rule_id: str, case: dict):
    metrics = apply_test_case(BASELINE, case)
    verdict = evaluate(metrics, EVIDENCE, metrics["step_time_mean_ns"], ruleset=RULESET)
    assert rule_id not in {f.rule_id for f in verdict.findings}


def test_healthy_baseline_is_compute_bound_only():
    verdict = evaluate(BASELINE, EVIDENCE, BASELINE["step_time_mean_ns"], ruleset=RULESET)
    assert verdict.labels == ["compute_bound"]
    assert [f.label for f in verdict.findings] == ["compute_bound"], [f.rule_id for f in verdict.findings]
    assert verdict.confidence == "high"
    assert verdict.health == []


# Exposed communication on 8 ranks; the fixes follow the collective that takes the time.
COMM_BOUND = {
    "comm_fraction": 0.45,
    "exposed_comm_fraction": 0.4,
    "comm_overlap_fraction": 0.1,
    "compute_fraction": 0.5,
    "world_size": 8,
    "backend": "nccl",
    "comm_wait_fraction": 0.1,
}


@pytest.mark.parametrize(
    "collective, wanted",
    [
        ("all_reduce", "bucket_cap_mb"),
        ("all_to_all", "TrainPipelineSparseDist"),
        ("all_gather", "backward_prefetch=BACKWARD_PRE"),
        ("reduce_scatter", "HYBRID_SHARD"),
        ("send_recv", "interleaved 1F1B"),
        ("recv", "micro-batches"),
    ],
)
def test_comm_fixes_follow_the_collective(collective: str, wanted: str):
    metrics = apply_test_case(BASELINE, {**COMM_BOUND, "comm_top_collective": collective})
    verdict = evaluate(metrics, EVIDENCE, metrics["step_time_mean_ns"], ruleset=RULESET)
    (finding,) = [f for f in verdict.findings if f.rule_id == "TD201"]
    assert finding.label == "comm_bound"
    text = " ".join(finding.fixes)
    assert wanted in text
    # DDP gradient-bucket and no_sync advice is for all-reduce only; the FSDP shard advice is not for it
    assert ("bucket_cap_mb" in text) == (collective == "all_reduce")
    assert ("no_sync" in text) == (collective == "all_reduce")
    assert ("HYBRID_SHARD" in text) == (collective in ("all_gather", "reduce_scatter"))
    assert ("TrainPipelineSparseDist" in text) == (collective == "all_to_all")
