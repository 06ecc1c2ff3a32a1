"""Analyses: pure functions from a ``Trace`` to metrics and evidence tables.

``analyze_trace`` runs them all for one rank and returns a ``RankResult``: a flat ``metrics`` dict
whose keys are exactly ``registry.METRICS``, evidence tables (lists of dicts) for reports and
rules, per-step and per-device rows, and the window used.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.trace import Trace
from .pipeline import run_analyses
from .registry import EVIDENCE, METRICS
from .window import Window


@dataclass
class RankResult:
    source: str
    rank: int | None
    window: Window
    metrics: dict[str, Any]
    evidence: dict[str, list[dict]]
    per_step: list[dict]
    per_device: list[dict]
    meta: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    timeline: dict[str, Any] = field(default_factory=dict)

    @property
    def step_time_ns(self) -> float | None:
        v = self.metrics.get("step_time_mean_ns")
        return float(v) if v else (float(self.window.length_ns) or None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "rank": self.rank,
            "window": {"start_ns": self.window.start_ns, "end_ns": self.window.end_ns,
                       "length_ns": self.window.length_ns, "kind": self.window.kind,
                       "description": self.window.describe()},
            "metrics": {k: _jsonable(v) for k, v in self.metrics.items()},
            "per_step": self.per_step, "per_device": self.per_device,
            "evidence": self.evidence, "warnings": self.warnings,
            "environment": environment(self.meta), "timeline": self.timeline,
        }


def _jsonable(v: Any) -> Any:
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, np.bool_):
        return bool(v)
    return v


def environment(meta: dict) -> dict[str, Any]:
    devices = meta.get("devices") or []
    first = devices[0] if devices else {}
    return {
        "format": meta.get("format"), "gpu": first.get("name"), "device_count": len(devices),
        "compute_capability": (f"{first.get('computeMajor')}.{first.get('computeMinor')}"
                               if first.get("computeMajor") is not None else None),
        "world_size": meta.get("world_size"), "rank": meta.get("rank"), "backend": meta.get("backend"),
        "nccl_version": meta.get("nccl_version"), "cuda_runtime_version": meta.get("cuda_runtime_version"),
        "cuda_driver_version": meta.get("cuda_driver_version"), "events": meta.get("events"),
        "torch_version": (meta.get("extra") or {}).get("torch_version"),
    }


def analyze_trace(trace: Trace, metrics: Iterable[str] | None = None,
                  evidence: Iterable[str] | None = None) -> RankResult:
    """Run the analyses for one rank: all of them by default, or those the named metrics and evidence
    tables (and the result's window, devices, warnings and timeline) need; metrics no analysis that
    ran produces are None. ``pipeline.run_analyses`` checks each analysis against its declaration."""
    out = run_analyses(trace, metrics, evidence, values=("window", "per_device", "warnings", "timeline"))
    per_step = out.evidence.get("per_step") or []
    return RankResult(source=trace.source, rank=trace.meta.rank, window=out.values["window"],
                      metrics={k: out.metrics.get(k) for k in METRICS},
                      evidence={k: out.evidence[k] for k in EVIDENCE if k in out.evidence},
                      per_step=per_step, per_device=out.values["per_device"], meta=trace.meta.to_dict(),
                      warnings=out.values["warnings"], timeline=out.values["timeline"])
