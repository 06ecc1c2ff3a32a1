"""The document of ``tracedoc diff --format json``, as typed records (``tracedoc/schema/diff.schema.json``
is generated from them).

``diff_report(d)`` reads a ``DiffResult`` into a ``DiffReport``: the job's step change and its
attribution, the focus pair's tables (cut to ``TABLE_ROWS_JSON`` rows) and, per aligned rank pair,
a compact entry. CI scripts read ``step_ms`` = ``{before, after, delta}`` and ``attribution`` = a list
of ``{category, delta_ms}`` in the breakdown's category order, whose values sum to ``step_ms.delta``.
The document sits below the result (``DiffResult.report()`` calls ``diff_report``): this module reads a
``DiffResult`` and a ``RankDiff`` by their attributes and does not import ``diff.model``.
"""

from __future__ import annotations

from typing import Any, Literal

from ..analyses.rank import Environment
from ..model.record import Record
from .metrics import LabelChange, MetricDelta
from .predictions import PredictionCheck
from .steps import CATEGORIES, StepProfile, attribution_ns
from .tables import KernelDelta, OperatorDelta

DIFF_SCHEMA = "tracedoc.diff"
DIFF_SCHEMA_VERSION = 1
TABLE_ROWS_JSON = 50
RANK_ROWS_JSON = 5  # kernels and operators per rank pair of a job


class Change(Record, kw_only=True):
    """A quantity before and after, and after - before."""

    before: float  # the first run's
    after: float  # the second run's
    delta: float  # after - before


class CategoryDelta(Record, kw_only=True):
    """A category's part of the step-time change."""

    category: str  # compute, exposed_comm, memcpy, or an idle cause
    delta_ms: float  # its part of the step-time change; the parts sum to step_ms.delta


class CategoryTimes(Record, kw_only=True):
    """A category's part of the typical step, before and after."""

    category: str  # compute, exposed_comm, memcpy, or an idle cause
    before_ms: float  # its part of the typical step before
    after_ms: float  # and after


class CommSplit(Record, kw_only=True):
    """Exposed communication split into waiting for the last rank and transfer (both runs have a job view)."""

    wait_ms: Change
    transfer_ms: Change


class Basis(Record, kw_only=True):
    """What the step time of each run is measured over."""

    before: str  # "steps" (completion intervals) or "window" (no steps: the whole window as one step)
    after: str  # the same for the second run


class StepCounts(Record, kw_only=True):
    """The steps each run's step time is the median of."""

    before: int  # steps summarised (0: the window stood for one step)
    after: int  # the same for the second run
    basis: Basis


class RunInput(Record, kw_only=True):
    """One of the runs compared: where it came from."""

    path: str  # as given
    kind: str  # "trace" (analysed for the diff) or "report" (a saved report)
    environment: Environment | None  # its focus rank's


class FocusPair(Record, kw_only=True):
    """The rank pair whose tables the report shows."""

    rank_before: int | None  # null: the rank number is unknown
    rank_after: int | None  # null: the rank number is unknown


class RankPairReport(Record, kw_only=True):
    """One aligned rank pair: its step change and attribution, and the metrics that moved."""

    rank_before: int | None  # null: the rank number is unknown
    rank_after: int | None  # null: the rank number is unknown
    step_ms: Change  # median step time (ms)
    attribution: list[CategoryDelta]  # the step change by category (summing to step_ms.delta)
    composition_ms: list[CategoryTimes]  # the typical step by category, before and after
    exposed_comm_split: CommSplit | None  # null unless both runs have a job view
    steps: StepCounts
    labels: LabelChange
    metrics: list[MetricDelta]  # those that moved
    kernels: list[KernelDelta]  # largest change in time per step first
    new_kernels: list[KernelDelta]  # only in the second run
    vanished_kernels: list[KernelDelta]  # only in the first run
    operators: list[OperatorDelta]  # CPU operators, largest change first
    kernels_complete: bool  # both reports carry every kernel name (not only their top 15)
    predictions: list[PredictionCheck] = []  # the base rank's what-if predictions against the new rank's step


class DiffReport(Record, kw_only=True):
    """Two runs compared: the step change, what it is attributed to, and the tables behind it."""

    schema: Literal["tracedoc.diff"] = DIFF_SCHEMA  # names this document type
    schema_version: Literal[1] = DIFF_SCHEMA_VERSION  # bumped on any incompatible change
    tracedoc_version: str | None = None  # the tracedoc that wrote it
    before: RunInput
    after: RunInput
    step_ms: Change  # median step time (ms), averaged over the aligned rank pairs
    step_pct: float | None  # the change in percent of the step before; null without a step before
    step_delta_interval_ms: list[float] | None  # 95% bootstrap interval of the change (one pair, 5+ steps a side)
    verdict: str  # regression, improvement, within_noise, no_change or unknown
    noise_floor_pct: float  # changes smaller than this are within noise
    led_by: list[str]  # categories moving the same way as the step, each at least 10% of the change
    attribution: list[CategoryDelta]  # the step change by category (summing to step_ms.delta)
    composition_ms: list[CategoryTimes]  # the typical step by category, before and after
    exposed_comm_split: CommSplit | None  # null unless both runs have a job view
    focus: FocusPair  # the pair with the largest step change: the one whose tables follow
    labels: LabelChange  # the focus pair's
    metrics: list[MetricDelta]  # every numeric metric of the focus pair
    kernels: list[KernelDelta]  # kernel groups, largest change in time per step first
    new_kernels: list[KernelDelta]  # only in the second run
    vanished_kernels: list[KernelDelta]  # only in the first run
    operators: list[OperatorDelta]  # CPU operators, largest change first
    ranks: list[RankPairReport]  # every aligned pair, compactly (metrics that moved, top rows)
    # the base run's what-if predictions, each with its status in the new run and the step measured there:
    # the job verdict's (against the job's step), then the focus pair's
    predictions: list[PredictionCheck] = []
    warnings: list[str]  # what differs between the runs beyond the change measured


def _step_ms(before: StepProfile, after: StepProfile) -> Change:
    return Change(before=before.step_ns / 1e6, after=after.step_ns / 1e6, delta=(after.step_ns - before.step_ns) / 1e6)


def _attribution(before: StepProfile, after: StepProfile) -> list[CategoryDelta]:
    delta = attribution_ns(before, after)
    return [CategoryDelta(category=c, delta_ms=delta[c] / 1e6) for c in CATEGORIES]


def _composition(before: StepProfile, after: StepProfile) -> list[CategoryTimes]:
    return [CategoryTimes(category=c, before_ms=before.category_ns[c] / 1e6, after_ms=after.category_ns[c] / 1e6)
            for c in CATEGORIES]


def _split(split: dict[str, tuple[int, int]] | None) -> CommSplit | None:
    if not split:
        return None
    parts = [Change(before=split["before"][i] / 1e6, after=split["after"][i] / 1e6,
                    delta=(split["after"][i] - split["before"][i]) / 1e6) for i in range(2)]
    return CommSplit(wait_ms=parts[0], transfer_ms=parts[1])


def pair_report(p: Any, rows: int = TABLE_ROWS_JSON, compact: bool = False) -> RankPairReport:
    """One ``RankDiff``'s entry; ``compact`` (one entry per rank of a job) keeps only metrics that moved."""
    return RankPairReport(
        rank_before=p.rank_before, rank_after=p.rank_after, step_ms=_step_ms(p.before, p.after),
        attribution=_attribution(p.before, p.after), composition_ms=_composition(p.before, p.after),
        exposed_comm_split=_split(p.comm_split),
        steps=StepCounts(before=p.before.steps, after=p.after.steps,
                         basis=Basis(before=p.before.basis, after=p.after.basis)),
        labels=p.labels, metrics=[m for m in p.metrics if not compact or m.change not in ("same", "unknown")],
        kernels=p.kernels[:rows], new_kernels=p.new_kernels[:rows], vanished_kernels=p.vanished_kernels[:rows],
        operators=p.operators[:rows], kernels_complete=p.kernels_complete, predictions=p.predictions)


def diff_report(d: Any) -> DiffReport:
    """The document of ``d``, a ``DiffResult``."""
    focus = d.focus_pair
    env = d.environment
    return DiffReport(
        tracedoc_version=d.tracedoc_version,
        before=RunInput(path=d.before_path, kind=d.before_kind, environment=env.get("before")),
        after=RunInput(path=d.after_path, kind=d.after_kind, environment=env.get("after")),
        step_ms=_step_ms(d.before, d.after), step_pct=d.step_pct,
        step_delta_interval_ms=list(d.step_interval_ms) if d.step_interval_ms else None, verdict=d.verdict,
        noise_floor_pct=d.noise_pct, led_by=d.led_by(), attribution=_attribution(d.before, d.after),
        composition_ms=_composition(d.before, d.after), exposed_comm_split=_split(d.comm_split),
        focus=FocusPair(rank_before=focus.rank_before, rank_after=focus.rank_after), labels=focus.labels,
        metrics=focus.metrics, kernels=focus.kernels[:TABLE_ROWS_JSON], new_kernels=focus.new_kernels[:TABLE_ROWS_JSON],
        vanished_kernels=focus.vanished_kernels[:TABLE_ROWS_JSON], operators=focus.operators[:TABLE_ROWS_JSON],
        ranks=[pair_report(p, rows=RANK_ROWS_JSON, compact=True) for p in d.pairs], warnings=list(d.warnings),
        predictions=d.predictions)
