"""GPU time breakdown: busy, compute, communication, exposed communication, overlap, copies.

Each quantity is the length of a union of intervals clipped to a window (docs/definitions.md), computed by
the interval algebra in ``tracedoc.model.intervals``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...model import intervals as iv
from ...model import trace as M
from ...model.evidence import StepStat
from ...model.groups import distinct
from ...model.trace import Trace
from ...model.stats import percentile
from .gpu_metrics import gpu_metrics
from ..core.registry import Produced, analysis


@dataclass
class OpSets:
    """The interval unions the breakdown and idle analyses share (whole trace, not clipped)."""

    busy: iv.IntervalSet
    compute: iv.IntervalSet
    comm: iv.IntervalSet
    memcpy: iv.IntervalSet
    h2d: iv.IntervalSet
    pageable: iv.IntervalSet
    memset: iv.IntervalSet


def op_sets(trace: Trace, comm_mask: np.ndarray, rows: np.ndarray | None = None) -> OpSets:
    g = trace.gpu_ops
    s, e, kind = g["start_ns"], g["end_ns"], g["kind"]
    sel = np.ones(len(g), dtype=bool) if rows is None else rows

    def u(mask: np.ndarray) -> iv.IntervalSet:
        m = mask & sel
        return iv.union(s[m], e[m])

    is_kernel = kind == M.KERNEL
    is_copy = kind == M.MEMCPY
    pageable = is_copy & ((g["src_kind"] == M.MEM_PAGEABLE) | (g["dst_kind"] == M.MEM_PAGEABLE))
    return OpSets(
        busy=u(np.ones(len(g), dtype=bool)),
        compute=u(is_kernel & ~comm_mask),
        comm=u(comm_mask),
        memcpy=u(is_copy),
        h2d=u(is_copy & (g["copy_kind"] == M.COPY_HTOD)),
        pageable=u(pageable),
        memset=u(kind == M.MEMSET),
    )


def breakdown(sets: OpSets, lo: int, hi: int) -> dict[str, float | None]:
    """Fractions of ``[lo, hi)``; ``comm_overlap_fraction`` is None without communication."""
    length = hi - lo

    def frac(x: int) -> float:
        return x / length if length > 0 else 0.0

    compute = iv.clip(sets.compute, lo, hi)
    comm = iv.clip(sets.comm, lo, hi)
    comm_ns = iv.total(comm)
    exposed_ns = iv.total(iv.subtract(comm, compute))
    busy_ns = iv.total(iv.clip(sets.busy, lo, hi))
    out = {
        "gpu_busy_fraction": frac(busy_ns),
        "compute_fraction": frac(iv.total(compute)),
        "comm_fraction": frac(comm_ns),
        "exposed_comm_fraction": frac(exposed_ns),
        "comm_overlap_fraction": (comm_ns - exposed_ns) / comm_ns if comm_ns > 0 else None,
        "memcpy_fraction": frac(iv.total(iv.clip(sets.memcpy, lo, hi))),
        "h2d_fraction": frac(iv.total(iv.clip(sets.h2d, lo, hi))),
        "exposed_h2d_fraction": frac(iv.total(iv.subtract(iv.clip(sets.h2d, lo, hi), compute))),
        "pageable_memcpy_fraction": frac(iv.total(iv.clip(sets.pageable, lo, hi))),
        "memset_fraction": frac(iv.total(iv.clip(sets.memset, lo, hi))),
        "idle_fraction": frac(length - busy_ns) if length > 0 else 0.0,
    }
    return out


BREAKDOWN_METRICS = (
    "gpu_busy_fraction",
    "compute_fraction",
    "comm_fraction",
    "exposed_comm_fraction",
    "comm_overlap_fraction",
    "memcpy_fraction",
    "h2d_fraction",
    "exposed_h2d_fraction",
    "pageable_memcpy_fraction",
    "memset_fraction",
    "idle_fraction",
)


@analysis(needs=("comm_mask",), provides=("op_sets",))
def gpu_op_sets(trace: Trace, inputs) -> Produced:
    return Produced(values={"op_sets": op_sets(trace, inputs["comm_mask"])})


@analysis(needs=("op_sets", "window"), produces=BREAKDOWN_METRICS)
def time_breakdown(trace: Trace, inputs) -> Produced:
    sets, win = inputs["op_sets"], inputs["window"]
    m = breakdown(sets, win.start_ns, win.end_ns)
    if win.end_ns - win.start_ns <= 0 and len(trace.gpu_ops):
        # A window of one instantaneous op is all busy by definition.
        m["gpu_busy_fraction"] = 1.0
        m["compute_fraction"] = 1.0 if len(sets.compute[0]) else 0.0
    return Produced(metrics=m)


@analysis(
    needs=("step_spans", "op_sets", "idle_sets", "dataloader_spans", "backlog"), evidence=("per_step", "step_stats")
)
def step_breakdown(trace: Trace, inputs) -> Produced:
    rows = per_step(
        inputs["step_spans"],
        inputs["op_sets"],
        inputs["idle_sets"],
        inputs["dataloader_spans"],
        inputs["backlog"].interval(),
    )
    return Produced(evidence={"per_step": rows, "step_stats": step_stats(rows)})


@analysis(needs=("comm_mask", "window"), provides=("per_device",), produces=("sm_efficiency", "est_occupancy_mean"))
def device_breakdown(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    rows = per_device(trace, inputs["comm_mask"], win.start_ns, win.end_ns)
    first = rows[0] if rows else {}
    return Produced(
        metrics={"sm_efficiency": first.get("sm_efficiency"), "est_occupancy_mean": first.get("est_occupancy")},
        values={"per_device": rows},
    )


STEP_QUANTITIES = (
    "step_time_ns",
    "window_ns",
    "busy_ns",
    "compute_ns",
    "comm_ns",
    "exposed_comm_ns",
    "memcpy_ns",
    "idle_ns",
    "idle_dataloader_ns",
    "idle_host_launch_ns",
    "idle_sync_ns",
    "idle_launch_latency_ns",
    "idle_other_ns",
    "dataloader_ns",
)


def step_stats(per_step_rows: list[dict]) -> list[StepStat]:
    """Total, p50 and p95 across steps of each per-step quantity."""
    if not per_step_rows:
        return []
    out = []
    for q in STEP_QUANTITIES:
        v = np.array([row[q] for row in per_step_rows if row[q] is not None], dtype=np.float64)
        if not v.size:
            continue
        out.append(
            StepStat(
                quantity=q,
                total_ns=int(v.sum()),
                p50_ns=percentile(v, 50),
                p95_ns=percentile(v, 95),
                max_ns=int(v.max()),
            )
        )
    return out


def per_step(
    steps, sets: OpSets, idle_sets: dict, dl_spans: iv.IntervalSet, backlog: iv.IntervalSet = iv.empty()
) -> list[dict]:
    """Per-step breakdown in ns; every quantity for all steps at once via prefix sums. A step a
    pre-window backlog ran ahead of has no step time (None); the backlog's span is not idle.

    Each step's quantities are measured over its step time: from the previous step's completion to its
    own (the first step: from its start), so they add up to the step time beside them and the steps do
    not overlap. ``start_ns`` and ``end_ns`` stay the step's own span (CPU start to completion), which
    overlaps the next steps when the CPU runs ahead; ``window_ns`` is the interval measured over."""
    if not len(steps):
        return []
    hi = steps.completion_ns
    lo = np.concatenate([steps.cpu_start_ns[:1], hi[:-1]])

    def over(iset) -> list[int]:
        return iv.overlap_per_interval(lo, hi, iset).tolist()

    cols = {
        "busy_ns": over(sets.busy),
        "compute_ns": over(sets.compute),
        "comm_ns": over(sets.comm),
        "exposed_comm_ns": over(iv.subtract(sets.comm, sets.compute)),
        "memcpy_ns": over(sets.memcpy),
        **{f"idle_{c}_ns": over(s) for c, s in idle_sets.items()},
        "dataloader_ns": over(dl_spans),
    }
    occupied = over(iv.union(np.concatenate([sets.busy[0], backlog[0]]), np.concatenate([sets.busy[1], backlog[1]])))
    timed = steps.timed().tolist()
    step_time = [t if ok else None for t, ok in zip(steps.step_time_ns.tolist(), timed)]
    rows = []
    for i in range(len(steps)):
        window = int(hi[i] - lo[i])
        # window_ns: the interval since the previous step completed, which the quantities are measured
        # over (the step time, where the step has one); start_ns/end_ns: the step's own span
        row = {
            "step": steps.names[i],
            "start_ns": int(steps.cpu_start_ns[i]),
            "end_ns": int(steps.end_ns[i]),
            "step_time_ns": step_time[i],
            "window_ns": window,
        }
        row.update({k: v[i] for k, v in cols.items()})
        row["idle_ns"] = max(0, window - occupied[i])
        rows.append(row)
    return rows


def per_device(trace: Trace, comm_mask: np.ndarray, lo: int, hi: int) -> list[dict]:
    """Breakdown, SM efficiency and occupancy per device that ran GPU ops."""
    g = trace.gpu_ops
    gpu_devs = sorted(set(distinct(g["device"]).tolist())) if len(g) else []
    sm = {d["device"]: d for d in gpu_metrics(trace, lo, hi, timeline=False)}
    out = []
    for dev in gpu_devs:
        rows = g["device"] == dev
        b = breakdown(op_sets(trace, comm_mask, rows), lo, hi)
        d = trace.meta.device(dev)
        extra = sm.get(dev, {})
        out.append(
            {
                "device": int(dev),
                "name": d.name if d else None,
                "kernels": int((rows & (g["kind"] == M.KERNEL)).sum()),
                "streams": int(distinct(g["stream"][rows]).size),
                **{
                    k: b[k]
                    for k in (
                        "gpu_busy_fraction",
                        "compute_fraction",
                        "comm_fraction",
                        "exposed_comm_fraction",
                        "comm_overlap_fraction",
                    )
                },
                "sm_efficiency": extra.get("sm_efficiency"),
                "est_occupancy": extra.get("est_occupancy"),
            }
        )
    return out
