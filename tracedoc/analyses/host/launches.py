"""Launch statistics: launch rate and delay, CPU launch overhead, CUDA graph launches, and how many GPU ops
are linked to the call that launched them (and why the others are not)."""

from __future__ import annotations

import re

import numpy as np

from ...model import intervals as iv
from ...model import trace as M
from ...model import vocab as V
from ...model.evidence import LaunchTotals
from ...model.groups import Groups, largest_first
from ...model.trace import Trace
from ...model.stats import percentile
from ..kernels import classify as C
from ..kernels.stats import window_kernel_rows
from ..core.registry import Produced, analysis


def launch_link_fraction(trace: Trace, backlog=None) -> float | None:
    """Share of GPU ops linked to their launch call; None without GPU ops. The ops of a pre-window
    backlog (``backlog.Backlog``) are left out: they were launched before the capture, so no recorded
    call could have launched them."""
    g = trace.gpu_ops
    n_backlog = int(backlog.ops.size) if backlog is not None and backlog.found else 0
    n = len(g) - n_backlog
    return float(np.count_nonzero(g["launch"] >= 0) / n) if n > 0 else None


OLD_TORCH = (1, 10)  # Kineto traces of torch before 1.10 often lack the correlation ids that link launches


def _version(text: str | None) -> tuple[int, ...] | None:
    m = re.match(r"\s*(\d+)\.(\d+)", str(text or ""))
    return (int(m.group(1)), int(m.group(2))) if m else None


def unlinked_ops_text(trace: Trace, backlog=None) -> str | None:
    """Which GPU ops have no launch call, and why, as far as the trace tells: the most frequent names,
    whether they carry a correlation id at all, and what the trace's recorder says. A version is named
    only where the trace records one (Kineto does not record torch's). None when all are linked."""
    g, r = trace.gpu_ops, trace.runtime
    if not len(g):
        return None
    unlinked = g["launch"] < 0
    if backlog is not None and backlog.found:
        unlinked[backlog.ops] = False
    n = int(unlinked.sum())
    if not n:
        return None
    rows = np.flatnonzero(unlinked)
    by_name = Groups(g["name"][rows])
    counts = by_name.count()
    top = largest_first(counts)[:3].tolist()
    names = ", ".join(f"{int(counts[i]):,} {trace.string(int(by_name.keys[0][i]))}" for i in top)
    if by_name.size > len(top):
        names += f" and {n - int(sum(counts[i] for i in top)):,} more"
    corr = g["correlation"][rows]
    without = int((corr <= 0).sum())
    why = []
    if without:
        why.append(f"{without:,} carry no correlation id" if without < n else "none carries a correlation id")
    if n - without:
        who = "no CUDA API call in the export" if trace.meta.format == "nsys" else "no launch call in the trace"
        why.append(
            f"{n - without:,} carry a correlation id that {who} has"
            + (
                " (the calls were made by a thread or API the capture did not trace, or before it started)"
                if len(r)
                else " (the trace holds no runtime calls)"
            )
        )
    text = f"unlinked: {names}; " + "; ".join(why)
    version = _version(trace.meta.versions.torch)
    if trace.meta.format != "nsys" and version is not None and version < OLD_TORCH:
        text += (
            f"; this trace was recorded with torch {trace.meta.versions.torch}, and torch before "
            f"{OLD_TORCH[0]}.{OLD_TORCH[1]} often leaves out the correlation ids"
        )
    return text


def launch_stats(trace: Trace, lo: int, hi: int, backlog=None, blocked: iv.IntervalSet | None = None) -> dict:
    """Launch statistics in ``[lo, hi)``; ``blocked``: host time blocked on a full launch queue, which is
    back-pressure from the GPU and not counted as launch overhead."""
    g, r = trace.gpu_ops, trace.runtime
    length_ms = (hi - lo) / 1e6
    out: dict = {"launch_delay_p50_ns": None, "launch_delay_p95_ns": None, "launch_delays_ns": np.zeros(0)}
    graph_call = None
    if len(r):
        graph_call = C.name_mask(trace, V.GRAPH_LAUNCH_RE, ids=r["name"])[r["name"]]
        is_launch = C.name_mask(trace, V.LAUNCH_CALL_RE, ids=r["name"])[r["name"]]
        in_win = (r["start_ns"] >= lo) & (r["start_ns"] < hi)
        sel = is_launch & in_win
        out["launch_calls"] = int(sel.sum())
        out["launches_per_ms"] = float(sel.sum() / length_ms) if length_ms > 0 else None
        launch_ns = int((r["end_ns"] - r["start_ns"])[sel].sum())
        out["cpu_launch_overhead_ns"] = launch_ns
        # Of the window: the time some thread is inside a launch call (the union, clipped), so calls on
        # several threads or running past the window's end never make it exceed the window.
        in_calls = iv.clip(iv.union(r["start_ns"][sel], r["end_ns"][sel]), lo, hi)
        if blocked is not None:
            in_calls = iv.subtract(in_calls, blocked)
        busy = iv.total(in_calls)
        out["cpu_launch_overhead_fraction"] = busy / (hi - lo) if hi > lo else None
        out["graph_launches"] = int((graph_call & in_win).sum())
    else:
        out.update(
            launch_calls=0,
            launches_per_ms=None,
            cpu_launch_overhead_ns=0,
            cpu_launch_overhead_fraction=None,
            graph_launches=0,
        )
    if len(g):
        linked = np.flatnonzero(g["launch"] >= 0)
        if linked.size:
            delay = np.maximum(g["start_ns"][linked] - r["end_ns"][g["launch"][linked]], 0)
            out["launch_delay_p50_ns"] = percentile(delay, 50)
            out["launch_delay_p95_ns"] = percentile(delay, 95)
            out["launch_delays_ns"] = delay
            skew = g["start_ns"][linked] < r["start_ns"][g["launch"][linked]] - 1_000_000
            out["clock_anomaly"] = bool(skew.any())
            out["clock_anomaly_count"] = int(skew.sum())
        else:
            out["clock_anomaly"] = False
        out["launch_link_fraction"] = launch_link_fraction(trace, backlog)
        out["unlinked_gpu_ops"] = unlinked_ops_text(trace, backlog)
        # Kernels inside graphs carry a graph id (2026 traces) or the correlation of their cudaGraphLaunch.
        in_graph = g["graph_id"] >= 0
        if len(r) and linked.size:
            in_graph[linked] |= graph_call[g["launch"][linked]]
        is_kernel = g["kind"] == M.KERNEL
        out["graph_kernels"] = int((in_graph & is_kernel).sum())
        out["graph_kernel_fraction"] = out["graph_kernels"] / int(is_kernel.sum()) if is_kernel.any() else None
    else:
        out.update(
            launch_link_fraction=None,
            graph_kernels=0,
            graph_kernel_fraction=None,
            clock_anomaly=False,
            unlinked_gpu_ops=None,
        )
    return out


LAUNCH_METRICS = (
    "launches_per_ms",
    "launch_delay_p50_ns",
    "launch_delay_p95_ns",
    "cpu_launch_overhead_fraction",
    "graph_launches",
    "graph_kernels",
    "graph_kernel_fraction",
    "launch_link_fraction",
    "clock_anomaly",
    "unlinked_gpu_ops",
)


@analysis(needs=("window", "backlog", "launch_queue"), produces=LAUNCH_METRICS, evidence=("launch",))
def launches(trace: Trace, inputs) -> Produced:
    lo, hi = inputs["window"].start_ns, inputs["window"].end_ns
    ls = launch_stats(trace, lo, hi, inputs["backlog"], inputs["launch_queue"].blocked_spans(trace))
    g = trace.gpu_ops
    rows = window_kernel_rows(trace, lo, hi)
    row = LaunchTotals(
        launch_calls=ls.get("launch_calls"),
        cpu_launch_overhead_ns=ls.get("cpu_launch_overhead_ns"),
        gpu_kernel_ns=int((g["end_ns"] - g["start_ns"])[rows].sum()) if len(g) else 0,
        clock_anomaly_count=ls.get("clock_anomaly_count", 0),
        **_distribution("launch_delay", ls.get("launch_delays_ns")),
    )
    return Produced(metrics={k: ls.get(k) for k in LAUNCH_METRICS}, evidence={"launch": [row]})


def _distribution(name: str, values) -> dict:
    """Percentiles of a duration sample, for evidence tables."""
    if values is None or not len(values):
        return {}
    qs = (5, 25, 50, 75, 95, 99)
    return {f"{name}_p{q}_ns": x for q, x in zip(qs, percentile(values, qs))}
