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


@dataclass
class Hop:
    """One edge of a critical path, in recorded time."""

    src: int
    dst: int
    start_ns: int
    end_ns: int
    kind: str  # "order" or a cross edge name


def critical_paths(g: G.Graph) -> list[list[Hop]]:
    """For each step, the path (latest first) that set its completion, cut at the previous one."""
    t = g.time
    comp = completions(g, t)
    done = np.maximum.accumulate(comp)
    starts = np.r_[t[g.step_start_point[0]], done[:-1]]
    paths = []
    member_pts = [g.step_end_point]
    for i in range(len(comp)):
        if comp[i] < done[i] or done[i] <= starts[i]:
            paths.append([])
            continue
        mine = g.op_end_point[g.op_step == i]
        cand = np.r_[g.step_end_point[i], mine]
        p = int(cand[np.argmax(t[cand])])
        paths.append(_walk(g, p, int(starts[i])))
    del member_pts
    return paths


def _walk(g: G.Graph, p: int, stop_ns: int) -> list[Hop]:
    hops: list[Hop] = []
    binding, src, etype, time = g.binding.tolist(), g.src, g.etype, g.time
    while time[p] > stop_ns:
        b = binding[p]
        if b == -2:
            break
        q = p - 1 if b == -1 else int(src[b])
        hops.append(Hop(q, p, int(time[q]), int(time[p]), "order" if b == -1 else G.EDGE_NAMES[int(etype[b])]))
        p = q
    return hops


def breakdown(trace: Trace, g: G.Graph, path: list[Hop], start_ns: int, end_ns: int) -> dict:
    """Split ``[start_ns, end_ns]`` (one step) along its critical path into causes, in ns.

    The parts sum to ``end_ns - start_ns`` exactly: every hop covers the time between its two
    points, the hops are contiguous, and time before the path's first point is idle (or, before a
    collective's last arrival, waiting for the other ranks).
    """
    out = {c: 0 for c in CATEGORIES}
    cpu_hops: dict[int, list[tuple[int, int]]] = {}
    covered_from = end_ns
    debt = 0  # a hop that goes back in time (timestamps rounded to 1 us) overlaps the hop before it
    for h in path:
        s, e = max(h.start_ns, start_ns), min(h.end_ns, end_ns)
        covered_from = min(covered_from, s)
        if h.end_ns < h.start_ns:
            debt += h.start_ns - h.end_ns
            continue
        take = min(debt, max(e - s, 0))
        e -= take
        debt -= take
        if e <= s:
            continue
        d = e - s
        kind_dst = int(g.kind[h.dst])
        if h.kind == "order":
            if kind_dst == G.GPU_E:
                out[_op_category(g, h.dst)] += d
            elif kind_dst == G.GPU_S:
                out["launch_overhead" if d < LAUNCH_GAP_NS else "idle"] += d
            else:
                cpu_hops.setdefault(int(g.chain[h.dst]), []).append((s, e))
        elif h.kind == "launch":
            out["launch_overhead"] += d
        elif h.kind in ("sync", "event_wait"):
            out["sync"] += d
        elif h.kind == "collective_arrival":
            out["comm_transfer"] += d
        else:  # fork / join: thread hand-off
            out["cpu"] += d
    first_kind = int(g.kind[path[-1].src]) if path else -1
    lead = max(covered_from - start_ns, 0) if path else end_ns - start_ns
    out["comm_wait" if first_kind == G.EXTERNAL else "idle"] += lead
    ops: dict[str, int] = {}
    for th, spans in cpu_hops.items():
        _cpu_makeup(trace, g, th, spans, out, ops)
    out["cpu_ops"] = [{"op": k, "ns": v} for k, v in sorted(ops.items(), key=lambda kv: -kv[1])]
    return out


def _op_category(g: G.Graph, point: int) -> str:
    i = np.searchsorted(g.op_rows, g.ref[point])
    if g.op_is_comm[i]:
        return "comm"
    return "memcpy" if g.op_kind[i] in (M.MEMCPY, M.MEMSET) else "compute"


def _cpu_makeup(trace: Trace, g: G.Graph, th: int, spans: list[tuple[int, int]], out: dict, ops: dict) -> None:
    """CPU time on the path on one thread: DataLoader, sync, launch calls, then top-level ops."""
    arr = np.array(spans, dtype=np.int64)
    rest = iv.union(arr[:, 0] + g.origin_ns, arr[:, 1] + g.origin_ns)
    for name, sets in (("dataloader", g.dataloader), ("sync", g.sync_spans), ("launch_overhead", g.launch_spans)):
        part = iv.intersect(rest, sets.get(th, iv.empty()))
        out[name] += iv.total(part)
        rest = iv.subtract(rest, part)
    total = iv.total(rest)
    out["cpu"] += total
    top = g.top_ops.get(th)
    in_ops = 0
    if top is not None and top[0].size and total:
        s, e, names = top  # outermost ops of the thread: disjoint
        per_op = iv.overlap_per_interval(s, e, rest)
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
