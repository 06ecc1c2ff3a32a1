"""Log analyses: a :class:`LogSeries` -> metrics (``registry.LOG_METRICS``), anomalies and chart data.

Definitions (DESIGN.md, log anomalies):

- **warm-up**: the first max(3, 1%) log points are left out of throughput and utilisation statistics.
- **NaN/inf**: a logged loss or gradient norm that is not finite; Megatron's nan-iteration counter.
- **loss spike**: modified z = 0.6745 (x - m) / MAD above ``spike_z`` against the median m and MAD of
  the trailing window, *and* x - m above ``spike_min_rise_fraction`` x |m|; contiguous points are
  one episode (a plateau is one episode, marked persistent when the loss stays up).
- **throughput dip**: after warm-up, throughput below P10 and more than ``dip_p10_margin`` under the
  median, or below ``dip_fraction`` x the trailing or the run median; in both cases also more than
  ``dip_noise_z`` robust sigmas (1.4826 MAD) under the median, so that the tail of ordinary noise is
  not a dip. Contiguous points are one episode.
- **periodic stall**: slow points that recur every k steps (see :func:`detect.find_period`).
- **time lost** of a slow point: (1/throughput - 1/median) x the steps it covers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.plain import plain_finite
from . import detect
from .series import LogSeries


@dataclass(frozen=True)
class LogOptions:
    window: int = 50  # log points in the moving average and the trailing reference
    spike_z: float = 6.0
    spike_min_rise_fraction: float = 0.05
    grad_spike_z: float = 6.0
    grad_spike_min_ratio: float = 2.0
    dip_fraction: float = 0.8
    dip_p10_margin: float = 0.05
    dip_noise_z: float = 5.0  # and more than this many robust sigmas (1.4826 MAD) under the median
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


def _anomaly(kind: str, steps: np.ndarray, start: int, end: int, **extra) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": kind}
    if start == end:
        out["step"] = int(steps[start])
    else:
        out["start_step"], out["end_step"] = int(steps[start]), int(steps[end])
    out.update({k: plain_finite(v) for k, v in extra.items()})
    return out


def analyze_series(series: LogSeries, options: LogOptions = LogOptions()) -> LogAnalysis:
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
    _throughput(series, options, warm, stride, m, anomalies, evidence, charts, notes)
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
    m["precision"] = series.header.get("precision")
    anomalies.sort(key=lambda a: (a.get("step", a.get("start_step", 0)), a["kind"]))
    evidence["anomalies"] = anomalies
    return LogAnalysis(metrics=m, anomalies=anomalies, evidence=evidence, charts=charts, notes=notes)


def _stability(series, options, m, anomalies, evidence, charts, notes) -> None:
    steps = series.step
    loss = series.col("loss")
    m["loss_logged"] = loss is not None
    for name in ("loss_nonfinite_count", "loss_nonfinite_first_step", "loss_spike_count", "loss_spike_first_step",
                 "loss_spike_max_z", "loss_spike_persistent_count", "divergence", "divergence_start_step",
                 "divergence_rise_fraction", "grad_norm_nonfinite_count", "grad_norm_spike_count",
                 "grad_norm_spike_first_step"):
        m[name] = None
    if loss is None:
        notes.append("the log has no training-loss field: no NaN, spike or divergence checks on the loss")
    else:
        present = series.present["loss"]
        bad = present & ~np.isfinite(loss)
        starts, ends = detect.episodes(bad)
        for s, e in zip(starts, ends):
            anomalies.append(_anomaly("nan", steps, int(s), int(e), field="loss"))
        m["loss_nonfinite_count"] = int(bad.sum())
        m["loss_nonfinite_first_step"] = int(steps[starts[0]]) if starts.size else None
        evidence["nan_steps"] = [{"step": int(steps[i]), "field": "loss", "value": str(loss[i])}
                                 for i in np.flatnonzero(bad)[:100]]
        x = np.where(present, loss, np.nan)
        w = _window(int(present.sum()), options.window)
        charts["loss"] = loss
        charts["loss_ma"] = detect.moving_average(x, max(1, w or options.window))
        charts["window"] = w or options.window
        rows: list[dict[str, Any]] = []
        if w:
            idx = np.flatnonzero(present)
            sp = detect.find_spikes(x[idx], w, options.spike_z, options.spike_min_rise_fraction)
            for s, e, p, z, ref, pers in zip(sp.starts, sp.ends, sp.peaks, sp.scores, sp.reference, sp.persistent):
                a = _anomaly("loss_spike", steps[idx], int(s), int(e), peak_step=int(steps[idx[p]]),
                             loss=float(x[idx[p]]), reference=float(ref), z=min(float(z), 1e9), persistent=bool(pers))
                anomalies.append(a)
                rows.append(a)
            m["loss_spike_count"] = int(sp.starts.size)
            m["loss_spike_first_step"] = int(steps[idx[sp.starts[0]]]) if sp.starts.size else None
            m["loss_spike_max_z"] = min(float(np.max(sp.scores)), 1e9) if sp.starts.size else None
            m["loss_spike_persistent_count"] = int(sp.persistent.sum())
            tr = detect.find_divergence(x[idx], options.divergence_rise_fraction)
            m["divergence"] = tr.diverging
            if tr.diverging:
                m["divergence_start_step"] = int(steps[idx[min(tr.start, idx.size - 1)]])
                m["divergence_rise_fraction"] = tr.rise_fraction if np.isfinite(tr.rise_fraction) else None
                a = {"kind": "divergence", "start_step": m["divergence_start_step"], "end_step": int(steps[idx[-1]]),
                     "to_nan": tr.to_nan}
                anomalies.append(a)
        else:
            notes.append(f"only {int(present.sum())} loss values: too few for spike and trend checks (25 needed)")
        evidence["loss_spikes"] = rows
    grad = series.col("grad_norm")
    if grad is not None:
        present = series.present["grad_norm"]
        bad = present & ~np.isfinite(grad)
        m["grad_norm_nonfinite_count"] = int(bad.sum())
        for s, e in zip(*detect.episodes(bad)):
            anomalies.append(_anomaly("nan", steps, int(s), int(e), field="grad_norm"))
        idx = np.flatnonzero(present)
        w = _window(idx.size, options.window)
        if w:
            sp = detect.find_spikes(grad[idx], w, options.grad_spike_z, options.grad_spike_min_ratio - 1.0)
            for s, e, p, z in zip(sp.starts, sp.ends, sp.peaks, sp.scores):
                anomalies.append(_anomaly("grad_norm_spike", steps[idx], int(s), int(e), peak_step=int(steps[idx[p]]),
                                          grad_norm=float(grad[idx[p]]), z=min(float(z), 1e9)))
            m["grad_norm_spike_count"] = int(sp.starts.size)
            m["grad_norm_spike_first_step"] = int(steps[idx[sp.starts[0]]]) if sp.starts.size else None
        charts["grad_norm"] = grad
    for name, kind in (("nan_iterations", "nan"), ("skipped_iterations", "skipped_iterations")):
        col = series.col(name)
        m[name] = int(np.nansum(col)) if col is not None else None
        if col is not None:
            for i in np.flatnonzero(col > 0)[:1000]:
                anomalies.append({"kind": kind, "step": int(steps[i]), "count": int(col[i]),
                                  **({"field": "nan_iterations"} if kind == "nan" else {})})
    span = int(steps[-1] - steps[0]) + 1 if len(series) else 0
    skipped = m["skipped_iterations"]
    m["skipped_iteration_fraction"] = skipped / span if skipped is not None and span else None
    m["overflow_messages"] = sum(1 for e in series.events if e.get("kind") == "overflow") if series.format == "DeepSpeed" else None


def _throughput(series, options, warm, stride, m, anomalies, evidence, charts, notes) -> None:
    steps = series.step
    tp = series.col("throughput")
    unit = series.units.get("throughput")
    st = series.col("step_time_s")
    if tp is None and st is not None:
        with np.errstate(divide="ignore", invalid="ignore"):
            tp = np.where(series.present["step_time_s"] & (st > 0), 1.0 / st, np.nan)
        unit = "steps/s"
    names = ("throughput_p10", "throughput_p50", "throughput_p90", "throughput_dip_count", "throughput_dip_first_step",
             "throughput_dip_lost_fraction", "periodic_stall_period_steps", "periodic_stall_count",
             "periodic_stall_first_step", "periodic_stall_lost_fraction", "step_time_p50_s")
    m.update(dict.fromkeys(names))
    m["throughput_logged"] = tp is not None
    m["throughput_unit"] = unit if tp is not None else None
    if st is not None and np.isfinite(st).any():
        m["step_time_p50_s"] = float(np.nanmedian(np.where(np.isfinite(st), st, np.nan)))
    if tp is None:
        notes.append("the log has no throughput or step-time field: throughput dips and stalls are not assessed "
                     "(log tokens_per_sec, samples_per_sec or step_time_s to get them)")
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
    sigma = detect.MAD_TO_SIGMA * float(np.median(np.abs(vals - p50)))
    with np.errstate(invalid="ignore"):
        dip = steady & (tp < p50 - options.dip_noise_z * sigma) & (((tp < p10) & (tp < (1 - options.dip_p10_margin) * p50))
                        | (tp < options.dip_fraction * med) | (tp < options.dip_fraction * p50))
        lost = np.where(dip, np.maximum(1.0 / tp - 1.0 / p50, 0.0) * stride, 0.0)
    total = float(np.sum(np.where(steady, stride / np.where(ok, tp, np.inf), 0.0))) or 1.0
    slow_idx = np.flatnonzero(dip)
    period = detect.find_period(steps[slow_idx], slow_idx, steps[steady])
    on_period = np.zeros(tp.size, dtype=bool)
    if period is not None:
        on_period[period.hits] = True
    starts, ends = detect.episodes(dip)
    dips, stalls = [], []
    for s, e in zip(starts, ends):
        i_min = s + int(np.argmin(tp[s:e + 1]))
        row = _anomaly("periodic_stall" if on_period[s] else "throughput_dip", steps, int(s), int(e),
                       min_throughput=float(tp[i_min]), median_throughput=p50,
                       lost_fraction=float(lost[s:e + 1].sum() / total))
        (stalls if on_period[s] else dips).append(row)
        anomalies.append(row)
    stall_mask = np.zeros(tp.size, dtype=bool)
    for s, e in zip(starts, ends):
        if on_period[s]:
            stall_mask[s:e + 1] = True
    m["throughput_dip_count"] = len(dips)
    m["throughput_dip_first_step"] = (dips[0].get("step", dips[0].get("start_step"))) if dips else None
    m["throughput_dip_lost_fraction"] = float(lost[dip & ~stall_mask].sum() / total)
    if period is not None:
        m["periodic_stall_period_steps"] = period.period
        m["periodic_stall_count"] = int(period.hits.size)
        m["periodic_stall_first_step"] = int(steps[period.hits[0]])
        m["periodic_stall_lost_fraction"] = float(lost[stall_mask].sum() / total)
    evidence["throughput_dips"] = dips[:100]
    evidence["periodic_stalls"] = ([{"period_steps": period.period, "phase": period.phase, "slow_steps": len(stalls),
                                     "first_steps": [int(steps[i]) for i in period.hits[:10]]}] if period else [])
    charts.update(throughput=tp, throughput_unit=unit, throughput_p10=p10, throughput_p50=p50, dip_mask=dip)


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
        anomalies.append(_anomaly("low_gpu_util", series.step, int(s), int(e),
                                  mean_percent=float(np.mean(util[s:e + 1]))))
