"""What a diff produces: ``DiffResult`` (the job) and one ``RankDiff`` per aligned rank pair.

``report()`` is its ``tracedoc diff --format json`` document, a typed ``diff.report.DiffReport``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .metrics import LabelChange, MetricDelta
from .steps import StepProfile, attribution_ns, median_change_interval_ns
from .tables import KernelDelta, OperatorDelta

DIFF_SCHEMA = "tracedoc.diff"
DIFF_SCHEMA_VERSION = 1
NOISE_FLOOR_PCT = 2.0  # one capture per side cannot resolve run-to-run jitter below this
TABLE_ROWS_JSON = 50


def step_change_pct(before: StepProfile, after: StepProfile) -> float | None:
    return (after.step_ns - before.step_ns) / before.step_ns * 100.0 if before.step_ns > 0 else None


def verdict_of(before: StepProfile, after: StepProfile, noise_pct: float = NOISE_FLOOR_PCT) -> str:
    """``regression``, ``improvement``, ``within_noise`` (|change| below the noise floor, or, with
    enough steps on both sides, a 95% interval of the change that includes zero), ``no_change``
    (identical step time) or ``unknown`` (no step time on the base side)."""
    if after.step_ns == before.step_ns:
        return "no_change"
    pct = step_change_pct(before, after)
    if pct is None:
        return "unknown"
    interval = median_change_interval_ns(before, after)
    if abs(pct) < noise_pct or (interval is not None and interval[0] <= 0 <= interval[1]):
        return "within_noise"
    return "regression" if pct > 0 else "improvement"


@dataclass
class RankDiff:
    """One aligned pair of ranks."""

    rank_before: int | None
    rank_after: int | None
    before: StepProfile
    after: StepProfile
    kernels: list[KernelDelta]
    operators: list[OperatorDelta]
    metrics: list[MetricDelta]
    labels: LabelChange
    kernels_complete: bool = True  # both reports carry every kernel name (not only the top 15)
    comm_split: dict[str, tuple[int, int]] | None = None  # "before"/"after" -> (wait_ns, transfer_ns) of exposed comm

    @property
    def attribution_ns(self) -> dict[str, int]:
        return attribution_ns(self.before, self.after)

    @property
    def step_delta_ns(self) -> int:
        return self.after.step_ns - self.before.step_ns

    @property
    def new_kernels(self) -> list[KernelDelta]:
        return [k for k in self.kernels if k.status == "new"]

    @property
    def vanished_kernels(self) -> list[KernelDelta]:
        return [k for k in self.kernels if k.status == "vanished"]

    def metric(self, name: str) -> MetricDelta | None:
        return next((m for m in self.metrics if m.name == name), None)


@dataclass
class DiffResult:
    """Two runs compared: the job's step change and its attribution, and every aligned rank pair."""

    before_path: str
    after_path: str
    before_kind: str  # "trace" or "report"
    after_kind: str
    before: StepProfile  # averaged over the aligned ranks
    after: StepProfile
    pairs: list[RankDiff]
    focus: int  # index of the pair with the largest step change: the one whose tables are shown
    warnings: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)  # "before"/"after" -> its focus rank's Environment
    noise_pct: float = NOISE_FLOOR_PCT
    tracedoc_version: str | None = None  # filled in by tracedoc.api.diff

    @property
    def step_delta_ns(self) -> int:
        return self.after.step_ns - self.before.step_ns

    @property
    def step_pct(self) -> float | None:
        return step_change_pct(self.before, self.after)

    @property
    def verdict(self) -> str:
        return verdict_of(self.before, self.after, self.noise_pct)

    @property
    def attribution_ns(self) -> dict[str, int]:
        return attribution_ns(self.before, self.after)

    @property
    def comm_split(self) -> dict[str, tuple[int, int]] | None:
        """Exposed communication as (wait, transfer) ns per side, averaged over the pairs that have it."""
        have = [p.comm_split for p in self.pairs if p.comm_split]
        if not have:
            return None
        return {side: (round(sum(h[side][0] for h in have) / len(have)), round(sum(h[side][1] for h in have) / len(have)))
                for side in ("before", "after")}

    @property
    def step_interval_ms(self) -> tuple[float, float] | None:
        """95% bootstrap interval of the step-time change (single rank pair with >= 5 steps a side)."""
        if len(self.pairs) != 1:
            return None
        iv = median_change_interval_ns(self.before, self.after)
        return (iv[0] / 1e6, iv[1] / 1e6) if iv is not None else None

    @property
    def focus_pair(self) -> RankDiff:
        return self.pairs[self.focus]

    def led_by(self, share: float = 0.1) -> list[str]:
        """Categories moving the same way as the step, each at least ``share`` of the change, largest first."""
        delta = self.step_delta_ns
        if delta == 0:
            return []
        parts = [(c, v) for c, v in self.attribution_ns.items() if v * delta > 0 and abs(v) >= share * abs(delta)]
        return [c for c, _ in sorted(parts, key=lambda cv: -abs(cv[1]))]

    def report(self):
        """The ``--format json`` document (``diff.report.DiffReport``)."""
        from .report import diff_report

        return diff_report(self)

    def to_dict(self) -> dict[str, Any]:
        return self.report().to_dict()
