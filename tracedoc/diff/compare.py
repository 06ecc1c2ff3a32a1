"""Two reports compared: ranks aligned, each pair diffed, comparability checked.

Ranks are aligned by rank number (by order when the numbers are unknown; a single rank on each side
is paired whatever its number, with a warning when the numbers differ). Runs that differ in GPU,
device count, world size, framework version or in most of their kernels and operators are still
compared; the result carries a warning that says what differs.
"""

from __future__ import annotations

from ..analyses.core.rank import RankResult
from .comm import rank_waits_ns, split_exposed_ns
from .inputs import Side
from .metrics import label_change, metric_deltas
from ..model.record import replace
from .model import NOISE_FLOOR_PCT, RANK_ROWS, TABLE_ROWS, DiffResult, RankDiff, step_change_pct, verdict_of
from .predictions import PredictionCheck, check_predictions
from .sides import RunSide, StepSplit, attribution, led_by, step_split
from .steps import StepProfile, mean_profile, median_change_interval_ns, step_profile
from .tables import (
    kernel_deltas,
    kernel_table,
    largest_rows,
    name_overlap,
    operator_deltas,
    operator_overlap,
    table_sizes,
)

MIN_NAME_OVERLAP = 0.5
_ENV_FIELDS = (
    ("gpu", "GPU"),
    ("device_count", "device count"),
    ("world_size", "world size"),
    ("backend", "backend"),
    ("torch_version", "torch version"),
    ("format", "trace format"),
)


def diff_sides(before: Side, after: Side, noise_pct: float = NOISE_FLOOR_PCT) -> DiffResult:
    pairs, warnings = align_ranks(before.ranks, after.ranks, before.path, after.path)
    waits_b, waits_a = rank_waits_ns(before.result), rank_waits_ns(after.result)
    worked = [_pair(b, a, waits_b.get(b.rank), waits_a.get(a.rank), noise_pct) for b, a in pairs]
    diffs = [d for d, _, _ in worked]
    per_pair = [comparability_warnings(b, a, d, before.path, after.path) for d, (b, a) in zip(diffs, pairs)]
    for i, found in enumerate(per_pair):  # said once when every pair has it, else per rank
        for w in found:
            if all(w in other for other in per_pair):
                warnings.append(w)
            else:
                warnings.append(f"rank {diffs[i].rank_before}: {w}")
    focus = max(range(len(diffs)), key=lambda i: (abs(diffs[i].step_delta_ns), -i))
    diffs = [_cut(d, TABLE_ROWS if i == focus else RANK_ROWS) for i, d in enumerate(diffs)]
    pb, pa = mean_profile([p for _, p, _ in worked]), mean_profile([p for _, _, p in worked])
    split = _mean_split([d.comm_split for d in diffs])
    run_b = RunSide(
        path=before.path,
        kind=before.kind,
        environment=pairs[0][0].environment,
        **step_split(pb, split["before"] if split else None),
    )
    run_a = RunSide(
        path=after.path,
        kind=after.kind,
        environment=pairs[0][1].environment,
        **step_split(pa, split["after"] if split else None),
    )
    delta = run_a.step_ns - run_b.step_ns
    parts = attribution(run_b, run_a)
    interval = median_change_interval_ns(pb, pa) if len(diffs) == 1 else None
    return DiffResult(
        before=run_b,
        after=run_a,
        step_delta_ns=delta,
        step_pct=step_change_pct(pb, pa),
        step_delta_interval_ns=list(interval) if interval is not None else None,
        verdict=verdict_of(pb, pa, noise_pct),
        noise_floor_pct=noise_pct,
        led_by=led_by({c.category: c.delta_ns for c in parts}, delta),
        attribution=parts,
        pairs=diffs,
        focus=focus,
        warnings=_dedupe(warnings),
        job_predictions=job_predictions(before, after, noise_pct),
    )


def _mean_split(splits: list[dict[str, tuple[int, int]] | None]) -> dict[str, tuple[int, int]] | None:
    """Exposed communication as (wait, transfer) ns per side, averaged over the pairs that have it."""
    have = [s for s in splits if s]
    if not have:
        return None
    return {
        side: (round(sum(h[side][0] for h in have) / len(have)), round(sum(h[side][1] for h in have) / len(have)))
        for side in ("before", "after")
    }


def _cut(d: RankDiff, rows: int) -> RankDiff:
    """A pair with only the largest ``rows`` rows of each kind of its tables (``tables.largest_rows``)."""
    kernels, operators = largest_rows(d.kernels, d.operators, rows)
    return replace(d, kernels=kernels, operators=operators, rows_kept=rows)


def _findings(rank_or_job) -> list:
    v = getattr(rank_or_job, "verdict", None)
    return list(v.findings) if v is not None else []


def job_predictions(before: Side, after: Side, noise_pct: float) -> list[PredictionCheck]:
    """The base job verdict's predictions (the straggler on time ...) against the new job's step; none
    unless both runs have a job view with a step."""
    jb, ja = before.result.job, after.result.job
    if jb is None or ja is None:
        return []
    sb, sa = jb.metrics.get("job_step_time_p50_ns"), ja.metrics.get("job_step_time_p50_ns")
    if not sb or not sa:
        return []
    return check_predictions(_findings(jb), _findings(ja), sb, sa, noise_pct)


def _pair(
    before: RankResult, after: RankResult, wait_before_ns: float | None, wait_after_ns: float | None, noise_pct: float
) -> tuple[RankDiff, StepProfile, StepProfile]:
    """One pair's record, and the two working profiles it was read from (their intervals give the job's)."""
    pb, pa = step_profile(before), step_profile(after)
    nb, na = pb.per_step_divisor, pa.per_step_divisor
    split_b = split_exposed_ns(pb.category_ns["exposed_comm"], wait_before_ns)
    split_a = split_exposed_ns(pa.category_ns["exposed_comm"], wait_after_ns)
    both = bool(split_b and split_a)
    kernels, operators = kernel_deltas(before, after, nb, na), operator_deltas(before, after, nb, na)
    d = RankDiff(
        rank_before=before.rank,
        rank_after=after.rank,
        before=StepSplit(**step_split(pb, split_b if both else None)),
        after=StepSplit(**step_split(pa, split_a if both else None)),
        kernels=kernels,
        operators=operators,
        rows_kept=max(len(kernels), len(operators)),
        sizes=table_sizes(kernels, operators),
        metrics=metric_deltas(before.metrics, after.metrics),
        labels=label_change(before, after),
        kernels_complete=kernel_table(before)[1] and kernel_table(after)[1],
        predictions=check_predictions(_findings(before), _findings(after), pb.step_ns, pa.step_ns, noise_pct)
        if pb.step_ns > 0
        else [],
    )
    return d, pb, pa


def align_ranks(
    before: list[RankResult], after: list[RankResult], where_b: str, where_a: str
) -> tuple[list[tuple[RankResult, RankResult]], list[str]]:
    """Pairs of ranks to compare, and warnings about ranks left out."""
    warnings: list[str] = []
    nums_b = [r.rank for r in before]
    nums_a = [r.rank for r in after]
    if len(before) == 1 and len(after) == 1:
        if nums_b[0] != nums_a[0] and None not in (nums_b[0], nums_a[0]):
            warnings.append(f"comparing rank {nums_b[0]} of {where_b} with rank {nums_a[0]} of {where_a}")
        return [(before[0], after[0])], warnings
    numbered = (
        None not in nums_b
        and None not in nums_a
        and len(set(nums_b)) == len(nums_b)
        and len(set(nums_a)) == len(nums_a)
    )
    if numbered:
        by_a = {r.rank: r for r in after}
        pairs = [(r, by_a[r.rank]) for r in before if r.rank in by_a]
        only_b = sorted(set(nums_b) - set(nums_a))
        only_a = sorted(set(nums_a) - set(nums_b))
        if only_b:
            warnings.append(f"ranks {_ranks(only_b)} of {where_b} have no counterpart in {where_a} and are left out")
        if only_a:
            warnings.append(f"ranks {_ranks(only_a)} of {where_a} have no counterpart in {where_b} and are left out")
        if pairs:
            return pairs, warnings
        warnings.append("no rank numbers in common; ranks are paired in order instead")
    n = min(len(before), len(after))
    if len(before) != len(after):
        warnings.append(
            f"{where_b} has {len(before)} ranks and {where_a} {len(after)}; the first {n} of each are compared in order"
        )
    return list(zip(before[:n], after[:n])), warnings


def comparability_warnings(before: RankResult, after: RankResult, d: RankDiff, where_b: str, where_a: str) -> list[str]:
    """What differs between the two runs beyond the change being measured."""
    out = []
    eb, ea = before.environment, after.environment
    for key, label in _ENV_FIELDS:
        vb, va = getattr(eb, key), getattr(ea, key)
        if vb is not None and va is not None and vb != va:
            out.append(
                f"the runs differ in {label}: {vb} before, {va} after; the numbers are still compared, "
                "but part of the change may come from that"
            )
    overlap = name_overlap(before, after)
    ops = operator_overlap(before, after)
    if overlap is not None and overlap < MIN_NAME_OVERLAP:
        out.append(
            f"only {overlap:.0%} of kernel names are shared between the runs: they may be "
            "different models or code paths, so kernel deltas mix unrelated work"
        )
    elif ops is not None and ops < MIN_NAME_OVERLAP:
        out.append(
            f"only {ops:.0%} of CPU operator names are shared between the runs: they may be "
            "different models or code paths"
        )
    mb, ma = before.metrics, after.metrics
    if bool(mb.get("has_gpu_ops")) != bool(ma.get("has_gpu_ops")):
        which = where_a if mb.get("has_gpu_ops") else where_b
        out.append(f"{which} has no GPU activity while the other run has; compare runs on the same device kind")
    if d.before.basis != d.after.basis:
        out.append(
            "one run has step spans and the other does not; a whole analysis window stands in for a "
            "step there, so the step times are not like for like"
        )
    elif d.before.basis == "window":
        out.append(
            "neither run has step spans (ProfilerStep#N or an NVTX step range); the whole analysis "
            "windows are compared as one step each"
        )
    if not d.kernels_complete:
        out.append(
            "a report without the full kernel table (written by an older tracedoc) lists only its "
            "top kernels; new and vanished kernels are judged from those"
        )
    return out


def _ranks(nums: list[int]) -> str:
    shown = ", ".join(str(n) for n in nums[:8])
    return shown + (f" and {len(nums) - 8} more" if len(nums) > 8 else "")


def _dedupe(items: list[str]) -> list[str]:
    seen: set[str] = set()
    return [x for x in items if not (x in seen or seen.add(x))]
