"""One metric's entry in the metric table: ``Metric(name, unit, better, meaning)``."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

LOWER, HIGHER = "lower", "higher"  # which side of a change is better (``better``); None: neither
SCOPES = ("rank", "job", "log")
# The range a value of each unit lies in by definition (a share, a duration, a count, a rate of
# non-negative things); units not listed (names, booleans, steps, scores) are not range-checked.
UNIT_BOUNDS: dict[str, tuple[float, float]] = {
    "fraction": (0.0, 1.0),
    "percent": (0.0, 100.0),
    **dict.fromkeys(
        ("ns", "ms", "count", "bytes", "blocks", "1/ms", "1/s", "version", "GB/s", "FLOPs", "TFLOP/s", "x"),
        (0.0, math.inf),
    ),
}
NON_NUMERIC_UNITS = ("bool", "name")


@dataclass(frozen=True)
class Metric:
    """A metric: its name (with its unit in it: ``*_ns``, ``*_fraction``...), unit, which change is
    better, what it means, the range its values must lie in, and its scope.

    ``better``: ``LOWER``, ``HIGHER`` or None (the value depends on how much was profiled, is a
    property of the machine or the workload, or has no better side). ``bounds``: None takes the
    unit's (``UNIT_BOUNDS``); give it where the unit says too much. ``scope``: ``rank`` (measured on
    one trace), ``job`` (across the ranks of a directory) or ``log`` (a training log and its config).
    ``topic``: the table's section (``flops``, ``estimate``...), which the analysis producing them names.
    """

    name: str
    unit: str
    better: str | None
    meaning: str
    bounds: tuple[float, float] | None = None
    scope: str = "rank"
    topic: str = ""

    @property
    def numeric(self) -> bool:
        """A number (what a delta, a direction and a range apply to), not a name or a flag."""
        return self.unit not in NON_NUMERIC_UNITS

    @property
    def valid_range(self) -> tuple[float, float] | None:
        """The range every value must lie in (None: any value of its type)."""
        return self.bounds if self.bounds is not None else UNIT_BOUNDS.get(self.unit)

    @property
    def json_type(self) -> str:
        """The JSON type of a measured value (a metric may always be null: not measurable)."""
        return {"bool": "boolean", "name": "string", "count": "integer"}.get(self.unit, "number")

    def describe(self) -> str:
        return f"{self.name} [{self.unit}]: {self.meaning}"


def topic(scope: str, name: str, metrics: tuple[Metric, ...]) -> tuple[Metric, ...]:
    """A section of the table: its metrics with their scope and topic set."""
    assert scope in SCOPES, scope
    return tuple(replace(m, scope=scope, topic=name) for m in metrics)
