"""What-if: the step time replayed on a transformed dependency graph, one transformation per fix.

Input: a :class:`~.graph.Graph`. Output: per fix, the predicted step time (docs/definitions.md: step time is
the interval between consecutive completions, and the report's step is their median) before and
after the change.

Each transformation changes only what the fix changes and keeps every other dependency and every
recorded duration (Daydream's approach):

- ``dataloader``: the CPU time inside DataLoader waits becomes zero;
- ``sync``: host synchronisations removed: they stop waiting for the GPU (the CPU runs ahead), and
  their own CPU time (a ``cudaFree`` that releases memory while the GPU idles) is gone;
- ``comm``: communication kernels leave the compute path -- compute no longer waits for them, on
  their stream or through events -- while the step still ends only when they have finished;
- ``launch``: CUDA-graph replay: on each thread, the CPU time from a step's first launch to its last
  (split at syncs, DataLoader waits and CPU collectives, which a graph cannot capture) shrinks to one
  launch call;
- ``batch``: a batch large enough to fill the GPU: a kernel launching fewer blocks than the GPU has SMs
  (``blocks_per_sm`` b < 1) would do b times more work in the same time, so today's work takes b of
  its duration (per sample, the larger batch's rate);
- ``host``: the CPU work between launches moved off the launching threads: CPU time (not launch,
  sync, DataLoader or CPU collective time) inside the long idle gaps whose next op the host launched
  late becomes zero.

A straggler's lateness (the ``straggler`` fix) is a job question: the job view replays its matched
collectives (``tracedoc.job.whatif``).
"""

from __future__ import annotations

import numpy as np

from ...model import intervals as iv
from ...model.groups import distinct, isin, lex_order
from ...model.record import Record
from ...model.stats import median
from . import graph as G
from .solve import Model, replay, step_times

FIXES = {
    "dataloader": "DataLoader waits removed",
    "sync": "host synchronisations removed (the CPU runs ahead)",
    "comm": "communication overlapped (comm kernels off the compute path)",
    "launch": "launch overhead cut (CUDA graphs: one launch per captured region)",
    "batch": "a batch that fills the GPU (kernels with fewer blocks than SMs do today's work in the share of "
    "their time the SMs they fill would need)",
    "host": "host work moved off the launching threads (the CPU time inside long host-late GPU idle gaps removed)",
    "straggler": "the straggler's lateness removed",  # replayed by the job view (tracedoc.job.whatif)
}


class Prediction(Record, frozen=True, kw_only=True):
    """A fix's predicted step time (the median of the replayed step times), in ms to 0.1 µs, and how it was
    predicted."""

    step_ms_before: float  # median step time (interval between completions) as recorded
    step_ms_after: float  # replayed with the fix applied
    gain_ms: float  # step_ms_before - step_ms_after
    method: str  # how it was predicted

    @classmethod
    def of(cls, before_ms: float, after_ms: float, method: str) -> "Prediction":
        """The prediction rounded as saved (the gain from the rounded times, so it reads back equal)."""
        before, after = round(before_ms, 4), round(after_ms, 4)
        return cls(step_ms_before=before, step_ms_after=after, gain_ms=round(before - after, 4), method=method)


def step_ms(g: G.Graph, t: np.ndarray) -> float:
    """The median of the replayed step times (docs/definitions.md: the report's step is the median), over the
    steps that have one (after a pre-window backlog, not the first)."""
    return float(median(step_times(g, t)[g.timed_from :])) / 1e6


def predict(g: G.Graph, fix: str) -> Prediction | None:
    """Replay the graph with one fix applied; None when the trace has nothing the fix changes
    (no DataLoader waits, no syncs, no communication, no launches, no under-filled kernels, no host-late gaps)."""
    before = step_ms(g, g.time)
    transformed = TRANSFORMS[fix](g)
    if transformed is None:
        return None
    model, unpermute = transformed
    t = replay(model)
    if unpermute is not None:
        t = t[unpermute]
    after = step_ms(g, t)
    steps = int(g.step_end_point.size) - g.timed_from
    return Prediction.of(
        before,
        min(after, before),
        f"critical-path replay, median of {steps} step time{'s' if steps != 1 else ''}: {FIXES[fix]}",
    )


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
    """The synchronising calls removed: nothing waits for the GPU through them, and the CPU time they
    took of their own (a ``cudaFree`` releasing memory with the GPU already idle) is gone too."""
    drop = g.etype == G.E_SYNC
    has_spans = any(v[0].size for v in g.sync_spans.values())
    if not drop.any() and not has_spans:
        return None
    m = _shrink_cpu(g, g.sync_spans) if has_spans else None
    m = m if m is not None else Model.of(g)
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
    order = lex_order((np.arange(len(g)), chain))
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
    """Per step on one thread: first launch start to last launch end, minus syncs, DataLoader waits and
    CPU collectives (a graph replay does not wait for peers any sooner)."""
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
    for other in (g.sync_spans.get(th), g.dataloader.get(th), g.collective_spans.get(th)):
        if other is not None and other[0].size:
            region = iv.subtract(region, other)
    return region


def _batch(g: G.Graph):
    """Kernels that fill a share b < 1 of the SMs take b of their duration."""
    if g.op_fill is None:
        return None
    under = np.flatnonzero(np.nan_to_num(g.op_fill, nan=1.0) < 1.0)
    if not under.size:
        return None
    m = Model.of(g)
    ends = g.op_end_point[under]
    m.chain_w[ends] = np.round(m.chain_w[ends] * np.maximum(g.op_fill[under], 0.0)).astype(m.chain_w.dtype)
    return m, None


def _host(g: G.Graph):
    """CPU time inside long host-late GPU idle gaps, other than launch, sync and DataLoader time, removed."""
    if g.host_gaps is None or not g.host_gaps[0].size:
        return None
    sets = {}
    for th in g.launch_spans:
        keep = g.host_gaps
        # launch, sync and DataLoader time are other fixes'; a CPU collective waits for peers, which no
        # move of host work removes
        for other in (g.launch_spans.get(th), g.sync_spans.get(th), g.dataloader.get(th), g.collective_spans.get(th)):
            if other is not None and other[0].size:
                keep = iv.subtract(keep, other)
        sets[th] = keep
    m = _shrink_cpu(g, sets)
    return (m, None) if m is not None else None


TRANSFORMS = {
    "dataloader": _dataloader,
    "sync": _sync,
    "comm": _comm,
    "launch": _launch,
    "batch": _batch,
    "host": _host,
}
