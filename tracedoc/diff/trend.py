"""A series of runs, each compared with the first: ``tracedoc diff BASE RUN2 RUN3 ...``.

Each run is a ``DiffResult`` against the base (the base analysed or read once), so every number of the
trend is the two-run diff's: the step change, its attribution by category (summing to the change),
the verdict, the labels gone and new, and the base's predictions checked against that run.
``TrendResult.report()`` is the ``--format json`` document (``tracedoc/schema/trend.schema.json``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Literal

from .. import display
from ..model.record import Record, to_builtins
from .metrics import LabelChange
from .model import DiffResult
from .predictions import PredictionCheck
from .report import CategoryDelta, RunInput
from .steps import CATEGORIES

TREND_SCHEMA = "tracedoc.trend"
TREND_SCHEMA_VERSION = 1


class TrendRun(Record, kw_only=True):
    """One run of the series against the base."""

    path: str  # as given
    kind: str  # "trace" (analysed for the comparison) or "report" (a saved report)
    step_ms: float  # its median step time (ms), averaged over the rank pairs aligned with the base
    delta_ms: float  # step_ms minus the base's
    step_pct: float | None  # the change in percent of the base step; null without a base step
    verdict: str  # regression, improvement, within_noise, no_change or unknown, against the base
    led_by: list[str]  # categories moving the same way as the step, each at least 10% of the change
    attribution: list[CategoryDelta]  # the change from the base by category (summing to delta_ms)
    labels: LabelChange  # the focus pair's labels, against the base's
    predictions: list[PredictionCheck]  # the base's what-if predictions against this run's step
    warnings: list[str]  # what differs from the base beyond the change measured


class TrendReport(Record, kw_only=True):
    """A series of runs, each compared with the first."""

    schema: Literal["tracedoc.trend"] = TREND_SCHEMA  # names this document type
    schema_version: Literal[1] = TREND_SCHEMA_VERSION  # bumped on any incompatible change
    tracedoc_version: str | None = None  # the tracedoc that wrote it
    base: RunInput  # the run every other is compared with
    base_step_ms: float  # its median step time (ms)
    noise_floor_pct: float  # changes smaller than this are within noise
    categories: list[str]  # the attribution's categories, in order
    runs: list[TrendRun]  # the other runs, in the order given


@dataclass(repr=False)
class TrendResult:
    """Runs compared with the first: one ``DiffResult`` per later run."""

    diffs: list[DiffResult]

    @property
    def base_path(self) -> str:
        return self.diffs[0].before_path

    def __repr__(self) -> str:
        steps = ", ".join(f"{d.after.step_ns / 1e6:.3f}" for d in self.diffs)
        text = (f"<TrendResult {len(self.diffs) + 1} runs against {os.path.basename(self.base_path)}: step ms "
                f"{self.diffs[0].before.step_ns / 1e6:.3f} → {steps}>")
        return text if len(text) <= 300 else text[:299] + "…"

    def report(self) -> TrendReport:
        first = self.diffs[0]
        env = first.environment.get("before")
        runs = []
        for d in self.diffs:
            doc = d.report()
            runs.append(TrendRun(path=d.after_path, kind=d.after_kind, step_ms=doc.step_ms.after,
                                 delta_ms=doc.step_ms.delta, step_pct=doc.step_pct, verdict=doc.verdict,
                                 led_by=doc.led_by, attribution=doc.attribution, labels=doc.labels,
                                 predictions=doc.predictions, warnings=doc.warnings))
        return TrendReport(tracedoc_version=first.tracedoc_version,
                           base=RunInput(path=first.before_path, kind=first.before_kind, environment=env),
                           base_step_ms=first.before.step_ns / 1e6, noise_floor_pct=first.noise_pct,
                           categories=list(CATEGORIES), runs=runs)

    def to_dict(self) -> dict[str, Any]:
        return to_builtins(self.report())

    TABLES = ("runs", "predictions")

    def table(self, name: str | None = None):
        """Without a name, the names of the trend's tables; else one as a pandas DataFrame: ``runs`` (one row per run, base first: step, change, verdict and
        each category's part of the change) or ``predictions`` (each run's checks of the base's predictions)."""
        import pandas as pd

        if name is None:
            return list(self.TABLES)
        doc = self.report()
        if name == "runs":
            rows = [{"run": doc.base.path, "step_ms": doc.base_step_ms, "delta_ms": 0.0, "step_pct": 0.0,
                     "verdict": "base", **{f"{c}_ms": 0.0 for c in doc.categories}}]
            rows += [{"run": r.path, "step_ms": r.step_ms, "delta_ms": r.delta_ms, "step_pct": r.step_pct,
                      "verdict": r.verdict, **{f"{a.category}_ms": a.delta_ms for a in r.attribution}}
                     for r in doc.runs]
        elif name == "predictions":
            rows = [{"run": r.path, **to_builtins(p)} for r in doc.runs for p in r.predictions]
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
