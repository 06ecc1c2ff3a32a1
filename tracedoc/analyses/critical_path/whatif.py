"""What-if: the step time replayed on a transformed dependency graph, one transformation per fix.

Input: a :class:`~.graph.Graph`. Output: per fix, the predicted mean step time (DESIGN.md: step
time is the interval between consecutive completions, so the mean is the span from the first
step's start to the last completion, divided by the steps) before and after the change.

Each transformation changes only what the fix changes and keeps every other dependency and every
recorded duration (Daydream's approach):

- ``dataloader``: the CPU time inside DataLoader waits becomes zero;
- ``sync``: host synchronisations stop waiting for the GPU (the CPU runs ahead);
- ``comm``: communication kernels leave the compute path -- compute no longer waits for them, on
  their stream or through events -- while the step still ends only when they have finished;
- ``launch``: CUDA-graph replay: on each thread, the CPU time from a step's first launch to its last
  (split at syncs and DataLoader waits, which a graph cannot capture) shrinks to one launch call.

A straggler's lateness is a job question: the job view replays its matched collectives
(``tracedoc.job.whatif``).
"""

from __future__ import annotations

import numpy as np

from ...model import intervals as iv
from ...model.groups import distinct, isin
from ...model.record import Record
from . import graph as G
from .solve import Model, replay, step_times

FIXES = {
    "dataloader": "DataLoader waits removed",
    "sync": "host synchronisations removed (the CPU runs ahead)",
    "comm": "communication overlapped (comm kernels off the compute path)",
    "launch": "launch overhead cut (CUDA graphs: one launch per captured region)",
}
# verdict label -> the fix that addresses it
LABEL_FIX = {"io_bound": "dataloader", "sync_bound": "sync", "comm_bound": "comm", "small_batch_bound": "launch"}


class Prediction(Record, frozen=True, kw_only=True):
    """A fix's predicted mean step time, in ms to 0.1 µs, and how it was predicted."""

    step_ms_before: float  # mean step time (interval between completions) as recorded
    step_ms_after: float  # replayed with the fix applied
    gain_ms: float  # step_ms_before - step_ms_after
    method: str  # how it was predicted

    @classmethod
    def of(cls, before_ms: float, after_ms: float, method: str) -> "Prediction":
        """The prediction rounded as saved (the gain from the rounded times, so it reads back equal)."""
        before, after = round(before_ms, 4), round(after_ms, 4)
        return cls(step_ms_before=before, step_ms_after=after, gain_ms=round(before - after, 4), method=method)


def mean_step_ms(g: G.Graph, t: np.ndarray) -> float:
    return float(step_times(g, t).mean()) / 1e6


def predict(g: G.Graph, fix: str) -> Prediction | None:
    """Replay the graph with one fix applied; None when the trace has nothing the fix changes
    (no DataLoader waits, no syncs, no communication, no launches)."""
    before = mean_step_ms(g, g.time)
    transformed = TRANSFORMS[fix](g)
    if transformed is None:
        return None
    model, unpermute = transformed
    t = replay(model)
    if unpermute is not None:
        t = t[unpermute]
    after = mean_step_ms(g, t)
    steps = int(g.step_end_point.size)
    return Prediction.of(before, min(after, before),
                      f"critical-path replay over {steps} step{'s' if steps != 1 else ''}: {FIXES[fix]}")


def predict_all(g: G.Graph) -> dict[str, Prediction]:
    out = {}
    for fix in TRANSFORMS:
        p = predict(g, fix)
        if p is not None:
            out[fix] = p
    return out


# -- transformations: each returns (model, inverse permutation or None), or None -----------------
def _cpu_edges(g: G.Graph) -> tuple[np.ndarray, np.ndarray]:
    """Chain edges on CPU threads: destination points and the chain each lies on."""
    cpu = np.flatnonzero(((g.kind == G.CPU_S) | (g.kind == G.CPU_E)) & ~g.head)
    return cpu, g.chain[cpu]


def _shrink_cpu(g: G.Graph, sets: dict[int, iv.IntervalSet]) -> Model | None:
    """Remove from each CPU chain edge the part of its recorded interval inside ``sets``."""
    m = Model.of(g)
    pts, chains = _cpu_edges(g)
    changed = False
    for th, iset in sets.items():
        if not iset[0].size:
            continue
        sel = pts[chains == th]
        cut = iv.overlap_per_interval(g.time[sel - 1] + g.origin_ns, g.time[sel] + g.origin_ns, iset)
        m.chain_w[sel] = np.maximum(m.chain_w[sel] - cut, 0)
        changed |= bool(cut.any())
    return m if changed else None


def _dataloader(g: G.Graph):
    m = _shrink_cpu(g, g.dataloader)
    return (m, None) if m is not None else None


def _sync(g: G.Graph):
    drop = g.etype == G.E_SYNC
    if not drop.any():
        return None
    m = Model.of(g)
    m.lag = np.where(drop, G.NEG // 4, m.lag)
    return m, None


def _comm(g: G.Graph):
    if not g.op_is_comm.any():
        return None
    m = Model.of(g)
    comm_end = np.zeros(len(g), dtype=bool)
    comm_end[g.op_end_point[g.op_is_comm]] = True
    comm_pts = comm_end.copy()
    comm_pts[g.op_start_point[g.op_is_comm]] = True
    # compute stops waiting for communication through events
    into_other = comm_end[g.src] & ~comm_pts[g.dst] & (g.etype == G.E_EVENT)
    m.lag = np.where(into_other, G.NEG // 4, m.lag)
    # comm kernels sharing a stream with other work move to a stream of their own
    stream_pts = (g.kind == G.GPU_S) | (g.kind == G.GPU_E)
    mixed = distinct(g.chain[stream_pts & comm_pts])
    mixed = mixed[isin(mixed, g.chain[stream_pts & ~comm_pts])]
    if not mixed.size:
        return m, None
    n_chains = int(g.chain.max()) + 1
    chain = np.where(comm_pts & isin(g.chain, mixed), g.chain + n_chains, g.chain)
    order = np.lexsort((np.arange(len(g)), chain))
    inv = np.empty_like(order)
    inv[order] = np.arange(order.size)
    w = m.chain_w[order]
    new_chain = chain[order]
    head = np.r_[True, new_chain[1:] != new_chain[:-1]]
    old_prev = g.prev[order]
    new_prev = np.r_[-1, order[:-1]]
    moved = (old_prev != new_prev) & ~head
    t = g.time[order]
    start = g.kind[order] == G.GPU_S
    # a moved stream edge: the next op may start right away; an op's own duration is kept
    w[moved & start] = 0
    w[moved & ~start] = np.maximum(t[moved & ~start] - g.time[new_prev[moved & ~start]], 0)
    floor = m.floor[order]
    floor[head & (floor <= G.NEG // 2)] = 0
    return Model(new_chain, w, floor, inv[g.src], inv[g.dst], m.lag, t, m.window_starts), inv


def _launch(g: G.Graph):
    regions = {}
    for th, spans in g.launch_spans.items():
        if not spans[0].size:
            continue
        region = _capture_regions(g, th, spans)
        if region[0].size:
            regions[th] = region
    m = _shrink_cpu(g, regions)
    if m is None:
        return None
    # one launch per captured region: its first launch call keeps its cost
    for th, (r_s, _r_e) in regions.items():
        sel = np.flatnonzero((g.span_thread == th) & ((g.span_kind & G.SPAN_LAUNCH) > 0))
        sel = sel[np.argsort(g.span_start[sel], kind="stable")]
        first = np.searchsorted(g.span_start[sel], r_s, side="left")
        ok = first < sel.size
        spans = sel[first[ok]]
        pts = np.flatnonzero(isin(g.ref, spans) & (g.kind == G.CPU_E) & (g.chain == th))
        m.chain_w[pts] = g.chain_w[pts]
    return m, None


def _capture_regions(g: G.Graph, th: int, launches: iv.IntervalSet) -> iv.IntervalSet:
    """Per step on one thread: first launch start to last launch end, minus syncs and DataLoader."""
    steps_s = g.time[g.step_start_point] + g.origin_ns
    steps_e = g.time[g.step_end_point] + g.origin_ns
    l_s, l_e = launches
    idx = np.searchsorted(steps_s, l_s, side="right") - 1
    ok = (idx >= 0) & (l_s < steps_e[np.maximum(idx, 0)])
    if not ok.any():
        return iv.empty()
    first = np.full(steps_s.size, np.iinfo(np.int64).max)
    last = np.full(steps_s.size, np.iinfo(np.int64).min)
    np.minimum.at(first, idx[ok], l_s[ok])
    np.maximum.at(last, idx[ok], l_e[ok])
    has = first < last
    region = iv.union(first[has], last[has])
    for other in (g.sync_spans.get(th), g.dataloader.get(th)):
        if other is not None and other[0].size:
            region = iv.subtract(region, other)
    return region


TRANSFORMS = {"dataloader": _dataloader, "sync": _sync, "comm": _comm, "launch": _launch}
