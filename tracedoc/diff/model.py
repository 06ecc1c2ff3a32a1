"""What a diff produces: ``DiffResult`` (the job) and one ``RankDiff`` per aligned rank pair.

Both are saved records (``tracedoc.model.record``): ``tracedoc diff --format json`` is the result's own
fields, in integer nanoseconds (``tracedoc/schema/diff.schema.json`` is generated from these types), and
``tracedoc.diff.load`` reads a saved diff back into an equal value (one of schema version 1,
in ms, through a migration). Renderers format the nanoseconds as ms for people.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from .. import display
from ..model.record import Record
from .metrics import LabelChange, MetricDelta
from .predictions import PredictionCheck
from .sides import CategoryDelta, RunSide, StepSplit
from .steps import CATEGORIES, StepProfile, median_change_interval_ns
from .tables import KernelDelta, OperatorDelta, TableSizes

from .saved import CURRENT as DIFF_SCHEMA_VERSION  # the version history is there
from .saved import DIFF_SCHEMA, convert

NOISE_FLOOR_PCT = 2.0  # one capture per side cannot resolve run-to-run jitter below this
TABLE_ROWS = 50  # the focus pair's kernels and operators kept, of each kind (all, changed, new, vanished)
RANK_ROWS = 5  # the same for every other rank pair


def step_change_pct(before: StepSplit | StepProfile, after: StepSplit | StepProfile) -> float | None:
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


def _basename(path: str) -> str:
    return os.path.basename(os.path.normpath(path)) or path


class RankDiff(Record, kw_only=True):
    """One aligned pair of ranks: its step change and attribution, and its tables."""

    rank_before: int | None  # null: the rank number is unknown
    rank_after: int | None  # null: the rank number is unknown
    before: StepSplit  # the base rank's typical step
    after: StepSplit  # the new rank's
    labels: LabelChange  # the verdict labels that went, came and stayed
    metrics: list[MetricDelta]  # every numeric metric (a migrated version-1 report: those that moved, off the focus)
    # kernel groups, largest change in time per step first: the largest rows_kept of all, of the changed,
    # of the new and of the vanished ones
    kernels: list[KernelDelta]
    # CPU operators, largest change first: the largest rows_kept of all and of the changed
    operators: list[OperatorDelta]
    kernels_complete: bool  # both reports carry every kernel name (not only their top 15)
    rows_kept: int  # rows kept of each kind: 50 for the focus pair, 5 for the others
    sizes: TableSizes  # the tables' rows before the cut, and the new kernels' totals
    predictions: list[PredictionCheck] = []  # the base rank's what-if predictions against the new rank's step

    @property
    def attribution_ns(self) -> dict[str, int]:
        return {c: self.after.category_ns[c] - self.before.category_ns[c] for c in CATEGORIES}

    @property
    def step_delta_ns(self) -> int:
        return self.after.step_ns - self.before.step_ns

    @property
    def comm_split(self) -> dict[str, tuple[int, int]] | None:
        """ "before"/"after" -> (wait_ns, transfer_ns) of the exposed communication; None unless both have it."""
        b, a = self.before.comm_split, self.after.comm_split
        return {"before": b, "after": a} if b and a else None

    @property
    def new_kernels(self) -> list[KernelDelta]:
        return [k for k in self.kernels if k.status == "new"]

    @property
    def vanished_kernels(self) -> list[KernelDelta]:
        return [k for k in self.kernels if k.status == "vanished"]

    def __repr__(self) -> str:
        return (
            f"<RankDiff rank {self.rank_before} → {self.rank_after}: {self.before.step_ns / 1e6:.3f} → "
            f"{self.after.step_ns / 1e6:.3f} ms per step>"
        )

    def metric(self, name: str) -> MetricDelta | None:
        return next((m for m in self.metrics if m.name == name), None)


class DiffResult(Record, kw_only=True):
    """Two runs compared: the job's step change and its attribution, and every aligned rank pair."""

    schema: Literal["tracedoc.diff"] = DIFF_SCHEMA  # names this document type
    schema_version: Literal[2] = DIFF_SCHEMA_VERSION  # bumped on any incompatible change (tracedoc/diff/saved.py)
    tracedoc_version: str | None = None  # the tracedoc that wrote it
    before: RunSide  # the base run: where it came from, its typical step averaged over the aligned rank pairs
    after: RunSide  # the new run, the same way
    step_delta_ns: int  # after.step_ns - before.step_ns
    step_pct: float | None  # the change in percent of the step before; null without a step before
    step_delta_interval_ns: list[float] | None  # 95% bootstrap interval of the change (one pair, 5+ steps a side)
    verdict: str  # regression, improvement, within_noise, no_change or unknown
    noise_floor_pct: float  # changes smaller than this are within noise
    led_by: list[str]  # categories moving the same way as the step, each at least 10% of the change
    attribution: list[CategoryDelta]  # the step change by category, in category order (summing to step_delta_ns)
    pairs: list[RankDiff]  # every aligned rank pair; the focus pair with all its rows
    focus: int  # index in pairs of the pair with the largest step change: the one whose tables are shown
    job_predictions: list[PredictionCheck] = []  # the base job verdict's what-if predictions, against the job's step
    warnings: list[str]  # what differs between the runs beyond the change measured

    @property
    def before_path(self) -> str:
        return self.before.path

    @property
    def after_path(self) -> str:
        return self.after.path

    @property
    def before_kind(self) -> str:
        return self.before.kind

    @property
    def after_kind(self) -> str:
        return self.after.kind

    @property
    def noise_pct(self) -> float:
        return self.noise_floor_pct

    @property
    def environment(self) -> dict[str, Any]:
        """ "before"/"after" -> its focus rank's ``Environment``."""
        return {"before": self.before.environment, "after": self.after.environment}

    @property
    def predictions(self) -> list[PredictionCheck]:
        """The base run's predictions checked against the new run: the job verdict's, then the focus pair's."""
        return self.job_predictions + self.focus_pair.predictions

    @property
    def attribution_ns(self) -> dict[str, int]:
        return {a.category: a.delta_ns for a in self.attribution}

    @property
    def comm_split(self) -> dict[str, tuple[int, int]] | None:
        """Exposed communication as (wait, transfer) ns per side, averaged over the pairs that have it."""
        b, a = self.before.comm_split, self.after.comm_split
        return {"before": b, "after": a} if b and a else None

    @property
    def step_interval_ms(self) -> tuple[float, float] | None:
        """95% bootstrap interval of the step-time change in ms (single rank pair with >= 5 steps a side)."""
        iv = self.step_delta_interval_ns
        return (iv[0] / 1e6, iv[1] / 1e6) if iv else None

    @property
    def focus_pair(self) -> RankDiff:
        return self.pairs[self.focus]

    def report(self) -> "DiffResult":
        """The ``--format json`` document: the result itself (a saved record)."""
        return self

    @classmethod
    def from_dict(cls, data: Any, where: str = "diff") -> "DiffResult":
        """The value a saved diff's document describes (schema version 1 migrated); a ``TraceError`` says
        what is wrong with one this tracedoc does not read."""
        return convert(data, cls, DIFF_SCHEMA, where)

    def __repr__(self) -> str:
        pct = self.step_pct
        change = f" ({pct:+.1f}%)" if pct is not None else ""
        led = self.led_by
        lead = f", led by {', '.join(led[:3])}" if led and self.verdict in ("regression", "improvement") else ""
        ranks = f"; {len(self.pairs)} rank pairs" if len(self.pairs) > 1 else ""
        names = f"{_basename(self.before_path)} → {_basename(self.after_path)}"
        text = (
            f"<DiffResult {names}: {self.before.step_ns / 1e6:.3f} → {self.after.step_ns / 1e6:.3f} ms per step"
            f"{change}, {self.verdict}{lead}{ranks}>"
        )
        return text if len(text) <= 300 else text[:299] + "…"

    TABLES = (
        "attribution",
        "kernels",
        "new_kernels",
        "vanished_kernels",
        "operators",
        "metrics",
        "ranks",
        "predictions",
    )

    def table(self, name: str | None = None):
        """Without a name, the names of the diff's tables; else one of them as a pandas DataFrame, times in ns:
        ``attribution`` (each category's part of the step before, after and its change), the focus pair's
        ``kernels``, ``new_kernels``, ``vanished_kernels``, ``operators`` (its largest 50 rows of each kind)
        and ``metrics`` (every one), ``ranks`` (one row per aligned pair) or ``predictions`` (the base's
        what-if predictions against the step the new run measured)."""
        import pandas as pd

        from ..model.record import to_builtins

        if name is None:
            return list(self.TABLES)
        focus = self.focus_pair
        if name == "attribution":
            att = self.attribution_ns
            rows = [
                {
                    "category": c,
                    "before_ns": self.before.category_ns[c],
                    "after_ns": self.after.category_ns[c],
                    "delta_ns": att[c],
                }
                for c in att
            ]
        elif name in ("kernels", "new_kernels", "vanished_kernels", "operators", "metrics"):
            rows = to_builtins(getattr(focus, name))
        elif name == "predictions":
            rows = to_builtins(self.predictions)
        elif name == "ranks":
            rows = [
                {
                    "rank_before": p.rank_before,
                    "rank_after": p.rank_after,
                    "before_ns": p.before.step_ns,
                    "after_ns": p.after.step_ns,
                    "delta_ns": p.step_delta_ns,
                    **{f"{c}_ns": v for c, v in p.attribution_ns.items()},
                }
                for p in self.pairs
            ]
        else:
            raise KeyError(f"no diff table {name!r}; tables: {', '.join(self.TABLES)}")
        return pd.DataFrame(rows)

    def _repr_html_(self) -> str:
        """A compact card for notebooks (the full page is ``tracedoc.render.diff.render_diff_html``)."""
        return display.show(self, "diff", "card")

    def to_text(self, **options: Any) -> str:
        """The terminal summary as a string (``width=N`` columns, 100 by default)."""
        return display.show(self, "diff", "text", **options)

    def to_markdown(self, **options: Any) -> str:
        """The Markdown report (a ticket comment)."""
        return display.show(self, "diff", "md", **options)

    def to_html(self, **options: Any) -> str:
        """The self-contained HTML page with side-by-side bars."""
        return display.show(self, "diff", "html", **options)

    def to_json(self, **options: Any) -> str:
        """The ``--format json`` document as text."""
        return display.show(self, "diff", "json", **options)

    def save(self, path: str | os.PathLike, format: str | None = None) -> None:
        """Write the diff to ``path`` in the format its extension (or ``format``: text, json, md, html)
        names; JSON for any other extension."""
        display.save(self, path, "diff", format)
