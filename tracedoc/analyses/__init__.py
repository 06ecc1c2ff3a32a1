"""Analyses: pure functions from a ``Trace`` to metrics and evidence tables.

``analyze_trace`` runs them for one rank and returns a ``RankAnalysis``: a flat ``metrics`` dict
whose keys are exactly ``registry.METRICS``, evidence tables (lists of dicts) for reports and
rules, per-step and per-device rows, and the window used.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..model.trace import Trace
from .pipeline import run_analyses
from .rank import RankAnalysis, environment  # noqa: F401  (re-exported)
from .registry import EVIDENCE, METRICS

# The values a rank's result carries besides its metrics and evidence tables.
RANK_VALUES = ("window", "per_device", "warnings", "timeline", "critical_path", "idle_sets")


def analyze_trace(trace: Trace, metrics: Iterable[str] | None = None,
                  evidence: Iterable[str] | None = None, workers: int | None = None) -> RankAnalysis:
    """Run the analyses for one rank: all of them by default, or those the named metrics and evidence
    tables (and the result's window, devices, warnings and timeline) need; metrics no analysis that
    ran produces are None. ``pipeline.run_analyses`` checks each analysis against its declaration;
    ``workers=1`` keeps them all in this process."""
    out = run_analyses(trace, metrics, evidence,
                       values=RANK_VALUES, workers=workers)
    per_step = out.evidence.get("per_step") or []
    return RankAnalysis(source=trace.source, rank=trace.meta.rank, window=out.values["window"],
                        metrics={k: out.metrics.get(k) for k in METRICS},
                        evidence={k: out.evidence[k] for k in EVIDENCE if k in out.evidence},
                        per_step=per_step, per_device=out.values["per_device"], meta=trace.meta.to_dict(),
                        warnings=out.values["warnings"], timeline=out.values["timeline"],
                        critical_path=out.values["critical_path"], idle_intervals=out.values["idle_sets"])
