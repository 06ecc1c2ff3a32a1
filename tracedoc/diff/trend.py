"""A series of runs, each compared with the first: ``tracedoc diff BASE RUN2 RUN3 ...``.

Each run is a ``DiffResult`` against the base (the base analysed or read once), so every number of the
trend is the two-run diff's: the step change, its attribution by category (summing to the change),
the verdict, the labels gone and new, and the base's predictions checked against that run.
``TrendResult`` is a saved record in integer nanoseconds: ``--format json`` is its own fields
(``tracedoc/schema/trend.schema.json``), and ``tracedoc.diff.load`` reads one back.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from .. import display
from ..analyses.core.rank import Environment
from ..model.record import Record, to_builtins
from .metrics import LabelChange
from .model import DiffResult
from .predictions import PredictionCheck
from .sides import CategoryDelta
from .steps import CATEGORIES

from .saved import CURRENT as TREND_SCHEMA_VERSION  # the version history is there
from .saved import TREND_SCHEMA, convert


class TrendRun(Record, kw_only=True):
    """One run of the series against the base."""

    path: str  # as given
    kind: str  # "trace" (analysed for the comparison) or "report" (a saved report)
    step_ns: int  # its median step time, averaged over the rank pairs aligned with the base
    # its typical step by category (summing to step_ns); null in a trend migrated from version 1
    category_ns: dict[str, int] | None
    delta_ns: int  # step_ns minus the base's
    step_pct: float | None  # the change in percent of the base step; null without a base step
    verdict: str  # regression, improvement, within_noise, no_change or unknown, against the base
    led_by: list[str]  # categories moving the same way as the step, each at least 10% of the change
    attribution: list[CategoryDelta]  # the change from the base by category (summing to delta_ns)
    labels: LabelChange  # the focus pair's labels, against the base's
    predictions: list[PredictionCheck]  # the base's what-if predictions against this run's step
    warnings: list[str]  # what differs from the base beyond the change measured


class TrendBase(Record, kw_only=True):
    """The run every other is compared with."""

    path: str  # as given
    kind: str  # "trace" or "report"
    environment: Environment | None  # its focus rank's; null in a trend migrated from version 1
    step_ns: int  # its median step time
    category_ns: dict[str, int] | None  # its typical step by category; null in a trend migrated from version 1


class TrendResult(Record, dict=True, kw_only=True):
    """Runs compared with the first. Not saved: ``diffs``, the whole ``DiffResult`` of each later run that
    a fresh comparison holds (the command line's gate reads them)."""

    schema: Literal["tracedoc.trend"] = TREND_SCHEMA  # names this document type
    schema_version: Literal[2] = TREND_SCHEMA_VERSION  # bumped on any incompatible change
    tracedoc_version: str | None = None  # the tracedoc that wrote it
    base: TrendBase  # the run every other is compared with
    noise_floor_pct: float  # changes smaller than this are within noise
    categories: list[str]  # the attribution's categories, in order
    runs: list[TrendRun]  # the other runs, in the order given

    @classmethod
    def of(cls, diffs: list[DiffResult]) -> "TrendResult":
        """The trend of the later runs' diffs against the same base; it keeps ``diffs``."""
        first = diffs[0]
        runs = [
            TrendRun(
                path=d.after.path,
                kind=d.after.kind,
                step_ns=d.after.step_ns,
                category_ns=dict(d.after.category_ns),
                delta_ns=d.step_delta_ns,
                step_pct=d.step_pct,
                verdict=d.verdict,
                led_by=list(d.led_by),
                attribution=list(d.attribution),
                labels=d.focus_pair.labels,
                predictions=d.predictions,
                warnings=list(d.warnings),
            )
            for d in diffs
        ]
        b = first.before
        out = cls(
            tracedoc_version=first.tracedoc_version,
            base=TrendBase(
                path=b.path, kind=b.kind, environment=b.environment, step_ns=b.step_ns, category_ns=dict(b.category_ns)
            ),
            noise_floor_pct=first.noise_floor_pct,
            categories=list(CATEGORIES),
            runs=runs,
        )
        out.diffs = diffs
        return out

    @property
    def base_path(self) -> str:
        return self.base.path

    def report(self) -> "TrendResult":
        """The ``--format json`` document: the result itself (a saved record)."""
        return self

    @classmethod
    def from_dict(cls, data: Any, where: str = "trend") -> "TrendResult":
        """The value a saved trend's document describes (schema version 1 migrated)."""
        return convert(data, cls, TREND_SCHEMA, where)

    def __repr__(self) -> str:
        steps = ", ".join(f"{r.step_ns / 1e6:.3f}" for r in self.runs)
        text = (
            f"<TrendResult {len(self.runs) + 1} runs against {os.path.basename(self.base_path)}: step ms "
            f"{self.base.step_ns / 1e6:.3f} → {steps}>"
        )
        return text if len(text) <= 300 else text[:299] + "…"

    TABLES = ("runs", "predictions")

    def table(self, name: str | None = None):
        """Without a name, the names of the trend's tables; else one as a pandas DataFrame: ``runs`` (one row per
        run, base first: step, change, verdict and each category's part of the change) or ``predictions`` (each
        run's checks of the base's predictions)."""
        import pandas as pd

        if name is None:
            return list(self.TABLES)
        if name == "runs":
            rows = [
                {
                    "run": self.base.path,
                    "step_ns": self.base.step_ns,
                    "delta_ns": 0,
                    "step_pct": 0.0,
                    "verdict": "base",
                    **{f"{c}_ns": 0 for c in self.categories},
                }
            ]
            rows += [
                {
                    "run": r.path,
                    "step_ns": r.step_ns,
                    "delta_ns": r.delta_ns,
                    "step_pct": r.step_pct,
                    "verdict": r.verdict,
                    **{f"{a.category}_ns": a.delta_ns for a in r.attribution},
                }
                for r in self.runs
            ]
        elif name == "predictions":
            rows = [{"run": r.path, **to_builtins(p)} for r in self.runs for p in r.predictions]
        else:
            raise KeyError(f"no trend table {name!r}; tables: runs, predictions")
        return pd.DataFrame(rows)

    def _repr_html_(self) -> str:
        """A compact card for notebooks: the chart of step time per run and each run's verdict."""
        return display.show(self, "trend", "card")

    def to_text(self, **options: Any) -> str:
        """The trend table as text (``width=N`` columns, 100 by default)."""
        return display.show(self, "trend", "text", **options)

    def to_markdown(self, **options: Any) -> str:
        """The trend as Markdown (a ticket comment)."""
        return display.show(self, "trend", "md", **options)

    def to_html(self, **options: Any) -> str:
        """The self-contained HTML page with the chart of step time per run."""
        return display.show(self, "trend", "html", **options)

    def to_json(self, **options: Any) -> str:
        """Every run's comparison with the first, as the ``--format json`` document."""
        return display.show(self, "trend", "json", **options)

    def save(self, path: str | os.PathLike, format: str | None = None) -> None:
        """Write the trend to ``path`` in the format its extension (or ``format``) names; JSON otherwise."""
        display.save(self, path, "trend", format)
