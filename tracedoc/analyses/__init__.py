"""Analyses: pure functions from a ``Trace`` to metrics and evidence tables.

``read_rank`` runs them for one rank and returns a ``RankRead``: the rank's ``RankResult`` (a flat
``metrics`` dict whose keys are the metric table's rank and job scopes, evidence tables for reports
and rules, per-step and per-device rows, the window used; no verdict yet), the compact tables the
job view joins, and, for the trace overlay, the idle intervals and critical paths.
``analyze_trace`` returns the ``RankResult`` alone.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ..model.trace import Trace
from .critical_path import PathOverlay
from .comm.instances import RankTables, gpu_figures
from .core.pipeline import run_analyses
from .core.rank import Environment, RankResult, environment
from .core.registry import EVIDENCE, METRICS

__all__ = ["Environment", "RankOverlay", "RankRead", "RankResult", "analyze_trace", "environment", "read_rank"]

# The values a rank's result carries besides its metrics and evidence tables.
RANK_VALUES = ("window", "per_device", "warnings", "timeline", "critical_path", "critical_path_overlay", "idle_sets")


@dataclass
class RankOverlay:
    """What the trace overlay (``--perfetto``) draws for a fresh analysis; not saved with a report."""

    idle_intervals: dict[str, Any] = field(default_factory=dict)  # idle cause -> interval set
    critical_path: PathOverlay = field(default_factory=PathOverlay)


class RankRead(NamedTuple):
    """One rank as read: its result (no verdict yet), the job view's tables (None unless asked for),
    the file's SHA-256 where the reader computed it, and the overlay (None once sent between processes)."""

    result: RankResult
    tables: RankTables | None
    sha256: str | None
    overlay: RankOverlay | None


def read_rank(
    trace: Trace,
    *,
    job: bool = False,
    given: Mapping[str, Any] | None = None,
    workers: int | None = None,
    metrics: Iterable[str] | None = None,
    evidence: Iterable[str] | None = None,
) -> RankRead:
    """Run the analyses of one rank: all of them by default, or those the named metrics and evidence
    tables (and the result's window, devices, warnings and timeline) need; metrics no analysis that ran
    produces are None. ``job``: also the compact tables with their lead-in, for the job view (else the
    calls alone, which give the rank's top collective). ``given``: stage inputs (``registry.GIVEN``),
    such as the ``estimate_request``. ``workers=1`` keeps every analysis in this process."""
    tables = "rank_tables" if job else "collective_calls"
    out = run_analyses(trace, metrics, evidence, values=RANK_VALUES + (tables,), workers=workers, given=given)
    result = RankResult(
        source=trace.source,
        rank=trace.meta.rank,
        window=out.values["window"],
        metrics={k: out.metrics.get(k) for k in METRICS},
        per_step=out.evidence.get("per_step") or [],
        per_device=out.values["per_device"],
        evidence={k: out.evidence[k] for k in EVIDENCE if k in out.evidence},
        warnings=[*out.values["warnings"], *out.warnings],
        environment=environment(trace.meta),
        timeline=out.values["timeline"],
        critical_path=out.values["critical_path"],
        verdict=None,
    )
    overlay = RankOverlay(out.values["idle_sets"], out.values["critical_path_overlay"])
    tables = out.values.get("rank_tables") if job else None
    if tables is not None:  # the job view's straggler cause reads the rank's GPU figures beside its tables
        tables.info.update(gpu_figures(result.metrics))
    return RankRead(result, tables, trace.meta.sha256, overlay)


def analyze_trace(
    trace: Trace,
    metrics: Iterable[str] | None = None,
    evidence: Iterable[str] | None = None,
    workers: int | None = None,
    given: Mapping[str, Any] | None = None,
) -> RankResult:
    """The ``RankResult`` of one rank (``read_rank`` without the job tables and the overlay)."""
    return read_rank(trace, given=given, workers=workers, metrics=metrics, evidence=evidence).result
