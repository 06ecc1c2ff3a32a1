"""Critical path of every step and what-if predictions (docs/critical-path.md).

Three small pure stages: ``graph`` (the dependency graph as edge arrays), ``solve`` (replay, paths
and their breakdown) and ``whatif`` (the step replayed after one fix). ``critical_path`` runs them
for one rank and returns a plain :class:`CriticalPath` value; registered as the analysis that provides
``critical_path`` (and the ``critical`` intervals of each timeline excerpt).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from ...model.record import Record, to_builtins
from ...model.trace import Trace
from ..gputime.backlog import Backlog
from ..host.launchqueue import LaunchQueue
from ..host.launches import launch_link_fraction as _launch_link_fraction
from ..core.registry import Produced, analysis
from ..gputime.window import Steps
from . import graph as G
from . import solve as S
from . import whatif as W

MIN_LINK_FRACTION = 0.5  # below this share of GPU ops linked to their launch, replays are not trusted

__all__ = ["CriticalPath", "PathOverlay", "critical_path", "critical_path_and_overlay"]


class CriticalPath(Record, kw_only=True):
    """One rank's critical path: per step its breakdown by category (summing to the step time), and
    per fix the replayed step time once it is applied; or why there is none (``available`` false)."""

    available: bool  # the steps could be replayed
    reason: str | None = None  # why they could not
    # per step: its span, step time and the critical path's time by category (summing to the step time)
    steps: list[dict[str, Any]] = []
    # per fix (dataloader, sync, comm, launch): the step time replayed with the fix applied
    predictions: dict[str, W.Prediction] = msgspec.field(default_factory=dict, name="what_if")
    notes: list[str] = []  # what the graph could not model

    def what_ifs(self) -> dict[str, dict]:
        """Predicted step time per fix (``whatif.FIXES``) the replay could model on this trace."""
        if not self.available:
            return {}
        return {fix: to_builtins(p) for fix, p in self.predictions.items()}


@dataclass
class PathOverlay:
    """The critical paths as flat arrays (absolute ns) and their chains, for the timeline and the trace
    overlay of a fresh analysis; not saved with a report."""

    segments: dict[str, np.ndarray] = field(default_factory=dict)
    chain_names: list[str] = field(default_factory=list)
    chain_keys: list[tuple[str, int, int]] = field(default_factory=list)

    def intervals_in(self, lo: int, hi: int, limit: int = 2000) -> list[list]:
        """The path's segments inside ``[lo, hi)``, relative to ``lo``: ``[start, end, category]``."""
        seg = self.segments
        if not seg or not seg["start_ns"].size:
            return []
        sel = np.flatnonzero((seg["start_ns"] < hi) & (seg["end_ns"] > lo))[:limit]
        s = np.maximum(seg["start_ns"][sel], lo) - lo
        e = np.minimum(seg["end_ns"][sel], hi) - lo
        return [[a, b, S.HOP_CATEGORIES[c]] for a, b, c in zip(s.tolist(), e.tolist(), seg["category"][sel].tolist())]


def critical_path(
    trace: Trace,
    steps: Steps,
    comm_mask: np.ndarray,
    launch_link_fraction: float | None = None,
    backlog: Backlog | None = None,
    queue: LaunchQueue | None = None,
) -> CriticalPath:
    """Build the graph of the trace's steps, its critical paths, breakdowns and what-ifs."""
    return critical_path_and_overlay(trace, steps, comm_mask, launch_link_fraction, backlog, queue)[0]


def critical_path_and_overlay(
    trace: Trace,
    steps: Steps,
    comm_mask: np.ndarray,
    launch_link_fraction: float | None = None,
    backlog: Backlog | None = None,
    queue: LaunchQueue | None = None,
) -> tuple[CriticalPath, PathOverlay]:
    """``critical_path`` and the paths themselves as a ``PathOverlay``."""
    if not len(steps):
        return CriticalPath(available=False, reason="the trace has no steps to replay"), PathOverlay()
    if launch_link_fraction is not None and launch_link_fraction < MIN_LINK_FRACTION:
        return (
            CriticalPath(
                available=False, reason=f"only {launch_link_fraction:.0%} of GPU ops are linked to their launch call"
            ),
            PathOverlay(),
        )
    if len(steps) <= steps.timed_from:
        return (
            CriticalPath(
                available=False,
                reason="no step has a step time: the GPU ran work launched before the "
                "profiler opened until the last step completed",
            ),
            PathOverlay(),
        )
    g = G.build_graph(trace, steps, comm_mask, backlog, queue)
    paths = S.critical_paths(g)
    done = np.maximum.accumulate(S.completions(g, g.time))
    starts = np.r_[g.time[g.step_start_point[0]], done[:-1]]
    rows = []
    for i, path in enumerate(paths):
        lo = int(starts[i])
        if i < steps.timed_from and backlog is not None and backlog.found:
            # until the backlog ends the step waits for work launched before the capture
            lo = min(max(lo, int(backlog.end_ns) - g.origin_ns), int(done[i]))
        b = S.breakdown(trace, g, path, lo, int(done[i]))
        b["backlog"] = lo - int(starts[i])
        row = {
            "step": steps.names[i],
            "start_ns": int(starts[i]) + g.origin_ns,
            "completion_ns": int(done[i]) + g.origin_ns,
            "step_ns": int(done[i] - starts[i]),
            "timed": i >= steps.timed_from,
        }
        row.update({f"{c}_ns": int(b[c]) for c in S.CATEGORIES})
        row["cpu_ops"] = b["cpu_ops"][:5]
        rows.append(row)
    return (
        CriticalPath(available=True, steps=rows, predictions=W.predict_all(g), notes=list(g.notes)),
        PathOverlay(_segments(paths, g, starts), g.chain_names, g.chain_keys),
    )


@analysis(
    needs=("step_spans", "comm_mask", "backlog", "launch_queue"),
    provides=("critical_path", "critical_path_overlay"),
    offload={"critical_path": CriticalPath, "critical_path_overlay": PathOverlay},
)
def step_critical_paths(trace: Trace, inputs) -> Produced:
    """Each step's critical path and the what-if predictions, unless too few GPU ops are linked to a launch."""
    backlog = inputs["backlog"]
    cp, overlay = critical_path_and_overlay(
        trace,
        inputs["step_spans"],
        inputs["comm_mask"],
        launch_link_fraction=_launch_link_fraction(trace, backlog),
        backlog=backlog,
        queue=inputs["launch_queue"],
    )
    return Produced(values={"critical_path": cp, "critical_path_overlay": overlay})


def _segments(paths: list[S.Path], g: G.Graph, starts: np.ndarray) -> dict[str, np.ndarray]:
    """The critical paths as flat arrays (absolute ns) for the trace overlay."""
    parts = {k: [] for k in ("step", "start_ns", "end_ns", "category", "chain", "from_chain")}
    for i, p in enumerate(paths):
        if not len(p):
            continue
        s = np.maximum(p.start_ns, starts[i])
        keep = p.end_ns > s
        parts["step"].append(np.full(int(keep.sum()), i))
        parts["start_ns"].append(s[keep] + g.origin_ns)
        parts["end_ns"].append(p.end_ns[keep] + g.origin_ns)
        parts["category"].append(p.category[keep])
        parts["chain"].append(g.chain[p.points[:-1][keep]])
        parts["from_chain"].append(g.chain[p.points[1:][keep]])
    return {k: (np.concatenate(v) if v else np.zeros(0, dtype=np.int64))[::-1] for k, v in parts.items()}
