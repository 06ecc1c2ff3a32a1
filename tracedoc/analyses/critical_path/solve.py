"""Replay a dependency graph, find each step's critical path and split it by cause.

Input: a :class:`~.graph.Graph` (optionally with changed weights). Output: point times, step
completions and, on the recorded graph, each step's critical path and its breakdown.

Replay: a point's time is the maximum of its chain predecessor's time plus the chain weight, its
floor, and every cross edge's source time plus lag. Along a chain this recurrence is a max-plus
scan, ``t = A + running_max(X - A)`` with ``A`` the chain's prefix sum of weights and ``X`` the
cross-edge bounds -- one vectorised pass over all chains. Cross edges are then re-applied until
nothing moves; each pass settles one more chain hop of the longest path, and every edge goes
forward in recorded time, so a handful of passes suffice on real steps.

Step time follows DESIGN.md: the interval between consecutive step completions, a completion
being max(the step's CPU end, the end of the last GPU op launched inside it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...model import intervals as iv
from ...model import trace as M
from ...model.trace import Trace
from . import graph as G

MAX_PASSES = 20_000
LAUNCH_GAP_NS = 30_000  # a stream gap shorter than this on the path is launch latency, not idle

CATEGORIES = ("compute", "comm", "comm_wait", "comm_transfer", "memcpy", "cpu", "launch_overhead", "dataloader",
              "sync", "idle")


@dataclass
class Model:
    """The parts of a graph a replay reads: chains (contiguous), weights, floors and cross edges."""

    chain: np.ndarray
    chain_w: np.ndarray
    floor: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    lag: np.ndarray

    @classmethod
    def of(cls, g: G.Graph) -> "Model":
        return cls(g.chain, g.chain_w.copy(), g.floor.copy(), g.src, g.dst, g.lag.copy())


def replay(m: Model) -> np.ndarray:
    """Time of every point (ns from the graph's origin) under the model's weights."""
    n = m.chain.size
    if not n:
        return np.zeros(0, dtype=np.int64)
    head = np.r_[True, m.chain[1:] != m.chain[:-1]]
    w = np.where(head, 0, m.chain_w)
    cs = np.cumsum(w)
    head_idx = np.maximum.accumulate(np.where(head, np.arange(n), 0))
    A = cs - cs[head_idx]
    seg = np.cumsum(head) - 1
    order = np.argsort(m.dst, kind="stable")
    dst_sorted = m.dst[order]
    if order.size:
        starts = np.r_[0, np.flatnonzero(dst_sorted[1:] != dst_sorted[:-1]) + 1]
        targets = dst_sorted[starts]
    src_sorted, lag_sorted = m.src[order], m.lag[order]
    floor = m.floor.copy()
    floor[head] = np.maximum(floor[head], G.NEG // 2)  # every chain head has a finite bound
    t = _scan(floor, A, seg, head)
    for _ in range(MAX_PASSES):
        if not order.size:
            return t
        X = floor.copy()
        bound = np.maximum.reduceat(t[src_sorted] + lag_sorted, starts)
        X[targets] = np.maximum(X[targets], bound)
        t_new = _scan(X, A, seg, head)
        if np.array_equal(t_new, t):
            return t
        t = t_new
    raise RuntimeError("critical path replay did not settle")  # edges go forward in time: cannot happen


def _scan(X: np.ndarray, A: np.ndarray, seg: np.ndarray, head: np.ndarray) -> np.ndarray:
    """Per chain: t_i = max(t_{i-1} + w_i, X_i), as A + running max of (X - A)."""
    V = X - A
    vmin = int(V[head].min())
    V = np.maximum(V, vmin) - vmin
    span = int(V.max()) + 1
    acc = np.maximum.accumulate(V + seg * span) - seg * span
    return acc + vmin + A


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
HOP_CATEGORIES = ("compute", "comm", "memcpy", "launch_overhead", "idle", "cpu", "sync", "comm_transfer")
_H = {name: i for i, name in enumerate(HOP_CATEGORIES)}
_EDGE_CATEGORY = {G.E_LAUNCH: _H["launch_overhead"], G.E_SYNC: _H["sync"], G.E_EVENT: _H["sync"],
                  G.E_FORK: _H["cpu"], G.E_JOIN: _H["cpu"], G.E_ARRIVAL: _H["comm_transfer"]}


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
    binding, src, times = g.binding.tolist(), g.src.tolist(), t.tolist()
    op_cat = _op_categories(g)
    paths = []
    for i in range(len(comp)):
        if comp[i] < done[i] or done[i] <= starts[i]:
            paths.append(_hops(g, np.zeros(1, dtype=np.int64), op_cat))
            continue
        cand = np.r_[g.step_end_point[i], g.op_end_point[g.op_step == i]]
        p = int(cand[np.argmax(t[cand])])
        paths.append(_hops(g, _walk(binding, src, times, p, int(starts[i])), op_cat))
    return paths


def _walk(binding: list, src: list, times: list, p: int, stop_ns: int) -> np.ndarray:
    pts = [p]
    while times[p] > stop_ns:
        b = binding[p]
        if b == -2:
            break
        p = p - 1 if b == -1 else src[b]
        pts.append(p)
    return np.array(pts, dtype=np.int64)


def _op_categories(g: G.Graph) -> np.ndarray:
    """Per GPU op of the graph: compute, comm or memcpy (memset counts with copies)."""
    memcpy = np.isin(g.op_kind, (M.MEMCPY, M.MEMSET))
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
    cat[gap] = np.where(end[gap] - start[gap] < LAUNCH_GAP_NS, _H["launch_overhead"], _H["idle"])
    cross = b >= 0
    if cross.any():
        lut = np.array([_EDGE_CATEGORY[k] for k in range(len(G.EDGE_NAMES))])
        cat[cross] = lut[g.etype[b[cross]]]
    return Path(pts, start, end, cat, np.where(cross, b, -1))


def breakdown(trace: Trace, g: G.Graph, path: Path, start_ns: int, end_ns: int) -> dict:
    """Split ``[start_ns, end_ns]`` (one step) along its critical path into causes, in ns.

    The parts sum to ``end_ns - start_ns`` exactly: the hops are contiguous, a hop that steps back in
    time (timestamps rounded to 1 us) only removes the overlap from the hop before it, and time before
    the path's first point is idle (or, before a collective's last arrival, waiting for the others).
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
        if g.arrival_edges is not None:  # a collective's hop: first the wait for the last rank
            arrival = np.flatnonzero(np.isin(path.edge, g.arrival_edges))
            wait = g.arrival_wait_ns[np.searchsorted(g.arrival_edges, path.edge[arrival])]
            waited = int(np.minimum(wait, d[arrival]).sum())
            out["comm_wait"] += waited
            sums[_H["comm_transfer"]] -= waited
        for name, code in _H.items():
            if name != "cpu":
                out[name] += int(sums[code])
        covered_from = int(min(eff_start.min(), end_ns))
        cpu = (path.category == _H["cpu"]) & (d > 0)
        is_order = g.binding[path.points[:-1]] == -1
        for th in np.unique(g.chain[path.points[:-1][cpu & is_order]]).tolist():
            sel = cpu & is_order & (g.chain[path.points[:-1]] == th)
            _cpu_makeup(trace, g, th, eff_start[sel], eff_start[sel] + d[sel], out, ops)
        out["cpu"] += int(d[cpu & ~is_order].sum())  # thread hand-offs
    else:
        covered_from = end_ns
    out["idle"] += max(covered_from - start_ns, 0)
    out["cpu_ops"] = [{"op": k, "ns": v} for k, v in sorted(ops.items(), key=lambda kv: -kv[1])]
    return out


def _cpu_makeup(trace: Trace, g: G.Graph, th: int, s: np.ndarray, e: np.ndarray, out: dict, ops: dict) -> None:
    """CPU time on the path on one thread: DataLoader, sync, launch calls, then top-level ops."""
    rest = iv.union(s + g.origin_ns, e + g.origin_ns)
    for name, sets in (("dataloader", g.dataloader), ("sync", g.sync_spans), ("launch_overhead", g.launch_spans)):
        part = iv.intersect(rest, sets.get(th, iv.empty()))
        out[name] += iv.total(part)
        rest = iv.subtract(rest, part)
    total = iv.total(rest)
    out["cpu"] += total
    top = g.top_ops.get(th)
    in_ops = 0
    if top is not None and top[0].size and total:
        op_s, op_e, names = top  # outermost ops of the thread: disjoint
        per_op = iv.overlap_per_interval(op_s, op_e, rest)
        hit = per_op > 0
        for nid, ns in zip(*_group_sum(names[hit], per_op[hit])):
            name = trace.string(int(nid))
            ops[name] = ops.get(name, 0) + int(ns)
            in_ops += int(ns)
    if total - in_ops:
        ops["(between ops)"] = ops.get("(between ops)", 0) + total - in_ops


def _group_sum(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    uniq, inv = np.unique(keys, return_inverse=True)
    return uniq, np.bincount(inv, weights=values, minlength=uniq.size).astype(np.int64)
