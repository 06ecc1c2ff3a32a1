"""What a late rank costs: the share of the other ranks' wait its lateness explains, and how far its
lateness stands above the other ranks' (README: the job view, straggler by cost).

Counting how often a rank arrives last cannot tell a straggler from chance in a short profile: among
8 ranks, 3 steps are too few. Its size can: a rank whose lateness explains most of the others' wait
and stands far above the spread of the others' lateness is the straggler whatever the count says.

- ``explained_share``: per rank, the others' wait at the collectives it arrived last at, over all the
  others' wait at the matched collectives (each instance's wait is the sum of its members' waits; the
  last arriver waits nothing). In [0, 1]; the shares of all ranks sum to at most 1.
- ``robust_scores``: per rank, (its lateness - the median of the other ranks') / the other ranks'
  spread, the spread being 1.4826 x their median absolute deviation (the standard deviation of a
  normal spread), never below ``SPREAD_FLOOR`` of the step: ranks in lockstep have almost no spread,
  and a rank a fraction of a percent later than them is no straggler. Lateness is per step, as a share
  of the step (``waits.RankWaits.late_fraction``). Computed for the ``MAX_SCORED`` latest ranks only
  (a rank below them cannot stand above the rest), over at least ``MIN_OTHERS`` other ranks.
"""

from __future__ import annotations

import numpy as np

from .timing import Timing

# The smallest spread of the others' lateness, as a share of the step.
SPREAD_FLOOR = 0.005
# A robust score needs this many other ranks (with two, median and spread say nothing).
MIN_OTHERS = 3
# Ranks scored: the latest this many.
MAX_SCORED = 64
MAD_TO_SD = 1.4826


def explained_share(t: Timing, ranks: np.ndarray) -> np.ndarray:
    """Per rank of ``ranks`` (sorted): the share of the other ranks' wait at the matched collectives
    spent at the collectives it arrived last at."""
    out = np.zeros(ranks.size)
    if not t.inst.size or not ranks.size:
        return out
    m = t.last_rank.size
    wait = t.wait_ns.astype(np.float64)
    inst_wait = np.bincount(t.inst, weights=wait, minlength=m)
    code = np.searchsorted(ranks, t.rank)
    own = np.bincount(code, weights=wait, minlength=ranks.size)
    last_code = np.searchsorted(ranks, t.last_rank)
    ok = (t.last_rank >= 0) & (last_code < ranks.size)
    ok[ok] &= ranks[last_code[ok]] == t.last_rank[ok]
    caused = np.bincount(last_code[ok], weights=inst_wait[ok], minlength=ranks.size)
    others = inst_wait.sum() - own
    np.divide(caused, others, out=out, where=others > 0)
    return np.clip(out, 0.0, 1.0)


def robust_scores(late: dict[int, float]) -> dict[int, float]:
    """Per rank (of the ``MAX_SCORED`` latest): how many spreads of the other ranks' lateness its
    own lies above their median. Empty with fewer than ``MIN_OTHERS`` + 1 ranks."""
    if len(late) < MIN_OTHERS + 1:
        return {}
    ranks = np.array(list(late), dtype=np.int64)
    values = np.array([late[r] for r in ranks.tolist()], dtype=np.float64)
    top = np.argsort(-values, kind="stable")[:MAX_SCORED]
    out = {}
    for i in top.tolist():
        others = np.delete(values, i)
        med = float(np.median(others))
        spread = max(MAD_TO_SD * float(np.median(np.abs(others - med))), SPREAD_FLOOR)
        out[int(ranks[i])] = (float(values[i]) - med) / spread
    return out
