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
- **skipped steps** (fp16): classified by :mod:`tracedoc.logs.scaler` (calibration and a steady trickle
  are normal; bursts, a rising rate, frequent skips and a collapsing scale are not).
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

from ..model.plain import plain_finite
from . import detect
from .detect import anomaly
from .registry import ANOMALY_RULES
from .scaler import PRIORITY, skip_rhythm
from .series import LogSeries
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


def _window(n: int, window: int) -> int:
    return int(max(5, min(window, n // 5))) if n >= 25 else 0


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
    spans = _span(series)
    for other_name, other in series.companions.items():
        spans += _span(other)
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
    main.metrics["skipped_iteration_fraction"] = _skip_share(main.metrics.get("skipped_iterations"), spans)
    _finish(main)
    return main


def _skip_share(skipped: int | None, span: int) -> float | None:
    """Skipped steps / steps spanned; at most 1 (more overflow messages than logged steps is a log cut
    short or mangled, not more skips than steps)."""
    return min(1.0, skipped / span) if skipped is not None and span else None


def _span(series: LogSeries) -> int:
    return int(series.step[-1] - series.step[0]) + 1 if len(series) else 0


def _finish(result: LogAnalysis) -> None:
    result.anomalies.sort(key=lambda a: (a.get("step", a.get("start_step", 0)), a["kind"]))
    result.evidence["anomalies"] = result.anomalies


_SUMS = ("loss_nonfinite_count", "grad_norm_nonfinite_count", "nan_iterations", "skipped_iterations",
         "overflow_messages", "loss_spike_count", "loss_spike_persistent_count", "loss_bump_count",
         "grad_norm_spike_count", "skip_burst_count")
_FIRSTS = ("loss_nonfinite_first_step", "loss_spike_first_step", "loss_bump_first_step", "grad_norm_spike_first_step",
           "divergence_start_step")
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
    m: dict[str, Any] = {"log_points": n, "log_first_step": int(steps[0]) if n else None,
                         "log_last_step": int(steps[-1]) if n else None}
    anomalies: list[dict[str, Any]] = []
    evidence: dict[str, list[dict[str, Any]]] = {}
    notes: list[str] = []
    charts: dict[str, Any] = {"steps": steps}
    warm = min(n, max(3, n // 100))
    stride = np.diff(steps, prepend=steps[0] - (int(np.median(np.diff(steps))) if n > 1 else 1)).astype(float)
    _stability(series, options, m, anomalies, evidence, charts, notes)
    find_trends(series, options.window, bool(m.get("divergence")), anomalies, notes, m)
    _skips(series, m, anomalies, evidence, charts)
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


_STABILITY = ("loss_nonfinite_count", "loss_nonfinite_first_step", "loss_spike_count", "loss_spike_first_step",
              "loss_spike_max_z", "loss_spike_persistent_count", "loss_bump_count", "loss_bump_first_step",
              "loss_bump_max_ratio", "divergence", "divergence_start_step", "divergence_rise_fraction",
              "grad_norm_nonfinite_count", "grad_norm_spike_count", "grad_norm_spike_first_step")


def _stability(series, options, m, anomalies, evidence, charts, notes) -> None:
    steps = series.step
    loss = series.col("loss")
    m["loss_logged"] = loss is not None
    m.update(dict.fromkeys(_STABILITY))
    x = None
    if loss is None:
        notes.append("the log has no training-loss field: no NaN, spike or divergence checks on the loss")
    else:
        present = series.present["loss"]
        bad = present & ~np.isfinite(loss)
        starts, ends = detect.episodes(bad)
        for s, e in zip(starts, ends):
            anomalies.append(anomaly("nan", steps, int(s), int(e), field="loss", value=str(loss[s]), rule=ANOMALY_RULES["nan"],
                                     criterion="not a finite number"))
        m["loss_nonfinite_count"] = int(bad.sum())
        m["loss_nonfinite_first_step"] = int(steps[starts[0]]) if starts.size else None
        evidence["nan_steps"] = [{"step": int(steps[i]), "field": "loss", "value": str(loss[i])}
                                 for i in np.flatnonzero(bad)[:100]]
        x = np.where(present, loss, np.nan)
        w = _window(int(present.sum()), options.window)
        charts["loss"] = loss
        charts["loss_ma"] = detect.moving_average(x, max(1, w or options.window))
        charts["loss_ma_last"] = detect.trailing_mean(x, w or options.window)
        charts["window"] = w or options.window
        if w:
            _loss_episodes(steps, x, present, w, options, m, anomalies, evidence)
        else:
            notes.append(f"only {int(present.sum())} loss values: too few for spike and trend checks (25 needed)")
            evidence["loss_spikes"] = []
    _grad_norm(series, x, options, m, anomalies, charts)
    for name, kind in (("nan_iterations", "nan"),):
        col = _counter(series, name)
        m[name] = int(np.nansum(col)) if col is not None else None
        if col is not None:
            for i in np.flatnonzero(col > 0)[:1000]:
                anomalies.append({"kind": kind, "step": int(steps[i]), "count": int(col[i]), "field": "nan_iterations",
                                  "rule": ANOMALY_RULES[kind], "criterion": "Megatron counted NaN iterations"})


def _loss_episodes(steps, x, present, w, options, m, anomalies, evidence) -> None:
    idx = np.flatnonzero(present)
    xs, st = x[idx], steps[idx]
    ref = detect.trailing_reference(xs, w)
    bumps = detect.find_bumps(xs, w, options.bump_rise_fraction, options.bump_z, reference=ref)
    in_bump = np.zeros(xs.size, dtype=bool)
    bump_rows = []
    for b in bumps:
        in_bump[b.start:b.end + 1] = True
        row = anomaly("loss_bump", st, b.start, b.end, peak_step=int(st[b.peak]), loss=float(xs[b.peak]),
                      reference=b.reference, mean_ratio=b.mean_ratio, max_ratio=b.max_ratio, rule=ANOMALY_RULES["loss_bump"],
                      criterion=f"the loss stayed over {1 + options.bump_rise_fraction:g}x (and {options.bump_z:g} "
                                f"robust sigmas above) the level before it for {b.end - b.start + 1} points, then "
                                "came back")
        anomalies.append(row)
        bump_rows.append(row)
    evidence["loss_bumps"] = bump_rows
    m["loss_bump_count"] = len(bumps)
    m["loss_bump_first_step"] = int(st[bumps[0].start]) if bumps else None
    m["loss_bump_max_ratio"] = max(b.max_ratio for b in bumps) if bumps else None
    sp = detect.find_spikes(xs, w, options.spike_z, options.spike_min_rise_fraction, ratio=options.spike_ratio,
                            ratio_z=options.spike_ratio_z, reference=ref)
    rows: list[dict[str, Any]] = []
    zs: list[float] = []
    persistent = 0
    for s, e, p, z, ref, pers, rel in zip(sp.starts, sp.ends, sp.peaks, sp.scores, sp.reference, sp.persistent,
                                          sp.relative):
        if in_bump[s:e + 1].any():
            continue  # part of a sustained bump, reported as that
        value = float(xs[p])
        ratio = value / ref if ref > 0 else None
        crit = (f"{ratio:.2g}x the trailing median (>= {options.spike_ratio:g}x) and z {min(float(z), 1e9):.1f} "
                f">= {options.spike_ratio_z:g}" if rel else
                f"z {min(float(z), 1e9):.1f} > {options.spike_z:g} scaled MADs and "
                f"{(value - ref) / abs(ref) if ref else float('inf'):+.0%} > {options.spike_min_rise_fraction:.0%} "
                "above the trailing median")
        a = anomaly("loss_spike", st, int(s), int(e), peak_step=int(st[p]), loss=value, reference=float(ref),
                    ratio=ratio, z=min(float(z), 1e9), persistent=bool(pers), rule=ANOMALY_RULES["loss_spike"], criterion=crit)
        anomalies.append(a)
        rows.append(a)
        zs.append(min(float(z), 1e9))
        persistent += bool(pers)
    evidence["loss_spikes"] = rows
    m["loss_spike_count"] = len(rows)
    m["loss_spike_first_step"] = rows[0].get("step", rows[0].get("start_step")) if rows else None
    m["loss_spike_max_z"] = max(zs) if zs else None
    m["loss_spike_persistent_count"] = persistent
    tr = detect.find_divergence(xs, options.divergence_rise_fraction)
    m["divergence"] = tr.diverging
    if tr.diverging:
        m["divergence_start_step"] = int(st[min(tr.start, idx.size - 1)])
        m["divergence_rise_fraction"] = tr.rise_fraction if np.isfinite(tr.rise_fraction) else None
        anomalies.append({"kind": "divergence", "start_step": m["divergence_start_step"], "end_step": int(st[-1]),
                          "to_nan": tr.to_nan, "rise_fraction": plain_finite(tr.rise_fraction), "rule": ANOMALY_RULES["divergence"],
                          "criterion": "ends in NaN/inf" if tr.to_nan else
                          "the smoothed loss rises from its minimum in most blocks to the end"})


def _grad_norm(series, loss, options, m, anomalies, charts) -> None:
    steps = series.step
    grad = series.col("grad_norm")
    if grad is None:
        return
    present = series.present["grad_norm"]
    bad = present & ~np.isfinite(grad)
    m["grad_norm_nonfinite_count"] = int(bad.sum())
    for s, e in zip(*detect.episodes(bad)):
        anomalies.append(anomaly("nan", steps, int(s), int(e), field="grad_norm", value=str(grad[s]), rule=ANOMALY_RULES["nan"],
                                 criterion="not a finite number"))
    idx = np.flatnonzero(present)
    w = _window(idx.size, options.window)
    if w:
        sp = detect.find_spikes(grad[idx], w, options.grad_spike_z, options.grad_spike_min_ratio - 1.0)
        for s, e, p, z, ref in zip(sp.starts, sp.ends, sp.peaks, sp.scores, sp.reference):
            peak = int(idx[p])
            extra = _loss_around(loss, peak, w) if loss is not None else {}
            anomalies.append(anomaly("grad_norm_spike", steps[idx], int(s), int(e), peak_step=int(steps[peak]),
                                     grad_norm=float(grad[peak]), reference=float(ref),
                                     ratio=float(grad[peak] / ref) if ref > 0 else None, z=min(float(z), 1e9),
                                     rule=ANOMALY_RULES["grad_norm_spike"], criterion=f"z {min(float(z), 1e9):.1f} > {options.grad_spike_z:g} and "
                                     f">= {options.grad_spike_min_ratio:g}x the trailing median", **extra))
        m["grad_norm_spike_count"] = int(sp.starts.size)
        m["grad_norm_spike_first_step"] = int(steps[idx[sp.starts[0]]]) if sp.starts.size else None
    charts["grad_norm"] = grad


def _loss_around(loss: np.ndarray, at: int, w: int) -> dict[str, Any]:
    """The loss before (median of the window before), at, and after (highest in the next 5 points) a step."""
    before = loss[max(0, at - w):at]
    before = before[np.isfinite(before)]
    after = loss[at + 1:at + 6]
    after = after[np.isfinite(after)]
    out: dict[str, Any] = {}
    if before.size:
        out["loss_before"] = float(np.median(before))
    if np.isfinite(loss[at]):
        out["loss_at"] = float(loss[at])
    if after.size:
        out["loss_after_max"] = float(np.max(after))
    if before.size and after.size and out["loss_before"] != 0:
        out["loss_rise_fraction"] = float(max(after.max(), loss[at] if np.isfinite(loss[at]) else -np.inf)
                                          / out["loss_before"] - 1.0)
    return out


def _counter(series: LogSeries, name: str) -> np.ndarray | None:
    """A per-interval count of iterations (skipped, NaN) as a count can be: whole, from 0 to the steps the
    interval holds; anything else (NaN, inf, negative) is left out."""
    col = series.col(name)
    if col is None:
        return None
    at = np.flatnonzero(series.present[name])
    steps = series.step[at]
    stride = max(1, int(np.median(np.diff(steps)))) if steps.size > 1 else max(1, int(steps[0] - series.step[0]) + 1)
    covered = np.full(col.size, np.inf)
    # the steps since the counter was last logged; the first value may count from the start of training
    covered[at] = np.diff(steps, prepend=steps[0] - max(stride, int(steps[0])))
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(col), np.floor(np.clip(col, 0, np.maximum(covered, 1))), np.nan)


def _skips(series, m, anomalies, evidence, charts) -> None:
    steps = series.step
    col = _counter(series, "skipped_iterations")
    scale = series.col("loss_scale")
    rhythm = skip_rhythm(steps, col, scale, series.events,
                         series.present["skipped_iterations"] if col is not None else None)
    overflow = [e for e in series.events if e.get("kind") == "overflow"]
    m["skipped_iterations"] = int(np.nansum(col)) if col is not None else (rhythm.skips if overflow else None)
    skipped = m["skipped_iterations"]
    m["skipped_iteration_fraction"] = _skip_share(skipped, _span(series))
    m["overflow_messages"] = len(overflow) if overflow or "DeepSpeed" in series.format else None
    m["skip_pattern"] = rhythm.pattern
    m["skip_burst_count"] = rhythm.bursts if rhythm.pattern is not None else None
    m["loss_scale_min"], m["loss_scale_max"] = rhythm.scale_min, rhythm.scale_max
    m["loss_scale_final"] = rhythm.scale_final
    evidence["skip_groups"] = rhythm.groups[:100]
    # the scaler's normal rhythm (calibration, a steady trickle) is not an anomaly; with bf16 every skip is
    abnormal = series.header.get("precision") == "bf16" or rhythm.pattern in ("burst", "rising", "frequent", "collapsing")
    shown = [g for g in rhythm.groups if abnormal and (rhythm.pattern != "burst" or g["kind"] == "burst"
                                                       or series.header.get("precision") == "bf16")]
    for g in shown[:1000]:
        start = int(np.searchsorted(steps, g["start_step"]))
        end = int(np.searchsorted(steps, g["end_step"]))
        start, end = min(start, len(steps) - 1), min(end, len(steps) - 1)
        anomalies.append(anomaly("skipped_iterations", steps, start, end, count=g["skips"], group=g["kind"],
                                 **{k: v for k, v in g.items() if k.startswith("loss_scale")}, rule=ANOMALY_RULES["skipped_iterations"],
                                 criterion=f"{rhythm.pattern} pattern: {rhythm.reason}"))
    if scale is not None:
        charts["loss_scale"] = scale


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
        anomalies.append(anomaly("low_gpu_util", series.step, int(s), int(e),
                                 mean_percent=float(np.mean(util[s:e + 1])), rule=ANOMALY_RULES["low_gpu_util"],
                                 criterion=f"GPU utilisation under {options.low_gpu_util_percent:g}%"))
