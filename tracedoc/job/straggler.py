"""Stragglers and their cause (DESIGN.md: straggler).

A straggler arrives last at the collectives that hold most of the others' wait, in more steps than
chance makes likely among that many ranks (often only the first collective of each step: after it
the ranks run in lockstep); the wait it costs each other rank is a significant share of the step;
and it waits less than the median rank itself. The rank with the longest step is not the test: a
rank that starts its step early and waits for the straggler has the longest step.

Its cause: the lead-in category (time from its previous collective end to its arrival) in which
it spends more per step than the median rank, by the largest margin.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..model.groups import distinct
from ..model.stats import median
from ..analyses.instances import LEAD_CATEGORIES, RankTables
from .match import Stacked
from .timing import Timing

# Significance: the wait a straggler costs each other rank, per step, as a share of the step.
MIN_WAIT_FRACTION = 0.05
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


@dataclass
class RankStats:
    rank: int
    instances: int
    arrived_last: int
    wait_ns: int  # total over matched instances
    lateness_ns: int  # total of (own arrival - median arrival), positive when late
    caused_wait_ns: float  # mean wait of the others at the instances this rank arrived last at, summed
    steps: int
    late_steps: int = 0  # steps in which it arrived last at half or more of its instances
    trials: int = 0  # steps (or instances, without steps) the chance test counts
    steady: bool = False  # late in every trial by a steady amount (mean >= STEADY_RATIO x spread)

    @property
    def last_share(self) -> float:
        return self.arrived_last / self.instances if self.instances else 0.0


def rank_stats(t: Timing) -> list[RankStats]:
    if not t.inst.size:
        return []
    m = t.last_rank.size
    members = np.bincount(t.inst, minlength=m)
    sum_wait = np.bincount(t.inst, weights=t.wait_ns, minlength=m)
    others_mean_wait = np.where(members > 1, sum_wait / np.maximum(members - 1, 1), 0.0)  # last waits 0
    order = np.lexsort((t.arrival_ns, t.inst))
    bounds = np.flatnonzero(np.append(True, t.inst[order][1:] != t.inst[order][:-1]))
    med = np.array([median(v) for v in np.split(t.arrival_ns[order], bounds[1:])])
    late = t.arrival_ns - med[t.inst]
    # trials for the chance test: steps (instances when no step is recorded); a rank is late in a step
    # when the instances it arrived last at hold at least half of the step's wait
    inst_step = np.full(m, -1, dtype=np.int64)
    inst_step[t.inst] = t.step
    trial = np.where(inst_step >= 0, inst_step, -1 - np.arange(m))
    trial_ids, trial_of = np.unique(trial, return_inverse=True)
    wait_in_trial = np.bincount(trial_of, weights=others_mean_wait, minlength=trial_ids.size)
    ranks, ridx = np.unique(t.rank, return_inverse=True)
    nr = ranks.size
    instances = np.bincount(ridx, minlength=nr)
    wait = np.bincount(ridx, weights=t.wait_ns.astype(np.float64), minlength=nr)
    lateness = np.bincount(ridx, weights=late.astype(np.float64), minlength=nr)
    last_idx = np.searchsorted(ranks, t.last_rank)  # rank index of each instance's last arriver
    has_last = (t.last_rank >= 0) & (last_idx < nr) & (ranks[np.minimum(last_idx, nr - 1)] == t.last_rank)
    li = last_idx[has_last]
    arrived_last = np.bincount(li, minlength=nr)
    caused_total = np.bincount(li, weights=others_mean_wait[has_last], minlength=nr)
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
    late_by_trial = np.bincount(ridx * nt + trial_of[t.inst], weights=late.astype(np.float64),
                                minlength=nr * nt).reshape(nr, nt)
    steady = np.zeros(nr, dtype=bool)
    for i in np.flatnonzero(late_steps == trials):
        v = late_by_trial[i][counted.reshape(nr, nt)[i]]
        steady[i] = v.size >= MIN_STEADY_TRIALS and (v > 0).all() and v.mean() >= STEADY_RATIO * v.std()
    step_pairs = distinct(ridx * (t.step.max() + 2 if t.step.size else 1) + (t.step + 1))
    steps = np.bincount(step_pairs // (t.step.max() + 2 if t.step.size else 1), minlength=nr)
    return [RankStats(rank=int(ranks[i]), instances=int(instances[i]), arrived_last=int(arrived_last[i]),
                      wait_ns=int(wait[i]), lateness_ns=int(lateness[i]), caused_wait_ns=float(caused_total[i]),
                      steps=max(1, int(steps[i])), late_steps=int(late_steps[i]), trials=int(trials[i]),
                      steady=bool(steady[i]))
            for i in range(nr)]


def chance_of(late: int, trials: int, n_ranks: int) -> float:
    """Probability that a rank arrives last in ``late`` or more of ``trials`` by chance (p = 1/ranks)."""
    p = 1.0 / max(n_ranks, 2)
    return float(sum(math.comb(trials, k) * p ** k * (1 - p) ** (trials - k) for k in range(late, trials + 1)))


def find_stragglers(stats: list[RankStats], step_ns: float | None, n_ranks: int) -> list[RankStats]:
    """Ranks that hold the job back, most costly first; empty when none is significant."""
    if len(stats) < 2:
        return []
    waits = np.array([s.wait_ns / s.instances for s in stats if s.instances])
    median_wait = median(waits) if waits.size else 0.0
    out = []
    for s in stats:
        per_step = s.caused_wait_ns / s.steps
        significant = bool(step_ns) and per_step >= MIN_WAIT_FRACTION * step_ns
        not_chance = chance_of(s.late_steps, s.trials, n_ranks) < CHANCE_P / max(n_ranks, 1) or s.steady
        if significant and not_chance and s.lateness_ns > 0 and s.wait_ns / max(s.instances, 1) <= median_wait:
            out.append(s)
    return sorted(out, key=lambda s: -s.caused_wait_ns)


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
    sums = {cat: np.bincount(ridx, weights=c[f"lead_{cat}_ns"][t.row].astype(np.float64), minlength=rk.size) / steps
            for cat in LEAD_CATEGORIES}
    sums["kernels"] = np.bincount(ridx, weights=c["lead_kernels"][t.row].astype(np.float64), minlength=rk.size) / steps
    return {int(r): {k: float(v[i]) for k, v in sums.items()} for i, r in enumerate(rk.tolist())}


def cause_of(rank: int, lead: dict[int, dict[str, float]], lateness_per_step_ns: float) -> dict:
    """The category in which the straggler's lead-in exceeds the median rank's most."""
    others = [v for r, v in lead.items() if r != rank] or list(lead.values())
    own = lead.get(rank, {})
    rows = []
    for cat in LEAD_CATEGORIES:
        med = median([o[cat] for o in others]) if others else 0.0
        rows.append({"category": cat, "rank_ms_per_step": own.get(cat, 0.0) / 1e6, "median_ms_per_step": med / 1e6,
                     "excess_ms_per_step": (own.get(cat, 0.0) - med) / 1e6})
    rows.sort(key=lambda x: -x["excess_ms_per_step"])
    top = rows[0]
    kernels_med = median([o["kernels"] for o in others]) if others else 0.0
    kernels_own = own.get("kernels", 0.0)
    explained = top["excess_ms_per_step"] * 1e6 >= MIN_CAUSE_SHARE * max(lateness_per_step_ns, 1.0) \
        and top["excess_ms_per_step"] > 0
    cause = top["category"] if explained else "unknown"
    text = CAUSE_TEXT.get(cause, "no category explains its lateness; compare its timeline with the median rank's")
    if kernels_med and abs(kernels_own - kernels_med) > 0.1 * kernels_med:
        text += f"; it runs {kernels_own:.0f} kernels per step before its collectives vs {kernels_med:.0f} on the median rank"
    return {"cause": cause, "text": text, "excess_ms_per_step": top["excess_ms_per_step"] if explained else 0.0,
            "breakdown": rows, "kernels_per_step": kernels_own, "median_kernels_per_step": kernels_med}
