"""The loss and gradient-norm checks of a log (docs/definitions.md: training logs): NaN/inf values and
Megatron's NaN-iteration counter, loss spikes and bumps, divergence, gradient-norm spikes.

``check_stability`` fills the metrics, anomalies, evidence tables, chart data and notes of
``analysis.analyze_series`` (definitions in ``tracedoc.logs.analysis``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.plain import plain_finite
from . import detect
from .detect import anomaly
from .registry import ANOMALY_RULES
from .skips import iteration_counts

_STABILITY = (
    "loss_nonfinite_count",
    "loss_nonfinite_first_step",
    "loss_spike_count",
    "loss_spike_first_step",
    "loss_spike_max_z",
    "loss_spike_persistent_count",
    "loss_bump_count",
    "loss_bump_first_step",
    "loss_bump_max_ratio",
    "divergence",
    "divergence_start_step",
    "divergence_rise_fraction",
    "grad_norm_nonfinite_count",
    "grad_norm_spike_count",
    "grad_norm_spike_first_step",
)


def _window(n: int, window: int) -> int:
    return int(max(5, min(window, n // 5))) if n >= 25 else 0


def check_stability(series, options, m, anomalies, evidence, charts, notes) -> None:
    """The loss's and the gradient norm's NaN/inf values, spikes, bumps and divergence, and Megatron's
    NaN-iteration counter, into ``m``, ``anomalies``, ``evidence``, ``charts`` and ``notes``."""
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
            anomalies.append(
                anomaly(
                    "nan",
                    steps,
                    int(s),
                    int(e),
                    field="loss",
                    value=str(loss[s]),
                    rule=ANOMALY_RULES["nan"],
                    criterion="not a finite number",
                )
            )
        m["loss_nonfinite_count"] = int(bad.sum())
        m["loss_nonfinite_first_step"] = int(steps[starts[0]]) if starts.size else None
        evidence["nan_steps"] = [
            {"step": int(steps[i]), "field": "loss", "value": str(loss[i])} for i in np.flatnonzero(bad)[:100]
        ]
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
        col = iteration_counts(series, name)
        m[name] = int(np.nansum(col)) if col is not None else None
        if col is not None:
            for i in np.flatnonzero(col > 0)[:1000]:
                anomalies.append(
                    {
                        "kind": kind,
                        "step": int(steps[i]),
                        "count": int(col[i]),
                        "field": "nan_iterations",
                        "rule": ANOMALY_RULES[kind],
                        "criterion": "Megatron counted NaN iterations",
                    }
                )


def _loss_episodes(steps, x, present, w, options, m, anomalies, evidence) -> None:
    idx = np.flatnonzero(present)
    xs, st = x[idx], steps[idx]
    ref = detect.trailing_reference(xs, w)
    bumps = detect.find_bumps(xs, w, options.bump_rise_fraction, options.bump_z, reference=ref)
    in_bump = np.zeros(xs.size, dtype=bool)
    bump_rows = []
    for b in bumps:
        in_bump[b.start : b.end + 1] = True
        row = anomaly(
            "loss_bump",
            st,
            b.start,
            b.end,
            peak_step=int(st[b.peak]),
            loss=float(xs[b.peak]),
            reference=b.reference,
            mean_ratio=b.mean_ratio,
            max_ratio=b.max_ratio,
            rule=ANOMALY_RULES["loss_bump"],
            criterion=f"the loss stayed over {1 + options.bump_rise_fraction:g}x (and {options.bump_z:g} "
            f"robust sigmas above) the level before it for {b.end - b.start + 1} points, then "
            "came back",
        )
        anomalies.append(row)
        bump_rows.append(row)
    evidence["loss_bumps"] = bump_rows
    m["loss_bump_count"] = len(bumps)
    m["loss_bump_first_step"] = int(st[bumps[0].start]) if bumps else None
    m["loss_bump_max_ratio"] = max(b.max_ratio for b in bumps) if bumps else None
    sp = detect.find_spikes(
        xs,
        w,
        options.spike_z,
        options.spike_min_rise_fraction,
        ratio=options.spike_ratio,
        ratio_z=options.spike_ratio_z,
        reference=ref,
    )
    rows: list[dict[str, Any]] = []
    zs: list[float] = []
    persistent = 0
    for s, e, p, z, ref, pers, rel in zip(
        sp.starts, sp.ends, sp.peaks, sp.scores, sp.reference, sp.persistent, sp.relative
    ):
        if in_bump[s : e + 1].any():
            continue  # part of a sustained bump, reported as that
        value = float(xs[p])
        ratio = value / ref if ref > 0 else None
        crit = (
            f"{ratio:.2g}x the trailing median (>= {options.spike_ratio:g}x) and z {min(float(z), 1e9):.1f} "
            f">= {options.spike_ratio_z:g}"
            if rel
            else f"z {min(float(z), 1e9):.1f} > {options.spike_z:g} scaled MADs and "
            f"{(value - ref) / abs(ref) if ref else float('inf'):+.0%} > {options.spike_min_rise_fraction:.0%} "
            "above the trailing median"
        )
        a = anomaly(
            "loss_spike",
            st,
            int(s),
            int(e),
            peak_step=int(st[p]),
            loss=value,
            reference=float(ref),
            ratio=ratio,
            z=min(float(z), 1e9),
            persistent=bool(pers),
            rule=ANOMALY_RULES["loss_spike"],
            criterion=crit,
        )
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
        anomalies.append(
            {
                "kind": "divergence",
                "start_step": m["divergence_start_step"],
                "end_step": int(st[-1]),
                "to_nan": tr.to_nan,
                "rise_fraction": plain_finite(tr.rise_fraction),
                "rule": ANOMALY_RULES["divergence"],
                "criterion": "ends in NaN/inf"
                if tr.to_nan
                else "the smoothed loss rises from its minimum in most blocks to the end",
            }
        )


def _grad_norm(series, loss, options, m, anomalies, charts) -> None:
    steps = series.step
    grad = series.col("grad_norm")
    if grad is None:
        return
    present = series.present["grad_norm"]
    bad = present & ~np.isfinite(grad)
    m["grad_norm_nonfinite_count"] = int(bad.sum())
    for s, e in zip(*detect.episodes(bad)):
        anomalies.append(
            anomaly(
                "nan",
                steps,
                int(s),
                int(e),
                field="grad_norm",
                value=str(grad[s]),
                rule=ANOMALY_RULES["nan"],
                criterion="not a finite number",
            )
        )
    idx = np.flatnonzero(present)
    w = _window(idx.size, options.window)
    if w:
        sp = detect.find_spikes(grad[idx], w, options.grad_spike_z, options.grad_spike_min_ratio - 1.0)
        for s, e, p, z, ref in zip(sp.starts, sp.ends, sp.peaks, sp.scores, sp.reference):
            peak = int(idx[p])
            extra = _loss_around(loss, peak, w) if loss is not None else {}
            anomalies.append(
                anomaly(
                    "grad_norm_spike",
                    steps[idx],
                    int(s),
                    int(e),
                    peak_step=int(steps[peak]),
                    grad_norm=float(grad[peak]),
                    reference=float(ref),
                    ratio=float(grad[peak] / ref) if ref > 0 else None,
                    z=min(float(z), 1e9),
                    rule=ANOMALY_RULES["grad_norm_spike"],
                    criterion=f"z {min(float(z), 1e9):.1f} > {options.grad_spike_z:g} and "
                    f">= {options.grad_spike_min_ratio:g}x the trailing median",
                    **extra,
                )
            )
        m["grad_norm_spike_count"] = int(sp.starts.size)
        m["grad_norm_spike_first_step"] = int(steps[idx[sp.starts[0]]]) if sp.starts.size else None
    charts["grad_norm"] = grad


def _loss_around(loss: np.ndarray, at: int, w: int) -> dict[str, Any]:
    """The loss before (median of the window before), at, and after (highest in the next 5 points) a step."""
    before = loss[max(0, at - w) : at]
    before = before[np.isfinite(before)]
    after = loss[at + 1 : at + 6]
    after = after[np.isfinite(after)]
    out: dict[str, Any] = {}
    if before.size:
        out["loss_before"] = float(np.median(before))
    if np.isfinite(loss[at]):
        out["loss_at"] = float(loss[at])
    if after.size:
        out["loss_after_max"] = float(np.max(after))
    if before.size and after.size and out["loss_before"] != 0:
        out["loss_rise_fraction"] = float(
            max(after.max(), loss[at] if np.isfinite(loss[at]) else -np.inf) / out["loss_before"] - 1.0
        )
    return out
