"""Align the ranks' collective sequences by where the collectives end (docs/job.md: matching
across ranks whose windows differ).

Ranks open and close their profilers independently and carry work launched before their window
opened, so rank r's first recorded collective need not be rank s's. Where no sequence number is
recorded, a group's calls of one signature (type and size; all-to-all: dtype, as ``all_to_allv``
sends a different amount from every rank) form one sequence per rank, in the order issued. The
members of a collective leave it together, so the right alignment of two ranks' sequences is the
offset at which their ends agree: the end skew of a right alignment is microseconds on NCCL (a few
hundred on a CPU backend), of a wrong one the distance to another call of the signature -- often a
step. Per signature, every rank is aligned with a reference rank (the member with the most calls of
it, the lowest on ties):

1. candidates: the offsets that pair a call with the reference's call ending nearest to it, or with
   the call of the same index within that call's step (the most frequent few per rank), and the
   offset that pairs the k-th call of a step with the reference's k-th call of the same step number;
2. each candidate is scored by how well the paired ends agree: the sum over its pairs of
   ``max(0, 1 - |end difference| / scale)``; many pairs that end together score high, pairs as far
   apart as the scale score nothing, and so does a pair of calls at different indices within their
   steps (every member issues a step's collectives in the same order);
3. the best candidate (ties: more votes, then the smaller shift) gives every call of the rank its
   position in the reference's sequence.

The scale of a pairing is how far apart two ends may be and still be the same call: half the gap
between the reference's call and its nearest other call of the signature (nearer to a neighbour
than to its partner, it would be the neighbour's), but never below the job's end-skew noise --
``NOISE_SPREADS`` x the lower quartile of every call's distance to the nearest reference end, about
7 standard deviations of the skews of right pairings on a busy CPU backend -- nor
``END_SKEW_FLOOR_NS``, and never above half a step: a pairing a step off is never right. A CPU
backend (gloo) runs a collective on a worker thread whose end, on a busy host, can trail the other
ranks' by many milliseconds (up to half a step measured with three ranks on two cores): there the
scale is ``CPU_SCALE_STEPS`` of a step, and only pairings about a step off are refused. ``refuse`` turns away a
pairing whose end, less the rank's clock difference (the median over its agreeing pairings), lies beyond that scale.
Vectorised over ranks: a signature costs O(calls log calls).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model.groups import lex_order
from ..model.stats import median, percentile

# Ends closer than this always agree: NCCL members leave a collective within tens of microseconds.
END_SKEW_FLOOR_NS = 50_000
# The end-skew noise: this many times the lower quartile of the distances to the nearest reference
# end. For normal skews the lower quartile of |skew| is 0.32 standard deviations: 22 x is about 7.
NOISE_SPREADS = 22.0
# Calls timed on the host (CPU backends): ends may be this many steps apart and still be one call.
# A gloo worker thread's end on a busy host trails the others' by up to half a step (measured: 22 ms
# of a 44 ms step, three ranks on two cores); a pairing a step off is a step apart: midway between.
CPU_SCALE_STEPS = 0.75
# A rank's clock difference is taken from at least this many agreeing pairings (else none is assumed).
MIN_CLOCK_PAIRS = 3
# Offsets per rank taken from the nearest-end votes (the most voted first).
TOP_CANDIDATES = 3
# Candidate pairings scored at once (bounds the memory of the scoring, not its result).
CHOOSE_CHUNK = 1 << 17


@dataclass
class SignatureAlignment:
    """One signature's alignment: per call (in the order given) its position, per rank its offset."""

    position: np.ndarray  # index of the reference's call it pairs with (may lie outside 0..n_ref-1)
    difference_ns: np.ndarray  # float: end - the paired reference call's end; NaN where unpaired
    scale_ns: np.ndarray  # float: how far apart the pair's ends may be (see the module docstring)
    reference: int  # the reference rank
    ranks: np.ndarray  # the ranks present, ascending
    offset: np.ndarray  # per rank: how many of the reference's calls come before the rank's first
    calls_per_step: float | None  # the reference's calls of this signature per step (median), None without steps


def _rank_then_issue_order(rank: np.ndarray, issued: np.ndarray) -> np.ndarray:
    """The rows sorted by rank, then by issue time; no sort where they are already (the stacked
    table holds each rank's calls together, mostly in the order issued)."""
    if rank.size < 2:
        return np.arange(rank.size)
    same = rank[1:] == rank[:-1]
    if (rank[1:] >= rank[:-1]).all() and (issued[1:][same] >= issued[:-1][same]).all():
        return np.arange(rank.size)
    return lex_order((issued, rank))


def nearest_distance(rank: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Per call: the distance from its end to the nearest end of the reference rank's calls (the rank
    with the most calls). Its lower quartile over a job measures the end-skew noise."""
    ranks, counts = np.unique(rank, return_counts=True)
    ref_end = np.sort(end[rank == ranks[int(np.argmax(counts))]])
    k = np.searchsorted(ref_end, end)
    lo, hi = np.clip(k - 1, 0, ref_end.size - 1), np.clip(k, 0, ref_end.size - 1)
    return np.minimum(np.abs(end - ref_end[lo]), np.abs(end - ref_end[hi])).astype(np.float64)


def noise_of(distances: np.ndarray) -> float:
    """The end-skew noise from every call's distance to its nearest reference end."""
    d = distances[np.isfinite(distances) & (distances > 0)]
    return NOISE_SPREADS * float(percentile(d, 25)) if d.size else 0.0


def align_signature(
    rank: np.ndarray,
    issued: np.ndarray,
    end: np.ndarray,
    step: np.ndarray,
    noise_ns: float,
    half_step_ns: float | None = None,
    on_cpu: bool = False,
) -> SignatureAlignment:
    """Align the calls of one signature of one group (rows: one call each, on the ranks that are members;
    ``issued``: when each call was issued, which orders a rank's sequence). ``on_cpu``: the calls
    are timed on the host (a CPU backend's worker thread): their scale is ``CPU_SCALE_STEPS`` of a step."""
    n = rank.size
    order = _rank_then_issue_order(rank, issued)
    r_s, e_s, st_s = rank[order], end[order], step[order]
    starts = np.flatnonzero(np.append(True, r_s[1:] != r_s[:-1]))
    ranks, counts = r_s[starts], np.diff(np.append(starts, n))
    code = np.repeat(np.arange(ranks.size), counts)
    j = np.arange(n) - starts[code]  # index of the call within its rank's sequence
    ref = int(np.argmax(counts))  # the most calls; np.argmax takes the lowest rank on ties
    lo, n_ref = int(starts[ref]), int(counts[ref])
    ref_end, ref_step = e_s[lo : lo + n_ref], st_s[lo : lo + n_ref]
    scale = _scales(ref_end, noise_ns, half_step_ns)
    if on_cpu and half_step_ns:
        scale = np.full(n_ref, max(2 * CPU_SCALE_STEPS * float(half_step_ns), END_SKEW_FLOOR_NS))
    kk = _index_in_step(code, st_s)
    k_ref = kk[lo : lo + n_ref]
    cand_rank, cand_offset, cand_votes = _candidates(code, j, e_s, st_s, ref_end, ref_step, ranks.size, kk, k_ref)
    best = _choose(cand_rank, cand_offset, cand_votes, starts, counts, e_s, ref_end, scale, kk, k_ref)
    offset_of_rank = np.zeros(ranks.size, dtype=np.int64)
    offset_of_rank[cand_rank[best]] = cand_offset[best]
    pos = j - offset_of_rank[code]
    paired = (pos >= 0) & (pos < n_ref)
    diff = np.full(n, np.nan)
    diff[paired] = e_s[paired] - ref_end[pos[paired]]
    sc = np.full(n, np.inf)
    sc[paired] = scale[pos[paired]]
    out_pos, out_diff, out_scale = np.empty(n, dtype=np.int64), np.empty(n), np.empty(n)
    out_pos[order], out_diff[order], out_scale[order] = pos, diff, sc
    return SignatureAlignment(
        position=out_pos,
        difference_ns=out_diff,
        scale_ns=out_scale,
        reference=int(ranks[ref]),
        ranks=ranks,
        offset=offset_of_rank,
        calls_per_step=_per_step(ref_step),
    )


def refuse(rank: np.ndarray, difference_ns: np.ndarray, scale_ns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Which pairings to refuse, and each call's deviation (its end difference less its rank's clock
    difference: the median over the rank's agreeing pairings, 0 with fewer than MIN_CLOCK_PAIRS)."""
    paired = np.isfinite(difference_ns)
    agree = paired & (np.abs(np.where(paired, difference_ns, 0.0)) <= scale_ns)
    ranks, code = np.unique(rank, return_inverse=True)
    clock = _group_median(code[agree], difference_ns[agree], ranks.size)
    enough = np.bincount(code[agree], minlength=ranks.size) >= MIN_CLOCK_PAIRS
    clock = np.where(enough, clock, 0.0)
    dev = np.where(paired, difference_ns - clock[code], 0.0)
    return paired & (np.abs(dev) > scale_ns), dev


def _scales(ref_end: np.ndarray, noise_ns: float, half_step_ns: float | None) -> np.ndarray:
    """Per reference call: half the gap to its nearest other call of the signature (by end), at least
    the noise and the floor, at most half a step (a pairing a step off is never right); half a step
    for a lone call (infinite without steps)."""
    n = ref_end.size
    top = half_step_ns if half_step_ns and half_step_ns > 0 else np.inf
    if n < 2:
        return np.full(n, top)
    by_end = np.argsort(ref_end, kind="stable")
    e = ref_end[by_end].astype(np.float64)
    gap = np.diff(e)
    near = np.minimum(np.append(np.inf, gap), np.append(gap, np.inf))
    out = np.empty(n)
    out[by_end] = near / 2
    return np.minimum(np.maximum(out, max(END_SKEW_FLOOR_NS, noise_ns)), max(top, END_SKEW_FLOOR_NS))


def _candidates(code, j, e_s, st_s, ref_end, ref_step, n_ranks, kk, k_ref):
    """Candidate offsets per rank: (rank code, offset, votes), several per rank. Each call votes for
    the offset that pairs it with the reference call ending nearest to it, and for the one that pairs
    it with the call of the same index in that call's step (ends blur within a step on a busy host;
    the step they fall in does not)."""
    n_ref = ref_end.size
    by_end = np.argsort(ref_end, kind="stable")
    sorted_end = ref_end[by_end]
    k1 = np.searchsorted(sorted_end, e_s)
    k0 = np.clip(k1 - 1, 0, n_ref - 1)
    np.clip(k1, 0, n_ref - 1, out=k1)
    nearer_below = np.abs(sorted_end[k0] - e_s) <= np.abs(sorted_end[k1] - e_s)
    near = by_end[np.where(nearer_below, k0, k1)]
    del k0, k1, nearer_below
    kn = k_ref[near]
    in_step = (kk >= 0) & (kn >= 0) & (kn != kk)  # where the nearest is another index in its step
    span = n_ref + int(j.max()) + 1  # every offset lies in (-span, span)
    width = 2 * span + 1
    key = code * width + (j - near + span)
    extra = code[in_step] * width + (j[in_step] - (near[in_step] - kn[in_step] + kk[in_step]) + span)
    del near, kn
    keys, counts = _count_keys(np.concatenate([key, extra]), n_ranks * width)
    del key, extra
    c_rank, c_off, c_votes = keys // width, keys % width - span, counts
    srt = lex_order((np.abs(c_off), -c_votes, c_rank))
    c_rank, c_off, c_votes = c_rank[srt], c_off[srt], c_votes[srt]
    first = np.searchsorted(c_rank, c_rank)  # the rank's first row among the sorted candidates
    keep = (np.arange(c_rank.size) - first) < TOP_CANDIDATES
    c_rank, c_off, c_votes = c_rank[keep], c_off[keep], c_votes[keep]
    s_rank, s_off = _step_candidates(code, j, st_s, ref_step, n_ranks, kk)
    if s_rank.size:  # the step candidates the votes do not already hold
        voted = c_rank * width + (c_off + span)
        new = ~np.isin(s_rank * width + (s_off + span), voted) & (np.abs(s_off) < span)
        c_rank = np.concatenate([c_rank, s_rank[new]])
        c_off = np.concatenate([c_off, s_off[new]])
        c_votes = np.concatenate([c_votes, np.zeros(int(new.sum()), dtype=c_votes.dtype)])
    return c_rank, c_off, c_votes


def _step_candidates(code, j, st_s, ref_step, n_ranks, kk):
    """Per rank, the offset that pairs the k-th call of a step with the reference's k-th call of the
    step with the same number (the most frequent over its calls); none without step numbers."""
    ok = st_s >= 0
    if not ok.any() or not (ref_step >= 0).any():
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    ref_steps, ref_first = np.unique(ref_step, return_index=True)
    where = np.clip(np.searchsorted(ref_steps, st_s), 0, ref_steps.size - 1)
    ok &= ref_steps[where] == st_s
    off = j - (ref_first[where] + kk)
    if not ok.any():
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    span = int(np.abs(off[ok]).max()) + 1
    width = 2 * span + 1
    keys, counts = _count_keys(code[ok] * width + off[ok] + span, n_ranks * width)
    c_rank, c_off = keys // width, keys % width - span
    srt = lex_order((-counts, c_rank))
    c_rank, c_off = c_rank[srt], c_off[srt]
    first = np.append(True, c_rank[1:] != c_rank[:-1])
    return c_rank[first], c_off[first]


def _index_in_step(code: np.ndarray, st_s: np.ndarray) -> np.ndarray:
    """Per call (sorted by rank, then issue): its index among its rank's calls of the signature in the
    same step; -1 outside every step."""
    if not st_s.size:
        return np.zeros(0, dtype=np.int64)
    key = code * (int(st_s.max()) + 2) + (st_s + 1)
    new = np.append(True, key[1:] != key[:-1])
    k = np.arange(key.size) - np.maximum.accumulate(np.where(new, np.arange(key.size), 0))
    return np.where(st_s >= 0, k, -1)


def _count_keys(keys: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct keys (0..size-1), ascending, and how often each occurs: a count over the key range
    when it is not much larger than the keys, else a sort."""
    if size <= 2 * keys.size + 1024:
        counts = np.bincount(keys, minlength=size)
        present = np.flatnonzero(counts)
        return present, counts[present]
    return np.unique(keys, return_counts=True)


def _choose(c_rank, c_off, c_votes, starts, counts, e_s, ref_end, scale, kk, k_ref) -> np.ndarray:
    """Index of the best candidate of each rank: the highest agreement score, then the most votes,
    then the smallest shift. A pair of calls at different indices within their steps scores nothing:
    every member issues the same collectives in a step, in the same order."""
    score = np.zeros(c_rank.size)
    alone = np.bincount(c_rank, minlength=starts.size)[c_rank] == 1  # a rank's only candidate needs no score
    todo = np.flatnonzero(~alone)
    reps_all = counts[c_rank]
    # score in chunks of about CHOOSE_CHUNK pairs: the pairs of every candidate of every rank at once
    # would hold several times the job's calls
    bounds = (
        np.searchsorted(
            np.cumsum(reps_all[todo]),
            np.arange(CHOOSE_CHUNK, int(reps_all[todo].sum()) + CHOOSE_CHUNK, CHOOSE_CHUNK),
            side="right",
        )
        if todo.size
        else []
    )
    lo = 0
    for hi in list(bounds) + [todo.size]:
        part = todo[lo : max(hi, lo + 1)] if lo < todo.size else todo[:0]
        lo = max(hi, lo + 1)
        if not part.size:
            continue
        reps = reps_all[part]
        cand = np.repeat(np.arange(part.size), reps)
        within = np.arange(cand.size) - np.repeat(np.cumsum(reps) - reps, reps)
        i = within - c_off[part][cand]
        valid = (i >= 0) & (i < ref_end.size)
        rows = (np.repeat(starts[c_rank[part]], reps) + within)[valid]
        i = i[valid]
        closeness = np.maximum(0.0, 1.0 - np.abs(e_s[rows] - ref_end[i]) / scale[i])  # lone reference call: 1
        a, b = kk[rows], k_ref[i]
        closeness[(a >= 0) & (b >= 0) & (a != b)] = 0.0
        score[part] = np.bincount(cand[valid], weights=closeness, minlength=part.size)
    srt = lex_order((np.abs(c_off), -c_votes, -np.round(score, 9), c_rank))
    first = np.append(True, c_rank[srt][1:] != c_rank[srt][:-1])
    return srt[first]


def _group_median(code: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    """Median of ``values`` per code 0..n-1 (0 for a code without values)."""
    out = np.zeros(n, dtype=np.float64)
    if not code.size:
        return out
    order = lex_order((values, code))
    c, v = code[order], values[order]
    starts = np.searchsorted(c, np.arange(n))
    ends = np.searchsorted(c, np.arange(n), side="right")
    has = ends > starts
    lo = (starts + (ends - starts - 1) // 2)[has]
    hi = (starts + (ends - starts) // 2)[has]
    out[has] = (v[lo] + v[hi]) / 2
    return out


def _per_step(ref_step: np.ndarray) -> float | None:
    steps = ref_step[ref_step >= 0]
    if not steps.size:
        return None
    return float(median(np.unique(steps, return_counts=True)[1]))
