"""CPU nesting depth (``cpu_ops.depth``), for every reader."""

from __future__ import annotations

import numpy as np

from ..model.groups import distinct, lex_order
from ..model.trace import Trace


def set_cpu_depths(trace: Trace, nest_group: np.ndarray | None = None) -> None:
    """Nesting depth of each CPU op within its thread (0 = outermost), without a per-op loop.

    Ops sorted by (thread, start, -end): an op's depth is the number of earlier ops of its thread
    that are still open at its start, i.e. its rank in the thread minus the ops that already ended.
    ``nest_group`` splits the ops into groups that nest among themselves only (nsys: push/pop
    ranges and OS runtime calls nest strictly; start/end ranges may overlap them without nesting).
    """
    c = trace.cpu_ops
    if not len(c):
        return
    if nest_group is None or not nest_group.any():
        c["depth"] = _depths(c["pid"], c["tid"], c["start_ns"], c["end_ns"])
        return
    depth = np.zeros(len(c), dtype=np.int64)
    for group in distinct(nest_group).tolist():
        rows = np.flatnonzero(nest_group == group)
        depth[rows] = _depths(c["pid"][rows], c["tid"][rows], c["start_ns"][rows], c["end_ns"][rows])
    c["depth"] = depth


def nest_depths(pid: np.ndarray, tid: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Nesting depth of intervals (one per row: thread ``pid``/``tid``, ``s`` to ``e``) among themselves
    only: the number of earlier intervals of the same thread still open at each one's start."""
    return _depths(np.asarray(pid), np.asarray(tid), np.asarray(s), np.asarray(e))


def _depths(pid: np.ndarray, tid: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    n = s.size
    order = lex_order((-e, s, tid, pid))
    p_o, t_o = pid[order], tid[order]
    new_thread = np.ones(n, dtype=bool)
    new_thread[1:] = (p_o[1:] != p_o[:-1]) | (t_o[1:] != t_o[:-1])
    bounds = np.append(np.flatnonzero(new_thread), n)
    depth = np.zeros(n, dtype=np.int64)
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):  # one pass per thread, not per op
        rows = order[lo:hi]
        closed = np.searchsorted(np.sort(e[rows]), s[rows], side="right")
        depth[rows] = np.maximum(np.arange(hi - lo) - closed, 0)
    return depth
