"""Log analyses: a :class:`LogSeries` -> metrics (``registry.LOG_METRICS``), anomalies and chart data.

Definitions (docs/definitions.md: training logs):

- **warm-up**: the first max(3, 1%) log points are left out of throughput and utilisation statistics.
- **NaN/inf**: a logged loss or gradient norm that is not finite; Megatron's nan-iteration counter.
- **loss spike**: modified z = 0.6745 (x - m) / MAD above ``spike_z`` against the median m and MAD of
  the trailing window, *and* x - m above ``spike_min_rise_fraction`` x |m|; or x at least
  ``spike_ratio`` x a positive m with z above ``spike_ratio_z`` (relative to the local level: a loss
  doubling from 0.01 is a spike). Contiguous points are one episode, marked persistent when the loss
  stays up.
- **loss bump**: the loss (a 5-point running median) more than ``bump_rise_fraction`` and ``bump_z``
  robust sigmas above the level before it for at least half a window, then back
  (:func:`detect.find_bumps`); spike episodes inside a bump are the bump.
- **gradient-norm spike**: as a loss spike, at least ``grad_spike_min_ratio`` x the trailing median;
  reported with the loss before, at and after it.
- NaN/inf, loss spikes and bumps, divergence and gradient-norm spikes: :mod:`tracedoc.logs.stability`.
- **skipped steps** (fp16): counted by :mod:`tracedoc.logs.skips`, classified by :mod:`tracedoc.logs.scaler`
  (calibration and a steady trickle are normal; bursts, a rising rate, frequent skips and a collapsing
  scale are not).
- throughput dips, periodic stalls and drift: :mod:`tracedoc.logs.throughput`; periodic patterns:
  :mod:`tracedoc.logs.periodic`; slow loss trends (regression, overfitting): :mod:`tracedoc.logs.trends`.

Every anomaly carries its step(s), the values, the reference level it was judged against, the
criterion that fired and the rule that reads it (``rule``). Engines logged side by side (RLHF actor
and critic) are analysed as separate series; their anomalies carry ``series`` and the count metrics
add up over them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import detect
from .detect import anomaly
from .registry import ANOMALY_RULES
from .scaler import PRIORITY
from .series import LogSeries
from .skips import check_skips, skip_share, steps_spanned
from .stability import check_stability
from .throughput import analyze_throughput
from .trends import find_trends


@dataclass(frozen=True)
class LogOptions:
    window: int = 50  # log points in the moving average and the trailing reference
    spike_z: float = 6.0
    spike_min_rise_fraction: float = 0.05
    spike_ratio: float = 2.0  # relative spikes: at least this many times the local median ...
    spike_ratio_z: float = 3.5  # ... and this modified z-score (Iglewicz-Hoaglin's outlier bar)
    bump_rise_fraction: float = 0.1
    bump_z: float = 4.0
    grad_spike_z: float = 6.0
    grad_spike_min_ratio: float = 2.0
    dip_fraction: float = 0.8
    dip_p10_margin: float = 0.05
    dip_noise_z: float = 5.0  # and more than this many robust sigmas (1.4826 MAD) under the median
    drift_fraction: float = 0.1  # drifts of at least this share are listed as anomalies
    pattern_min_lost_fraction: float = 0.002  # a periodic pattern costing less is a note, not a stall
    low_gpu_util_percent: float = 50.0
    divergence_rise_fraction: float = 0.1


@dataclass
class LogAnalysis:
    metrics: dict[str, Any]
    anomalies: list[dict[str, Any]]
    evidence: dict[str, list[dict[str, Any]]]
    charts: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def analyze_series(series: LogSeries, options: LogOptions = LogOptions()) -> LogAnalysis:
    """Analyse a series and the series logged beside it (``series.companions``)."""
    main = _analyze_one(series, options)
    if not series.companions:
        main.metrics["log_series"] = None
        _finish(main)
        return main
    name = series.name or "main"
    for a in main.anomalies:
        a["series"] = name
    spans = steps_spanned(series)
    for other_name, other in series.companions.items():
        spans += steps_spanned(other)
        part = _analyze_one(other, options, stability_only=True)
        for a in part.anomalies:
            a["series"] = other_name
        main.anomalies += part.anomalies
        for key, rows in part.evidence.items():
            if key in ("loss_spikes", "loss_bumps", "skip_groups", "nan_steps"):
                main.evidence.setdefault(key, []).extend(dict(r, series=other_name) for r in rows)
        _merge_metrics(main.metrics, part.metrics)
        main.charts.setdefault("companions", {})[other_name] = part.charts
        main.notes += [f"{other_name}: {n}" for n in part.notes]
    main.metrics["log_series"] = ", ".join([name, *series.companions])
    main.metrics["skipped_iteration_fraction"] = skip_share(main.metrics.get("skipped_iterations"), spans)
    _finish(main)
    return main


def _finish(result: LogAnalysis) -> None:
    result.anomalies.sort(key=lambda a: (a.get("step", a.get("start_step", 0)), a["kind"]))
    result.evidence["anomalies"] = result.anomalies


_SUMS = (
    "loss_nonfinite_count",
    "grad_norm_nonfinite_count",
    "nan_iterations",
    "skipped_iterations",
    "overflow_messages",
    "loss_spike_count",
    "loss_spike_persistent_count",
    "loss_bump_count",
    "grad_norm_spike_count",
    "skip_burst_count",
)
_FIRSTS = (
    "loss_nonfinite_first_step",
    "loss_spike_first_step",
    "loss_bump_first_step",
    "grad_norm_spike_first_step",
    "divergence_start_step",
)
_MAXES = ("loss_spike_max_z", "loss_bump_max_ratio", "divergence_rise_fraction", "loss_scale_max")
_MINS = ("loss_scale_min",)


def _merge_metrics(into: dict[str, Any], other: dict[str, Any]) -> None:
    def pick(keys, fn):
        for k in keys:
            vals = [v for v in (into.get(k), other.get(k)) if v is not None]
            into[k] = fn(vals) if vals else None

    pick(_SUMS, sum)
    pick(_FIRSTS, min)
    pick(_MAXES, max)
    pick(_MINS, min)
    if other.get("divergence") is True:
        into["divergence"] = True
    ranked = [p for p in (into.get("skip_pattern"), other.get("skip_pattern")) if p is not None]
    into["skip_pattern"] = min(ranked, key=PRIORITY.index) if ranked else None
    if into.get("precision") is None:
        into["precision"] = other.get("precision")


def _analyze_one(series: LogSeries, options: LogOptions, stability_only: bool = False) -> LogAnalysis:
    steps = series.step
    n = len(series)
    m: dict[str, Any] = {
        "log_points": n,
        "log_first_step": int(steps[0]) if n else None,
        "log_last_step": int(steps[-1]) if n else None,
    }
    anomalies: list[dict[str, Any]] = []
    evidence: dict[str, list[dict[str, Any]]] = {}
    notes: list[str] = []
    charts: dict[str, Any] = {"steps": steps}
    warm = min(n, max(3, n // 100))
    stride = np.diff(steps, prepend=steps[0] - (int(np.median(np.diff(steps))) if n > 1 else 1)).astype(float)
    check_stability(series, options, m, anomalies, evidence, charts, notes)
    find_trends(series, options.window, bool(m.get("divergence")), anomalies, notes, m)
    check_skips(series, m, anomalies, evidence, charts)
    m["precision"] = series.header.get("precision")
    if stability_only:
        return LogAnalysis(metrics=m, anomalies=anomalies, evidence=evidence, charts=charts, notes=notes)
    analyze_throughput(series, options, warm, stride, m, anomalies, evidence, charts, notes)
    _utilisation(series, options, warm, m, anomalies)
    lr = series.col("lr")
    sched = detect.lr_schedule(steps, lr) if lr is not None else None
    m["lr_schedule"] = sched["shape"] if sched else None
    m["lr_jump_count"] = len(sched["jump_steps"]) if sched else None
    if sched:
        evidence["lr_schedule"] = [sched]
        for s in sched["jump_steps"]:
            anomalies.append({"kind": "lr_jump", "step": s})
        charts["lr"] = lr
    return LogAnalysis(metrics=m, anomalies=anomalies, evidence=evidence, charts=charts, notes=notes)


def _utilisation(series, options, warm, m, anomalies) -> None:
    util = series.col("gpu_util_percent")
    m["gpu_util_logged"] = util is not None
    m.update(gpu_util_mean_percent=None, low_gpu_util_fraction=None, low_gpu_util_episode_count=None)
    if util is None:
        return
    ok = np.isfinite(util)
    ok[:warm] = False
    if not ok.any():
        return
    low = ok & (util < options.low_gpu_util_percent)
    m["gpu_util_mean_percent"] = float(np.mean(util[ok]))
    m["low_gpu_util_fraction"] = float(low.sum() / ok.sum())
    starts, ends = detect.episodes(low)
    m["low_gpu_util_episode_count"] = int(starts.size)
    for s, e in zip(starts, ends):
        anomalies.append(
            anomaly(
                "low_gpu_util",
                series.step,
                int(s),
                int(e),
                mean_percent=float(np.mean(util[s : e + 1])),
                rule=ANOMALY_RULES["low_gpu_util"],
                criterion=f"GPU utilisation under {options.low_gpu_util_percent:g}%",
            )
        )
