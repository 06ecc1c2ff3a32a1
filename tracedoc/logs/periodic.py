"""Periodic patterns among a log's slow episodes, ranked by the time they lose.

A **pattern** is a chain of slow episodes whose starts follow each other every k steps, within a
tolerance (``max(log stride, 1% of k)``: a data-shard switch every 189-190 steps is one pattern), where
one beat may be missed (a gap of 2k links too, and counts as a beat without a stall). It needs at
least ``MIN_HITS`` stalls and stalls on at least ``MIN_COVERAGE`` of its beats, and, unless its stalls are
exactly on the beat and at least half of all slow points, to be one that chance would not make: with the slow points
scattered at random, a chain with as many hits within its own spread of the beats would turn up less often than
``ALPHA`` over all the chains tried (a binomial tail; the wider the spread and the more slow points, the
more hits it takes).

Candidate periods are the most common spacings between each episode's start and the starts of the next
``NEIGHBOURS`` episodes (so two patterns that interleave are both seen). Of the chains found, the one that
loses the most time is taken first, its episodes removed, and the search repeated: the costly 2.4x step
every 190 steps ranks above a regular but cheap 8% slowdown every 125 steps, and each is its own
pattern. Plain values in and out: episode starts (steps), the time each lost, the log's stride.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from dataclasses import dataclass

import numpy as np

MIN_HITS = 3
MIN_COVERAGE = 0.6
NEIGHBOURS = 8
CANDIDATES = 8
MAX_PATTERNS = 3
MAX_EPISODES = 5_000  # bounds the chain search (a Python loop over episodes per candidate period)
DOMINANT_SHARE = 0.5
ALPHA = 0.05  # a chain is kept when chance would make one as good less often than this, over all tried


def _chance(hits: int, beats: int, p: float, trials: int) -> float:
    """How often ``trials`` chains of random slow points (each beat hit with probability ``p``) would have
    ``hits`` of ``beats`` (the first hit given): the binomial tail times the trials, at most 1."""
    n, k = beats - 1, hits - 1
    if k <= 0 or p >= 1:
        return 1.0
    if p <= 0:
        return 0.0
    tail = 0.0
    for j in range(k, n + 1):
        tail += math.exp(
            math.lgamma(n + 1)
            - math.lgamma(j + 1)
            - math.lgamma(n - j + 1)
            + j * math.log(p)
            + (n - j) * math.log1p(-p)
        )
    return min(1.0, tail * trials)


@dataclass(frozen=True)
class Pattern:
    period: int  # the median spacing of consecutive stalls, in steps
    period_min: int  # the shortest and longest spacing between consecutive stalls
    period_max: int
    members: np.ndarray  # indices (into the episodes given) of the stalls on the pattern
    coverage: float  # stalls / beats from the first stall to the last
    lost: float  # the time the stalls lost, in the caller's unit
    first_step: int  # the step of the first stall

    @property
    def phase(self) -> int:
        return int(self.first_step % self.period) if self.period > 0 else 0


def _tolerance(k: float, stride: int) -> int:
    return max(stride, int(round(0.01 * k)))


def _candidates(starts: np.ndarray, stride: int) -> list[int]:
    diffs = []
    for j in range(1, min(NEIGHBOURS, starts.size - 1) + 1):
        diffs.append(starts[j:] - starts[:-j])
    d = np.concatenate(diffs) if diffs else np.array([], dtype=np.int64)
    d = d[d >= 2 * stride]
    if d.size == 0:
        return []
    values, counts = np.unique(d, return_counts=True)
    support = []
    for v in values[np.argsort(-counts, kind="stable")][: 4 * CANDIDATES]:
        tol = _tolerance(v, stride)
        support.append((int(np.sum(np.abs(d - v) <= tol)), -int(v), int(v)))
    out: list[int] = []
    for _, _, v in sorted(support, reverse=True):
        if all(abs(v - k) > _tolerance(k, stride) for k in out):
            out.append(v)
        if len(out) >= CANDIDATES:
            break
    return out


def _chains(starts: np.ndarray, lost: np.ndarray, k: int, stride: int) -> list[np.ndarray]:
    """Chains of episodes (indices into ``starts``, sorted) each ``k`` (or 2k: one missed beat) after the one
    before. Each episode links to the successor that fits the period best (then the one of the most alike
    cost), and an episode taken by two keeps the better fit: an unrelated slow step near a beat does not
    break the chain."""
    tol = _tolerance(k, stride)
    at = starts.tolist()
    cost = np.log(np.maximum(lost, 1e-300)).tolist()
    succ = [-1] * len(at)
    fit = [0.0] * len(at)
    owner: dict[int, int] = {}  # successor -> the episode linked to it
    for j, x in enumerate(at):
        for m in (1, 2):
            a = bisect_left(at, x + m * (k - tol), j + 1)
            b = bisect_right(at, x + m * (k + tol), j + 1)
            if a < b:
                i = min(range(a, b), key=lambda i: (abs(at[i] - x - m * k), abs(cost[i] - cost[j])))
                f = abs(at[i] - x - m * k) + 0.5 * (m - 1) * tol
                prev = owner.get(i)
                if prev is None or f < fit[prev]:
                    if prev is not None:
                        succ[prev] = -1
                    owner[i], succ[j], fit[j] = j, i, f
                break
    chains = []
    for j in range(len(at)):
        if j in owner and succ[owner[j]] == j:
            continue  # not the head of a chain
        chain = [j]
        while succ[chain[-1]] >= 0:
            chain.append(succ[chain[-1]])
        if len(chain) >= MIN_HITS:
            chains.append(np.array(chain, dtype=np.int64))
    return chains


def _best(starts: np.ndarray, lost: np.ndarray, stride: int, last_step: int, points: int) -> Pattern | None:
    best: Pattern | None = None
    candidates = _candidates(starts, stride)
    density = starts.size / max(points, 1)  # slow points per logged point
    for k in candidates:
        for chain in _chains(starts, lost, k, stride):
            s = starts[chain]
            gaps = np.diff(s)
            # beats from the first stall to the end of the log: a pattern that stopped is covered less
            beats = int(np.sum(np.maximum(1, np.round(gaps / k)))) + 1 + max(0, int((last_step - s[-1]) // k))
            coverage = chain.size / beats
            # the chance that a beat's window holds a slow point: the density x the logged points in a window as
            # wide as the chain's own spread around its beats
            spread = int(np.max(np.abs(gaps - k * np.maximum(1, np.round(gaps / k))))) if gaps.size else 0
            p_beat = min(1.0, density * (2 * spread / stride + 1))
            # chance must not make such a chain (the gap that set the candidate period given), unless the
            # stalls are exactly on the beat and most of the slow points (three slow steps 20 apart and no other)
            dominant = spread == 0 and chain.size >= DOMINANT_SHARE * starts.size
            if (
                coverage < MIN_COVERAGE
                or not dominant
                and _chance(chain.size - 1, beats - 1, p_beat, starts.size * len(candidates)) > ALPHA
            ):
                continue
            single = gaps[np.abs(gaps - k) <= _tolerance(k, stride)]
            single = single if single.size else gaps
            pat = Pattern(
                period=int(np.median(single)),
                period_min=int(single.min()),
                period_max=int(single.max()),
                members=chain,
                coverage=float(coverage),
                lost=float(lost[chain].sum()),
                first_step=int(s[0]),
            )
            key = (pat.lost, chain.size * coverage, pat.period)
            if best is None or key > (best.lost, best.members.size * best.coverage, best.period):
                best = pat
    return best


def find_patterns(
    starts: np.ndarray, lost: np.ndarray, stride: int, last_step: int, points: int, most: int = MAX_PATTERNS
) -> list[Pattern]:
    """Periodic patterns among slow episodes (``starts``: their first steps, increasing; ``lost``: the time
    each lost; ``last_step``: the log's last step, to which a pattern's beats are counted; ``points``: the
    logged points they are among, for the chance test), the costliest first; each episode belongs to at
    most one pattern."""
    starts = np.asarray(starts, dtype=np.int64)
    lost = np.asarray(lost, dtype=np.float64)
    left = np.arange(starts.size)
    if left.size > MAX_EPISODES:  # a log slow everywhere: the costliest episodes set the patterns
        left = np.sort(np.argsort(-lost, kind="stable")[:MAX_EPISODES])
    out: list[Pattern] = []
    while left.size >= MIN_HITS and len(out) < most:
        pat = _best(starts[left], lost[left], max(1, stride), last_step, points)
        if pat is None:
            break
        members = left[pat.members]
        out.append(
            Pattern(
                pat.period, pat.period_min, pat.period_max, members, pat.coverage, pat.lost, first_step=pat.first_step
            )
        )
        left = np.setdiff1d(left, members)
    return out
