"""Interval algebra on sorted numpy arrays.

An *interval set* is a pair ``(starts, ends)`` of int64 arrays, sorted by start, disjoint and
non-touching (``ends[i] < starts[i + 1]``), each interval half-open ``[start, end)``. Every function
here takes and returns that normal form, so results can be chained without re-sorting. All work is
vectorized; nothing loops over intervals in Python.
"""

from __future__ import annotations

import numpy as np

IntervalSet = tuple[np.ndarray, np.ndarray]

_EMPTY = np.zeros(0, dtype=np.int64)


def empty() -> IntervalSet:
    return _EMPTY.copy(), _EMPTY.copy()


def union(starts: np.ndarray, ends: np.ndarray) -> IntervalSet:
    """Merge arbitrary (unsorted, overlapping) intervals into normal form."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    keep = ends > starts
    starts, ends = starts[keep], ends[keep]
    if starts.size == 0:
        return empty()
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    running_end = np.maximum.accumulate(e)
    # A new group starts where the start is past every end seen so far.
    new_group = np.empty(s.size, dtype=bool)
    new_group[0] = True
    new_group[1:] = s[1:] > running_end[:-1]
    group_starts = s[new_group]
    last_in_group = np.append(np.flatnonzero(new_group)[1:] - 1, s.size - 1)
    group_ends = running_end[last_in_group]
    return group_starts, group_ends


def total(iset: IntervalSet) -> int:
    starts, ends = iset
    return int((ends - starts).sum())


def _boundaries(a: IntervalSet, b: IntervalSet, need_a: bool, need_b: bool) -> IntervalSet:
    """Sweep both sets' boundaries; keep the stretches where membership matches the flags. The stretches
    come out in order and disjoint, so runs of them that touch are joined into normal form directly."""
    a_s, a_e = a
    b_s, b_e = b
    pts = np.concatenate([a_s, a_e, b_s, b_e])
    if pts.size == 0:
        return empty()
    na, nb = a_s.size + a_e.size, b_s.size + b_e.size
    delta_a = np.zeros(na + nb, dtype=np.int32)
    delta_a[: a_s.size] = 1
    delta_a[a_s.size : na] = -1
    delta_b = np.zeros(na + nb, dtype=np.int32)
    delta_b[na : na + b_s.size] = 1
    delta_b[na + b_s.size :] = -1
    order = np.argsort(pts, kind="stable")
    pts = pts[order]
    in_a = np.cumsum(delta_a[order])
    in_b = np.cumsum(delta_b[order])
    # Only the state after the last event at each coordinate counts.
    last = np.append(pts[1:] != pts[:-1], True)
    pts, in_a, in_b = pts[last], in_a[last], in_b[last]
    on = (((in_a > 0) == need_a) & ((in_b > 0) == need_b))[:-1]  # the stretch from each point to the next
    if not on.any():
        return empty()
    first = on.copy()
    first[1:] &= ~on[:-1]
    end = on.copy()
    end[:-1] &= ~on[1:]
    return pts[:-1][first].astype(np.int64), pts[1:][end].astype(np.int64)


def intersect(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    return _boundaries(a, b, True, True)


def subtract(a: IntervalSet, b: IntervalSet) -> IntervalSet:
    """``a`` minus ``b``."""
    return _boundaries(a, b, True, False)


def clip(iset: IntervalSet, lo: int, hi: int) -> IntervalSet:
    """Intersect with the single window ``[lo, hi)``."""
    starts, ends = iset
    s = np.maximum(starts, lo)
    e = np.minimum(ends, hi)
    keep = e > s
    return s[keep], e[keep]


def overlapping(iset: IntervalSet, lo: int, hi: int) -> IntervalSet:
    """The intervals of ``iset`` that overlap ``[lo, hi)``, whole (not clipped), found by binary search:
    what an intersection or subtraction with anything inside ``[lo, hi)`` reads of a long set."""
    starts, ends = iset
    i0 = int(np.searchsorted(ends, lo, side="right"))
    i1 = int(np.searchsorted(starts, hi, side="left"))
    return starts[i0:i1], ends[i0:i1]


def gaps(iset: IntervalSet, lo: int | None = None, hi: int | None = None) -> IntervalSet:
    """Complement of ``iset`` inside ``[lo, hi)`` (defaults: its own span)."""
    starts, ends = iset
    if starts.size == 0:
        if lo is None or hi is None or hi <= lo:
            return empty()
        return np.array([lo], dtype=np.int64), np.array([hi], dtype=np.int64)
    lo = int(starts[0]) if lo is None else lo
    hi = int(ends[-1]) if hi is None else hi
    g_s = np.concatenate([[lo], ends])
    g_e = np.concatenate([starts, [hi]])
    return clip((g_s, g_e), lo, hi)


def overlap_per_interval(q_starts: np.ndarray, q_ends: np.ndarray, iset: IntervalSet) -> np.ndarray:
    """For each query interval, the length of its overlap with the normal-form ``iset``.

    Uses prefix sums of covered length, so it is O((n + m) log m).
    """
    starts, ends = iset
    q_starts = np.asarray(q_starts, dtype=np.int64)
    q_ends = np.asarray(q_ends, dtype=np.int64)
    if starts.size == 0 or q_starts.size == 0:
        return np.zeros(q_starts.size, dtype=np.int64)
    cum = np.concatenate([[0], np.cumsum(ends - starts)])

    def covered_before(t: np.ndarray) -> np.ndarray:
        # Covered length in (-inf, t).
        i = np.searchsorted(starts, t, side="right")  # intervals starting at or before t
        full = cum[np.maximum(i - 1, 0)]
        partial = np.where(i > 0, np.minimum(t, ends[np.maximum(i - 1, 0)]) - starts[np.maximum(i - 1, 0)], 0)
        return np.where(i > 0, full + np.maximum(partial, 0), 0)

    return np.maximum(covered_before(q_ends) - covered_before(q_starts), 0)
