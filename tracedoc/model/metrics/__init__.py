"""The metric table: every metric tracedoc reports, once, with its unit, meaning, better side, range and scope.

Everything that lists metrics reads it: the analysis registry (which analysis produces each rank
metric), the rules engine (the names a rule may read, and their types), the checks run on every
result (each value inside its range), the diff (which change is better), the job view, the FLOPs
and estimate analyses (their ``topic``) and the JSON schema (generated from it). Adding a metric is
one entry here plus the analysis that computes it.

A value of ``None`` means "not measurable on this trace" (overlap without communication, a median
without kernels), never zero. Fractions are of the analysis window unless the meaning says otherwise.
"""

from __future__ import annotations

from .job import JOB_METRICS
from .log import LOG_METRICS
from .metric import HIGHER, LOWER, NON_NUMERIC_UNITS, SCOPES, UNIT_BOUNDS, Metric
from .rank import RANK_METRICS

TABLE: tuple[Metric, ...] = RANK_METRICS + JOB_METRICS + LOG_METRICS
BY_NAME: dict[str, Metric] = {m.name: m for m in TABLE}
# What a rank's result holds and a trace rule reads: its own metrics and the job view's (None for one trace).
TRACE_METRICS: dict[str, Metric] = {m.name: m for m in TABLE if m.scope in ("rank", "job")}
# What a training log's result holds and a ``scope = "log"`` rule reads.
LOG_METRIC_TABLE: dict[str, Metric] = {m.name: m for m in LOG_METRICS}

__all__ = [
    "BY_NAME",
    "HIGHER",
    "LOG_METRIC_TABLE",
    "LOWER",
    "NON_NUMERIC_UNITS",
    "SCOPES",
    "TABLE",
    "TRACE_METRICS",
    "UNIT_BOUNDS",
    "Metric",
    "metric_names",
    "valid_range",
]


def metric_names(scope: str | None = None, topic: str | None = None) -> tuple[str, ...]:
    """The names of a scope's (and a topic's) metrics, in table order."""
    return tuple(m.name for m in TABLE if (scope is None or m.scope == scope) and (topic is None or m.topic == topic))


def valid_range(name: str) -> tuple[float, float] | None:
    """The range a metric's values must lie in; None for a name outside the table or a unit without one."""
    m = BY_NAME.get(name)
    return m.valid_range if m is not None else None


def _check_table() -> None:
    seen: set[str] = set()
    for m in TABLE:
        if m.name in seen:
            raise AssertionError(f"metric {m.name!r} is in the metric table twice")
        seen.add(m.name)
        if m.better not in (None, LOWER, HIGHER) or (m.better is not None and not m.numeric):
            raise AssertionError(f"metric {m.name!r}: better must be {LOWER!r}, {HIGHER!r} or None (numbers only)")


_check_table()
