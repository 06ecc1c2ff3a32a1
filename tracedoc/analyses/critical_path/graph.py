"""The dependency graph of a trace's steps, built as edge arrays (docs/critical-path.md).

Input: a ``Trace`` and its steps. Output: a :class:`Graph` whose nodes are points in time -- the
start and the end of every task that can hold the GPU back -- on *chains*: one per CPU thread that
launches or waits for GPU work, one per GPU stream. Consecutive points of a chain are joined by a
chain edge (program order on a thread, FIFO order on a stream, an op's own duration); *cross*
edges join chains: launch call -> GPU op, GPU op -> the synchronising call that waited for it,
GPU op -> the op another stream held back until it finished (event wait), and thread -> thread where
one thread waits for another (the autograd thread).

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
from ...model.groups import dense_codes, first_rows, lex_order
from ...model import vocab as V
from ...model.trace import Trace
from ..kernels import classify as C
from ..gputime.backlog import Backlog
from ..host.launchqueue import LaunchQueue, long_gap_ns
from ..gputime.window import Steps, launch_times
from .edges import CrossEdges
from .kinds import (
    CPU_E,
    CPU_S,
    E_EVENT,
    E_FORK,
    E_JOIN,
    E_LAUNCH,
    E_QUEUE,
    E_SYNC,
    EDGE_NAMES,
    GPU_E,
    GPU_S,
    NEG,
    SPAN_BLOCKED,
    SPAN_DATALOADER,
    SPAN_LAUNCH,
    SPAN_STEP,
    SPAN_SYNC,
)
from .spans import cpu_spans, host_sync_mask, main_thread, outermost

# the constants are read through this module by the other stages
__all__ = [
    "Graph",
    "build_graph",
    "host_sync_mask",
    "CPU_E",
    "CPU_S",
    "GPU_E",
    "GPU_S",
    "NEG",
    "E_EVENT",
    "E_FORK",
    "E_JOIN",
    "E_LAUNCH",
    "E_QUEUE",
    "E_SYNC",
    "EDGE_NAMES",
    "SPAN_BLOCKED",
    "SPAN_DATALOADER",
    "SPAN_LAUNCH",
    "SPAN_STEP",
    "SPAN_SYNC",
]


@dataclass
class Graph:
    """Points on chains plus cross edges; points of one chain are contiguous and in time order."""

    origin_ns: int
    time: np.ndarray  # recorded time of each point, ns relative to ``origin_ns``
    chain: np.ndarray  # chain id of each point (non-decreasing)
    kind: np.ndarray  # CPU_S / CPU_E / GPU_S / GPU_E
    ref: np.ndarray  # gpu_ops row (GPU points) or span index (CPU points), -1 otherwise
    chain_w: np.ndarray  # weight of the edge from the previous point of the chain (0 at heads)
    head: np.ndarray  # first point of its chain
    floor: np.ndarray  # earliest time of the point (NEG where none)
    src: np.ndarray  # cross edges
    dst: np.ndarray
    lag: np.ndarray
    etype: np.ndarray
    chain_names: list[str]
    chain_keys: list[tuple[str, int, int]]  # ("cpu", pid, tid) or ("gpu", device, stream)
    # CPU spans (launch calls, syncs, DataLoader waits, steps) the CPU points belong to
    span_start: np.ndarray
    span_end: np.ndarray
    span_kind: np.ndarray
    span_thread: np.ndarray  # chain id
    span_runtime: np.ndarray  # runtime row, -1 for cpu_ops spans
    # GPU ops in the graph
    op_rows: np.ndarray  # gpu_ops rows
    op_start_point: np.ndarray
    op_step: np.ndarray  # step whose CPU span launched the op, -1 before the first
    op_is_comm: np.ndarray
    op_kind: np.ndarray
    # steps
    step_start_point: np.ndarray
    step_end_point: np.ndarray
    dataloader: dict[int, iv.IntervalSet] = field(default_factory=dict)  # per thread chain
    sync_spans: dict[int, iv.IntervalSet] = field(default_factory=dict)
    launch_spans: dict[int, iv.IntervalSet] = field(default_factory=dict)
    blocked_spans: dict[int, iv.IntervalSet] = field(default_factory=dict)  # host blocked on a full launch queue
    collective_spans: dict[int, iv.IntervalSet] = field(default_factory=dict)  # in CPU collectives (waiting for peers)
    top_ops: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)  # s, e, name
    top_ops_reach: dict[int, np.ndarray] = field(default_factory=dict)  # running max of top_ops' ends
    main_chain: int = 0
    notes: list[str] = field(default_factory=list)
    op_end_point: np.ndarray | None = None
    binding: np.ndarray | None = None  # per point: -1 chain edge, -2 floor, else the cross edge that set it
    launch_latency_ns: int = 0
    replay_layout: object | None = field(default=None, repr=False, compare=False)  # solve.Layout, once built
    timed_from: int = 0  # steps before this one have no step time (a pre-window backlog ran ahead of them)
    op_fill: np.ndarray | None = None  # per graph op: blocks per SM (NaN unrecorded; copies and memsets NaN)
    host_gaps: iv.IntervalSet | None = None  # long GPU idle gaps the host launched late for (absolute ns)

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
        G.add_edges_from(
            (int(u), int(v), {"weight": int(w), "type": "order"})
            for u, v, w in zip(prev[has], np.flatnonzero(has), self.chain_w[has])
        )
        G.add_edges_from(
            (int(u), int(v), {"weight": int(w), "type": EDGE_NAMES[int(k)]})
            for u, v, w, k in zip(self.src, self.dst, self.lag, self.etype)
        )
        return G


def build_graph(
    trace: Trace, steps: Steps, comm_mask: np.ndarray, backlog: Backlog | None = None, queue: LaunchQueue | None = None
) -> Graph:
    """Build the dependency graph of the trace's steps (all steps, so that a step's work queued
    behind the previous one is modelled). ``steps`` must be non-empty. GPU ops launched before the
    first step, and those of a pre-window backlog (launched before the capture), keep their recorded
    times: no fix moves them, and no step owns them. A launch call that blocked on a full launch queue
    (``queue``) waits for the GPU op whose end freed its slot: back-pressure, not host time."""
    lo = int(steps.cpu_start_ns.min())
    last_cpu_end = int(steps.cpu_end_ns.max())
    g = trace.gpu_ops
    launched = launch_times(trace) if len(g) else np.zeros(0, dtype=np.int64)
    before = launched < lo
    if backlog is not None and backlog.found:
        before[backlog.ops] = True
    in_win = (launched >= lo) & (launched < last_cpu_end) & ~before if len(g) else np.zeros(0, dtype=bool)
    pinned = before & (g["end_ns"] > lo) if len(g) else in_win
    ops = np.flatnonzero(in_win | pinned)
    b = _Builder(trace, lo)
    main = main_thread(trace, steps)
    spans = cpu_spans(
        trace,
        steps,
        ops,
        lo,
        last_cpu_end,
        main,
        *((queue.blocked_rows, queue.blocked_ns) if queue is not None else (None, None)),
    )
    b.add_spans(spans)
    b.add_ops(ops, pinned[ops], comm_mask[ops] if comm_mask.size else np.zeros(ops.size, dtype=bool))
    b.finish_points()
    b.link_launches()
    b.link_syncs()
    b.link_queue_slots()
    b.link_event_waits()
    b.link_threads()
    graph = b.weigh(steps)
    graph.notes.extend(b.notes)
    graph.timed_from = steps.timed_from
    fill = g["blocks_per_sm"][ops].astype(np.float64)
    graph.op_fill = np.where(g["kind"][ops] == M.KERNEL, fill, np.nan)
    graph.host_gaps = host_late_gaps(trace, ops, launched, lo, int(g["end_ns"][ops].max()) if ops.size else lo)
    return graph


def host_late_gaps(trace: Trace, ops: np.ndarray, launched: np.ndarray, lo: int, hi: int) -> iv.IntervalSet:
    """The stretches in ``[lo, hi)`` with none of ``ops`` running on any stream, long ones only
    (``launchqueue.long_gap_ns``), whose next op the host launched only after the stretch began: the
    host was busy elsewhere (its fix is the ``host`` what-if)."""
    g = trace.gpu_ops
    if not ops.size:
        return iv.empty()
    busy = iv.union(g["start_ns"][ops], g["end_ns"][ops])
    gs, ge = iv.gaps(iv.clip(busy, lo, hi), lo, hi)
    long = (ge - gs) >= long_gap_ns(trace, lo, hi)
    gs, ge = gs[long], ge[long]
    if not gs.size:
        return iv.empty()
    linked = ops[g["launch"][ops] >= 0]
    order = linked[np.argsort(g["start_ns"][linked], kind="stable")]
    pos = np.minimum(np.searchsorted(g["start_ns"][order], ge, side="left"), max(order.size - 1, 0))
    nxt = order[pos] if order.size else np.zeros(0, dtype=np.int64)
    late = (g["start_ns"][nxt] == ge) & (launched[nxt] > gs) if order.size else np.zeros(gs.size, dtype=bool)
    return gs[late], ge[late]


class _Builder(CrossEdges):
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

    def _points(self, t, chain_key, kind, ref, prio, floor) -> np.ndarray:
        ids = np.arange(self.n, self.n + t.size)
        self.n += t.size
        for lst, v in (
            (self.t, t),
            (self.chain_key, chain_key),
            (self.kind, kind),
            (self.ref, ref),
            (self.prio, prio),
            (self.floor, floor),
        ):
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
        order = np.r_[rank_main, np.flatnonzero(keys != main_key)]
        pos = np.empty(keys.size, dtype=np.int64)
        pos[order] = np.arange(keys.size)
        self.thread_chain = pos[inv]
        self.n_threads = keys.size
        first = first_rows(inv, keys.size)  # a span of each thread, in key order
        self.thread_keys = [("cpu", int(pid[first[i]]), int(tid[first[i]])) for i in order]
        self.thread_names = [f"thread {k[2]}" for k in self.thread_keys]
        s, e, n = spans["start"] - self.origin, spans["end"] - self.origin, spans["start"].size
        zero = e == s
        self.span_s = self._points(s, self.thread_chain, np.full(n, CPU_S), np.arange(n), np.ones(n), np.full(n, NEG))
        self.span_e = self._points(
            e, self.thread_chain, np.full(n, CPU_E), np.arange(n), np.where(zero, 2, 0), np.full(n, NEG)
        )

    def add_ops(self, ops: np.ndarray, pinned: np.ndarray, is_comm: np.ndarray) -> None:
        g = self.trace.gpu_ops
        key = g["device"][ops].astype(np.int64) * (1 << 40) + g["stream"][ops]
        keys, inv = np.unique(key, return_inverse=True)
        self.stream_chain = self.n_threads + inv
        self.stream_keys = keys
        dev, stream = g["device"][ops], g["stream"][ops]
        first = first_rows(inv, keys.size)
        self.stream_keys_out = [("gpu", int(dev[i]), int(stream[i])) for i in first]
        self.stream_names = [f"GPU {k[1]} stream {k[2]}" for k in self.stream_keys_out]
        s, e = g["start_ns"][ops] - self.origin, g["end_ns"][ops] - self.origin
        n = ops.size
        floor = np.where(pinned, s, NEG)
        # launch order breaks ties between ops starting together on a stream
        self.ops, self.op_pinned, self.op_comm = ops, pinned, is_comm
        self.op_s = self._points(s, self.stream_chain, np.full(n, GPU_S), ops, np.ones(n), floor)
        self.op_e = self._points(
            np.maximum(e, s), self.stream_chain, np.full(n, GPU_E), ops, np.where(e > s, 0, 2), np.full(n, NEG)
        )
        self.op_launch = g["launch"][ops]
        self.op_launched = launch_times(self.trace)[ops]

    def finish_points(self) -> None:
        t = np.concatenate(self.t)
        chain = np.concatenate(self.chain_key)
        prio = np.concatenate(self.prio)
        order = lex_order((prio, t, chain))
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
        self.floor[self.head] = np.where(
            self.floor[self.head] > NEG, self.floor[self.head], np.minimum(0, self.T[self.head])
        )
        self.t = self.chain_key = self.prio = []  # sorted above: the pieces are freed (large traces)

    def edge(self, src: np.ndarray, dst: np.ndarray, base: np.ndarray | int, etype: int) -> None:
        src, dst = np.asarray(src, np.int64), np.asarray(dst, np.int64)
        if src.size:
            self.edges.append((src, dst, np.broadcast_to(np.asarray(base, np.int64), src.shape).copy(), etype))

    # -- cross edges -------------------------------------------------------------------------
    def weigh(self, steps: Steps) -> Graph:
        """Chain and cross weights such that replaying the graph gives the recorded times."""
        T, n = self.T, self.T.size
        prev_t = np.r_[0, T[:-1]]
        dt = T - prev_t
        base = dt.copy()
        gpu_s = self.kind == GPU_S
        base[gpu_s] = 0  # a stream starts its next op as soon as it may
        sync_e = self.rank[self.span_e[np.flatnonzero(self.sync_has_edge)]]
        base[sync_e] = 0  # a waiting call's time is the GPU's, not the CPU's
        queued = np.flatnonzero(self.queue_has_edge)  # a blocked launch: only its own cost is the CPU's
        base[self.rank[self.span_e[queued]]] = np.maximum(
            self.spans["end"][queued] - self.spans["start"][queued] - self.spans["blocked_ns"][queued], 0
        )
        base[self.join_points] = 0
        base[self.fork_points] = 0
        base[self.head] = 0
        w = np.minimum(base, dt)
        w[self.head] = 0
        src = np.concatenate([e[0] for e in self.edges]) if self.edges else np.zeros(0, np.int64)
        dst = np.concatenate([e[1] for e in self.edges]) if self.edges else np.zeros(0, np.int64)
        lag = np.concatenate([e[2] for e in self.edges]) if self.edges else np.zeros(0, np.int64)
        etype = np.concatenate([np.full(e[0].size, e[3]) for e in self.edges]) if self.edges else np.zeros(0, np.int64)
        lag = np.minimum(lag, T[dst] - T[src])
        chain_ready = np.where(self.head, NEG, prev_t + w)
        del prev_t, dt, base, gpu_s  # each as long as the points: freed before the next ones are made
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
            uniq, code = dense_codes(dst[hit_idx])
            pos = first_rows(code, uniq.size)
            first[uniq] = hit_idx[pos]
        w = w + np.where(chain_binds, residual, 0)
        self.floor = np.where(floor_binds, self.floor + residual, self.floor)
        has_cross = first >= 0
        lag[first[has_cross]] += residual[has_cross]
        binding = np.where(chain_binds, -1, np.where(floor_binds, -2, first))
        del chain_ready, ready, cross_ready, residual, chain_binds, floor_binds, first, has_cross
        graph = self._graph(w, src, dst, lag, etype, steps)
        graph.binding = binding
        graph.launch_latency_ns = self.launch_latency_ns
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
        g = Graph(
            origin_ns=self.origin,
            time=self.T,
            chain=self.chain,
            kind=self.kind,
            ref=self.ref,
            chain_w=w,
            head=self.head,
            floor=self.floor,
            src=src,
            dst=dst,
            lag=lag,
            etype=etype,
            chain_names=c_names,
            chain_keys=self.thread_keys + self.stream_keys_out,
            span_start=sp["start"],
            span_end=sp["end"],
            span_kind=sp["kind"],
            span_thread=self.thread_chain,
            span_runtime=sp["runtime"],
            op_rows=self.ops,
            op_start_point=self.rank[self.op_s],
            op_step=op_step,
            op_is_comm=self.op_comm,
            op_kind=self.trace.gpu_ops["kind"][self.ops],
            step_start_point=self.rank[self.span_s[step_rows]],
            step_end_point=self.rank[self.span_e[step_rows]],
        )
        g.op_end_point = self.rank[self.op_e]
        self._thread_sets(g)
        return g

    def _thread_sets(self, g: Graph) -> None:
        """Per thread chain: DataLoader, sync and launch spans, and the top-level ops (for the
        make-up of CPU time on the path)."""
        sp = self.spans
        for th in range(self.n_threads):
            sel = self.thread_chain == th
            for attr, flag in (
                ("dataloader", SPAN_DATALOADER),
                ("sync_spans", SPAN_SYNC),
                ("launch_spans", SPAN_LAUNCH),
            ):
                m = sel & ((sp["kind"] & flag) > 0)
                getattr(g, attr)[th] = iv.union(sp["start"][m], sp["end"][m])
            m = sel & ((sp["kind"] & SPAN_BLOCKED) > 0)  # the blocked end of each blocked launch call
            g.blocked_spans[th] = iv.union(sp["end"][m] - sp["blocked_ns"][m], sp["end"][m])
        c = self.trace.cpu_ops
        if not len(c):
            return
        rows = np.flatnonzero((c["kind"] == M.CPU_OP) & ~self.cpu_marks[c["name"]])
        top = outermost(c, rows)
        key = c["pid"][top] * (1 << 32) + (c["tid"][top] & 0xFFFFFFFF)
        thread_key = sp["pid"] * (1 << 32) + (sp["tid"] & 0xFFFFFFFF)
        # collective ops on the CPU (gloo, c10d, NCCL enqueues): a thread inside one waits for its peers
        coll = np.flatnonzero(C.name_mask(self.trace, V.COLLECTIVE_OP_RE, ids=c["name"])[c["name"]])
        coll_key = c["pid"][coll] * (1 << 32) + (c["tid"][coll] & 0xFFFFFFFF)
        for th in range(self.n_threads):
            k = thread_key[np.flatnonzero(self.thread_chain == th)[0]]
            mine = coll[coll_key == k]
            g.collective_spans[th] = iv.union(c["start_ns"][mine], c["end_ns"][mine])
        for th in range(self.n_threads):
            k = thread_key[np.flatnonzero(self.thread_chain == th)[0]]
            m = top[key == k]
            m = m[np.argsort(c["start_ns"][m], kind="stable")]
            g.top_ops[th] = (c["start_ns"][m], c["end_ns"][m], c["name"][m])
            g.top_ops_reach[th] = np.maximum.accumulate(c["end_ns"][m]) if m.size else c["end_ns"][m]
        g.main_chain = 0
