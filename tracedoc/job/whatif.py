"""What-if for the job view: the job's step time once a straggler's lateness is removed.

Input: the matched instances' timing (``timing.Timing``: per member its arrival and wait, per
instance its last arrival, clocks aligned) and each rank's step table. Output: the prediction
``{step_ms_before, step_ms_after, gain_ms, method}`` that the ``straggler_bound`` finding carries.

Why not the critical-path replay of each rank (``analyses/critical_path``): the ranks' traces and
graphs live in their workers and are gone by the time the job step matches collectives across
ranks; shipping graphs back would break the job step's O(ranks x collectives) budget. The job step replays the
collectives themselves instead, in lockstep:

- each rank's time between two of its collectives is its own work, kept as recorded; what a rank
  does after a collective starts when the collective does, so a collective that starts (and ends)
  earlier moves the rank's next arrival, and its step completion, earlier by as much;
- with the straggler on time, it reaches each collective no later than the last of the other
  members, so a collective starts at the latest arrival of the members other than the straggler.

Let ``d(k)`` be how much earlier instance ``k`` starts in the replay, and ``p(r, k)`` the instance
rank ``r`` took part in that began (its last member arrived) last before ``r`` arrived at ``k``:
began, not ended, because a CPU backend's work end is recorded after the caller has moved on
(``d = 0`` when there is none). Each member arrives ``d(p(r, k))`` earlier, and the last of the
members other than the straggler sets the start::

    d(k) = min over members r != straggler of ( wait(r, k) + d(p(r, k)) )

with ``wait(r, k)`` = last arrival - own arrival, as measured. A delay is counted once: lateness
at a step's first collective moves every later arrival of every rank, and the waits recorded at the
step's later collectives already hold it. A rank's step completion moves by ``d`` of the last
instance it took part in that began before it. The prediction is each rank's mean step time (the
span from its first step's start to its last completion over its steps, docs/definitions.md), the median
over ranks, before and after.

Limits: it overstates the gain where a rank's work after a collective does not wait for it (its
next step held back by its own input pipeline, say); lateness outside matched collectives is not
seen; with several stragglers the top one alone is put on time (the next one then sets the pace).
"""

from __future__ import annotations

import numpy as np

from ..model.groups import distinct
from ..model.stats import median
from ..analyses.comm.instances import RankTables
from .timing import Timing

METHOD = (
    "job replay of {n} matched collectives over {steps} steps: rank {rank}'s lateness removed (each "
    "collective starts at the latest arrival of the other ranks; delays carry forward in lockstep)"
)


def straggler_removed(
    t: Timing, ranks: list[RankTables], straggler: int, step_ns: float | None = None, windows=None
) -> tuple[dict | None, str | None]:
    """The predicted job step time with ``straggler`` on time: ``({step_ms_before, step_ms_after,
    gain_ms, method}, None)``, or ``(None, why)`` when the job has nothing to replay.

    ``step_ns``: the job's step time (the report's one step time); the replay's relative gain is
    applied to it, so the prediction starts from the step the report shows. ``windows``
    (``waits.StepWindows``): each rank's matched steps; the replay then spans those steps only (the
    steps outside the span every rank's window covers hold no matched collective to move)."""
    if not t.inst.size:
        return None, "no collective was matched and timed across the ranks"
    with_steps = [rt for rt in ranks if rt.steps["number"].size]
    if not with_steps:
        return None, "the ranks recorded no steps"
    m = t.last_ns.size
    began = _Began(t.rank, t.last_ns[t.inst], t.inst)
    earlier = _replay(
        t.inst, t.rank, t.wait_ns, began.before(t.rank, t.arrival_ns, strict=True), t.last_ns, straggler, m
    )
    # per rank, its first step's start and every completion (aligned clock), as one query table
    parts = []
    for rt in with_steps:
        mine = np.flatnonzero(windows.rank == rt.rank) if windows is not None else np.zeros(0, dtype=np.int64)
        if mine.size:
            mine = mine[np.argsort(windows.hi_ns[mine], kind="stable")]
            parts.append(np.append(windows.lo_ns[mine][:1], windows.hi_ns[mine]))  # aligned clock already
            continue
        order = np.argsort(rt.steps["start_ns"], kind="stable")
        points = np.append(rt.steps["start_ns"][order][:1], rt.steps["completion_ns"][order])
        parts.append(points - t.offsets_ns.get(rt.rank, 0))
    sizes = np.array([p.size for p in parts])
    q_time = np.concatenate(parts)
    q_rank = np.repeat(np.array([rt.rank for rt in with_steps], dtype=np.int64), sizes)
    moved = q_time - earlier[began.before(q_rank, q_time, strict=False)]  # index -1: no instance, 0 ns
    first = np.r_[0, np.cumsum(sizes)[:-1]]
    steps = sizes - 1
    span_before = _span(q_time, first, sizes)
    span_after = np.minimum(_span(moved, first, sizes), span_before)
    before_ms = median(span_before / steps) / 1e6
    after_ms = median(span_after / steps) / 1e6
    method = METHOD.format(n=m, steps=int(median(steps)), rank=straggler)
    if step_ns and before_ms > 0:
        share = max(0.0, 1.0 - min(after_ms, before_ms) / before_ms)
        before_ms, after_ms = step_ns / 1e6, step_ns / 1e6 * (1.0 - share)
        method += f"; the replay's gain ({share:.1%} of its mean step) applied to the job's step time"
    before_r, after_r = round(before_ms, 4), round(min(after_ms, before_ms), 4)
    return {
        "step_ms_before": before_r,
        "step_ms_after": after_r,
        "gain_ms": round(before_r - after_r, 4),
        "method": method,
    }, None


def _span(points: np.ndarray, first: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per rank: the latest completion minus the first step's start (its segment's first point)."""
    seg = np.repeat(np.arange(sizes.size), sizes)
    done = points.copy()
    done[first] = np.iinfo(np.int64).min  # the start is not a completion
    latest = np.full(sizes.size, np.iinfo(np.int64).min, dtype=np.int64)
    np.maximum.at(latest, seg, done)
    return (latest - points[first]).astype(np.float64)


class _Began:
    """The matched instance a rank took part in that began (its last member arrived) last before a
    given time. Rows sorted by (rank, start) as one integer key: rank code x the span of the times +
    time, or dense time codes where that would overflow."""

    def __init__(self, rank: np.ndarray, start: np.ndarray, inst: np.ndarray):
        self.rank, self.start, self.inst = rank, start, inst
        self.ranks = distinct(rank)
        self.lo = int(start.min()) if start.size else 0
        self.width = (int(start.max()) - self.lo + 2) if start.size else 1
        self.sorted_key = self.order = None

    def before(self, q_rank: np.ndarray, q_time: np.ndarray, strict: bool) -> np.ndarray:
        """Per query (rank, time): the rank's instance whose start is the latest ``<`` the time
        (``<=`` unless ``strict``); -1 when none (also for a rank without instances)."""
        r_code = np.searchsorted(self.ranks, q_rank)
        known = (r_code < self.ranks.size) & (self.ranks[np.minimum(r_code, self.ranks.size - 1)] == q_rank)
        if (self.ranks.size + 1) * self.width < 2**62:
            if self.sorted_key is None:
                key = np.searchsorted(self.ranks, self.rank) * self.width + (self.start - self.lo)
                self.order = np.argsort(key, kind="stable")
                self.sorted_key = key[self.order]
            sorted_key, order, width = self.sorted_key, self.order, self.width
            q_key = r_code * width + np.clip(q_time - self.lo, -1, width - 1)
            q_key = np.where(q_time < self.lo, r_code * width - 1, q_key)
        else:
            n = self.start.size
            _, code = np.unique(np.concatenate([self.start, q_time]), return_inverse=True)
            width = int(code.max()) + 2
            key = np.searchsorted(self.ranks, self.rank) * width + code[:n]
            order = np.argsort(key, kind="stable")
            sorted_key = key[order]
            q_key = r_code * width + code[n:]
        pos = np.searchsorted(sorted_key, q_key, side="left" if strict else "right") - 1
        ok = known & (pos >= 0)
        ok[ok] = sorted_key[pos[ok]] // width == r_code[ok]
        out = np.full(q_key.size, -1, dtype=np.int64)
        out[ok] = self.inst[order[pos[ok]]]
        return out


def _replay(inst, rank, wait, prev, last_ns, straggler: int, m: int) -> np.ndarray:
    """``d(k)`` per instance (ns), index ``m`` = no instance (0): how much earlier each matched
    instance starts and ends with the straggler on time."""
    prev = np.where(prev >= 0, prev, m)
    # the straggler does not bound an instance it shares with other ranks
    others = rank != straggler
    use = others | (np.bincount(inst[others], minlength=m)[inst] == 0)
    inst, wait, prev = inst[use], wait[use], prev[use]
    order = np.argsort(inst, kind="stable")
    inst, wait, prev = inst[order], wait[order], prev[order]
    bounds = np.searchsorted(inst, np.arange(m + 1))
    chained = _replay_chains(inst, wait, prev, bounds, m)
    if chained is not None:
        return chained
    # members came from different instances (several groups): replay in order of start; an instance's
    # predecessors began before it
    earlier = np.zeros(m + 1, dtype=np.int64)
    for k in np.argsort(last_ns, kind="stable").tolist():
        lo, hi = bounds[k], bounds[k + 1]
        if lo < hi:
            earlier[k] = int((wait[lo:hi] + earlier[prev[lo:hi]]).min())
    return earlier


def _replay_chains(inst, wait, prev, bounds, m: int) -> np.ndarray | None:
    """The replay when every instance's bounding members all took part in the same instance before it (one
    group, or groups in sequence): ``d(k) = min wait(k) + d(p(k))`` summed along the chains by pointer
    doubling (log2 of the chain length passes). None when members came from different instances."""
    p = np.full(m + 1, m, dtype=np.int64)
    lo = bounds[:-1]
    has = bounds[1:] > lo
    p[:m][has] = prev[lo[has]]
    if (prev != p[inst]).any():
        return None
    step = np.zeros(m + 1, dtype=np.int64)
    own = np.full(m, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(own, inst, wait)
    step[:m] = np.where(has, own, 0)
    acc, ptr = step.copy(), p.copy()
    for _ in range(int(np.ceil(np.log2(m + 1))) + 1):
        if (ptr == m).all():
            return acc
        acc = acc + acc[ptr]
        ptr = ptr[ptr]
    return acc if (ptr == m).all() else None
