"""Replay a dependency graph, find each step's critical path and split it by cause.

Input: a :class:`~.graph.Graph` (optionally with changed weights). Output: point times, step
completions and, on the recorded graph, each step's critical path and its breakdown.

Replay: a point's time is the maximum of its chain predecessor's time plus the chain weight, its
floor, and every cross edge's source time plus lag. Along a chain this recurrence is a max-plus
scan, ``t = A + running_max(X - A)`` with ``A`` the chain's prefix sum of weights and ``X`` the
cross-edge bounds -- one vectorised pass over all chains. Cross edges are then re-applied until
nothing moves; each pass settles one more chain hop of the longest path.

Every edge goes forward in recorded time, so the points are replayed window by window in recorded
time (a step's worth of points at least, long steps cut shorter, see ``_blocks``): edges from
earlier windows are already settled, and a window needs only as many passes as its own longest
chain of hops, each over its own points. Replaying all points at once would need passes in
proportion to the number of steps, each over every point: time quadratic in the trace's length.
The windows and the index arrays their passes read (a :class:`Layout`) depend on the chains, times
and edges only, so the what-ifs that keep those share one.

Step time follows docs/definitions.md: the interval between consecutive step completions, a completion
being max(the step's CPU end, the end of the last GPU op launched inside it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...model import intervals as iv
from ...model import trace as M
from ...model.groups import dense_codes, distinct, isin, stable_order
from ...model.trace import Trace
from ..gputime.idle import LAUNCH_LATENCY_NS
from . import graph as G

MAX_PASSES = 20_000

# queue_full: the host blocked in a launch call until the GPU freed a slot in a full launch queue (the GPU
# sets the pace); backlog: in a step without a step time, the wait for work launched before the capture.
CATEGORIES = (
    "compute",
    "comm",
    "comm_wait",
    "comm_transfer",
    "memcpy",
    "cpu",
    "launch_overhead",
    "dataloader",
    "sync",
    "queue_full",
    "idle",
    "backlog",
)


@dataclass
class Model:
    """The parts of a graph a replay reads: chains (contiguous), weights, floors and cross edges; the
    recorded times and step starts that cut the replay into windows; and, for models of one graph
    that keep its chains and edges, the :class:`Layout` they share."""

    chain: np.ndarray
    chain_w: np.ndarray
    floor: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    lag: np.ndarray
    time: np.ndarray | None = None  # recorded time of each point (replay windows); None: one window
    window_starts: np.ndarray | None = None  # recorded times where a window may begin (step starts)
    layout: Layout | None = field(default=None, repr=False, compare=False)

    @classmethod
    def of(cls, g: G.Graph) -> "Model":
        m = cls(
            g.chain, g.chain_w.copy(), g.floor.copy(), g.src, g.dst, g.lag.copy(), g.time, g.time[g.step_start_point]
        )
        if g.replay_layout is None and len(g):
            g.replay_layout = Layout.of(m)
        m.layout = g.replay_layout
        return m


MIN_WINDOW_POINTS = 2_000  # windows are whole steps merged until they hold this many points
# windows hold this many points on average at most: long steps are cut at equal stretches of recorded time
MAX_WINDOW_POINTS = 4_096


@dataclass
class _Window:
    """One window's points ``lo:hi`` (in layout order) and the index arrays its passes read."""

    lo: int
    hi: int
    carried: np.ndarray  # points (layout order) that go on from their chain's earlier window ...
    carried_from: np.ndarray  # ... and that chain's previous point
    out_edges: np.ndarray  # edges (in layout edge order) from settled windows, by destination
    out_src: np.ndarray
    out_starts: np.ndarray
    out_targets: np.ndarray  # window-local
    in_edges: np.ndarray  # edges inside the window, by destination
    in_src: np.ndarray  # window-local
    in_starts: np.ndarray
    in_targets: np.ndarray  # window-local
    seg: np.ndarray  # run (chain) number of each point within the window
    heads: np.ndarray  # window-local first point of each run


@dataclass
class Layout:
    """How a replay walks a graph: points ordered by window (``_blocks``), then chain, then chain
    order, so that each window's chains are contiguous runs; edges by destination; and per window
    the index arrays its passes read. Depends on the chains, times and edges, not on weights."""

    perm: np.ndarray  # layout order -> point
    pos: np.ndarray  # point -> layout order
    chain_head: np.ndarray  # layout order: the point heads its chain
    run_start: np.ndarray  # layout order: first point of the point's run (its chain within its window)
    run_head: np.ndarray
    edges: np.ndarray  # edge order: by destination's layout position
    windows: list[_Window]

    @classmethod
    def of(cls, m: Model) -> "Layout":
        n = m.chain.size
        head = np.r_[True, m.chain[1:] != m.chain[:-1]]
        window = _blocks(m, head)
        chains = int(m.chain.max()) + 1
        perm = stable_order(window * chains + m.chain, (int(window.max()) + 1) * chains)
        pos = np.empty(n, dtype=np.int64)
        pos[perm] = np.arange(n)
        chain, win = m.chain[perm], window[perm]
        run_head = np.r_[True, (chain[1:] != chain[:-1]) | (win[1:] != win[:-1])]
        run_start = np.maximum.accumulate(np.where(run_head, np.arange(n), 0))
        chain_head = head[perm]
        carried = np.flatnonzero(run_head & ~chain_head)
        carried_from = pos[perm[carried] - 1]
        dst_all = pos[m.dst]
        edges = np.argsort(dst_all, kind="stable")
        src, dst = pos[m.src][edges], dst_all[edges]
        bounds = np.flatnonzero(np.r_[True, win[1:] != win[:-1], True])
        e_bounds = np.searchsorted(dst, bounds)
        c_bounds = np.searchsorted(carried, bounds)
        windows = []
        for b in range(bounds.size - 1):
            lo, hi = int(bounds[b]), int(bounds[b + 1])
            es = np.arange(e_bounds[b], e_bounds[b + 1])
            inner = src[es] >= lo
            o, i = es[~inner], es[inner]
            o_start, i_start = _runs(dst[o]), _runs(dst[i])
            heads = np.flatnonzero(run_head[lo:hi])
            seg = np.zeros(hi - lo, dtype=np.int64)
            seg[heads[1:]] = 1
            c = slice(c_bounds[b], c_bounds[b + 1])
            windows.append(
                _Window(
                    lo,
                    hi,
                    carried[c],
                    carried_from[c],
                    o,
                    src[o],
                    o_start,
                    dst[o][o_start] - lo,
                    i,
                    src[i] - lo,
                    i_start,
                    dst[i][i_start] - lo,
                    np.cumsum(seg),
                    heads,
                )
            )
        return cls(perm, pos, chain_head, run_start, run_head, edges, windows)


def _runs(sorted_keys: np.ndarray) -> np.ndarray:
    """Where each run of equal values begins in a sorted array."""
    return np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]) if sorted_keys.size else sorted_keys


def replay(m: Model) -> np.ndarray:
    """Time of every point (ns from the graph's origin) under the model's weights, window after
    window: the same fixed point a replay of the whole graph at once reaches."""
    n = m.chain.size
    if not n:
        return np.zeros(0, dtype=np.int64)
    lay = m.layout if m.layout is not None else Layout.of(m)
    w = m.chain_w[lay.perm]
    floor = m.floor[lay.perm]
    floor[lay.chain_head] = np.maximum(floor[lay.chain_head], G.NEG // 2)  # every chain head has a finite bound
    A = np.where(lay.run_head, 0, w)
    np.cumsum(A, out=A)
    A -= A[lay.run_start]  # summed chain weights from the point's run head (in place: one array, not three)
    lag = m.lag[lay.edges]
    t = np.zeros(n, dtype=np.int64)
    for win in lay.windows:
        X = floor[win.lo : win.hi].copy()
        if win.carried.size:  # a chain going on from an earlier window: its settled time bounds the run
            at = win.carried - win.lo
            X[at] = np.maximum(X[at], t[win.carried_from] + w[win.carried])
        if win.out_edges.size:  # edges from settled windows: fixed bounds
            bound = np.maximum.reduceat(t[win.out_src] + lag[win.out_edges], win.out_starts)
            X[win.out_targets] = np.maximum(X[win.out_targets], bound)
        t[win.lo : win.hi] = _settle(X, A[win.lo : win.hi], win, lag[win.in_edges])
    return t[lay.pos]


def _blocks(m: Model, head: np.ndarray) -> np.ndarray:
    """Per point, its replay window (0, 1, ...): runs of steps by recorded time, at least
    ``MIN_WINDOW_POINTS`` points each (long steps cut at equal stretches of recorded time, so that a
    window holds about ``MAX_WINDOW_POINTS`` at most), merged wherever an edge would lead back to an
    earlier window (clock skew between the CPU's and the GPU's timestamps), so that no edge does."""
    n = m.chain.size
    if m.time is None or not n:
        return np.zeros(n, dtype=np.int64)
    cuts = distinct(m.window_starts) if m.window_starts is not None else np.zeros(0, dtype=np.int64)
    slices = n // MAX_WINDOW_POINTS
    if slices > 1:
        t0, t1 = int(m.time.min()), int(m.time.max())
        cuts = distinct(np.r_[cuts, t0 + (np.arange(1, slices) * ((t1 - t0) / slices)).astype(np.int64)])
    if cuts.size < 2:
        return np.zeros(n, dtype=np.int64)
    block = np.searchsorted(cuts, m.time, side="right")
    sizes = np.bincount(block, minlength=cuts.size + 1)
    # merge consecutive windows until each holds enough points
    merged = np.zeros(sizes.size, dtype=np.int64)
    have = 0
    for i, k in enumerate(sizes.tolist()):
        merged[i] = merged[i - 1] + (have >= MIN_WINDOW_POINTS) if i else 0
        have = k if i and have >= MIN_WINDOW_POINTS else have + k
    block = merged[block]
    # edges (cross and chain) that lead back in window order join every window in between
    prev = np.flatnonzero(~head)
    src = np.r_[m.src, prev - 1]
    dst = np.r_[m.dst, prev]
    back = block[src] > block[dst]
    if back.any():
        n_blocks = int(block.max()) + 1
        join = np.zeros(n_blocks + 1, dtype=np.int64)
        np.add.at(join, block[dst[back]], 1)
        np.add.at(join, block[src[back]], -1)
        joined = np.cumsum(join)[:-1] > 0  # window i is joined with window i + 1
        block = np.r_[0, np.cumsum(~joined[:-1])][block]
    return block


def _settle(floor: np.ndarray, A: np.ndarray, b: _Window, lag: np.ndarray) -> np.ndarray:
    """Times of one window's points: its chain runs and its own cross edges, re-applied until no bound
    moves; each pass settles one more chain hop of the longest path."""
    t = _scan(floor, A, b.seg, b.heads)
    if not b.in_edges.size:
        return t
    at = b.in_targets
    last = floor[at]
    X = floor.copy()
    for _ in range(MAX_PASSES):
        bound = np.maximum.reduceat(t[b.in_src] + lag, b.in_starts)
        np.maximum(bound, last, out=bound)  # bounds only rise from pass to pass
        if (bound == last).all():
            return t
        X[at] = last = bound
        t = _scan(X, A, b.seg, b.heads)
    raise RuntimeError("critical path replay did not settle")  # edges go forward in time: cannot happen


def _scan(X: np.ndarray, A: np.ndarray, seg: np.ndarray, heads: np.ndarray) -> np.ndarray:
    """Per run: t_i = max(t_{i-1} + w_i, X_i), as A + running max of (X - A); runs start at ``heads``."""
    V = X - A
    vmin = V[heads].min()
    np.maximum(V, vmin, out=V)
    V -= vmin
    off = seg * (V.max() + 1)  # lifts each run above the one before, so the running max restarts
    V += off
    np.maximum.accumulate(V, out=V)
    V -= off
    V += A
    V += vmin
    return V


def completions(g: G.Graph, t: np.ndarray) -> np.ndarray:
    """Completion time of each step: its CPU end or the end of the last GPU op it launched."""
    c = t[g.step_end_point].copy()
    mine = g.op_step >= 0
    if mine.any():
        np.maximum.at(c, g.op_step[mine], t[g.op_end_point[mine]])
    return c


def step_times(g: G.Graph, t: np.ndarray) -> np.ndarray:
    """Interval between consecutive completions (the first: completion - its start), ns."""
    done = np.maximum.accumulate(completions(g, t))
    return np.diff(np.r_[t[g.step_start_point[0]], done])


# hop categories (codes into HOP_CATEGORIES); CPU hops are split further by what the thread was in
HOP_CATEGORIES = ("compute", "comm", "memcpy", "launch_overhead", "idle", "cpu", "sync", "comm_transfer", "queue_full")
_H = {name: i for i, name in enumerate(HOP_CATEGORIES)}
_EDGE_CATEGORY = {
    G.E_LAUNCH: _H["launch_overhead"],
    G.E_SYNC: _H["sync"],
    G.E_EVENT: _H["sync"],
    G.E_FORK: _H["cpu"],
    G.E_JOIN: _H["cpu"],
    G.E_QUEUE: _H["queue_full"],
}


@dataclass
class Path:
    """One step's critical path: its points, latest first, and per hop (point i+1 -> point i) the
    recorded interval and category code (``HOP_CATEGORIES``)."""

    points: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    category: np.ndarray
    edge: np.ndarray  # cross edge of each hop, -1 for chain order

    def __len__(self) -> int:
        return int(self.start_ns.size)


def critical_paths(g: G.Graph) -> list[Path]:
    """For each step, the path (latest first) that set its completion, cut at the previous one."""
    t = g.time
    comp = completions(g, t)
    done = np.maximum.accumulate(comp)
    starts = np.r_[t[g.step_start_point[0]], done[:-1]]
    # per point: the nearest point at or before it on its chain that a cross edge or the floor set (a
    # chain head always is one), so a walk crosses a run of chain edges in one step
    n = t.size
    run_from = np.maximum.accumulate(np.where(g.binding != -1, np.arange(n), 0))
    op_cat = _op_categories(g)
    paths = []
    for i in range(len(comp)):
        if comp[i] < done[i] or done[i] <= starts[i]:
            paths.append(_hops(g, np.zeros(1, dtype=np.int64), op_cat))
            continue
        cand = np.r_[g.step_end_point[i], g.op_end_point[g.op_step == i]]
        p = int(cand[np.argmax(t[cand])])
        paths.append(_hops(g, _walk(g, run_from, p, int(starts[i])), op_cat))
    return paths


def _walk(g: G.Graph, run_from: np.ndarray, p: int, stop_ns: int) -> np.ndarray:
    """The points from ``p`` back along the edges that set them (latest first), up to the first point
    at or before ``stop_ns`` or one only its floor set."""
    parts = [np.array([p], dtype=np.int64)]
    while True:
        q = int(run_from[p])  # p, p - 1, ..., q: chain edges set p .. q + 1
        # times rise along a chain: from the first point after stop_ns on, the walk goes on
        j = q + int(np.searchsorted(g.time[q : p + 1], stop_ns, side="right"))
        if j > q:  # it stops at j - 1 (or at p itself)
            parts.append(np.arange(p - 1, j - 2, -1))
            break
        parts.append(np.arange(p - 1, q - 1, -1))
        b = int(g.binding[q])
        if b == -2:
            break
        p = int(g.src[b])
        parts.append(np.array([p], dtype=np.int64))
    return np.concatenate(parts)


def _op_categories(g: G.Graph) -> np.ndarray:
    """Per GPU op of the graph: compute, comm or memcpy (memset counts with copies)."""
    memcpy = isin(g.op_kind, (M.MEMCPY, M.MEMSET))
    return np.where(g.op_is_comm, _H["comm"], np.where(memcpy, _H["memcpy"], _H["compute"]))


def _hops(g: G.Graph, pts: np.ndarray, op_cat: np.ndarray) -> Path:
    dst, src = pts[:-1], pts[1:]
    b = g.binding[dst]
    kind = g.kind[dst]
    start, end = g.time[src], g.time[dst]
    cat = np.full(dst.size, _H["cpu"])
    gpu_end = (b == -1) & (kind == G.GPU_E)
    if gpu_end.any():
        cat[gpu_end] = op_cat[np.searchsorted(g.op_rows, g.ref[dst[gpu_end]])]
    gap = (b == -1) & (kind == G.GPU_S)
    # a stream gap shorter than the launch latency threshold on the path is launch latency, not idle
    cat[gap] = np.where(end[gap] - start[gap] < LAUNCH_LATENCY_NS, _H["launch_overhead"], _H["idle"])
    cross = b >= 0
    if cross.any():
        lut = np.array([_EDGE_CATEGORY[k] for k in range(len(G.EDGE_NAMES))])
        cat[cross] = lut[g.etype[b[cross]]]
    return Path(pts, start, end, cat, np.where(cross, b, -1))


def breakdown(trace: Trace, g: G.Graph, path: Path, start_ns: int, end_ns: int) -> dict:
    """Split ``[start_ns, end_ns]`` (one step) along its critical path into causes, in ns.

    The parts sum to ``end_ns - start_ns`` exactly: the hops are contiguous, a hop that steps back in
    time (timestamps rounded to 1 us) only removes the overlap from the hop before it, and time before
    the path's first point is idle.
    """
    out = {c: 0 for c in CATEGORIES}
    ops: dict[str, int] = {}
    if len(path):
        # effective interval: clipped to the step and to the start of every later hop
        later_start = np.minimum.accumulate(np.r_[end_ns, path.start_ns[:-1]])
        eff_end = np.minimum(path.end_ns, later_start)
        eff_start = np.maximum(path.start_ns, start_ns)
        d = np.maximum(eff_end - eff_start, 0)
        sums = np.bincount(path.category, weights=d, minlength=len(HOP_CATEGORIES)).astype(np.int64)
        for name, code in _H.items():
            if name != "cpu":
                out[name] += int(sums[code])
        covered_from = int(min(eff_start.min(), end_ns))
        cpu = (path.category == _H["cpu"]) & (d > 0)
        is_order = g.binding[path.points[:-1]] == -1
        for th in distinct(g.chain[path.points[:-1][cpu & is_order]]).tolist():
            sel = cpu & is_order & (g.chain[path.points[:-1]] == th)
            _cpu_makeup(trace, g, th, eff_start[sel], eff_start[sel] + d[sel], out, ops)
        out["cpu"] += int(d[cpu & ~is_order].sum())  # thread hand-offs
    else:
        covered_from = end_ns
    out["idle"] += max(covered_from - start_ns, 0)
    out["cpu_ops"] = [{"op": k, "ns": v} for k, v in sorted(ops.items(), key=lambda kv: -kv[1])]
    return out


def _cpu_makeup(trace: Trace, g: G.Graph, th: int, s: np.ndarray, e: np.ndarray, out: dict, ops: dict) -> None:
    """CPU time on the path on one thread: DataLoader, sync, blocked on a full launch queue, launch calls,
    then top-level ops."""
    rest = iv.union(s + g.origin_ns, e + g.origin_ns)
    if not rest[0].size:
        return
    # the thread's spans and ops are the whole trace's: only those around this step's stretches count
    lo, hi = int(rest[0][0]), int(rest[1][-1])
    for name, sets in (
        ("dataloader", g.dataloader),
        ("sync", g.sync_spans),
        ("queue_full", g.blocked_spans),
        ("launch_overhead", g.launch_spans),
    ):
        part = iv.intersect(rest, iv.overlapping(sets.get(th, iv.empty()), lo, hi))
        out[name] += iv.total(part)
        rest = iv.subtract(rest, part)
    total = iv.total(rest)
    out["cpu"] += total
    top = g.top_ops.get(th)
    in_ops = 0
    if top is not None and top[0].size and total:
        op_s, op_e, names = top  # outermost ops of the thread, by start
        # ops before the first whose end (or an earlier op's) passes lo, or starting at hi or later, miss it
        a = int(np.searchsorted(g.top_ops_reach[th], lo, side="right"))
        b = int(np.searchsorted(op_s, hi, side="left"))
        op_s, op_e, names = op_s[a:b], op_e[a:b], names[a:b]
        per_op = iv.overlap_per_interval(op_s, op_e, rest)
        hit = per_op > 0
        for nid, ns in zip(*_group_sum(names[hit], per_op[hit])):
            name = trace.string(int(nid))
            ops[name] = ops.get(name, 0) + int(ns)
            in_ops += int(ns)
    if total - in_ops:
        ops["(between ops)"] = ops.get("(between ops)", 0) + total - in_ops


def _group_sum(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uniq, inv = dense_codes(keys)
    return uniq, np.bincount(inv, weights=values, minlength=uniq.size).astype(np.int64)
