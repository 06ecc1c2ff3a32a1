"""Analyses: pure functions from a ``Trace`` to metrics and evidence tables.

``analyze_trace`` runs them all for one rank and returns a ``RankResult``: a flat ``metrics`` dict
whose keys are exactly ``registry.METRICS``, evidence tables (lists of dicts) for reports and
rules, per-step and per-device rows, and the window used.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model import intervals as iv
from ..model import trace as M
from ..model.trace import Trace
from . import breakdown as B
from . import classify as C
from . import comm, gaps, gpu_metrics, host, idle, kernels, links, timeline
from .registry import METRICS
from .window import Window, find_steps, find_window


@dataclass
class RankResult:
    source: str
    rank: int | None
    window: Window
    metrics: dict[str, Any]
    evidence: dict[str, list[dict]]
    per_step: list[dict]
    per_device: list[dict]
    meta: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    timeline: dict[str, Any] = field(default_factory=dict)

    @property
    def step_time_ns(self) -> float | None:
        v = self.metrics.get("step_time_mean_ns")
        return float(v) if v else (float(self.window.length_ns) or None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "rank": self.rank,
            "window": {"start_ns": self.window.start_ns, "end_ns": self.window.end_ns,
                       "length_ns": self.window.length_ns, "kind": self.window.kind,
                       "description": self.window.describe()},
            "metrics": {k: _jsonable(v) for k, v in self.metrics.items()},
            "per_step": self.per_step, "per_device": self.per_device,
            "evidence": self.evidence, "warnings": self.warnings,
            "environment": environment(self.meta), "timeline": self.timeline,
        }


def _jsonable(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def environment(meta: dict) -> dict[str, Any]:
    devices = meta.get("devices") or []
    first = devices[0] if devices else {}
    return {
        "format": meta.get("format"), "gpu": first.get("name"), "device_count": len(devices),
        "compute_capability": (f"{first.get('computeMajor')}.{first.get('computeMinor')}"
                               if first.get("computeMajor") is not None else None),
        "world_size": meta.get("world_size"), "rank": meta.get("rank"), "backend": meta.get("backend"),
        "nccl_version": meta.get("nccl_version"), "cuda_runtime_version": meta.get("cuda_runtime_version"),
        "cuda_driver_version": meta.get("cuda_driver_version"), "events": meta.get("events"),
        "torch_version": (meta.get("extra") or {}).get("torch_version"),
    }


def analyze_trace(trace: Trace) -> RankResult:
    g = trace.gpu_ops
    steps = find_steps(trace)
    win = find_window(trace, steps)
    lo, hi = win.start_ns, win.end_ns
    length = hi - lo
    gpu_ext = links.gpu_external_ids(trace)
    launching_ops = links.OpsByExternalId(trace, innermost=True)
    comm_mask = C.comm_kernel_mask(trace, gpu_ext)
    tc_classes = C.tensor_core_class(trace)
    sets = B.op_sets(trace, comm_mask)
    m: dict[str, Any] = {k: None for k in METRICS}
    m["window_ns"] = length
    m["steps"] = len(steps)
    if len(steps):
        d = steps.dur_ns
        m["step_time_mean_ns"] = float(d.mean())
        m["step_time_p50_ns"] = float(np.percentile(d, 50))
        m["step_time_p95_ns"] = float(np.percentile(d, 95))
    m.update(B.breakdown(sets, lo, hi))
    if length <= 0 and len(g):
        # A window of one instantaneous op is all busy by definition.
        m["gpu_busy_fraction"] = 1.0
        m["compute_fraction"] = 1.0 if len(sets.compute[0]) else 0.0

    dl_spans, dl_multi, dl_names = host.dataloader_spans(trace)
    sync_spans, sync_stats, sync_rows = host.sync_calls(trace, lo, hi)
    causes = idle.idle_causes(trace, sets.busy, lo, hi, dl_spans, sync_spans)
    totals = causes.totals()
    m["idle_short_launch_fraction"] = causes.launch_idle_in_short_gaps() / length if length > 0 else 0.0
    idle_s, idle_e = causes.idle
    m["idle_gap_max_ns"] = int((idle_e - idle_s).max()) if idle_s.size else 0
    for cause, ns in totals.items():
        m[f"idle_{cause}_fraction"] = ns / length if length > 0 else 0.0
    dl_in_window = iv.clip(dl_spans, lo, hi)
    m["dataloader_fraction"] = iv.total(dl_in_window) / length if length > 0 else 0.0
    m["dataloader_stall_fraction"] = totals["dataloader"] / length if length > 0 else 0.0
    m["dataloader_multiprocess"] = dl_multi
    m["sync_fraction"] = sync_stats["sync_ns"] / length if length > 0 else 0.0
    m["sync_calls"] = sync_stats["sync_calls"]
    m["sync_memcpy_count"] = sync_stats["sync_memcpy_count"]

    m.update(kernels.kernel_stats(trace))
    kernel_rows = np.flatnonzero((g["kind"] == M.KERNEL) & (g["start_ns"] < hi) & (g["end_ns"] > lo)) if len(g) \
        else np.zeros(0, dtype=np.int64)
    m.update(kernels.occupancy_stats(trace, kernel_rows))
    ls = kernels.launch_stats(trace, lo, hi)
    for k in ("launches_per_ms", "launch_delay_p50_ns", "launch_delay_p95_ns", "cpu_launch_overhead_fraction",
              "graph_launches", "graph_kernels", "launch_link_fraction", "clock_anomaly"):
        m[k] = ls.get(k)
    kernel_ops = launching_ops.names_of(gpu_ext)
    m.update(kernels.tensor_cores(trace, comm_mask, lo, hi, kernel_ops, tc_classes))

    mem = host.memory(trace)
    for k in ("memory_peak_allocated_bytes", "memory_peak_reserved_bytes", "device_memory_bytes",
              "memory_peak_fraction"):
        m[k] = mem[k]
    gap = gaps.stream_gaps(trace, comm_mask, lo, hi, gpu_ext, launching_ops)
    if gap["all_ns"].size:
        m["gap_max_ns"] = int(gap["all_ns"].max())
        m["gap_p95_ns"] = float(np.percentile(gap["all_ns"], 95))
    if len(g):
        copies = (g["kind"] == M.MEMCPY) & ((g["src_kind"] == M.MEM_PAGEABLE) | (g["dst_kind"] == M.MEM_PAGEABLE))
        m["pageable_memcpy_count"] = int((copies & (g["start_ns"] < hi) & (g["end_ns"] > lo)).sum())
    else:
        m["pageable_memcpy_count"] = 0

    devices = trace.meta.get("devices") or []
    gpu_devs = sorted(set(np.unique(g["device"]).tolist())) if len(g) else []
    m["gpu_count"] = len(gpu_devs)
    cc = _compute_capability(devices, gpu_devs)
    m["compute_capability"] = cc
    m["tensor_core_capable"] = (cc >= 7.0) if cc is not None and not _is_rocm(devices) else (
        True if _is_rocm(devices) and cc is not None and cc >= 9.0 else None)
    m["world_size"] = trace.meta.get("world_size")
    m["backend"] = cuda_backend(trace.meta.get("backend"))
    m["uses_data_parallel"] = host.uses_data_parallel(trace)
    m["has_gpu_ops"] = bool(len(g))
    m["truncated"] = bool(trace.meta.get("truncated"))

    per_step = _per_step(steps, sets, causes, dl_spans)
    per_device = _per_device(trace, comm_mask, lo, hi, gpu_devs, devices)
    sm = {d["device"]: d for d in gpu_metrics.gpu_metrics(trace, lo, hi, timeline=False)}
    for row in per_device:
        extra = sm.get(row["device"], {})
        row["sm_efficiency"] = extra.get("sm_efficiency")
        row["est_occupancy"] = extra.get("est_occupancy")
    m["sm_efficiency"] = per_device[0]["sm_efficiency"] if per_device else None
    m["est_occupancy_mean"] = per_device[0]["est_occupancy"] if per_device else None
    evidence = {
        "idle_causes": [{"cause": c, "ns": ns, "fraction": ns / length if length > 0 else 0.0}
                        for c, ns in totals.items()],
        "top_gaps": gap["top"],
        "stream_gaps": gap["streams"],
        "top_kernels": kernels.top_kernels(trace, comm_mask, lo, hi, tc_classes),
        "top_operators": kernels.top_operators(trace, kernel_ops, lo, hi),
        "kernel_totals": kernels.kernel_totals(trace, comm_mask, lo, hi),
        "operator_totals": kernels.operator_totals(trace, kernel_ops, lo, hi),
        "collectives": comm.collectives(trace, comm_mask, gpu_ext, lo, hi, trace.meta.get("world_size")),
        "sync_calls": sync_rows,
        "memory_top_allocs": mem["top_allocs"],
        "memory_per_device": mem["per_device"],
        "memory_curve": mem["curve"],
        "dataloader": [{"name": n} for n in dl_names],
        "per_step": per_step,
        "step_stats": _step_stats(per_step),
        "contents": [{"table": name, "rows": n} for name, n in trace.summary().items()]
        + [{"table": f"other: {cat}", "rows": n} for cat, n in sorted((trace.meta.get("other_categories") or {}).items())],
        "launch": [{"launch_calls": ls.get("launch_calls"), "cpu_launch_overhead_ns": ls.get("cpu_launch_overhead_ns"),
                    "gpu_kernel_ns": int((g["end_ns"] - g["start_ns"])[kernel_rows].sum()) if len(g) else 0,
                    "clock_anomaly_count": ls.get("clock_anomaly_count", 0),
                    **_distribution("launch_delay", ls.get("launch_delays_ns"))}],
    }
    warnings = list(trace.warnings)
    other = trace.meta.get("other_categories") or {}
    accel = {k: v for k, v in other.items() if k.startswith(("mtia", "xpu", "privateuse1"))}
    if accel and not len(g):
        warnings.append(f"{trace.source}: accelerator events of categories {', '.join(sorted(accel))} are present; "
                        "tracedoc's GPU analyses cover CUDA and ROCm kernels, memcpy and memset")
    excerpts = timeline.excerpts(trace, steps, comm_mask, lo, hi, causes.sets, dl_spans, sync_spans)
    return RankResult(source=trace.source, rank=trace.meta.get("rank"), window=win, metrics=m, evidence=evidence,
                      per_step=per_step, per_device=per_device, meta=trace.meta, warnings=warnings,
                      timeline={"excerpts": excerpts})


def cuda_backend(backend) -> str | None:
    """The backend used for CUDA tensors: ``"cpu:gloo,cuda:nccl"`` -> ``"nccl"``."""
    if not backend:
        return None
    text = str(backend)
    if ":" not in text:
        return text
    pairs = dict(p.split(":", 1) for p in text.split(",") if ":" in p)
    return pairs.get("cuda") or next(iter(pairs.values()), None)


def _is_rocm(devices: list[dict]) -> bool:
    return any("AMD" in str(d.get("name", "")) or "Radeon" in str(d.get("name", "")) or
               "Instinct" in str(d.get("name", "")) for d in devices)


def _compute_capability(devices: list[dict], gpu_devs: list[int]) -> float | None:
    by_id = {d.get("id"): d for d in devices}
    for dev in gpu_devs + [d.get("id") for d in devices]:
        d = by_id.get(dev)
        if d and d.get("computeMajor") is not None:
            try:
                return float(f"{int(d['computeMajor'])}.{int(d.get('computeMinor') or 0)}")
            except (TypeError, ValueError):
                return None
    return None


_STEP_QUANTITIES = ("window_ns", "busy_ns", "compute_ns", "comm_ns", "exposed_comm_ns", "memcpy_ns", "idle_ns",
                    "idle_dataloader_ns", "idle_host_launch_ns", "idle_sync_ns", "idle_launch_latency_ns",
                    "idle_other_ns", "dataloader_ns")


def _step_stats(per_step: list[dict]) -> list[dict]:
    """Total, p50 and p95 across steps of each per-step quantity."""
    if not per_step:
        return []
    out = []
    for q in _STEP_QUANTITIES:
        v = np.array([row[q] for row in per_step], dtype=np.float64)
        out.append({"quantity": q, "total_ns": int(v.sum()), "p50_ns": float(np.percentile(v, 50)),
                    "p95_ns": float(np.percentile(v, 95)), "max_ns": int(v.max())})
    return out


def _distribution(name: str, values) -> dict:
    """Percentiles of a duration sample, for evidence tables."""
    if values is None or not len(values):
        return {}
    qs = (5, 25, 50, 75, 95, 99)
    return {f"{name}_p{q}_ns": float(x) for q, x in zip(qs, np.percentile(values, qs))}


def _per_step(steps, sets, causes, dl_spans) -> list[dict]:
    """Per-step breakdown in ns; every quantity for all steps at once via prefix sums."""
    if not len(steps):
        return []
    lo, hi = steps.cpu_start_ns, steps.end_ns

    def over(iset) -> list[int]:
        return iv.overlap_per_interval(lo, hi, iset).tolist()

    cols = {
        "busy_ns": over(sets.busy), "compute_ns": over(sets.compute), "comm_ns": over(sets.comm),
        "exposed_comm_ns": over(iv.subtract(sets.comm, sets.compute)), "memcpy_ns": over(sets.memcpy),
        **{f"idle_{c}_ns": over(s) for c, s in causes.sets.items()},
        "dataloader_ns": over(dl_spans),
    }
    rows = []
    for i in range(len(steps)):
        window = int(hi[i] - lo[i])
        row = {"step": steps.names[i], "start_ns": int(lo[i]), "end_ns": int(hi[i]), "window_ns": window}
        row.update({k: v[i] for k, v in cols.items()})
        row["idle_ns"] = max(0, window - row["busy_ns"])
        rows.append(row)
    return rows


def _per_device(trace: Trace, comm_mask, lo, hi, gpu_devs, devices) -> list[dict]:
    g = trace.gpu_ops
    by_id = {d.get("id"): d for d in devices}
    out = []
    for dev in gpu_devs:
        rows = g["device"] == dev
        sets = B.op_sets(trace, comm_mask, rows)
        b = B.breakdown(sets, lo, hi)
        d = by_id.get(dev, {})
        out.append({"device": int(dev), "name": d.get("name"), "kernels": int((rows & (g["kind"] == M.KERNEL)).sum()),
                    "streams": int(np.unique(g["stream"][rows]).size),
                    **{k: b[k] for k in ("gpu_busy_fraction", "compute_fraction", "comm_fraction",
                                          "exposed_comm_fraction", "comm_overlap_fraction")}})
    return out
