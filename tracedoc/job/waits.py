"""A rank's wait and lateness per step as unions of intervals (docs/job.md: wait and lateness
are bounded by the step).

Collectives that overlap in time on one rank (DDP buckets on a communication thread or stream,
asynchronous gloo work) each hold a waiting interval ``[own arrival, last arrival]``; summing them
counts the same time twice and gives waits longer than the step. Here every measure is the length
of a union of intervals, cut by the rank's step windows ``(previous completion, completion]`` (the
first step: ``(start, completion]``), over the steps in which the rank has a matched collective (its
matched steps). A measure's share of the time of those steps is therefore in [0, 1] by construction,
and "ms per step" is that share of the rank's matched step time (its median), so it never exceeds
the step.

Input: the matched instances' timing (``timing.Timing``, clocks aligned) and each rank's steps;
output: ``RankWaits`` per rank and the wait each other rank spends on one late rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import intervals as iv
from ..model.groups import distinct, lex_order
from ..analyses.comm.instances import RankTables
from .timing import Timing

_LIMIT = 2**62


@dataclass
class StepWindows:
    """Every rank's matched-step windows, on the aligned clock: one row per (rank, step)."""

    rank: np.ndarray
    step: np.ndarray  # in the job's step numbering
    lo_ns: np.ndarray
    hi_ns: np.ndarray
    step_time_ns: np.ndarray
    wait_ns: np.ndarray | None = None  # per window: the rank's wait in it (rank_waits fills it)
    late_ns: np.ndarray | None = None  # per window: the rank's lateness in it (rank_waits fills it)

    def total_by_rank(self, ranks: np.ndarray) -> np.ndarray:
        return np.bincount(
            np.searchsorted(ranks, self.rank), weights=self.step_time_ns.astype(np.float64), minlength=ranks.size
        )


@dataclass
class RankWaits:
    """One rank's waiting and lateness over the job's matched steps."""

    rank: int
    steps: int  # matched steps
    step_p50_ns: float | None  # median step time over the matched steps
    time_ns: int  # their total time
    wait_ns: int  # |union of waiting intervals| within them
    late_ns: int  # |union of (median arrival, own arrival] where later than the median| within them
    wait_p50_ns: float | None  # median over the matched steps of the wait in each
    late_p50_ns: float | None  # median over the matched steps of the lateness in each
    comm_ns: int  # |union of (arrival, end)| over the matched collectives (all of them)
    comm_wait_ns: int  # |union of waiting intervals| over the matched collectives (all of them)

    @property
    def wait_fraction(self) -> float | None:
        """The median step's wait as a share of the median step (<= 1: no step waits longer than it lasts)."""
        return _share(self.wait_p50_ns, self.step_p50_ns)

    @property
    def late_fraction(self) -> float | None:
        return _share(self.late_p50_ns, self.step_p50_ns)


def _share(part: float | None, whole: float | None) -> float | None:
    return part / whole if part is not None and whole else None


def step_windows(ranks: list[RankTables], t: Timing, step_shift: dict[int, int]) -> StepWindows:
    """The windows of the steps in which each rank has a matched collective."""
    parts = {k: [] for k in ("rank", "step", "lo", "hi", "time")}
    have = t.step >= 0
    # (rank, step) of the matched collectives, as one sorted key: rank x width + step
    width = int(t.step[have].max()) + 1 if have.any() else 1
    lo_step = int(t.step[have].min()) if have.any() else 0
    keys = distinct(t.rank[have] * width + (t.step[have] - lo_step)) if have.any() else np.zeros(0, np.int64)
    key_rank = keys // width if keys.size else keys
    for rt in ranks:
        st = rt.steps
        a, b = np.searchsorted(key_rank, [rt.rank, rt.rank + 1]) if keys.size else (0, 0)
        own = keys[a:b] - rt.rank * width + lo_step
        if not st["number"].size or not own.size:
            continue
        shift = t.offsets_ns.get(rt.rank, 0)
        completion = np.maximum.accumulate(st["completion_ns"]) - shift
        lo = np.append(st["start_ns"][:1] - shift, completion[:-1])
        keep = np.isin(st["number"], own)
        # a step a pre-window backlog ran ahead of has no step time to take a share of; where no step
        # of the rank has one (a one-step profile), its span from the CPU start stands in (longer than
        # the step by the CPU's run-ahead: the shares are understated, never overstated)
        if "timed" in st and st["timed"].astype(bool).any():
            keep &= st["timed"].astype(bool)
        parts["rank"].append(np.full(int(keep.sum()), rt.rank, dtype=np.int64))
        parts["step"].append(st["number"][keep] + step_shift.get(rt.rank, 0))
        parts["lo"].append(lo[keep])
        parts["hi"].append(completion[keep])
        parts["time"].append(st["step_time_ns"][keep])
    cat = {k: np.concatenate(v) if v else np.zeros(0, dtype=np.int64) for k, v in parts.items()}
    return StepWindows(cat["rank"], cat["step"], cat["lo"], cat["hi"], cat["time"])


def rank_waits(t: Timing, windows: StepWindows) -> dict[int, RankWaits]:
    """Per rank: matched steps, and its wait, lateness and communication as unions of intervals."""
    if not t.inst.size:
        return {}
    ranks = distinct(t.rank)
    code = np.searchsorted(ranks, t.rank)
    last = np.minimum(t.last_ns[t.inst], np.maximum(t.end_ns, t.arrival_ns))  # no rank waits after it left
    med = median_arrival(t)[t.inst]
    late = t.arrival_ns > med
    wcode = np.searchsorted(ranks, windows.rank)
    known = (wcode < ranks.size) & (ranks[np.minimum(wcode, ranks.size - 1)] == windows.rank)
    wk, lo, hi = wcode[known], windows.lo_ns[known], windows.hi_ns[known]
    waiting = KeyedUnion(code, t.arrival_ns, last, ranks.size)
    wait_each = waiting.within(wk, lo, hi)
    late_each = per_window(code[late], med[late], t.arrival_ns[late], wk, lo, hi, ranks.size)
    windows.wait_ns = np.zeros(windows.rank.size, dtype=np.int64)
    windows.wait_ns[known] = wait_each
    windows.late_ns = np.zeros(windows.rank.size, dtype=np.int64)
    windows.late_ns[known] = late_each
    comm = union_length(code, t.arrival_ns, np.maximum(t.end_ns, t.arrival_ns), ranks.size)
    comm_wait = waiting.totals()
    steps = np.bincount(wk, minlength=ranks.size)
    time = np.bincount(wk, weights=windows.step_time_ns[known].astype(np.float64), minlength=ranks.size)
    wait = np.bincount(wk, weights=wait_each.astype(np.float64), minlength=ranks.size)
    lateness = np.bincount(wk, weights=late_each.astype(np.float64), minlength=ranks.size)
    step_p50 = _median_by(wk, windows.step_time_ns[known], ranks.size)
    wait_p50, late_p50 = _median_by(wk, wait_each, ranks.size), _median_by(wk, late_each, ranks.size)
    return {
        int(r): RankWaits(
            rank=int(r),
            steps=int(steps[i]),
            step_p50_ns=step_p50[i],
            time_ns=int(time[i]),
            wait_ns=int(wait[i]),
            late_ns=int(lateness[i]),
            wait_p50_ns=wait_p50[i],
            late_p50_ns=late_p50[i],
            comm_ns=int(comm[i]),
            comm_wait_ns=int(comm_wait[i]),
        )
        for i, r in enumerate(ranks.tolist())
    }


def caused_wait(t: Timing, windows: StepWindows, late_rank: int, waits: dict[int, RankWaits]) -> float | None:
    """The share of their step the other ranks spend waiting at the collectives ``late_rank`` arrived
    last at: per other rank, the mean over its matched steps of that wait (a union of intervals in
    each step) over its median step; then the mean over the other ranks. In [0, 1]. A mean, not a
    median over steps: two slow ranks that take turns at arriving last each cost their share."""
    if not t.inst.size:
        return None
    at = (t.last_rank[t.inst] == late_rank) & (t.rank != late_rank)
    others = distinct(t.rank[t.rank != late_rank])
    if not others.size:
        return None
    code = np.searchsorted(others, t.rank[at])
    wcode = np.searchsorted(others, windows.rank)
    known = (wcode < others.size) & (others[np.minimum(wcode, others.size - 1)] == windows.rank)
    last = np.minimum(t.last_ns[t.inst[at]], np.maximum(t.end_ns[at], t.arrival_ns[at]))
    each = per_window(
        code, t.arrival_ns[at], last, wcode[known], windows.lo_ns[known], windows.hi_ns[known], others.size
    )
    total = np.bincount(wcode[known], weights=each.astype(np.float64), minlength=others.size)
    shares = [
        _share(float(total[i]) / waits[r].steps, waits[r].step_p50_ns) if waits[r].steps else None
        for i, r in enumerate(others.tolist())
        if r in waits
    ]
    shares = [min(x, 1.0) for x in shares if x is not None]
    return float(np.mean(shares)) if shares else None


def _median_by(code: np.ndarray, values: np.ndarray, n: int) -> list[float | None]:
    """Median of ``values`` per code 0..n-1; None for a code without values."""
    out: list[float | None] = [None] * n
    if not code.size:
        return out
    order = lex_order((values, code))
    c, v = code[order], values[order].astype(np.float64)
    starts = np.searchsorted(c, np.arange(n))
    ends = np.searchsorted(c, np.arange(n), side="right")
    for i in np.flatnonzero(ends > starts).tolist():
        k = ends[i] - starts[i]
        out[i] = float((v[starts[i] + (k - 1) // 2] + v[starts[i] + k // 2]) / 2)
    return out


def median_arrival(t: Timing) -> np.ndarray:
    """Median arrival of each instance (the mean of the two middle arrivals for an even count)."""
    if t.median_ns is None:
        t.median_ns = _median_arrival(t)
    return t.median_ns


def _median_arrival(t: Timing) -> np.ndarray:
    m = t.last_ns.size
    order = lex_order((t.arrival_ns, t.inst))
    a, inst = t.arrival_ns[order], t.inst[order]
    starts = np.searchsorted(inst, np.arange(m))
    counts = np.bincount(inst, minlength=m)
    lo = starts + (counts - 1) // 2
    hi = starts + counts // 2
    out = np.zeros(m, dtype=np.int64)
    has = counts > 0
    out[has] = (a[lo[has]] + a[hi[has]]) // 2
    return out


# -- unions of intervals per key ------------------------------------------------------------------


class KeyedUnion:
    """The union of each key's intervals ``[lo, hi)`` (keys 0..n_keys-1), computed as one union on a
    line where key k occupies ``[k * width, (k + 1) * width)`` (in chunks of keys where that would
    overflow int64), so that intervals of different keys never merge."""

    def __init__(
        self, key: np.ndarray, lo: np.ndarray, hi: np.ndarray, n_keys: int, t0: int | None = None, t1: int | None = None
    ):
        self.n_keys = n_keys
        self.chunks: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []
        if not key.size:
            self.t0, self.width, self.per_chunk = 0, 1, max(n_keys, 1)
            return
        self.t0 = int(lo.min()) if t0 is None else min(int(lo.min()), t0)
        top = int(max(hi.max(), lo.max())) if t1 is None else max(int(hi.max()), int(lo.max()), t1)
        self.width = top - self.t0 + 2
        self.per_chunk = max(1, _LIMIT // self.width)
        for first in range(0, n_keys, self.per_chunk):
            sel = (key >= first) & (key < first + self.per_chunk) if n_keys > self.per_chunk else slice(None)
            k = key[sel] - first
            seg_lo, seg_hi = iv.union(k * self.width + (lo[sel] - self.t0), k * self.width + (hi[sel] - self.t0))
            self.chunks.append((first, seg_lo, seg_hi, np.concatenate([[0], np.cumsum(seg_hi - seg_lo)])))

    def totals(self) -> np.ndarray:
        """Per key: the length of its union."""
        out = np.zeros(self.n_keys, dtype=np.int64)
        for first, seg_lo, seg_hi, _ in self.chunks:
            np.add.at(out, seg_lo // self.width + first, seg_hi - seg_lo)
        return out

    def within(self, w_key: np.ndarray, w_lo: np.ndarray, w_hi: np.ndarray) -> np.ndarray:
        """Per window ``(w_lo, w_hi]`` of key ``w_key``: the length of the key's union inside it."""
        out = np.zeros(w_key.size, dtype=np.int64)
        for first, seg_lo, seg_hi, cum in self.chunks:
            sel = np.flatnonzero((w_key >= first) & (w_key < first + self.per_chunk))
            if not sel.size:
                continue
            base = (w_key[sel] - first) * self.width
            top = self.width - 1

            def at(t: np.ndarray, seg_lo=seg_lo, seg_hi=seg_hi, cum=cum, base=base, sel=sel, top=top) -> np.ndarray:
                return _covered_to(seg_lo, seg_hi, cum, base + np.clip(t[sel] - self.t0, 0, top))

            out[sel] = at(w_hi) - at(w_lo)
        return out


def union_length(key: np.ndarray, lo: np.ndarray, hi: np.ndarray, n_keys: int) -> np.ndarray:
    """Per key 0..n_keys-1: the length of the union of its intervals ``[lo, hi)``."""
    return KeyedUnion(key, lo, hi, n_keys).totals()


def per_window(
    key: np.ndarray, lo: np.ndarray, hi: np.ndarray, w_key: np.ndarray, w_lo: np.ndarray, w_hi: np.ndarray, n_keys: int
) -> np.ndarray:
    """Per window: the length of the union of its key's intervals ``[lo, hi)`` inside it."""
    if not key.size or not w_key.size:
        return np.zeros(w_key.size, dtype=np.int64)
    return KeyedUnion(key, lo, hi, n_keys).within(w_key, w_lo, w_hi)


def _covered_to(seg_lo: np.ndarray, seg_hi: np.ndarray, cum: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The length of the segments' union below each ``x`` (segments sorted and disjoint)."""
    idx = np.searchsorted(seg_lo, x, side="right") - 1
    ok = idx >= 0
    out = np.zeros(x.size, dtype=np.int64)
    i = idx[ok]
    out[ok] = cum[i] + np.minimum(x[ok] - seg_lo[i], seg_hi[i] - seg_lo[i])
    return out
