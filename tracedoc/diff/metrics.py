"""Metric deltas with their direction, and label changes.

``DIRECTIONS`` is the one table that says, for every numeric metric of the registry, whether a
lower or a higher value is better, or neither (``None``: the value depends on how much was
profiled, or is a property of the machine or the workload, or has no better side). A test keeps
it complete as metrics are added.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ..analyses.registry import METRICS

LOWER, HIGHER = "lower", "higher"
NON_NUMERIC_UNITS = ("bool", "name")

DIRECTIONS: dict[str, str | None] = {
    "window_ns": None, "steps": None, "iterations": None,
    "step_time_mean_ns": LOWER, "step_time_p50_ns": LOWER, "step_time_p95_ns": LOWER,
    "gpu_busy_fraction": HIGHER, "compute_fraction": HIGHER, "comm_fraction": None,
    "exposed_comm_fraction": LOWER, "comm_overlap_fraction": HIGHER,
    "memcpy_fraction": LOWER, "h2d_fraction": LOWER, "exposed_h2d_fraction": LOWER,
    "pageable_memcpy_fraction": LOWER, "pageable_memcpy_count": LOWER, "memset_fraction": LOWER,
    "idle_fraction": LOWER, "idle_dataloader_fraction": LOWER, "idle_host_launch_fraction": LOWER,
    "idle_sync_fraction": LOWER, "idle_launch_latency_fraction": LOWER, "idle_other_fraction": LOWER,
    "idle_short_launch_fraction": LOWER, "idle_host_long_fraction": LOWER,
    "dataloader_fraction": LOWER, "dataloader_stall_fraction": LOWER,
    "kernel_count": None, "kernel_median_ns": HIGHER, "kernels_under_10us_fraction": LOWER,
    "launches_per_ms": None, "launch_delay_p50_ns": None, "launch_delay_p95_ns": None,
    "cpu_launch_overhead_fraction": LOWER, "blocks_per_sm_mean": HIGHER, "est_occupancy_mean": HIGHER,
    "sm_efficiency": HIGHER, "graph_launches": None, "graph_kernels": None,
    "graph_kernel_fraction": None,
    "tensor_core_fraction": HIGHER, "tensor_core_unknown_fraction": None, "tc_eligible_non_tc_fraction": LOWER,
    "sync_fraction": LOWER, "sync_calls": LOWER, "sync_memcpy_count": LOWER,
    "implicit_sync_calls": LOWER, "implicit_sync_fraction": LOWER,
    "idle_blocked_in_sync_fraction": LOWER, "idle_host_late_blocked_fraction": LOWER,
    "sync_blocked_longest_call_ns": LOWER, "sync_blocked_longest_call_fraction": None,
    "memory_peak_allocated_bytes": LOWER, "memory_peak_reserved_bytes": LOWER, "device_memory_bytes": None,
    "memory_peak_fraction": LOWER,
    "gap_max_ns": LOWER, "idle_gap_max_ns": LOWER, "gap_p95_ns": LOWER,
    "gpu_count": None, "compute_capability": None, "world_size": None,
    "launch_link_fraction": None, "gpu_op_count": None,
    # efficiency: FLOPs counted from the trace or a model formula
    "model_flops_per_step": None, "hardware_flops_per_step": None, "formula_flops_per_step": None,
    "achieved_tflops": HIGHER, "mfu": HIGHER, "hfu": HIGHER, "tensor_core_mfu": HIGHER, "formula_mfu": HIGHER,
    "peak_tflops": None, "flops_counted_fraction": None, "trace_to_formula_flops_ratio": None,
    "fp32_flops_fraction": LOWER, "small_gemm_fraction": LOWER, "unfused_attention_fraction": LOWER,
    "tokens_per_s": HIGHER, "samples_per_s": HIGHER, "memory_estimate_bytes": None, "max_micro_batch": None,
    # the job view across ranks
    "job_ranks": None, "collectives_matched": None, "job_step_time_p50_ns": LOWER,
    "comm_wait_fraction": LOWER, "rank_comm_wait_fraction": LOWER, "comm_busbw_gbps": HIGHER, "link_busbw_gbps": None,
    "straggler_count": LOWER, "straggler_rank": None, "straggler_cause_ms_per_step": LOWER,
    "straggler_wait_ms_per_step": LOWER, "straggler_wait_fraction": LOWER,
    "runtime_calls": None, "profiler_range_events": None,
    "straggler_arrived_last_fraction": LOWER,
    # the pre-window backlog and the launch queue: how the capture began and how far the CPU ran ahead
    "backlog_ns": None, "backlog_ops": None, "launch_queue_depth_max": None, "launch_blocked_calls": None,
    "launch_blocked_fraction": None, "launch_period_ns": None, "host_gap_long_ns": None,
}

# Changes smaller than these are shown as unchanged: 0.5 percentage points of a fraction, 2% of others.
FRACTION_TOLERANCE = 0.005
RELATIVE_TOLERANCE = 0.02


def numeric_metrics() -> list[str]:
    """Registry metrics whose values are numbers (the ones a delta and a direction apply to)."""
    return [k for k, (unit, _) in METRICS.items() if unit not in NON_NUMERIC_UNITS]


@dataclass
class MetricDelta:
    name: str
    unit: str
    before: float | None
    after: float | None
    direction: str | None  # "lower" or "higher" is better; None: neither
    change: str  # "better", "worse", "changed" (no better side), "same", "unknown"

    @property
    def delta(self) -> float | None:
        return None if self.before is None or self.after is None else self.after - self.before

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "delta": self.delta}


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _significant(unit: str, before: float, after: float) -> bool:
    if unit == "fraction":
        return abs(after - before) >= FRACTION_TOLERANCE
    scale = max(abs(before), abs(after))
    return scale > 0 and abs(after - before) >= RELATIVE_TOLERANCE * scale


def metric_deltas(before: dict[str, Any], after: dict[str, Any]) -> list[MetricDelta]:
    out = []
    for name in numeric_metrics():
        unit = METRICS[name][0]
        b, a = _number(before.get(name)), _number(after.get(name))
        direction = DIRECTIONS.get(name)
        if b is None or a is None:
            change = "same" if b is None and a is None else "unknown"
        elif not _significant(unit, b, a):
            change = "same"
        elif direction is None:
            change = "changed"
        else:
            change = "better" if (a < b) == (direction == LOWER) else "worse"
        out.append(MetricDelta(name=name, unit=unit, before=b, after=a, direction=direction, change=change))
    return out


@dataclass
class LabelChange:
    gone: list[str]
    new: list[str]
    kept: list[str]
    before_withheld: bool = False
    after_withheld: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def label_change(before_rank: dict[str, Any], after_rank: dict[str, Any]) -> LabelChange:
    vb, va = before_rank.get("verdict") or {}, after_rank.get("verdict") or {}
    lb, la = list(vb.get("labels") or []), list(va.get("labels") or [])
    return LabelChange(gone=[x for x in lb if x not in la], new=[x for x in la if x not in lb],
                       kept=[x for x in lb if x in la], before_withheld=bool(vb.get("withheld")),
                       after_withheld=bool(va.get("withheld")))
