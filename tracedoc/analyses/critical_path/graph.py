"""The dependency graph of a trace's steps, built as edge arrays (DESIGN.md: Critical path).

Input: a ``Trace`` and its steps. Output: a :class:`Graph` whose nodes are points in time -- the
start and the end of every task that can hold the GPU back -- on *chains*: one per CPU thread that
launches or waits for GPU work, one per GPU stream. Consecutive points of a chain are joined by a
chain edge (program order on a thread, FIFO order on a stream, an op's own duration); *cross*
edges join chains: launch call -> GPU op, GPU op -> the synchronising call that waited for it,
GPU op -> the op another stream held back until it finished (event wait), thread -> thread where
one thread waits for another (the autograd thread), and, from the job view, the last rank's
arrival -> the end of the collective kernel.

Every edge weight is derived from the trace so that replaying the graph reproduces the recorded
times exactly: each point's time is the maximum over its incoming edges of (source time + weight),
and the part of a point's time no dependency explains (a GPU gap, a thread's wake-up) is kept as a
fixed weight on the edge that bound it. Transformations then change weights or drop edges.

Kept compact: a thread contributes only the calls that touch the GPU (launches, syncs), its
DataLoader waits and its step marks; the CPU time between them is one edge whose make-up (which
top-level op, DataLoader, launch or sync time) is looked up from interval sets when needed.
Same for Kineto and nsys: only the ``Trace`` tables are read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...model import intervals as iv
from ...model import trace as M
from ...model.trace import Trace
from .. import classify as C
from ..window import Steps, launch_times

NEG = -(1 << 50)  # "no bound" for point times (about 13 days before the origin)
SYNC_TOLERANCE_NS = 2_000  # Kineto rounds to microseconds: a waited-for op may end 1 us after the call
BLOCKED_OVERLAP_FRACTION = 0.1  # a thread doing less than this much op work during another's burst waits on it

# point kinds
CPU_S, CPU_E, GPU_S, GPU_E = 0, 1, 2, 3
# span kinds on CPU threads (bit flags: cudaMemcpy is a launch and a sync)
SPAN_LAUNCH, SPAN_SYNC, SPAN_DATALOADER, SPAN_STEP = 1, 2, 4, 8
# cross edge types
E_LAUNCH, E_SYNC, E_EVENT, E_FORK, E_JOIN, E_ARRIVAL = 0, 1, 2, 3, 4, 5
EDGE_NAMES = {E_LAUNCH: "launch", E_SYNC: "sync", E_EVENT: "event_wait", E_FORK: "fork", E_JOIN: "join",
              E_ARRIVAL: "collective_arrival"}

_HOST_SYNC_RE_EXTRA = ("cudaFree", "hipFree", "cuMemFree", "cuMemFree_v2")


@dataclass
class Arrivals:
    """Matched collectives of this rank, from the job view (times on this rank's clock, ns).

    ``gpu_row``: row in ``trace.gpu_ops`` of the collective kernel; ``last_arrival_ns``: when the last
    member rank arrived; ``on_time_arrival_ns``: when the last one would have arrived without the
    straggler's lateness (the latest arrival among the other ranks).
    """

    gpu_row: np.ndarray
    last_arrival_ns: np.ndarray
    on_time_arrival_ns: np.ndarray


@dataclass
class Graph:
    """Points on chains plus cross edges; points of one chain are contiguous and in time order."""

    origin_ns: int
    time: np.ndarray          # recorded time of each point, ns relative to ``origin_ns``
    chain: np.ndarray         # chain id of each point (non-decreasing)
    kind: np.ndarray          # CPU_S / CPU_E / GPU_S / GPU_E
    ref: np.ndarray           # gpu_ops row (GPU points) or span index (CPU points), -1 otherwise
    chain_w: np.ndarray       # weight of the edge from the previous point of the chain (0 at heads)
    head: np.ndarray          # first point of its chain
    floor: np.ndarray         # earliest time of the point (NEG where none)
    src: np.ndarray           # cross edges
    dst: np.ndarray
    lag: np.ndarray
    etype: np.ndarray
    chain_names: list[str]
    chain_keys: list[tuple[str, int, int]]  # ("cpu", pid, tid) or ("gpu", device, stream)
    # CPU spans (launch calls, syncs, DataLoader waits, steps) the CPU points belong to
    span_start: np.ndarray
    span_end: np.ndarray
    span_kind: np.ndarray
    span_thread: np.ndarray   # chain id
    span_runtime: np.ndarray  # runtime row, -1 for cpu_ops spans
    # GPU ops in the graph
    op_rows: np.ndarray       # gpu_ops rows
    op_start_point: np.ndarray
    op_step: np.ndarray       # step whose CPU span launched the op, -1 before the first
    op_is_comm: np.ndarray
    op_kind: np.ndarray
    # steps
    step_start_point: np.ndarray
    step_end_point: np.ndarray
    dataloader: dict[int, iv.IntervalSet] = field(default_factory=dict)  # per thread chain
    sync_spans: dict[int, iv.IntervalSet] = field(default_factory=dict)
    launch_spans: dict[int, iv.IntervalSet] = field(default_factory=dict)
    top_ops: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)  # s, e, name
    main_chain: int = 0
    notes: list[str] = field(default_factory=list)
    op_end_point: np.ndarray | None = None
    binding: np.ndarray | None = None      # per point: -1 chain edge, -2 floor, else the cross edge that set it
    launch_latency_ns: int = 0
    arrival_edges: np.ndarray | None = None   # cross edges carrying a wait for the last rank (job view)
    arrival_wait_ns: np.ndarray | None = None
    arrival_cut_ns: np.ndarray | None = None  # per arrival edge: the straggler's share of the wait

    def __len__(self) -> int:
        return int(self.time.size)

    @property
    def prev(self) -> np.ndarray:
        """Index of each point's chain predecessor (-1 at chain heads)."""
        idx = np.arange(self.time.size) - 1
        idx[self.head] = -1
        return idx

    def to_networkx(self):
        """A ``networkx.DiGraph`` of the same graph: nodes are point indices (with time, chain and
        kind attributes), every edge carries ``weight`` (ns) and ``type``."""
        import networkx as nx

        G = nx.DiGraph()
        for i, (t, c, k) in enumerate(zip(self.time.tolist(), self.chain.tolist(), self.kind.tolist())):
            G.add_node(i, time_ns=t, chain=self.chain_names[c], kind=k)
        prev = self.prev
        has = prev >= 0
        G.add_edges_from((int(u), int(v), {"weight": int(w), "type": "order"})
                         for u, v, w in zip(prev[has], np.flatnonzero(has), self.chain_w[has]))
        G.add_edges_from((int(u), int(v), {"weight": int(w), "type": EDGE_NAMES[int(k)]})
                         for u, v, w, k in zip(self.src, self.dst, self.lag, self.etype))
        return G


def host_sync_mask(trace: Trace) -> np.ndarray:
    """Per string id: a runtime call that blocks the host until GPU work is done."""
    sync = C.name_mask(trace, C.SYNC_CALL_RE)
    wait = trace.string_ids(lambda s: s.startswith(("cudaStreamWaitEvent", "hipStreamWaitEvent")))
    free = trace.string_ids(lambda s: s in _HOST_SYNC_RE_EXTRA)
    return (sync & ~wait) | free


def build_graph(trace: Trace, steps: Steps, comm_mask: np.ndarray, arrivals: Arrivals | None = None) -> Graph:
    """Build the dependency graph of the trace's steps (all steps, so that a step's work queued
    behind the previous one is modelled). ``steps`` must be non-empty."""
    lo = int(steps.cpu_start_ns.min())
    last_cpu_end = int(steps.cpu_end_ns.max())
    g, r, c = trace.gpu_ops, trace.runtime, trace.cpu_ops
    launched = launch_times(trace) if len(g) else np.zeros(0, dtype=np.int64)
    in_win = (launched >= lo) & (launched < last_cpu_end) if len(g) else np.zeros(0, dtype=bool)
    pinned = (launched < lo) & (g["end_ns"] > lo) if len(g) else in_win
    ops = np.flatnonzero(in_win | pinned)
    b = _Builder(trace, lo)
    main_thread = _main_thread(trace, steps)
    spans = _cpu_spans(trace, steps, ops, lo, last_cpu_end, main_thread)
    b.add_spans(spans)
    b.add_ops(ops, pinned[ops], comm_mask[ops] if comm_mask.size else np.zeros(ops.size, dtype=bool))
    if arrivals is not None:
        b.add_arrivals(arrivals)
    b.finish_points()
    b.link_arrivals()
    b.link_launches()
    b.link_syncs()
    b.link_event_waits()
    b.link_threads()
    graph = b.weigh(steps)
    graph.notes.extend(b.notes)
    return graph


def _main_thread(trace: Trace, steps: Steps) -> tuple[int, int]:
    c = trace.cpu_ops
    first = np.flatnonzero(c["start_ns"] == steps.cpu_start_ns[0])
    row = int(first[0]) if first.size else 0
    return int(c["pid"][row]), int(c["tid"][row])


def _cpu_spans(trace: Trace, steps: Steps, ops: np.ndarray, lo: int, hi: int, main: tuple[int, int]) -> dict:
    """Launch calls of the graph's ops, host syncs, ``.item()`` ops, DataLoader waits and steps."""
    g, r, c = trace.gpu_ops, trace.runtime, trace.cpu_ops
    parts = []
    if len(r):
        launch_rows = np.unique(g["launch"][ops][g["launch"][ops] >= 0]) if ops.size else np.zeros(0, np.int64)
        sync = host_sync_mask(trace)[r["name"]] & (r["start_ns"] >= lo) & (r["start_ns"] < hi)
        rows = np.union1d(launch_rows, np.flatnonzero(sync))
        kind = np.where(np.isin(rows, launch_rows), SPAN_LAUNCH, 0) | np.where(sync[rows], SPAN_SYNC, 0)
        parts.append((r["start_ns"][rows], r["end_ns"][rows], kind, r["pid"][rows], r["tid"][rows], rows))
    if len(c):
        in_win = (c["start_ns"] >= lo) & (c["start_ns"] < hi)
        item = C.name_mask(trace, C.SYNC_OP_RE)[c["name"]] & in_win & (c["kind"] == M.CPU_OP)
        item_rows = _ops_without_runtime_sync(trace, np.flatnonzero(item))
        dl = C.name_mask(trace, C.DATALOADER_RE)[c["name"]] & in_win & (c["kind"] != M.PYTHON_FUNCTION)
        dl_rows = _outermost(c, np.flatnonzero(dl))
        for rows, kind in ((item_rows, SPAN_SYNC), (dl_rows, SPAN_DATALOADER)):
            parts.append((c["start_ns"][rows], c["end_ns"][rows], np.full(rows.size, kind), c["pid"][rows],
                          c["tid"][rows], np.full(rows.size, -1)))
    n = len(steps)
    parts.append((steps.cpu_start_ns, steps.cpu_end_ns, np.full(n, SPAN_STEP), np.full(n, main[0]),
                  np.full(n, main[1]), np.full(n, -1)))
    cat = [np.concatenate([p[i] for p in parts]) for i in range(6)]
    return {"start": cat[0].astype(np.int64), "end": np.maximum(cat[1], cat[0]).astype(np.int64),
            "kind": cat[2].astype(np.int64), "pid": cat[3].astype(np.int64), "tid": cat[4].astype(np.int64),
            "runtime": cat[5].astype(np.int64), "main": main}


def _outermost(c, rows: np.ndarray) -> np.ndarray:
    """Rows not contained in an earlier row of the same thread (nested DataLoader marks count once)."""
    if not rows.size:
        return rows
    order = rows[np.lexsort((-c["end_ns"][rows], c["start_ns"][rows], c["tid"][rows], c["pid"][rows]))]
    key = c["pid"][order] * (1 << 32) + c["tid"][order]
    end = c["end_ns"][order]
    new_thread = np.r_[True, key[1:] != key[:-1]]
    # running max of ends within each thread: offset per thread keeps threads apart
    grp = np.cumsum(new_thread) - 1
    span = int(end.max() - end.min()) + 1 if end.size else 1
    run = np.maximum.accumulate(end - end.min() + grp * span) - grp * span + end.min()
    keep = new_thread.copy()
    keep[1:] |= c["start_ns"][order][1:] >= run[:-1]
    return order[keep]


def _ops_without_runtime_sync(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """``.item()``-style ops that hold no host-sync runtime call (those are the sync themselves)."""
    r, c = trace.runtime, trace.cpu_ops
    if not rows.size or not len(r):
        return rows
    sync_rows = np.flatnonzero(host_sync_mask(trace)[r["name"]])
    if not sync_rows.size:
        return rows
    key_r = r["pid"][sync_rows] * (1 << 32) + (r["tid"][sync_rows] & 0xFFFFFFFF)
    key_c = c["pid"][rows] * (1 << 32) + (c["tid"][rows] & 0xFFFFFFFF)
    keys, inv = np.unique(np.r_[key_r, key_c], return_inverse=True)
    t0 = min(int(r["start_ns"][sync_rows].min()), int(c["start_ns"][rows].min()))
    span = max(int(r["start_ns"][sync_rows].max()), int(c["end_ns"][rows].max())) - t0 + 1
    # (thread, time) as one sortable number: the first sync call at or after each op's start
    calls = np.sort(inv[:sync_rows.size] * span + (r["start_ns"][sync_rows] - t0))
    op_start = inv[sync_rows.size:] * span + (c["start_ns"][rows] - t0)
    op_end = inv[sync_rows.size:] * span + (c["end_ns"][rows] - t0)
    j = np.minimum(np.searchsorted(calls, op_start, side="left"), calls.size - 1)
    inside = (calls[j] >= op_start) & (calls[j] <= op_end)
    return rows[~inside]


class _Builder:
    """Collects points and cross edges, then sorts the points into chains and weighs the edges."""

    def __init__(self, trace: Trace, origin: int):
        self.trace = trace
        self.origin = origin
        self.t: list[np.ndarray] = []
        self.chain_key: list[np.ndarray] = []
        self.kind: list[np.ndarray] = []
        self.ref: list[np.ndarray] = []
        self.prio: list[np.ndarray] = []
        self.floor: list[np.ndarray] = []
        self.n = 0
        self.edges: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]] = []  # src, dst, base lag, type
        self.notes: list[str] = []
        self.arrival_ops: tuple[np.ndarray, ...] | None = None

    def _points(self, t, chain_key, kind, ref, prio, floor) -> np.ndarray:
        ids = np.arange(self.n, self.n + t.size)
        self.n += t.size
        for lst, v in ((self.t, t), (self.chain_key, chain_key), (self.kind, kind), (self.ref, ref),
                       (self.prio, prio), (self.floor, floor)):
            lst.append(np.asarray(v, dtype=np.int64))
        return ids

    # -- points ------------------------------------------------------------------------------
    def add_spans(self, spans: dict) -> None:
        self.spans = spans
        pid, tid = spans["pid"], spans["tid"]
        thread_key = pid * (1 << 32) + (tid & 0xFFFFFFFF)
        main_key = spans["main"][0] * (1 << 32) + (spans["main"][1] & 0xFFFFFFFF)
        keys, inv = np.unique(thread_key, return_inverse=True)
        # chain keys: threads first (main thread = chain 0), then streams
        rank_main = np.flatnonzero(keys == main_key)
        order = np.r_[rank_main, np.setdiff1d(np.arange(keys.size), rank_main)]
        pos = np.empty(keys.size, dtype=np.int64)
        pos[order] = np.arange(keys.size)
        self.thread_chain = pos[inv]
        self.n_threads = keys.size
        first = np.unique(inv, return_index=True)[1]  # a span of each thread, in key order
        self.thread_keys = [("cpu", int(pid[first[i]]), int(tid[first[i]])) for i in order]
        self.thread_names = [f"thread {k[2]}" for k in self.thread_keys]
        s, e, n = spans["start"] - self.origin, spans["end"] - self.origin, spans["start"].size
        zero = e == s
        self.span_s = self._points(s, self.thread_chain, np.full(n, CPU_S), np.arange(n), np.ones(n), np.full(n, NEG))
        self.span_e = self._points(e, self.thread_chain, np.full(n, CPU_E), np.arange(n), np.where(zero, 2, 0),
                                   np.full(n, NEG))

    def add_ops(self, ops: np.ndarray, pinned: np.ndarray, is_comm: np.ndarray) -> None:
        g = self.trace.gpu_ops
        key = g["device"][ops].astype(np.int64) * (1 << 40) + g["stream"][ops]
        keys, inv = np.unique(key, return_inverse=True)
        self.stream_chain = self.n_threads + inv
        self.stream_keys = keys
        dev, stream = g["device"][ops], g["stream"][ops]
        first = np.unique(inv, return_index=True)[1]
        self.stream_keys_out = [("gpu", int(dev[i]), int(stream[i])) for i in first]
        self.stream_names = [f"GPU {k[1]} stream {k[2]}" for k in self.stream_keys_out]
        s, e = g["start_ns"][ops] - self.origin, g["end_ns"][ops] - self.origin
        n = ops.size
        floor = np.where(pinned, s, NEG)
        # launch order breaks ties between ops starting together on a stream
        self.ops, self.op_pinned, self.op_comm = ops, pinned, is_comm
        self.op_s = self._points(s, self.stream_chain, np.full(n, GPU_S), ops, np.ones(n), floor)
        self.op_e = self._points(np.maximum(e, s), self.stream_chain, np.full(n, GPU_E), ops,
                                 np.where(e > s, 0, 2), np.full(n, NEG))
        self.op_launch = g["launch"][ops]
        self.op_launched = launch_times(self.trace)[ops]

    def add_arrivals(self, arrivals: Arrivals) -> None:
        """A collective kernel ends a transfer after the last rank arrived: its own duration is the
        transfer, and an edge from its start carries the wait for the last rank (relative to its
        own arrival, so the other ranks keep their lateness when this one moves)."""
        if not self.ops.size or not arrivals.gpu_row.size:
            return
        pos = np.minimum(np.searchsorted(self.ops, arrivals.gpu_row), self.ops.size - 1)
        hit = self.ops[pos] == arrivals.gpu_row
        if not hit.any():
            return
        g = self.trace.gpu_ops
        rows = self.ops[pos[hit]]
        own = g["start_ns"][rows]
        wait = np.maximum(arrivals.last_arrival_ns[hit] - own, 0)
        transfer = np.maximum(g["end_ns"][rows] - own - wait, 0)
        on_time = np.minimum(np.maximum(arrivals.on_time_arrival_ns[hit] - own, 0), wait)
        self.arrival_ops = (pos[hit], wait, transfer, on_time)

    def link_arrivals(self) -> None:
        """Collective kernel start -> its end, weighted by the wait for the last rank plus the transfer."""
        if self.arrival_ops is None:
            return
        op_idx, wait, transfer, _ = self.arrival_ops
        self.edge(self.rank[self.op_s[op_idx]], self.rank[self.op_e[op_idx]], wait + transfer, E_ARRIVAL)


    def finish_points(self) -> None:
        t = np.concatenate(self.t)
        chain = np.concatenate(self.chain_key)
        prio = np.concatenate(self.prio)
        order = np.lexsort((prio, t, chain))
        self.order = order
        self.rank = np.empty(order.size, dtype=np.int64)
        self.rank[order] = np.arange(order.size)
        self.T = t[order]
        self.chain = chain[order]
        self.head = np.r_[True, self.chain[1:] != self.chain[:-1]]
        self.kind = np.concatenate(self.kind)[order]
        self.ref = np.concatenate(self.ref)[order]
        self.floor = np.concatenate(self.floor)[order]
        # every chain head may start no earlier than the origin unless it is pinned earlier
        self.floor[self.head] = np.where(self.floor[self.head] > NEG, self.floor[self.head],
                                         np.minimum(0, self.T[self.head]))

    def edge(self, src: np.ndarray, dst: np.ndarray, base: np.ndarray | int, etype: int) -> None:
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        if src.size:
            self.edges.append((src, dst, np.broadcast_to(np.asarray(base, np.int64), src.shape).copy(), etype))

    # -- cross edges -------------------------------------------------------------------------
    def link_launches(self) -> None:
        """Launch call start -> GPU op start. The base weight is the typical launch latency."""
        sp = self.spans
        if not self.ops.size or not sp["runtime"].size:
            self.launch_latency_ns = 0
            return
        rt = sp["runtime"]
        rows = np.flatnonzero(rt >= 0)
        sorter = rows[np.argsort(rt[rows], kind="stable")]
        linked = self.op_launch >= 0
        pos = np.searchsorted(rt[sorter], self.op_launch[linked])
        pos = np.minimum(pos, max(sorter.size - 1, 0))
        hit = sorter.size > 0
        found = (rt[sorter[pos]] == self.op_launch[linked]) if hit else np.zeros(pos.size, dtype=bool)
        op_idx = np.flatnonzero(linked)[found]
        span_idx = sorter[pos[found]]
        src = self.rank[self.span_s[span_idx]]
        dst = self.rank[self.op_s[op_idx]]
        lag = self.T[dst] - self.T[src]
        latency = np.maximum(lag, 0)
        # launch latency: the typical delay of an op launched onto an idle stream
        prev_end = np.where(self.head[dst], NEG, self.T[np.maximum(dst - 1, 0)])
        idle = self.T[src] >= prev_end
        pool = latency[idle] if idle.any() else latency
        self.launch_latency_ns = int(np.median(pool)) if pool.size else 0
        self.edge(src, dst, np.minimum(latency, self.launch_latency_ns), E_LAUNCH)
        self.launch_pairs = (span_idx, op_idx)
        unlinked = int((~linked).sum()) + int((~found).sum())
        if unlinked:
            self.notes.append(f"{unlinked} of {self.ops.size} GPU ops have no launch call in the graph; "
                              "they follow their stream only")

    def _last_launched(self, chain_id: int, before: np.ndarray) -> np.ndarray:
        """Per query time: the op of a stream chain launched last at or before it (-1 if none)."""
        sel = np.flatnonzero(self.stream_chain == chain_id)
        if not sel.size:
            return np.full(before.size, -1)
        order = sel[np.argsort(self.op_launched[sel], kind="stable")]
        i = np.searchsorted(self.op_launched[order], before, side="right") - 1
        return np.where(i >= 0, order[np.maximum(i, 0)], -1)

    def _sync_stream_info(self) -> tuple[dict, dict]:
        """From GPU-side sync markers: runtime row -> (waited stream key or -1, marker name)."""
        s, r = self.trace.syncs, self.trace.runtime
        if not len(s) or not len(r):
            return {}, {}
        order = np.argsort(r["correlation"], kind="stable")
        pos = np.minimum(np.searchsorted(r["correlation"][order], s["correlation"]), len(r) - 1)
        hit = (r["correlation"][order][pos] == s["correlation"]) & (s["correlation"] >= 0)
        waited = {}
        waiting = {}
        for i in np.flatnonzero(hit).tolist():
            row = int(order[pos[i]])
            name = self.trace.string(int(s["name"][i]))
            dev = int(s["device"][i]) if s["device"][i] >= 0 else 0
            if "Wait" in name:
                waiting[row] = (dev * (1 << 40) + int(s["stream"][i]), dev * (1 << 40) + int(s["wait_on_stream"][i]))
            elif int(s["wait_on_stream"][i]) >= 0:
                waited[row] = dev * (1 << 40) + int(s["wait_on_stream"][i])
            elif "Stream" in name and int(s["stream"][i]) >= 0:
                waited[row] = dev * (1 << 40) + int(s["stream"][i])
        return waited, waiting

    def link_syncs(self) -> None:
        """GPU op end -> end of the host call that waited for it: per stream, the op launched last
        before the call, when it finished by the time the call returned."""
        sp = self.spans
        syncs = np.flatnonzero(sp["kind"] & SPAN_SYNC)
        self.sync_has_edge = np.zeros(sp["start"].size, dtype=bool)
        if not syncs.size or not self.ops.size:
            return
        waited, _ = self._sync_stream_info()
        start = sp["start"][syncs] - self.origin
        end = sp["end"][syncs] - self.origin
        restrict = np.array([waited.get(int(row), -1) for row in sp["runtime"][syncs]], dtype=np.int64) \
            if waited else np.full(syncs.size, -1)
        g_end = self.T[self.rank[self.op_e]]
        for ci, key in enumerate(self.stream_keys.tolist()):
            op = self._last_launched(self.n_threads + ci, start + self.origin)
            ok = (op >= 0) & ((restrict < 0) | (restrict == key))
            ok[ok] &= g_end[op[ok]] <= end[ok] + SYNC_TOLERANCE_NS
            if ok.any():
                self.edge(self.rank[self.op_e[op[ok]]], self.rank[self.span_e[syncs[ok]]], 0, E_SYNC)
                self.sync_has_edge[syncs[ok]] = True

    def link_event_waits(self) -> None:
        """Op before the recorded event on one stream -> next op launched onto the waiting stream."""
        r = self.trace.runtime
        if not len(r) or not self.ops.size or len(self.stream_keys) < 2:
            return
        _, waiting = self._sync_stream_info()
        is_wait = self.trace.string_ids(lambda s: s.startswith(("cudaStreamWaitEvent", "hipStreamWaitEvent")))
        lo, hi = self.origin, self.origin + int(self.T.max()) + 1
        rows = np.flatnonzero(is_wait[r["name"]] & (r["start_ns"] >= lo) & (r["start_ns"] < hi))
        if not rows.size:
            return
        at = r["start_ns"][rows]
        g_s, g_e = self.T[self.rank[self.op_s]], self.T[self.rank[self.op_e]]
        # the waiting stream's next op: from the marker, else the next op launched after the call
        launch_order = np.argsort(self.op_launched, kind="stable")
        nxt = np.searchsorted(self.op_launched[launch_order], at, side="left")
        dst = np.where(nxt < launch_order.size, launch_order[np.minimum(nxt, launch_order.size - 1)], -1)
        src_key = np.full(rows.size, -1, dtype=np.int64)
        for i, row in enumerate(rows.tolist()):
            if row in waiting:
                wait_key, from_key = waiting[row]
                ci = np.flatnonzero(self.stream_keys == wait_key)
                dst[i] = self._next_on(self.n_threads + int(ci[0]), at[i]) if ci.size else -1
                src_key[i] = from_key
        best_src = np.full(rows.size, -1)
        best_end = np.full(rows.size, NEG)
        for ci, key in enumerate(self.stream_keys.tolist()):
            op = self._last_launched(self.n_threads + ci, at)
            ok = (op >= 0) & (dst >= 0)
            ok[ok] &= (self.stream_chain[op[ok]] != self.stream_chain[dst[ok]])
            ok &= (src_key < 0) | (src_key == key)
            ok[ok] &= g_e[op[ok]] <= g_s[dst[ok]] + SYNC_TOLERANCE_NS
            better = ok & (np.where(ok, g_e[np.maximum(op, 0)], NEG) > best_end)
            best_src[better], best_end[better] = op[better], g_e[op[better]]
        ok = best_src >= 0
        self.edge(self.rank[self.op_e[best_src[ok]]], self.rank[self.op_s[dst[ok]]], 0, E_EVENT)

    def _next_on(self, chain_id: int, at: int) -> int:
        sel = np.flatnonzero(self.stream_chain == chain_id)
        if not sel.size:
            return -1
        order = sel[np.argsort(self.op_launched[sel], kind="stable")]
        i = np.searchsorted(self.op_launched[order], at, side="left")
        return int(order[i]) if i < order.size else -1

    def link_threads(self) -> None:
        """A burst of another thread's work while the main thread does nothing is a hand-off: the
        main thread waits for it (the autograd thread runs backward while the caller blocks)."""
        self.join_points = np.zeros(0, dtype=np.int64)
        self.fork_points = np.zeros(0, dtype=np.int64)
        if self.n_threads < 2:
            return
        main = np.flatnonzero(self.chain == 0)
        main_t = self.T[main]
        busy = self._op_coverage(self.spans["main"])
        forks, joins, f_src, j_dst = [], [], [], []
        for th in range(1, self.n_threads):
            pts = np.flatnonzero(self.chain == th)
            idx = np.searchsorted(main_t, self.T[pts], side="right") - 1
            valid = (idx >= 0) & (idx + 1 < main.size)
            brk = np.r_[True, idx[1:] != idx[:-1]]
            first = np.flatnonzero(brk & valid)
            last = np.r_[np.flatnonzero(brk)[1:] - 1, pts.size - 1]
            last = last[np.searchsorted(np.flatnonzero(brk), first)]
            b_s, b_e = self.T[pts[first]], self.T[pts[last]]
            work = iv.overlap_per_interval(b_s + self.origin, b_e + self.origin, busy)
            blocked = work <= BLOCKED_OVERLAP_FRACTION * np.maximum(b_e - b_s, 1)
            first, last = first[blocked], last[blocked]
            forks.append(pts[first])
            f_src.append(main[idx[first]])
            joins.append(main[idx[first] + 1])
            j_dst.append(pts[last])
        self.fork_points = np.concatenate(forks)
        self.join_points = np.concatenate(joins)
        self.edge(np.concatenate(f_src), self.fork_points, 0, E_FORK)
        self.edge(np.concatenate(j_dst), self.join_points, 0, E_JOIN)

    def _op_coverage(self, thread: tuple[int, int]) -> iv.IntervalSet:
        """Time the thread spends inside recorded ops other than step and DataLoader marks."""
        c = self.trace.cpu_ops
        if not len(c):
            return iv.empty()
        marks = C.name_mask(self.trace, C.DATALOADER_RE) | _step_mask(self.trace)
        sel = (c["pid"] == thread[0]) & (c["tid"] == thread[1]) & ~marks[c["name"]] & (c["kind"] == M.CPU_OP)
        r = self.trace.runtime
        rsel = (r["pid"] == thread[0]) & (r["tid"] == thread[1]) if len(r) else np.zeros(0, dtype=bool)
        return iv.union(np.r_[c["start_ns"][sel], r["start_ns"][rsel]], np.r_[c["end_ns"][sel], r["end_ns"][rsel]])

    # -- weights -----------------------------------------------------------------------------
    def weigh(self, steps: Steps) -> Graph:
        """Chain and cross weights such that replaying the graph gives the recorded times."""
        T, n = self.T, self.T.size
        prev_t = np.r_[0, T[:-1]]
        dt = T - prev_t
        base = dt.copy()
        gpu_s = self.kind == GPU_S
        base[gpu_s] = 0  # a stream starts its next op as soon as it may
        sp = self.spans
        sync_e = self.rank[self.span_e[np.flatnonzero(self.sync_has_edge)]]
        base[sync_e] = 0  # a waiting call's time is the GPU's, not the CPU's
        base[self.join_points] = 0
        base[self.fork_points] = 0
        if self.arrival_ops is not None:
            op_idx, _, transfer, _ = self.arrival_ops
            base[self.rank[self.op_e[op_idx]]] = transfer
        base[self.head] = 0
        w = np.minimum(base, dt)
        w[self.head] = 0
        src = np.concatenate([e[0] for e in self.edges]) if self.edges else np.zeros(0, np.int64)
        dst = np.concatenate([e[1] for e in self.edges]) if self.edges else np.zeros(0, np.int64)
        lag = np.concatenate([e[2] for e in self.edges]) if self.edges else np.zeros(0, np.int64)
        etype = np.concatenate([np.full(e[0].size, e[3]) for e in self.edges]) if self.edges else np.zeros(0, np.int64)
        # external arrival points are chain heads pinned at the arrival; their edge goes to the op end
        lag = np.minimum(lag, T[dst] - T[src])
        chain_ready = np.where(self.head, NEG, prev_t + w)
        ready = np.maximum(chain_ready, self.floor)
        cross_ready = T[src] + lag
        np.maximum.at(ready, dst, cross_ready)
        residual = T - ready  # >= 0 by construction
        chain_binds = (chain_ready >= ready) & ~self.head
        floor_binds = ~chain_binds & (self.floor >= ready)
        cross_hit = (cross_ready == ready[dst]) & ~chain_binds[dst] & ~floor_binds[dst]
        first = np.full(n, -1)
        hit_idx = np.flatnonzero(cross_hit)
        if hit_idx.size:
            uniq, pos = np.unique(dst[hit_idx], return_index=True)
            first[uniq] = hit_idx[pos]
        w = w + np.where(chain_binds, residual, 0)
        self.floor = np.where(floor_binds, self.floor + residual, self.floor)
        has_cross = first >= 0
        lag[first[has_cross]] += residual[has_cross]
        binding = np.where(chain_binds, -1, np.where(floor_binds, -2, first))
        graph = self._graph(w, src, dst, lag, etype, steps)
        graph.binding = binding
        graph.launch_latency_ns = self.launch_latency_ns
        if self.arrival_ops is not None:
            _, wait, _, on_time = self.arrival_ops
            graph.arrival_edges = np.flatnonzero(etype == E_ARRIVAL)
            graph.arrival_cut_ns = wait - on_time  # the lateness the straggler adds to each wait
            graph.arrival_wait_ns = wait
        return graph

    def _graph(self, w, src, dst, lag, etype, steps: Steps) -> Graph:
        sp = self.spans
        c_names = self.thread_names + self.stream_names
        step_rows = np.flatnonzero(sp["kind"] == SPAN_STEP)
        step_rows = step_rows[np.argsort(sp["start"][step_rows], kind="stable")]
        lo = steps.cpu_start_ns
        idx = np.searchsorted(lo, self.op_launched, side="right") - 1
        op_step = np.where((idx >= 0) & (self.op_launched < steps.cpu_end_ns[np.maximum(idx, 0)]), idx, -1)
        op_step[self.op_pinned] = -1
        g = Graph(origin_ns=self.origin, time=self.T, chain=self.chain, kind=self.kind, ref=self.ref, chain_w=w,
                  head=self.head, floor=self.floor, src=src, dst=dst, lag=lag, etype=etype, chain_names=c_names,
                  chain_keys=self.thread_keys + self.stream_keys_out,
                  span_start=sp["start"], span_end=sp["end"], span_kind=sp["kind"], span_thread=self.thread_chain,
                  span_runtime=sp["runtime"], op_rows=self.ops, op_start_point=self.rank[self.op_s],
                  op_step=op_step, op_is_comm=self.op_comm, op_kind=self.trace.gpu_ops["kind"][self.ops],
                  step_start_point=self.rank[self.span_s[step_rows]],
                  step_end_point=self.rank[self.span_e[step_rows]])
        g.op_end_point = self.rank[self.op_e]
        self._thread_sets(g)
        return g

    def _thread_sets(self, g: Graph) -> None:
        """Per thread chain: DataLoader, sync and launch spans, and the top-level ops (for the
        make-up of CPU time on the path)."""
        sp = self.spans
        for th in range(self.n_threads):
            sel = self.thread_chain == th
            for attr, flag in (("dataloader", SPAN_DATALOADER), ("sync_spans", SPAN_SYNC), ("launch_spans", SPAN_LAUNCH)):
                m = sel & ((sp["kind"] & flag) > 0)
                getattr(g, attr)[th] = iv.union(sp["start"][m], sp["end"][m])
        c = self.trace.cpu_ops
        if not len(c):
            return
        marks = C.name_mask(self.trace, C.DATALOADER_RE) | _step_mask(self.trace)
        rows = np.flatnonzero((c["kind"] == M.CPU_OP) & ~marks[c["name"]])
        top = _outermost(c, rows)
        key = c["pid"][top] * (1 << 32) + (c["tid"][top] & 0xFFFFFFFF)
        thread_key = sp["pid"] * (1 << 32) + (sp["tid"] & 0xFFFFFFFF)
        for th in range(self.n_threads):
            k = thread_key[np.flatnonzero(self.thread_chain == th)[0]]
            m = top[key == k]
            m = m[np.argsort(c["start_ns"][m], kind="stable")]
            g.top_ops[th] = (c["start_ns"][m], c["end_ns"][m], c["name"][m])
        g.main_chain = 0


def _step_mask(trace: Trace) -> np.ndarray:
    from ..window import step_name_mask

    return step_name_mask(trace)
