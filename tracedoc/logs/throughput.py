"""Throughput of one log series: dips, periodic stalls (with the cause the log names), and drift.

Definitions (docs/definitions.md: training logs):

- **throughput**: the logged tokens/s, samples/s or steps/s, else 1 / step time (steps/s).
- **slow point** (after warm-up): below P10 and more than ``dip_p10_margin`` under the median, or below
  ``dip_fraction`` x the trailing or the run median; in both cases also more than ``dip_noise_z``
  robust sigmas of the point-to-point noise under the median (the tail of ordinary noise is not slow).
  Contiguous slow points form an episode.
- **periodic stall**: slow episodes that start every k steps (:func:`detect.find_period`). The stall is
  the episode's first points, as many as a stall on that period usually lasts; what follows in a
  longer episode is a dip of its own (a sustained dip that begins on a stall is still a dip).
- **cause** of a periodic stall: the event the log reports just before most of its slow points
  (evaluation, checkpoint save, garbage collection), when at least 60% of them have one.
- **dip**: every other slow episode.
- **time lost** of a slow point: (1/throughput - 1/median) x the steps it covers, as a share of the
  run time after warm-up.
- **drift**: the change of the time per unit of work (1/throughput) from the median of the first fifth
  of the steady points (after warm-up, not slow) to the median of the last fifth; ``gradual`` when the
  block medians rise in most blocks, ``step`` when one jump carries most of it (the step of that jump).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import detect
from .detect import anomaly
from .periodic import find_patterns
from .registry import ANOMALY_RULES

CAUSE_SHARE = 0.6
CAUSES = {"eval": "evaluation", "save": "checkpoint save", "gc": "garbage collection"}
DRIFT_MIN_POINTS = 50
DRIFT_BLOCKS = 10
_NAMES = (
    "throughput_p10",
    "throughput_p50",
    "throughput_p90",
    "throughput_dip_count",
    "throughput_dip_first_step",
    "throughput_dip_lost_fraction",
    "periodic_stall_period_steps",
    "periodic_stall_count",
    "periodic_stall_first_step",
    "periodic_stall_lost_fraction",
    "periodic_stall_cause",
    "step_time_p50_s",
    "periodic_stall_period_text",
    "periodic_stall_slowdown",
    "periodic_pattern_count",
    "step_time_drift_fraction",
    "throughput_drift_shape",
    "generation_time_fraction",
)


def throughput_of(series) -> tuple[np.ndarray | None, str | None]:
    tp = series.col("throughput")
    unit = series.units.get("throughput")
    st = series.col("step_time_s")
    if tp is None and st is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            tp = np.where(series.present["step_time_s"] & (st > 0), 1.0 / st, np.nan)
        unit = "steps/s"
    return tp, unit


def analyze_throughput(
    series,
    options,
    warm: int,
    stride: np.ndarray,
    m: dict[str, Any],
    anomalies: list[dict[str, Any]],
    evidence: dict[str, list],
    charts: dict[str, Any],
    notes: list[str],
) -> None:
    steps = series.step
    tp, unit = throughput_of(series)
    st = series.col("step_time_s")
    m.update(dict.fromkeys(_NAMES))
    m["throughput_logged"] = tp is not None
    m["throughput_unit"] = unit if tp is not None else None
    if st is not None:
        good = st[np.isfinite(st) & (st > 0)]
        m["step_time_p50_s"] = float(np.median(good)) if good.size else None
    _phases(series, m)
    if tp is None:
        notes.append(
            "the log has no throughput or step-time field: throughput dips and stalls are not assessed "
            "(log tokens_per_sec, samples_per_sec or step_time_s to get them)"
        )
        return
    ok = np.isfinite(tp) & (tp > 0)
    steady = ok.copy()
    steady[:warm] = False
    if steady.sum() < 10:
        notes.append(f"only {int(steady.sum())} throughput values after warm-up: too few for dips (10 needed)")
        return
    vals = tp[steady]
    p10, p50, p90 = (float(v) for v in np.percentile(vals, [10, 50, 90]))
    m.update(throughput_p10=p10, throughput_p50=p50, throughput_p90=p90)
    if m["step_time_p50_s"] is None and unit == "steps/s":
        m["step_time_p50_s"] = 1.0 / p50
    w = _window(int(ok.sum()), options.window) or 5
    med, _ = detect.trailing_reference(np.where(ok, tp, np.nan), w, with_mad=False)
    # point-to-point noise (robust sigma of successive differences / sqrt 2): a slow drift or a level change
    # over the run does not widen it the way the spread around the run median would
    sigma = detect.MAD_TO_SIGMA * float(np.median(np.abs(np.diff(vals)))) / np.sqrt(2) if vals.size > 1 else 0.0
    floor = p50 - options.dip_noise_z * sigma
    with np.errstate(invalid="ignore", divide="ignore"):
        by_p10 = (tp < p10) & (tp < (1 - options.dip_p10_margin) * p50)
        by_trail = tp < options.dip_fraction * med
        by_median = tp < options.dip_fraction * p50
        slow = steady & (tp < floor) & (by_p10 | by_trail | by_median)
        tick = _derived_tick(series, unit)
        if tick:  # step times from a coarse clock ("H:MM:SS"): slower by more than its rounding only
            slow &= (1.0 / tp - 1.0 / p50) * stride > TICKS * tick
        lost = np.where(slow, np.maximum(1.0 / tp - 1.0 / p50, 0.0) * stride, 0.0)
    total = float(np.sum(np.where(steady, stride / np.where(ok, tp, np.inf), 0.0))) or 1.0
    starts, ends = detect.episodes(slow)
    lengths = ends - starts + 1
    log_stride = max(1, int(np.median(np.diff(steps)))) if steps.size > 1 else 1
    last_step = int(steps[np.flatnonzero(steady)[-1]])
    patterns = find_patterns(steps[starts], lost[starts], log_stride, last_step, int(steady.sum()))
    stall_mask = np.zeros(tp.size, dtype=bool)
    rows: list[tuple[int, int, str, int]] = []  # first, last point, kind, pattern number
    pattern_of = {}
    stall_lens = []
    for n_pat, pat in enumerate(patterns):
        on = starts[pat.members]
        stall_lens.append(_stall_length(pat.period, lengths[pat.members], log_stride))
        pattern_of.update(dict.fromkeys(on.tolist(), n_pat))
    for s, e in zip(starts.tolist(), ends.tolist()):
        n_pat = pattern_of.get(s)
        if n_pat is not None:
            cut = min(e, s + stall_lens[n_pat] - 1)
            stall_mask[s : cut + 1] = True
            rows.append((s, cut, "periodic_stall", n_pat))
            if cut < e:
                rows.append((cut + 1, e, "throughput_dip", -1))
        else:
            rows.append((s, e, "throughput_dip", -1))
    summaries = []
    for n_pat, pat in enumerate(patterns):
        hits = np.array(sorted(s for s, p in pattern_of.items() if p == n_pat), dtype=np.int64)
        mask = np.zeros(tp.size, dtype=bool)
        for s in hits.tolist():
            mask[s : s + stall_lens[n_pat]] = True
        mask &= stall_mask
        cause = _stall_cause(series, hits, steps)
        summaries.append(
            {
                "pattern": n_pat + 1,
                "period_steps": pat.period,
                "period_min_steps": pat.period_min,
                "period_max_steps": pat.period_max,
                "phase": pat.phase,
                "slow_steps": int(hits.size),
                "coverage": round(pat.coverage, 3),
                "lost_fraction": float(lost[mask].sum() / total),
                "slowdown": float(np.median(p50 / tp[hits])),
                "cause": cause[0] if cause else None,
                "cause_evidence": cause[1] if cause else None,
                "reported": bool(lost[mask].sum() / total >= options.pattern_min_lost_fraction),
                "first_steps": [int(steps[i]) for i in hits[:10]],
            }
        )
    dips, stalls = [], []
    for s, e, kind, n_pat in rows:
        if kind == "periodic_stall" and not summaries[n_pat]["reported"]:
            continue  # a pattern too cheap to report: its steps are explained, not dips
        i_min = s + int(np.argmin(tp[s : e + 1]))
        crit = (
            "below P10 and >5% under the median"
            if by_p10[i_min]
            else f"under {options.dip_fraction:g}x the moving median"
            if by_trail[i_min]
            else f"under {options.dip_fraction:g}x the run median"
        )
        extra: dict[str, Any] = {
            "min_throughput": float(tp[i_min]),
            "median_throughput": p50,
            "lost_fraction": float(lost[s : e + 1].sum() / total),
            "criterion": f"{crit}, and {options.dip_noise_z:g} robust sigmas under it",
        }
        if kind == "periodic_stall":
            summ = summaries[n_pat]
            extra.update(
                period_steps=summ["period_steps"],
                pattern=summ["pattern"],
                pattern_lost_fraction=summ["lost_fraction"],
                **({"cause": summ["cause"]} if summ["cause"] else {}),
            )
            if summ["period_min_steps"] != summ["period_max_steps"]:
                extra.update(period_min_steps=summ["period_min_steps"], period_max_steps=summ["period_max_steps"])
        row = anomaly(kind, steps, s, e, rule=ANOMALY_RULES[kind], **extra)
        (stalls if kind == "periodic_stall" else dips).append(row)
        anomalies.append(row)
    for summ in summaries[1:]:
        if summ["reported"]:
            notes.append(
                f"periodic pattern {summ['pattern']}: a slow step {_every(summ)}{_after(summ)}, "
                f"{summ['slowdown']:.2f}x the median step, {summ['slow_steps']} of them, "
                f"{summ['lost_fraction']:.2%} of the run time (the costliest pattern is in the metrics)"
            )
    for summ in summaries:
        if not summ["reported"]:
            notes.append(
                f"also a slow step {_every(summ)}{_after(summ)}: {summ['slowdown']:.2f}x the median step, "
                f"{summ['slow_steps']} of them, {summ['lost_fraction']:.2%} of the run time (under "
                f"{options.pattern_min_lost_fraction:.1%}: not reported as a stall, nor as dips)"
            )
    dip_mask = slow & ~stall_mask
    m["throughput_dip_count"] = len(dips)
    m["throughput_dip_first_step"] = (dips[0].get("step", dips[0].get("start_step"))) if dips else None
    m["throughput_dip_lost_fraction"] = float(lost[dip_mask].sum() / total)
    top = summaries[0] if summaries and summaries[0]["reported"] else None
    if top is not None:
        m["periodic_stall_period_steps"] = top["period_steps"]
        m["periodic_stall_count"] = top["slow_steps"]
        m["periodic_stall_first_step"] = top["first_steps"][0]
        m["periodic_stall_lost_fraction"] = top["lost_fraction"]
        m["periodic_stall_cause"] = top["cause"]
        m["periodic_stall_period_text"] = _every(top)[len("every ") : -len(" steps")]
        m["periodic_stall_slowdown"] = top["slowdown"]
    m["periodic_pattern_count"] = sum(s["reported"] for s in summaries) if summaries else 0
    evidence["throughput_dips"] = dips[:100]
    evidence["periodic_stalls"] = summaries
    _drift(steps, tp, steady & ~slow, unit, m, anomalies, options.drift_fraction)
    charts.update(
        throughput=tp,
        throughput_unit=unit,
        throughput_p10=p10,
        throughput_p50=p50,
        throughput_p90=p90,
        dip_mask=dip_mask,
        stall_mask=stall_mask,
    )


TICKS = 2  # a difference of two rounded clock readings is off by up to one tick; a slow interval needs more


def _derived_tick(series, unit: str | None) -> float | None:
    """The clock resolution behind steps/s derived from elapsed-time differences, when it is one."""
    if unit != "steps/s" or not series.fields_seen.get("step_time_s", "").startswith("differences"):
        return None
    return series.clock_tick_s


def _window(n: int, window: int) -> int:
    return int(max(5, min(window, n // 5))) if n >= 25 else 0


def _stall_length(period: int, lengths: np.ndarray, log_stride: int) -> int:
    """How many points a stall on the period lasts: the usual length of the slow episodes that start on
    it, at most a quarter of the period."""
    typical = int(np.median(lengths)) if lengths.size else 1
    return max(1, min(typical, period // (4 * log_stride) or 1))


def _every(summ: dict[str, Any]) -> str:
    lo, hi = summ["period_min_steps"], summ["period_max_steps"]
    return f"every {lo}-{hi} steps" if lo != hi else f"every {summ['period_steps']} steps"


def _after(summ: dict[str, Any]) -> str:
    return f" after each {summ['cause']}" if summ["cause"] else ""


def _stall_cause(series, hits: np.ndarray, steps: np.ndarray) -> tuple[str, str] | None:
    """The event kind the log reports in the interval before most stalls (the previous logged step to the
    stall's step), and how many stalls had one."""
    events = [e for e in series.events if e.get("kind") in CAUSES]
    if not events or hits.size == 0:
        return None
    prev = np.where(hits > 0, steps[np.maximum(hits - 1, 0)], steps[hits] - 1)
    best = None
    for kind in CAUSES:
        at = np.array(sorted({int(e["step"]) for e in events if e["kind"] == kind}), dtype=np.int64)
        if at.size == 0:
            continue
        lo = np.searchsorted(at, prev, side="left")  # an event after step p happened in (p, next logged step]
        hi = np.searchsorted(at, steps[hits], side="left")
        n = int(np.sum(hi > lo))
        if n >= CAUSE_SHARE * hits.size and (best is None or n > best[1]):
            best = (kind, n)
    if best is None:
        return None
    kind, n = best
    return CAUSES[kind], f"{n} of {hits.size} slow steps follow a logged {CAUSES[kind]}"


def _drift(
    steps: np.ndarray,
    tp: np.ndarray,
    steady: np.ndarray,
    unit: str | None,
    m: dict[str, Any],
    anomalies: list[dict[str, Any]],
    report_fraction: float,
) -> None:
    idx = np.flatnonzero(steady)
    if idx.size < DRIFT_MIN_POINTS:
        return
    t = 1.0 / tp[idx]  # time per unit of work
    fifth = idx.size // 5
    first, last = float(np.median(t[:fifth])), float(np.median(t[-fifth:]))
    drift = last / first - 1.0
    edges = np.linspace(0, idx.size, DRIFT_BLOCKS + 1).astype(np.int64)
    blocks = np.array([np.median(t[a:b]) for a, b in zip(edges[:-1], edges[1:])])
    jumps = np.diff(blocks)
    total = blocks[-1] - blocks[0]
    if abs(drift) < 0.02:
        shape, at = None, None  # no change worth a shape
    elif total != 0 and np.max(np.abs(jumps)) > 0.6 * abs(total):
        shape = "step"
        j = int(np.argmax(np.abs(jumps)))
        at = int(steps[idx[edges[j + 1]]])
    else:
        shape, at = "gradual", None
    m["step_time_drift_fraction"] = drift
    m["throughput_drift_shape"] = shape
    if abs(drift) < report_fraction:
        return
    anomalies.append(
        anomaly(
            "throughput_drift",
            steps,
            int(idx[0]),
            int(idx[-1]),
            rule=ANOMALY_RULES["throughput_drift"],
            drift_fraction=drift,
            shape=shape,
            **({"change_step": at} if at is not None else {}),
            first_throughput=1.0 / first,
            last_throughput=1.0 / last,
            unit=unit,
            criterion="median time per unit of work, last fifth of the steady points vs the first",
        )
    )


def _phases(series, m: dict[str, Any]) -> None:
    gen, e2e = series.col("generation_time_s"), series.col("step_time_s")
    if gen is None or e2e is None:
        return
    with np.errstate(invalid="ignore", divide="ignore"):
        share = gen / e2e
    share = share[np.isfinite(share) & (share >= 0) & (share <= 1)]
    if share.size:
        m["generation_time_fraction"] = float(np.median(share))
