"""Metric deltas with their direction, and label changes.

Whether a lower or a higher value of a metric is better, or neither, is the metric table's
``better`` (``tracedoc.model.metrics``); ``DIRECTIONS`` reads it for the numeric metrics.
"""

from __future__ import annotations

import math
from typing import Any

from ..analyses.core.rank import RankResult
from ..model.metrics import LOWER, TRACE_METRICS as METRICS
from ..model.record import Record

# For every numeric metric, which change is better ("lower", "higher" or None), from the metric table.
DIRECTIONS: dict[str, str | None] = {name: m.better for name, m in METRICS.items() if m.numeric}

# Changes smaller than these are shown as unchanged: 0.5 percentage points of a fraction, 2% of others.
FRACTION_TOLERANCE = 0.005
RELATIVE_TOLERANCE = 0.02


def numeric_metrics() -> list[str]:
    """Metrics whose values are numbers (the ones a delta and a direction apply to)."""
    return list(DIRECTIONS)


class MetricDelta(Record, kw_only=True):
    """One metric of both runs: its values, its change, and whether that is better."""

    name: str  # as in the metric table
    unit: str  # the metric table's
    before: float | None  # null: not measured
    after: float | None  # null: not measured
    direction: str | None  # "lower" or "higher" is better; None: neither
    change: str  # "better", "worse", "changed" (no better side), "same", "unknown"
    delta: float | None = None  # after - before; None when either is unknown

    def __post_init__(self) -> None:
        self.delta = None if self.before is None or self.after is None else self.after - self.before


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        return None
    return float(v)


def _significant(unit: str, before: float, after: float) -> bool:
    if unit == "fraction":
        return abs(after - before) >= FRACTION_TOLERANCE
    scale = max(abs(before), abs(after))
    return scale > 0 and abs(after - before) >= RELATIVE_TOLERANCE * scale


def metric_deltas(before: dict[str, Any], after: dict[str, Any]) -> list[MetricDelta]:
    out = []
    for name in numeric_metrics():
        unit = METRICS[name].unit
        b, a = _number(before.get(name)), _number(after.get(name))
        direction = DIRECTIONS.get(name)
        if b is None or a is None:
            change = "same" if b is None and a is None else "unknown"
        elif not _significant(unit, b, a):
            change = "same"
        elif direction is None:
            change = "changed"
        else:
            change = "better" if (a < b) == (direction == LOWER) else "worse"
        out.append(MetricDelta(name=name, unit=unit, before=b, after=a, direction=direction, change=change))
    return out


class LabelChange(Record, kw_only=True):
    """The verdict labels that went, came and stayed."""

    gone: list[str]  # labels of the first run only
    new: list[str]  # labels of the second run only
    kept: list[str]  # labels of both
    before_withheld: bool = False  # the verdict was withheld before
    after_withheld: bool = False  # ... after


def label_change(before_rank: RankResult, after_rank: RankResult) -> LabelChange:
    vb, va = before_rank.verdict, after_rank.verdict
    lb, la = (list(vb.labels) if vb else []), (list(va.labels) if va else [])
    return LabelChange(
        gone=[x for x in lb if x not in la],
        new=[x for x in la if x not in lb],
        kept=[x for x in lb if x in la],
        before_withheld=bool(vb and vb.withheld),
        after_withheld=bool(va and va.withheld),
    )
