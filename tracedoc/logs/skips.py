"""Skipped steps: the log's per-interval iteration counters read as counts, and the skip metrics and
anomalies of a log; ``scaler.skip_rhythm`` tells the loss scaler's normal rhythm from the patterns
that are not (docs/definitions.md: training logs).
"""

from __future__ import annotations

import numpy as np

from .detect import anomaly
from .registry import ANOMALY_RULES
from .scaler import skip_rhythm
from .series import LogSeries


def iteration_counts(series: LogSeries, name: str) -> np.ndarray | None:
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


def check_skips(series, m, anomalies, evidence, charts) -> None:
    """The skipped steps, their pattern and the loss scale into ``m``, ``evidence`` and ``charts``; the
    skips the scaler's normal rhythm does not explain into ``anomalies``."""
    steps = series.step
    col = iteration_counts(series, "skipped_iterations")
    scale = series.col("loss_scale")
    rhythm = skip_rhythm(
        steps, col, scale, series.events, series.present["skipped_iterations"] if col is not None else None
    )
    overflow = [e for e in series.events if e.get("kind") == "overflow"]
    m["skipped_iterations"] = int(np.nansum(col)) if col is not None else (rhythm.skips if overflow else None)
    skipped = m["skipped_iterations"]
    m["skipped_iteration_fraction"] = skip_share(skipped, steps_spanned(series))
    m["overflow_messages"] = len(overflow) if overflow or "DeepSpeed" in series.format else None
    m["skip_pattern"] = rhythm.pattern
    m["skip_burst_count"] = rhythm.bursts if rhythm.pattern is not None else None
    m["loss_scale_min"], m["loss_scale_max"] = rhythm.scale_min, rhythm.scale_max
    m["loss_scale_final"] = rhythm.scale_final
    evidence["skip_groups"] = rhythm.groups[:100]
    # the scaler's normal rhythm (calibration, a steady trickle) is not an anomaly; with bf16 every skip is
    abnormal = series.header.get("precision") == "bf16" or rhythm.pattern in (
        "burst",
        "rising",
        "frequent",
        "collapsing",
    )
    shown = [
        g
        for g in rhythm.groups
        if abnormal and (rhythm.pattern != "burst" or g["kind"] == "burst" or series.header.get("precision") == "bf16")
    ]
    for g in shown[:1000]:
        start = int(np.searchsorted(steps, g["start_step"]))
        end = int(np.searchsorted(steps, g["end_step"]))
        start, end = min(start, len(steps) - 1), min(end, len(steps) - 1)
        anomalies.append(
            anomaly(
                "skipped_iterations",
                steps,
                start,
                end,
                count=g["skips"],
                group=g["kind"],
                **{k: v for k, v in g.items() if k.startswith("loss_scale")},
                rule=ANOMALY_RULES["skipped_iterations"],
                criterion=f"{rhythm.pattern} pattern: {rhythm.reason}",
            )
        )
    if scale is not None:
        charts["loss_scale"] = scale


def skip_share(skipped: int | None, span: int) -> float | None:
    """Skipped steps / steps spanned; at most 1 (more overflow messages than logged steps is a log cut
    short or mangled, not more skips than steps)."""
    return min(1.0, skipped / span) if skipped is not None and span else None


def steps_spanned(series: LogSeries) -> int:
    return int(series.step[-1] - series.step[0]) + 1 if len(series) else 0
