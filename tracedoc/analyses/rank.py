"""What the analyses produce for one rank: ``RankAnalysis`` (the lower-layer value ``analyze_trace`` returns).

The saved, renderable value is ``tracedoc.result.RankResult``, built from this one and the rules
engine's verdict; this one still holds the trace's metadata, which the saved value keeps only as the
``environment`` summary.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .window import Window


@dataclass
class RankAnalysis:
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
    critical_path: Any = None  # critical_path.CriticalPath
    idle_intervals: dict[str, Any] = field(default_factory=dict)  # cause -> interval set (the trace overlay)

    def what_ifs(self) -> tuple[dict[str, dict], str | None]:
        """Predicted step time per verdict label (the fix's replay), and why there is none when not."""
        cp = self.critical_path
        if cp is None or not cp.available:
            return {}, (cp.reason if cp is not None else None)
        return cp.what_ifs(), None

    @property
    def step_time_ns(self) -> float | None:
        """The report's step: the median step time (DESIGN.md, one step time); the window without one."""
        v = self.metrics.get("step_time_p50_ns")
        return float(v) if v else (float(self.window.length_ns) or None)


def environment(meta: dict) -> dict[str, Any]:
    """Where the trace came from, as its metadata records it (the report's ``environment``)."""
    devices = meta.get("devices") or []
    first = devices[0] if devices else {}
    extra = meta.get("extra") or {}
    return {
        "format": meta.get("format"), "gpu": first.get("name"), "device_count": len(devices),
        "compute_capability": (f"{first.get('computeMajor')}.{first.get('computeMinor')}"
                               if first.get("computeMajor") is not None else None),
        "world_size": meta.get("world_size"), "rank": meta.get("rank"), "backend": meta.get("backend"),
        "nccl_version": meta.get("nccl_version"), "cuda_runtime_version": meta.get("cuda_runtime_version"),
        "cuda_driver_version": meta.get("cuda_driver_version"), "events": meta.get("events"),
        "torch_version": next((str(extra[k]) for k in ("torch_version", "pytorch_version", "torchVersion")
                               if extra.get(k)), None),
        "pid": meta.get("pid"),
    }
