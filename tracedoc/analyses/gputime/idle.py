"""Idle time split into disjoint causes (docs/definitions.md: idle), and per-stream kernel gaps.

Idle is window minus busy. Causes are assigned in order, first match wins:

1. ``dataloader``: idle time while a DataLoader ``__next__`` span is open (time-based);
2. ``host_launch``: idle pieces whose next GPU op was launched after the gap began (the CPU was
   late) -- unless the CPU was blocked in a synchronizing call when the gap began: then the CPU was
   not late but held back, and the piece goes to ``sync``;
3. ``sync``: the pieces just described, plus remaining idle time while the CPU is blocked in a
   synchronizing call (time-based);
4. ``launch_latency``: remaining pieces shorter than 30 us whose next op was launched before;
5. ``other``: the rest.

A ``.item()`` in the loop looks like this: the CPU blocks in the sync until the GPU drains, the gap
begins while it is still blocked, and the GPU stays idle until the CPU has launched the next op.
That gap is the sync's cost (the queue drained, and the CPU restarts it from empty), so it counts
as ``sync``, not as a late host -- up to ``SYNC_RESTART_NS`` after the sync returns. A longer wait
after it (a checkpoint save, evaluation, logging) is the host's own work and counts as
``host_launch``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...model import intervals as iv
from ...model import trace as M
from ...model import vocab as V
from ...model.evidence import IdleCause, IdleCpuOp
from ...model.groups import dense_codes, isin, lex_order
from ...model.trace import Trace
from ..kernels import classify as C
from ..core.registry import Produced, analysis
from ..host.launchqueue import long_gap_ns
from ..host.nesting import nest_order
from .window import launch_times, step_name_mask

LAUNCH_LATENCY_NS = 30_000  # a gap shorter than this after a launch ahead of it is launch latency (docs/definitions.md)
SYNC_RESTART_NS = 10_000_000
CAUSES = ("dataloader", "host_launch", "sync", "launch_latency", "other")


@dataclass
class IdleCauses:
    """The window's GPU idle time split by cause, as interval sets."""

    sets: dict[str, iv.IntervalSet]  # cause -> interval set inside the window
    idle: iv.IntervalSet
    # launch_latency pieces before an op of a CUDA graph the host had already launched: the gap is
    # inside a graph replay (GPU-side scheduling), not the host launching late.
    in_graph: iv.IntervalSet = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    # idle gaps from this length on are long: host work, not the dispatch of the next op
    # (``launchqueue.long_gap_ns``: ten of the trace's own launch periods)
    long_ns: int = 1_000_000

    def gaps(self, long: bool) -> iv.IntervalSet:
        """The idle gaps at least ``long_ns`` long (``long``), or the shorter ones."""
        g_s, g_e = self.idle
        sel = ((g_e - g_s) >= self.long_ns) if long else ((g_e - g_s) < self.long_ns)
        return g_s[sel], g_e[sel]

    def launch_idle_in_short_gaps(self, lo: int | None = None, hi: int | None = None) -> int:
        """host_launch + launch_latency time inside idle gaps shorter than ``long_ns`` (inside ``[lo, hi)``
        when given)."""
        launch = iv.union(
            np.concatenate([self.sets["host_launch"][0], self.sets["launch_latency"][0]]),
            np.concatenate([self.sets["host_launch"][1], self.sets["launch_latency"][1]]),
        )
        part = iv.intersect(iv.subtract(launch, self.in_graph), self.gaps(long=False))
        return iv.total(part if lo is None else iv.clip(part, lo, hi))

    def host_late_long(self, lo: int | None = None, hi: int | None = None) -> iv.IntervalSet:
        """host_launch idle inside idle gaps of ``long_ns`` or more (inside ``[lo, hi)`` when given): the
        host was busy with other work than launching (``host_bound``)."""
        part = iv.intersect(self.sets["host_launch"], self.gaps(long=True))
        return part if lo is None else iv.clip(part, lo, hi)

    def totals(self, lo: int | None = None, hi: int | None = None) -> dict[str, int]:
        if lo is None:
            return {c: iv.total(s) for c, s in self.sets.items()}
        return {c: iv.total(iv.clip(s, lo, hi)) for c, s in self.sets.items()}


def _next_op_launch(trace: Trace, at: np.ndarray) -> np.ndarray:
    """For each time in ``at``: the earliest launch among GPU ops starting exactly there (-1 if none)."""
    return _next_op(trace, at)[0]


def _next_op(trace: Trace, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each time in ``at``: the earliest launch among GPU ops starting exactly there and that
    op's row (-1 and -1 if none). An op not linked to its launch call has no known launch time (-1):
    whether the host was late for it cannot be told (a GPU-only trace has no launch calls at all)."""
    g = trace.gpu_ops
    if not len(g) or not at.size:
        return np.full(at.size, -1, dtype=np.int64), np.full(at.size, -1, dtype=np.int64)
    starts = g["start_ns"]
    launched = launch_times(trace)
    order = lex_order((launched, starts))
    s_sorted, l_sorted = starts[order], launched[order]
    pos = np.searchsorted(s_sorted, at, side="left")
    ok = pos < s_sorted.size
    posc = np.minimum(pos, s_sorted.size - 1)
    ok &= s_sorted[posc] == at
    known = ok & (g["launch"][order[posc]] >= 0)
    return np.where(known, l_sorted[posc], -1), np.where(ok, order[posc], -1)


def graph_op_mask(trace: Trace) -> np.ndarray:
    """Which GPU ops ran inside a CUDA graph: a graph id, or launched by a graph launch call."""
    g, r = trace.gpu_ops, trace.runtime
    in_graph = g["graph_id"] >= 0
    linked = np.flatnonzero(g["launch"] >= 0)
    if len(r) and linked.size:
        in_graph[linked] |= C.name_mask(trace, V.GRAPH_LAUNCH_RE, ids=r["name"])[r["name"]][g["launch"][linked]]
    return in_graph


def _inside(t: np.ndarray, iset: iv.IntervalSet) -> tuple[np.ndarray, np.ndarray]:
    """Whether each time lies inside the normal-form interval set, and the end of the interval that
    holds it (ends inclusive: a sync that returns the instant the GPU drains still held the CPU
    when the gap began)."""
    s, e = iset
    if not s.size or not t.size:
        return np.zeros(t.size, dtype=bool), np.zeros(t.size, dtype=np.int64)
    i = np.maximum(np.searchsorted(s, t, side="right") - 1, 0)
    return (t >= s[i]) & (t <= e[i]), e[i]


def idle_causes(
    trace: Trace,
    busy: iv.IntervalSet,
    lo: int,
    hi: int,
    dataloader: iv.IntervalSet,
    sync: iv.IntervalSet,
    long_ns: int | None = None,
) -> IdleCauses:
    idle = iv.gaps(iv.clip(busy, lo, hi), lo, hi)
    dl = iv.intersect(idle, dataloader)
    rest = iv.subtract(idle, dl)
    r_s, r_e = rest
    # The idle gap each remaining piece belongs to, and that gap's start.
    gap_idx = np.searchsorted(idle[0], r_s, side="right") - 1
    gap_start = idle[0][np.maximum(gap_idx, 0)] if r_s.size else r_s
    gap_end = idle[1][np.maximum(gap_idx, 0)] if r_s.size else r_e
    next_launch = _next_op_launch(trace, gap_end)
    has_next = next_launch >= 0
    blocked, sync_end = _inside(gap_start, sync)
    late = has_next & (next_launch > gap_start)
    host = late & ~blocked
    held = late & blocked
    # A held piece is the sync's up to SYNC_RESTART_NS after the sync returned; the CPU's own.
    held_until = np.clip(sync_end + SYNC_RESTART_NS, r_s, r_e)
    host_set = iv.union(np.concatenate([r_s[host], held_until[held]]), np.concatenate([r_e[host], r_e[held]]))
    other_pieces = ~host & ~held
    remaining = (r_s[other_pieces], r_e[other_pieces])
    in_sync = iv.intersect(remaining, sync)
    sync_set = iv.union(np.concatenate([r_s[held], in_sync[0]]), np.concatenate([held_until[held], in_sync[1]]))
    remaining2 = iv.subtract(remaining, sync_set)
    s2, e2 = remaining2
    gi2 = np.searchsorted(idle[0], s2, side="right") - 1
    g_len = (idle[1] - idle[0])[np.maximum(gi2, 0)] if s2.size else s2
    g_end2 = idle[1][np.maximum(gi2, 0)] if s2.size else s2
    nl2, next_row = _next_op(trace, g_end2)
    latency = (nl2 >= 0) & (g_len < LAUNCH_LATENCY_NS)
    graph = latency & (next_row >= 0)
    if graph.any():
        graph[graph] = graph_op_mask(trace)[next_row[graph]]
    sets = {
        "dataloader": dl,
        "host_launch": host_set,
        "sync": sync_set,
        "launch_latency": iv.union(s2[latency], e2[latency]),
        "other": iv.union(s2[~latency], e2[~latency]),
    }
    return IdleCauses(
        sets=sets,
        idle=idle,
        in_graph=iv.union(s2[graph], e2[graph]),
        long_ns=long_gap_ns(trace, lo, hi) if long_ns is None else long_ns,
    )


def cpu_ops_during(trace: Trace, iset: iv.IntervalSet, top: int = 10) -> list[IdleCpuOp]:
    """The outermost CPU ops (step spans left out) running during ``iset``, by time overlapping it."""
    c = trace.cpu_ops
    if not len(c) or not iset[0].size:
        return []
    kinds = isin(c["kind"], (M.CPU_OP, M.USER_ANNOTATION, M.PYTHON_FUNCTION))
    rows = np.flatnonzero(kinds & ~step_name_mask(trace)[c["name"]])
    if not rows.size:
        return []
    # Outermost per thread: an op that starts after every earlier op on its thread has ended.
    rows = nest_order(c, rows)
    s, e = c["start_ns"][rows], c["end_ns"][rows]
    pid, tid = c["pid"][rows], c["tid"][rows]
    first = np.r_[True, (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])]
    thread = np.cumsum(first) - 1  # rows are sorted by thread: codes in (pid, tid) order
    # Running max of ends within each thread: offset each thread's ends above the previous threads'.
    span = int(e.max() - s.min()) + 1
    shifted = e - s.min() + thread.astype(np.int64) * span
    prev_max = np.maximum.accumulate(np.r_[np.int64(-1), shifted[:-1]])
    outer = first | (s - s.min() + thread.astype(np.int64) * span >= prev_max)
    rows, s, e = rows[outer], s[outer], e[outer]
    overlap = iv.overlap_per_interval(s, e, iset)
    hit = overlap > 0
    if not hit.any():
        return []
    names = c["name"][rows][hit]
    uniq, code = dense_codes(names)
    total = np.bincount(code, weights=overlap[hit])
    count = np.bincount(code)
    order = np.argsort(-total, kind="stable")[:top]
    return [IdleCpuOp(op=trace.string(int(uniq[i])), count=int(count[i]), idle_overlap_ns=int(total[i])) for i in order]


def occupied(busy: iv.IntervalSet, *also: iv.IntervalSet) -> iv.IntervalSet:
    """GPU busy time, with ``also`` counted as busy: a pre-window backlog's span (until it ends the GPU
    ran work launched before the capture, recorded or not), none of which is idle. (Time the host is
    blocked on a full launch queue is not: the GPU still idles between queued kernels, and those gaps,
    whose next op was launched long before, are launch latency, never a late host.)"""
    extra = [x for x in also if x[0].size]
    if not extra:
        return busy
    return iv.union(
        np.concatenate([busy[0], *(x[0] for x in extra)]), np.concatenate([busy[1], *(x[1] for x in extra)])
    )


@analysis(
    needs=("op_sets", "window", "dataloader_spans", "sync_spans", "backlog"),
    provides=("idle_sets", "idle_split"),
    produces=(
        "idle_short_launch_fraction",
        "idle_host_long_fraction",
        "idle_gap_max_ns",
        *(f"idle_{c}_fraction" for c in CAUSES),
        "dataloader_fraction",
        "dataloader_stall_fraction",
    ),
    evidence=("idle_causes", "idle_other_cpu_ops"),
)
def idle_time(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    lo, hi = win.start_ns, win.end_ns
    length = hi - lo
    dl_spans = inputs["dataloader_spans"]
    # The causes cover the whole analysed span (per-step rows read them from the first step's start);
    # the window's metrics are their part inside the window.
    busy = occupied(inputs["op_sets"].busy, inputs["backlog"].interval())
    causes = idle_causes(trace, busy, win.span_lo, hi, dl_spans, inputs["sync_spans"])
    totals = causes.totals(lo, hi)

    def frac(ns: int) -> float:
        return ns / length if length > 0 else 0.0

    idle_s, idle_e = iv.clip(causes.idle, lo, hi)
    m = {
        "idle_short_launch_fraction": frac(causes.launch_idle_in_short_gaps(lo, hi)),
        "idle_host_long_fraction": frac(iv.total(causes.host_late_long(lo, hi))),
        "idle_gap_max_ns": int((idle_e - idle_s).max()) if idle_s.size else 0,
        **{f"idle_{cause}_fraction": frac(ns) for cause, ns in totals.items()},
        "dataloader_fraction": frac(iv.total(iv.clip(dl_spans, lo, hi))),
        "dataloader_stall_fraction": frac(totals["dataloader"]),
    }
    rows = [IdleCause(cause=c, ns=ns, fraction=frac(ns)) for c, ns in totals.items()]
    return Produced(
        metrics=m,
        evidence={
            "idle_causes": rows,
            "idle_other_cpu_ops": cpu_ops_during(trace, iv.clip(causes.sets["other"], lo, hi)),
        },
        values={"idle_sets": causes.sets, "idle_split": causes},
    )
