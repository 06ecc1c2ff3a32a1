"""Idle time split into disjoint causes (DESIGN.md: idle), and per-stream kernel gaps.

Idle is window minus busy. Causes are assigned in order, first match wins:

1. ``dataloader``: idle time while a DataLoader ``__next__`` span is open (time-based);
2. ``host_launch``: idle pieces whose next GPU op was launched after the piece began;
3. ``sync``: remaining idle time while the CPU is blocked in a synchronizing call (time-based);
4. ``launch_latency``: remaining pieces shorter than 30 us whose next op was launched before;
5. ``other``: the rest.

A host sync usually shows up as ``host_launch``: the GPU drains, the sync returns, and only then
does the CPU launch the next op. The sync analysis reports the CPU side separately.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import intervals as iv
from ..model.trace import Trace
from .window import launch_times

LAUNCH_LATENCY_NS = 30_000
CAUSES = ("dataloader", "host_launch", "sync", "launch_latency", "other")


@dataclass
class IdleCauses:
    sets: dict[str, iv.IntervalSet]  # cause -> interval set inside the window
    idle: iv.IntervalSet

    def totals(self, lo: int | None = None, hi: int | None = None) -> dict[str, int]:
        if lo is None:
            return {c: iv.total(s) for c, s in self.sets.items()}
        return {c: iv.total(iv.clip(s, lo, hi)) for c, s in self.sets.items()}


def _next_op_launch(trace: Trace, at: np.ndarray) -> np.ndarray:
    """For each time in ``at``: the earliest launch among GPU ops starting exactly there (-1 if none)."""
    g = trace.gpu_ops
    if not len(g) or not at.size:
        return np.full(at.size, -1, dtype=np.int64)
    starts = g["start_ns"]
    launched = launch_times(trace)
    order = np.lexsort((launched, starts))
    s_sorted, l_sorted = starts[order], launched[order]
    pos = np.searchsorted(s_sorted, at, side="left")
    ok = pos < s_sorted.size
    posc = np.minimum(pos, s_sorted.size - 1)
    ok &= s_sorted[posc] == at
    return np.where(ok, l_sorted[posc], -1)


def idle_causes(trace: Trace, busy: iv.IntervalSet, lo: int, hi: int,
                dataloader: iv.IntervalSet, sync: iv.IntervalSet) -> IdleCauses:
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
    host = has_next & (next_launch > gap_start)
    host_set = iv.union(r_s[host], r_e[host])
    remaining = (r_s[~host], r_e[~host])
    sync_set = iv.intersect(remaining, sync)
    remaining2 = iv.subtract(remaining, sync_set)
    s2, e2 = remaining2
    gi2 = np.searchsorted(idle[0], s2, side="right") - 1
    g_len = (idle[1] - idle[0])[np.maximum(gi2, 0)] if s2.size else s2
    g_end2 = idle[1][np.maximum(gi2, 0)] if s2.size else s2
    nl2 = _next_op_launch(trace, g_end2)
    latency = (nl2 >= 0) & (g_len < LAUNCH_LATENCY_NS)
    sets = {
        "dataloader": dl,
        "host_launch": host_set,
        "sync": sync_set,
        "launch_latency": iv.union(s2[latency], e2[latency]),
        "other": iv.union(s2[~latency], e2[~latency]),
    }
    return IdleCauses(sets=sets, idle=idle)
