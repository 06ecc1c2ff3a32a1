"""Stragglers, how sure the report is of them, and their cause (docs/job.md: straggler by cost).

A straggler is named for what its lateness costs the others (``magnitude.py``): its lateness explains
a large share of the other ranks' wait and stands far above the spread of the other ranks'
lateness. Where the size cannot decide (fewer than four ranks, or no rank stands out), the count
decides: the rank arrives last at the collectives that hold most of the others' wait more often
than chance makes likely among that many ranks. Either way the wait it costs the other ranks is a
significant share of their step, and it waits no more than the median rank itself. The rank with
the longest step is not the test: a rank that starts its step early and waits for the straggler has
the longest step.

Confidence combines size and count: ``high`` when the chance test passes over steps; ``medium`` for
a large, isolated lateness over a few steps (or one the steps cannot test: the count passes over
collective instances); ``low`` over one step (a one-step profile still names its likely straggler,
never no one), or for the rank that arrives last most often when there are too few collectives for
a test. A balanced job names no one above ``low``.

Its cause: the lead-in category (time from its previous collective end to its arrival) in which
it spends more per step than the median rank, by the largest margin; host launch starvation when
that time is host work and the straggler's GPU idles in long host-late gaps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, NamedTuple

import numpy as np

from ..model.groups import distinct, lex_order
from ..model.stats import median
from ..analyses.comm.instances import LEAD_CATEGORIES, RankTables
from .magnitude import explained_share, robust_scores
from .match import Stacked
from .timing import Timing
from .waits import RankWaits

# Significance: the wait a straggler costs each other rank, per step, as a share of the step.
MIN_WAIT_FRACTION = 0.03
# Size: a rank stands out when its lateness, a share of the step at least MIN_LATE_SHARE, lies at
# least MIN_SCORE spreads above the other ranks' (magnitude.robust_scores); the ranks that stand out
# are named by size when together they explain at least MIN_EXPLAINED of the others' wait, each at
# least MIN_EXPLAINS_EACH (two equally slow ranks take turns at arriving last).
MIN_LATE_SHARE = 0.03
MIN_SCORE = 4.0
MIN_EXPLAINED = 0.5
MIN_EXPLAINS_EACH = 0.2
# Where the steps could show a repeat (the chance test over them can pass) and show none, the size
# alone names a rank only when its lateness is at least this share of the step: a few percent late in
# some steps is what the scheduler does to balanced ranks sharing cores (a real 4-rank CPU job, 3% late
# in 5 of 8 steps), a quarter of the step late in one of three is not (the 8-rank NCCL job: 27%, medium).
LARGE_LATE_SHARE = 0.10
# Confidence levels, lowest first (as the engine's trace-health levels)
CONFIDENCES = ("low", "medium", "high")
# Fewer profiled steps than this: the chance test runs over collective instances (medium confidence).
MIN_STEP_TRIALS = 3
# More often than chance: the rank is late (arrived last at the collectives holding at least half
# of the step's wait) in more steps than a binomial draw with p = 1/ranks gives with probability
# CHANCE_P / ranks. Every rank is tested, so the bound is shared among them (Bonferroni): at 0.05 per
# rank, a balanced 4-rank job would name a straggler by chance about once in five profiles.
CHANCE_P = 0.05
# ... or late in every one of at least MIN_STEADY_TRIALS steps by a steady amount (few ranks, few steps)
MIN_STEADY_TRIALS = 3
STEADY_RATIO = 2.0
# A cause must explain at least this share of the straggler's lateness.
MIN_CAUSE_SHARE = 0.25

CAUSE_TEXT = {
    "compute": "longer GPU compute before its collectives",
    "copy": "longer memory copies before its collectives",
    "dataloader": "input pipeline: waits on the DataLoader",
    "sync": "host synchronisation (blocking .item()/synchronize calls)",
    "host": "host work: CPU ops, Python and kernel launches",
    "other": "time no recorded op explains (host stalls outside the profiler, clocks/thermal, data skew)",
}


class Starvation(NamedTuple):
    """When a straggler's GPU is starved by its host: busy less than ``busy_below`` of the window (TD101's
    ``busy_threshold``) and idle at least ``host_late_from`` of it in long host-late gaps (TD104's
    ``host_idle_threshold``). The caller reads both from the run's rule parameters, so ``--param``
    moves them as it moves the rules."""

    busy_below: float
    host_late_from: float


@dataclass
class RankStats:
    """One rank's arrivals at the matched collectives and its waits over their steps."""

    rank: int
    instances: int  # matched instances it takes part in
    arrived_last: int  # ... at which it arrived last (alone)
    decided: int  # ... at which someone arrived last (not a tie)
    wait_ns: int  # |union of its waiting intervals| over its matched steps (waits.py)
    lateness_ns: int  # |union of (median arrival, own arrival]| where later than the median, same steps
    time_ns: int  # the time of its matched steps
    steps: int  # its matched steps
    late_steps: int = 0  # steps in which it arrived last at half or more of its instances' wait
    trials: int = 0  # steps (or instances, without steps) the chance test counts
    steady: bool = False  # late in every trial by a steady amount (mean >= STEADY_RATIO x spread)
    step_p50_ns: float | None = None  # median step time over its matched steps
    explains: float = 0.0  # share of the other ranks' wait spent at the collectives it arrived last at
    score: float | None = None  # how far its lateness stands above the others' (magnitude.robust_scores)

    @property
    def last_share(self) -> float:
        return self.arrived_last / self.instances if self.instances else 0.0

    @property
    def wait_fraction(self) -> float:
        return self.wait_ns / self.time_ns if self.time_ns else 0.0

    @property
    def late_fraction(self) -> float:
        return self.lateness_ns / self.time_ns if self.time_ns else 0.0


@dataclass
class Straggler:
    """A rank named as a straggler, with the confidence of the finding and its cost to the others."""

    stats: RankStats
    confidence: str  # high, medium, low (docs/job.md: confidence)
    why: str  # the test behind the confidence, and why it is limited
    caused_fraction: float  # the share of the others' matched step time spent waiting for it (mean over them)
    by_size: bool = False  # named by the size of its lateness (else by the count alone)

    @property
    def rank(self) -> int:
        return self.stats.rank


def rank_stats(t: Timing, waits: dict[int, RankWaits], step_shift: dict[int, int]) -> list[RankStats]:
    """Per rank: how often it arrives last, in how many steps, and its wait and lateness (unions)."""
    if not t.inst.size:
        return []
    m = t.last_rank.size
    members = np.bincount(t.inst, minlength=m)
    sum_wait = np.bincount(t.inst, weights=t.wait_ns, minlength=m)
    others_mean_wait = np.where(members > 1, sum_wait / np.maximum(members - 1, 1), 0.0)  # last waits 0
    order = lex_order((t.arrival_ns, t.inst))
    bounds = np.flatnonzero(np.append(True, t.inst[order][1:] != t.inst[order][:-1]))
    med = np.array([median(v) for v in np.split(t.arrival_ns[order], bounds[1:])])
    late = t.arrival_ns - med[t.inst]
    # trials for the chance test: steps in the job's numbering (instances when no step is recorded); a
    # rank is late in a step when the instances it arrived last at hold at least half of the step's wait
    shift = np.zeros(t.rank.size, dtype=np.int64)
    if step_shift:
        ranks_u, inverse = np.unique(t.rank, return_inverse=True)
        shift = np.array([step_shift.get(int(r), 0) for r in ranks_u.tolist()], dtype=np.int64)[inverse]
    inst_step = np.full(m, -1, dtype=np.int64)
    has_step = t.step >= 0
    inst_step[t.inst[has_step]] = (t.step + shift)[has_step]
    trial = np.where(inst_step >= 0, inst_step, -1 - np.arange(m))
    trial_ids, trial_of = np.unique(trial, return_inverse=True)
    wait_in_trial = np.bincount(trial_of, weights=others_mean_wait, minlength=trial_ids.size)
    ranks, ridx = np.unique(t.rank, return_inverse=True)
    nr = ranks.size
    instances = np.bincount(ridx, minlength=nr)
    last_idx = np.searchsorted(ranks, t.last_rank)  # rank index of each instance's last arriver
    has_last = (t.last_rank >= 0) & (last_idx < nr) & (ranks[np.minimum(last_idx, nr - 1)] == t.last_rank)
    li = last_idx[has_last]
    arrived_last = np.bincount(li, minlength=nr)
    decided = np.bincount(ridx[has_last[t.inst]], minlength=nr)
    # per (rank, trial): does the rank take part, and the wait of the instances it arrived last at
    nt = trial_ids.size
    part = np.zeros(nr * nt, dtype=bool)
    part[ridx * nt + trial_of[t.inst]] = True
    caused = np.bincount(li * nt + trial_of[has_last], weights=others_mean_wait[has_last], minlength=nr * nt)
    counted = part & np.tile(wait_in_trial > 0, nr)
    late_trial = counted & (caused >= 0.5 * np.tile(wait_in_trial, nr))
    trials = counted.reshape(nr, nt).sum(axis=1)
    late_steps = late_trial.reshape(nr, nt).sum(axis=1)
    # lateness per (rank, trial): a rank late by a steady amount every step is no coincidence either
    late_by_trial = np.bincount(
        ridx * nt + trial_of[t.inst], weights=late.astype(np.float64), minlength=nr * nt
    ).reshape(nr, nt)
    steady = np.zeros(nr, dtype=bool)
    for i in np.flatnonzero((late_steps == trials) & (trials >= MIN_STEADY_TRIALS)):
        v = late_by_trial[i][counted.reshape(nr, nt)[i]]
        steady[i] = v.size >= MIN_STEADY_TRIALS and (v > 0).all() and v.mean() >= STEADY_RATIO * v.std()
    explains = explained_share(t, ranks)
    out = []
    for i in range(nr):
        r = int(ranks[i])
        w = waits.get(r)
        out.append(
            RankStats(
                rank=r,
                instances=int(instances[i]),
                arrived_last=int(arrived_last[i]),
                decided=int(decided[i]),
                wait_ns=w.wait_ns if w else 0,
                lateness_ns=w.late_ns if w else 0,
                time_ns=w.time_ns if w else 0,
                steps=w.steps if w else 0,
                late_steps=int(late_steps[i]),
                trials=int(trials[i]),
                steady=bool(steady[i]),
                step_p50_ns=w.step_p50_ns if w else None,
                explains=float(explains[i]),
            )
        )
    return out


def chance_of(late: int, trials: int, n_ranks: int) -> float:
    """Probability that a rank arrives last in ``late`` or more of ``trials`` by chance (p = 1/ranks)."""
    p = 1.0 / max(n_ranks, 2)
    return float(sum(math.comb(trials, k) * p**k * (1 - p) ** (trials - k) for k in range(late, trials + 1)))


def find_stragglers(
    stats: list[RankStats], n_ranks: int, caused_fraction: Callable[[int], float | None]
) -> list[Straggler]:
    """Ranks that hold the job back, most costly first, each with its confidence; empty when none.

    A straggler is late, waits no more than the median rank, and the wait it costs the others is at
    least ``MIN_WAIT_FRACTION`` of their step. It is named by size (``_stands_out``) or, where size
    cannot decide, by how often it arrives last (``_by_count``). Fills each rank's ``score``."""
    if len(stats) < 2:
        return []
    alpha = CHANCE_P / max(n_ranks, 1)
    median_wait = median(np.array([s.wait_fraction for s in stats]))
    scores = robust_scores({s.rank: s.late_fraction for s in stats})
    for s in stats:
        s.score = scores.get(s.rank)
    outliers = {s.rank for s in stats if _stands_out(s)}
    explained = sum(s.explains for s in stats if s.rank in outliers)
    most = max(s.arrived_last for s in stats)
    most_often = [s for s in stats if s.arrived_last == most]
    out = []
    for s in stats:
        if not (s.arrived_last and s.late_fraction > 0 and s.wait_fraction <= median_wait):
            continue
        by_size = s.rank in outliers and explained >= MIN_EXPLAINED and s.explains >= MIN_EXPLAINS_EACH
        if by_size:
            level, why = _by_size(s, n_ranks, alpha)
        else:
            level, why = _by_count(s, n_ranks, alpha, len(most_often) == 1 and most_often[0] is s)
        if level is None:
            continue
        share = caused_fraction(s.rank)
        if share is None or share < MIN_WAIT_FRACTION:
            continue
        out.append(Straggler(s, level, why, share, by_size))
    return sorted(out, key=lambda x: (-CONFIDENCES.index(x.confidence), -x.caused_fraction))


def _stands_out(s: RankStats) -> bool:
    return s.score is not None and s.score >= MIN_SCORE and s.late_fraction >= MIN_LATE_SHARE


def _chance_over_steps(s: RankStats, n_ranks: int, alpha: float) -> tuple[bool, float]:
    step_p = chance_of(s.late_steps, s.trials, n_ranks) if s.trials else 1.0
    return bool(s.trials and (step_p < alpha or s.steady)), step_p


def _size_text(s: RankStats) -> str:
    return (
        f"late by {s.late_fraction:.0%} of the step, {s.score:.0f} spreads above the other ranks' lateness, "
        f"at the collectives holding {s.explains:.0%} of their wait"
    )


def _by_size(s: RankStats, n_ranks: int, alpha: float) -> tuple[str | None, str]:
    """Confidence of a rank named by size: high when the chance test over steps passes too; low over
    one step; medium otherwise (a few steps, or steps the count cannot tell from chance, the lateness
    then at least ``LARGE_LATE_SHARE``). None for a small lateness in steps that show no repeat."""
    passes, step_p = _chance_over_steps(s, n_ranks, alpha)
    if s.steps == 1 or s.trials == 1:
        return "low", f"{_size_text(s)}; only 1 step profiled, which cannot show that it repeats"
    if passes:
        how = (
            f"late in {s.late_steps} of {s.trials} steps, chance {_p(step_p)}"
            if step_p < alpha
            else f"late by a steady amount in all {s.trials} steps"
        )
        return "high", f"{_size_text(s)}; {how}"
    if s.trials >= MIN_STEP_TRIALS and chance_of(s.trials, s.trials, n_ranks) < alpha:
        count = f"late in {s.late_steps} of {s.trials} steps, which the count alone cannot tell from chance"
        if s.late_fraction < LARGE_LATE_SHARE:
            return (
                None,
                f"{_size_text(s)}; but {count}, and {s.late_fraction:.0%} of the step is within what "
                "the scheduler alone does to balanced ranks",
            )
    else:
        count = (
            f"only {s.trials} steps profiled, too few for the chance test over steps"
            if s.trials
            else "no steps recorded for the chance test over steps"
        )
    return "medium", f"{_size_text(s)}; {count}"


def _by_count(s: RankStats, n_ranks: int, alpha: float, most_often_last: bool) -> tuple[str | None, str]:
    """Confidence of a rank named by how often it arrives last (no rank stands out by size): high
    when the chance test passes over steps; medium when the steps cannot decide and it passes over
    collective instances (more than one step); low for the rank last most often when there are too
    few collectives for that test, or one step only. None where a test could decide and says chance."""
    passes, step_p = _chance_over_steps(s, n_ranks, alpha)
    if passes:
        how = (
            f"late in {s.late_steps} of {s.trials} steps, chance {_p(step_p)}"
            if step_p < alpha
            else f"late by a steady amount in all {s.trials} steps"
        )
        return "high", how
    steps_can_decide = s.trials >= MIN_STEP_TRIALS and chance_of(s.trials, s.trials, n_ranks) < alpha
    if steps_can_decide:
        return None, f"late in {s.late_steps} of {s.trials} steps: as often as chance allows"
    few = f"{s.trials} step{'s' if s.trials != 1 else ''} profiled" if s.trials else "no steps recorded"
    one_step = s.steps == 1 or s.trials == 1
    inst_p = chance_of(s.arrived_last, s.decided, n_ranks) if s.decided else 1.0
    if inst_p < alpha and one_step:
        return "low", (
            f"last at {s.arrived_last} of {s.decided} collectives, chance {_p(inst_p)}; but only {few}, "
            "and collectives within a step are not independent"
        )
    if inst_p < alpha:
        return "medium", (
            f"last at {s.arrived_last} of {s.decided} collectives, chance {_p(inst_p)}; only {few}, "
            f"so the test runs over collectives, which within a step are not independent"
        )
    can = chance_of(s.decided, s.decided, n_ranks) < alpha  # could the test over collectives pass at all?
    if most_often_last and (not can or s.trials <= 1):  # too few for a test, or one step: its likely straggler
        return "low", (
            f"last at {s.arrived_last} of {s.decided} collectives, more often than any other rank; "
            + (
                f"only {few}, and chance alone gives that {_p(inst_p)} of the time"
                if can
                else f"{few} and {s.decided} collectives are too few for a chance test"
            )
        )
    return None, f"last at {s.arrived_last} of {s.decided} collectives: as often as chance allows"


def _p(p: float) -> str:
    return f"{p:.1%}" if p >= 0.001 else f"{p:.1e}"


def lead_per_step(ranks: list[RankTables], stacked: Stacked, t: Timing) -> dict[int, dict[str, float]]:
    """Per rank: lead-in time per step (ns) by category over its matched instances, and kernels per step."""
    if not t.inst.size:
        return {}
    c = stacked.cols
    rk, ridx = np.unique(t.rank, return_inverse=True)
    step = c["step"][t.row]
    width = int(step.max()) + 2
    steps = np.bincount(distinct(ridx * width + step + 1) // width, minlength=rk.size)
    steps = np.maximum(steps, 1).astype(np.float64)
    sums = {
        cat: np.bincount(ridx, weights=c[f"lead_{cat}_ns"][t.row].astype(np.float64), minlength=rk.size) / steps
        for cat in LEAD_CATEGORIES
    }
    sums["kernels"] = np.bincount(ridx, weights=c["lead_kernels"][t.row].astype(np.float64), minlength=rk.size) / steps
    return {int(r): {k: float(v[i]) for k, v in sums.items()} for i, r in enumerate(rk.tolist())}


def cause_of(
    rank: int,
    lead: dict[int, dict[str, float]],
    lateness_per_step_ns: float,
    gpu: dict[str, float | None] | None = None,
    starved: Starvation | None = None,
) -> dict:
    """The category in which the straggler's lead-in exceeds the median rank's most.

    ``gpu``: the straggler's ``gpu_busy_fraction`` and ``host_late_idle_fraction`` (idle in gaps of
    1 ms or more because the host launched late, not blocked in a sync): host work that leaves its GPU
    idle in such gaps is host launch starvation, by the bars ``starved`` sets (none without them)."""
    others = [v for r, v in lead.items() if r != rank] or list(lead.values())
    own = lead.get(rank, {})
    rows = []
    for cat in LEAD_CATEGORIES:
        med = median([o[cat] for o in others]) if others else 0.0
        rows.append(
            {
                "category": cat,
                "rank_ms_per_step": own.get(cat, 0.0) / 1e6,
                "median_ms_per_step": med / 1e6,
                "excess_ms_per_step": (own.get(cat, 0.0) - med) / 1e6,
            }
        )
    rows.sort(key=lambda x: -x["excess_ms_per_step"])
    top = rows[0]
    kernels_med = median([o["kernels"] for o in others]) if others else 0.0
    kernels_own = own.get("kernels", 0.0)
    explained = (
        top["excess_ms_per_step"] * 1e6 >= MIN_CAUSE_SHARE * max(lateness_per_step_ns, 1.0)
        and top["excess_ms_per_step"] > 0
    )
    cause = top["category"] if explained else "unknown"
    busy, host_late = (gpu or {}).get("gpu_busy_fraction"), (gpu or {}).get("host_late_idle_fraction")
    if (
        cause in ("host", "other", "unknown")
        and starved is not None
        and busy is not None
        and host_late is not None
        and busy < starved.busy_below
        and host_late >= starved.host_late_from
    ):
        cause = "host_launch"
        text = (
            f"host launch starvation: its GPU is busy {busy:.0%} of the window and idles {host_late:.0%} of it "
            "in gaps of 1 ms or more waiting for the host to launch the next work"
        )
    else:
        text = CAUSE_TEXT.get(cause, "no category explains its lateness; compare its timeline with the median rank's")
    if kernels_med and abs(kernels_own - kernels_med) > 0.1 * kernels_med:
        text += (
            f"; it runs {kernels_own:.0f} kernels per step before its collectives vs {kernels_med:.0f} "
            "on the median rank"
        )
    return {
        "cause": cause,
        "text": text,
        "excess_ms_per_step": top["excess_ms_per_step"] if explained else 0.0,
        "breakdown": rows,
        "kernels_per_step": kernels_own,
        "median_kernels_per_step": kernels_med,
    }
