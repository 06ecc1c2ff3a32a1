"""What a diff produces: ``DiffResult`` (the job) and one ``RankDiff`` per aligned rank pair.

``report()`` is its ``tracedoc diff --format json`` document, a typed ``diff.report.DiffReport``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from .. import display
from .metrics import LabelChange, MetricDelta
from .predictions import PredictionCheck
from .steps import StepProfile, attribution_ns, median_change_interval_ns
from .tables import KernelDelta, OperatorDelta

NOISE_FLOOR_PCT = 2.0  # one capture per side cannot resolve run-to-run jitter below this


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


def _basename(path: str) -> str:
    import os

    return os.path.basename(os.path.normpath(path)) or path


@dataclass(repr=False)
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
    predictions: list[PredictionCheck] = field(default_factory=list)  # the base's what-ifs against the new step

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

    def __repr__(self) -> str:
        return (f"<RankDiff rank {self.rank_before} → {self.rank_after}: {self.before.step_ns / 1e6:.3f} → "
                f"{self.after.step_ns / 1e6:.3f} ms per step>")

    def metric(self, name: str) -> MetricDelta | None:
        return next((m for m in self.metrics if m.name == name), None)


@dataclass(repr=False)
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
    job_predictions: list[PredictionCheck] = field(default_factory=list)  # the base job verdict's, vs the job step

    @property
    def predictions(self) -> list[PredictionCheck]:
        """The base run's predictions checked against the new run: the job verdict's, then the focus pair's."""
        return self.job_predictions + self.focus_pair.predictions

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

    def __repr__(self) -> str:
        pct = self.step_pct
        change = f" ({pct:+.1f}%)" if pct is not None else ""
        led = self.led_by()
        lead = f", led by {', '.join(led[:3])}" if led and self.verdict in ("regression", "improvement") else ""
        ranks = f"; {len(self.pairs)} rank pairs" if len(self.pairs) > 1 else ""
        names = f"{_basename(self.before_path)} → {_basename(self.after_path)}"
        text = (f"<DiffResult {names}: {self.before.step_ns / 1e6:.3f} → {self.after.step_ns / 1e6:.3f} ms per step"
                f"{change}, {self.verdict}{lead}{ranks}>")
        return text if len(text) <= 300 else text[:299] + "…"

    TABLES = ("attribution", "kernels", "new_kernels", "vanished_kernels", "operators", "metrics", "ranks",
              "predictions")

    def table(self, name: str | None = None):
        """Without a name, the names of the diff's tables; else one of them as a pandas DataFrame: ``attribution`` (each category's part of the step
        before, after and its change), the focus pair's ``kernels``, ``new_kernels``, ``vanished_kernels``,
        ``operators`` and ``metrics`` (every row, uncut), ``ranks`` (one row per aligned pair) or ``predictions``
        (the base's what-if predictions against the step the new run measured)."""
        import pandas as pd

        from ..model.record import to_builtins

        if name is None:
            return list(self.TABLES)
        focus = self.focus_pair
        if name == "attribution":
            att = self.attribution_ns
            rows = [{"category": c, "before_ms": self.before.category_ns[c] / 1e6,
                     "after_ms": self.after.category_ns[c] / 1e6, "delta_ms": att[c] / 1e6} for c in att]
        elif name in ("kernels", "new_kernels", "vanished_kernels", "operators", "metrics"):
            rows = to_builtins(getattr(focus, name))
        elif name == "predictions":
            rows = to_builtins(self.predictions)
        elif name == "ranks":
            rows = [{"rank_before": p.rank_before, "rank_after": p.rank_after, "before_ms": p.before.step_ns / 1e6,
                     "after_ms": p.after.step_ns / 1e6, "delta_ms": p.step_delta_ns / 1e6,
                     **{f"{c}_ms": v / 1e6 for c, v in p.attribution_ns.items()}} for p in self.pairs]
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

    def report(self):
        """The ``--format json`` document (``diff.report.DiffReport``)."""
        from .report import diff_report

        return diff_report(self)

    def to_dict(self) -> dict[str, Any]:
        return self.report().to_dict()
