"""Cross edges of the dependency graph: launch call -> GPU op, GPU op -> the host call that waited
for it, GPU op -> the op another stream held back (event wait), thread -> thread hand-offs, and a
collective's wait for the last rank. A mixin of the graph builder: it reads the builder's points."""

from __future__ import annotations

import functools

import numpy as np

from ...model import intervals as iv
from ...model import trace as M
from ...model import vocab as V
from ...model.groups import distinct
from ...model.stats import median
from ..kernels import classify as C
from .kinds import (
    BLOCKED_OVERLAP_FRACTION,
    E_EVENT,
    E_FORK,
    E_JOIN,
    E_LAUNCH,
    E_QUEUE,
    E_SYNC,
    NEG,
    SPAN_BLOCKED,
    SPAN_SYNC,
    SYNC_TOLERANCE_NS,
)
from .spans import step_mask


class CrossEdges:
    """Methods of the graph builder that add cross edges (see ``graph._Builder``)."""

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
        # Only ops launched onto an idle stream show what a launch takes; when the queue never drained
        # (a GPU-bound trace), every delay is time spent queued, and the latency is unknown: 0.
        pool = latency[idle]
        self.launch_latency_ns = int(median(pool)) if pool.size else 0
        self.edge(src, dst, np.minimum(latency, self.launch_latency_ns), E_LAUNCH)
        self.launch_pairs = (span_idx, op_idx)
        # ops launched before the first step or the capture keep their recorded times: not a gap in the graph
        unlinked = int((~linked & ~self.op_pinned).sum()) + int((~found & ~self.op_pinned[linked]).sum())
        if unlinked:
            self.notes.append(
                f"{unlinked} of {self.ops.size} GPU ops have no launch call in the graph; they follow their stream only"
            )

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
        restrict = (
            np.array([waited.get(int(row), -1) for row in sp["runtime"][syncs]], dtype=np.int64)
            if waited
            else np.full(syncs.size, -1)
        )
        g_end = self.T[self.rank[self.op_e]]
        for ci, key in enumerate(self.stream_keys.tolist()):
            op = self._last_launched(self.n_threads + ci, start + self.origin)
            ok = (op >= 0) & ((restrict < 0) | (restrict == key))
            ok[ok] &= g_end[op[ok]] <= end[ok] + SYNC_TOLERANCE_NS
            if ok.any():
                self.edge(self.rank[self.op_e[op[ok]]], self.rank[self.span_e[syncs[ok]]], 0, E_SYNC)
                self.sync_has_edge[syncs[ok]] = True

    def link_queue_slots(self) -> None:
        """GPU op end -> end of a launch call that blocked on its stream's full queue: the call returned
        when that op (the last one on the stream to finish before it did) freed a slot."""
        sp = self.spans
        self.queue_has_edge = np.zeros(sp["start"].size, dtype=bool)
        blocked = np.flatnonzero(sp["kind"] & SPAN_BLOCKED)
        if not blocked.size or not getattr(self, "launch_pairs", None) or not self.ops.size:
            return
        span_idx, op_idx = self.launch_pairs
        order = np.argsort(span_idx, kind="stable")
        s_sorted = span_idx[order]
        pos = np.minimum(np.searchsorted(s_sorted, blocked), max(s_sorted.size - 1, 0))
        has = s_sorted.size > 0
        found = (s_sorted[pos] == blocked) if has else np.zeros(blocked.size, dtype=bool)
        calls, ops = blocked[found], op_idx[order[pos[found]]]
        g_end = self.T[self.rank[self.op_e]]
        end = sp["end"][calls] - self.origin
        start = sp["start"][calls] - self.origin
        for chain in distinct(self.stream_chain[ops]).tolist():
            mine = self.stream_chain[ops] == chain
            on = np.flatnonzero(self.stream_chain == chain)
            on = on[np.argsort(g_end[on], kind="stable")]
            i = np.searchsorted(g_end[on], end[mine] + SYNC_TOLERANCE_NS, side="right") - 1
            ok = i >= 0
            freed = on[np.maximum(i, 0)]
            ok &= g_end[freed] >= start[mine]
            if ok.any():
                self.edge(self.rank[self.op_e[freed[ok]]], self.rank[self.span_e[calls[mine][ok]]], 0, E_QUEUE)
                self.queue_has_edge[calls[mine][ok]] = True

    def link_event_waits(self) -> None:
        """Op before the recorded event on one stream -> next op launched onto the waiting stream."""
        r = self.trace.runtime
        if not len(r) or not self.ops.size or len(self.stream_keys) < 2:
            return
        _, waiting = self._sync_stream_info()
        is_wait = self.trace.string_ids(V.STREAM_WAIT_CALL_RE.match, r["name"])
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
            ok[ok] &= self.stream_chain[op[ok]] != self.stream_chain[dst[ok]]
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
        sel = (c["pid"] == thread[0]) & (c["tid"] == thread[1]) & ~self.cpu_marks[c["name"]] & (c["kind"] == M.CPU_OP)
        r = self.trace.runtime
        rsel = (r["pid"] == thread[0]) & (r["tid"] == thread[1]) if len(r) else np.zeros(0, dtype=bool)
        return iv.union(np.r_[c["start_ns"][sel], r["start_ns"][rsel]], np.r_[c["end_ns"][sel], r["end_ns"][rsel]])

    @functools.cached_property
    def cpu_marks(self) -> np.ndarray:
        """Per string id: a DataLoader or step mark (a span around a thread's work, not work itself);
        only the names of CPU ops are tested, once per graph."""
        return C.name_mask(self.trace, V.DATALOADER_RE, ids=self.trace.cpu_ops["name"]) | step_mask(self.trace)

    # -- weights -----------------------------------------------------------------------------
