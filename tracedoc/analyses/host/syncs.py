"""Host synchronizations: explicit and implicit synchronizing calls, and the GPU idle time a launching
thread spends blocked in them."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...model import intervals as iv
from ...model import trace as M
from ...model import vocab as V
from ...model.evidence import ImplicitSync, SyncBlockedCall, SyncCall
from ...model.groups import Groups, distinct, isin, largest_first, row_codes, lex_order
from ...model.trace import Trace
from ..kernels import classify as C
from .links import OpsByExternalId
from ..core.registry import Produced, analysis


@dataclass
class BlockingCalls:
    """Every synchronizing call in the window, explicit or implicit, one row per call (a sync runtime
    call and the ``.item()`` op around it are two rows): its span, thread and name id."""

    start_ns: np.ndarray
    end_ns: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    name: np.ndarray

    def on_threads(self, pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
        """Which rows ran on one of the threads ``(pid[i], tid[i])``."""
        if not self.start_ns.size + np.size(pid):
            return np.zeros(self.start_ns.size, dtype=bool)
        code = row_codes(np.concatenate([self.pid, pid]), np.concatenate([self.tid, tid]))[0]
        return isin(code[: self.start_ns.size], code[self.start_ns.size :])


def sync_calls(
    trace: Trace, lo: int, hi: int
) -> tuple[iv.IntervalSet, dict, list[SyncCall], list[SyncCall], BlockingCalls]:
    """Synchronizing CPU calls: runtime sync APIs, synchronous memcpy, ``.item()``-style ops, and the
    implicit syncs (``implicit_syncs``). Returns the union of their spans, counts, the explicit-sync
    table, the implicit-sync table and the calls one by one."""
    r, c = trace.runtime, trace.cpu_ops
    parts_s, parts_e, rows_info = [], [], []
    calls = {k: [np.zeros(0, dtype=np.int64)] for k in ("start", "end", "pid", "tid", "name")}

    def keep(table, rows: np.ndarray) -> None:
        for k, col in (("start", "start_ns"), ("end", "end_ns"), ("pid", "pid"), ("tid", "tid"), ("name", "name")):
            calls[k].append(table[col][rows].astype(np.int64))

    stats = {"sync_calls": 0, "sync_ns": 0, "sync_memcpy_count": 0, "implicit_sync_calls": 0, "implicit_sync_ns": 0}
    frames = []
    if len(r):
        sync_names = C.name_mask(trace, V.SYNC_CALL_RE, ids=r["name"])
        m = sync_names[r["name"]] & (r["start_ns"] < hi) & (r["end_ns"] > lo)
        rows = np.flatnonzero(m)
        parts_s.append(r["start_ns"][rows])
        parts_e.append(r["end_ns"][rows])
        keep(r, rows)
        stats["sync_memcpy_count"] = int(
            C.name_mask(trace, V.SYNC_MEMCPY_RE, ids=r["name"][rows])[r["name"][rows]].sum()
        )
        ext = r["external_id"][rows]
        frames.append({"call": r["name"][rows], "ext": ext, "dur": r["end_ns"][rows] - r["start_ns"][rows]})
    if len(c):
        sync_ops = C.name_mask(trace, V.SYNC_OP_RE, ids=c["name"])
        m = sync_ops[c["name"]] & (c["start_ns"] < hi) & (c["end_ns"] > lo)
        rows = np.flatnonzero(m)
        parts_s.append(c["start_ns"][rows])
        parts_e.append(c["end_ns"][rows])
        keep(c, rows)
        if frames:  # an op whose sync runtime call is already counted is the same sync, not another
            counted = frames[0]["ext"]
            ext = c["external_id"][rows]
            rows = rows[~((ext >= 0) & isin(ext, counted))]
        frames.append(
            {"call": c["name"][rows], "ext": c["external_id"][rows], "dur": c["end_ns"][rows] - c["start_ns"][rows]}
        )
    imp_s, imp_e, imp_frame = implicit_syncs(trace, lo, hi)
    parts_s.append(imp_s)
    parts_e.append(imp_e)
    if imp_frame["call"].size:
        for k, v in (
            ("start", imp_s),
            ("end", imp_e),
            ("pid", imp_frame["pid"]),
            ("tid", imp_frame["tid"]),
            ("name", imp_frame["call"]),
        ):
            calls[k].append(np.asarray(v, dtype=np.int64))
    implicit_rows = _by_op_and_call(trace, imp_frame)
    stats["implicit_sync_calls"] = int(imp_frame["call"].size)
    stats["implicit_sync_ns"] = iv.total(iv.clip(iv.union(imp_s, imp_e), lo, hi))
    spans = iv.union(np.concatenate(parts_s), np.concatenate(parts_e))
    df = _concat_calls(frames)
    stats["sync_calls"] = int(df["call"].size)
    stats["sync_ns"] = iv.total(iv.clip(spans, lo, hi))
    rows_info = _by_op_and_call(trace, df)
    blocking = BlockingCalls(*(np.concatenate(calls[k]) for k in ("start", "end", "pid", "tid", "name")))
    return spans, stats, rows_info, implicit_rows, blocking


def implicit_syncs(trace: Trace, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Calls that block the host until the device drains as a side effect: freeing device or pinned
    memory (``cudaFree``/``hipFree``), pinned host allocation (``cudaHostAlloc``), ``empty_cache``,
    the launch call of a copy from or to pageable memory, and ``cudaMalloc`` when the caching
    allocator is also freeing (it releases its cache and retries the allocation when memory runs
    short; in steady state it reuses blocks and calls neither). Explicit syncs are not repeated.
    The calls come as columns (``call``, ``ext``, ``dur``, ``op``, ``pid``, ``tid``); ``op`` is the
    call's own name where the call is a CPU op, else -1."""
    r, c = trace.runtime, trace.cpu_ops
    starts, ends, frames = [np.zeros(0, dtype=np.int64)], [np.zeros(0, dtype=np.int64)], []
    if len(r):
        in_win = (r["start_ns"] < hi) & (r["end_ns"] > lo)
        name = r["name"]
        names = C.name_mask(trace, V.IMPLICIT_SYNC_CALL_RE, ids=name)[name]
        allocs = C.name_mask(trace, V.ALLOC_CALL_RE, ids=name)[name]
        if not (in_win & C.name_mask(trace, V.FREE_CALL_RE, ids=name)[name]).any():
            names &= ~allocs  # cudaMalloc alone: the allocator growing its cache, not memory pressure
        implicit = names & in_win
        g = trace.gpu_ops
        if len(g):  # the launch call of a pageable copy waits for the copy (cudaMemcpyAsync included)
            pageable = (
                (g["kind"] == M.MEMCPY)
                & (g["launch"] >= 0)
                & ((g["src_kind"] == M.MEM_PAGEABLE) | (g["dst_kind"] == M.MEM_PAGEABLE))
            )
            calls = g["launch"][pageable]
            explicit = C.name_mask(trace, V.SYNC_CALL_RE, ids=r["name"][calls])
            implicit[calls] |= in_win[calls] & ~explicit[r["name"][calls]]
        rows = np.flatnonzero(implicit)
        starts.append(r["start_ns"][rows])
        ends.append(r["end_ns"][rows])
        frames.append(
            {
                "call": r["name"][rows],
                "ext": r["external_id"][rows],
                "dur": r["end_ns"][rows] - r["start_ns"][rows],
                "op": np.full(rows.size, -1, dtype=np.int64),
                "pid": r["pid"][rows],
                "tid": r["tid"][rows],
            }
        )
    if len(c):
        named = C.name_mask(trace, V.IMPLICIT_SYNC_OP_RE, ids=c["name"])
        m = named[c["name"]] & (c["start_ns"] < hi) & (c["end_ns"] > lo)
        rows = np.flatnonzero(m)
        starts.append(c["start_ns"][rows])
        ends.append(c["end_ns"][rows])
        frames.append(
            {
                "call": c["name"][rows],
                "ext": np.full(rows.size, -1, dtype=np.int64),
                "dur": c["end_ns"][rows] - c["start_ns"][rows],
                "op": c["name"][rows].astype(np.int64),
                "pid": c["pid"][rows],
                "tid": c["tid"][rows],
            }
        )
    return np.concatenate(starts), np.concatenate(ends), _concat_calls(frames)


def _concat_calls(frames: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Call tables stacked column by column; a table without ``op`` gives -1 (the op is looked up)."""
    cols = ("call", "ext", "dur", "op", "pid", "tid")
    out = {}
    for k in cols:
        parts = [
            np.asarray(f[k], dtype=np.int64) if k in f else np.full(f["call"].size, -1, dtype=np.int64)
            for f in frames
            if k in f or k == "op"
        ]
        if parts or k in ("call", "ext", "dur", "op"):
            out[k] = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return out


def _by_op_and_call(trace: Trace, calls: dict[str, np.ndarray], top: int = 10) -> list[SyncCall]:
    """Calls grouped by the op that caused them (the outermost aten op with the same External id);
    a call that is an op itself names itself."""
    if not calls["call"].size:
        return []
    ops = OpsByExternalId(trace, innermost=False).names_of(calls["ext"])
    ops = np.where(calls["op"] >= 0, calls["op"], ops).astype(np.int64)
    groups = Groups(ops, calls["call"])
    count, total_ns = groups.count(), groups.sum(calls["dur"])
    order = largest_first(total_ns)[:top]
    op, call = groups.keys
    return [
        SyncCall(
            op=trace.string(int(op[i])) if op[i] >= 0 else None,
            call=trace.string(int(call[i])),
            count=int(count[i]),
            total_ns=int(total_ns[i]),
        )
        for i in order.tolist()
    ]


@analysis(
    needs=("window", "step_spans"),
    provides=("sync_spans", "blocking_calls"),
    produces=("sync_fraction", "sync_calls", "sync_memcpy_count", "implicit_sync_calls", "implicit_sync_fraction"),
    evidence=("sync_calls", "implicit_syncs"),
)
def host_syncs(trace: Trace, inputs) -> Produced:
    lo, hi = inputs["window"].start_ns, inputs["window"].end_ns
    spans, stats, rows, implicit, blocking = sync_calls(trace, lo, hi)
    length = hi - lo
    m = {
        "sync_fraction": stats["sync_ns"] / length if length > 0 else 0.0,
        "sync_calls": stats["sync_calls"],
        "sync_memcpy_count": stats["sync_memcpy_count"],
        "implicit_sync_calls": stats["implicit_sync_calls"],
        "implicit_sync_fraction": stats["implicit_sync_ns"] / length if length > 0 else 0.0,
    }
    steps = len(inputs["step_spans"])
    implicit = [
        ImplicitSync(
            op=r.op, call=r.call, count=r.count, total_ns=r.total_ns, per_step=r.count / steps if steps else None
        )
        for r in implicit
    ]
    return Produced(
        metrics=m,
        evidence={"sync_calls": rows, "implicit_syncs": implicit},
        values={"sync_spans": spans, "blocking_calls": blocking},
    )


def launching_threads(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """The threads (pids, tids) whose runtime calls launched GPU ops: the main thread, and in a
    training loop the autograd threads that launch the backward pass. Empty when no GPU op is
    linked to its launch call."""
    g, r = trace.gpu_ops, trace.runtime
    calls = distinct(g["launch"][g["launch"] >= 0]) if len(g) and len(r) else np.zeros(0, dtype=np.int64)
    if not calls.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    pid, tid = r["pid"][calls], r["tid"][calls]
    one_each = row_codes(pid, tid)[1]  # ascending by (pid, tid)
    return pid[one_each], tid[one_each]


def blocked_idle(
    trace: Trace, calls: BlockingCalls, idle: iv.IntervalSet, host_late: iv.IntervalSet, top: int = 5
) -> dict:
    """GPU idle time while a launching thread is blocked in a synchronizing call, whatever idle cause
    the canonical split gave it: in all, inside ``host_late`` (host_launch idle in long gaps), and
    the calls that hold the most of it. A blocked launching thread cannot launch, so such idle is a
    sync stall even where the next launch came after the gap began. Without launch links the
    launching threads are unknown and every thread's calls count."""
    pids, tids = launching_threads(trace)
    mine = calls.on_threads(pids, tids) if pids.size else np.ones(calls.start_ns.size, dtype=bool)
    s, e, names = calls.start_ns[mine], calls.end_ns[mine], calls.name[mine]
    pid, tid = calls.pid[mine], calls.tid[mine]
    blocked = iv.intersect(idle, iv.union(s, e))
    # One sync is one row: an op around a sync call (``.item()`` around cudaStreamSynchronize) gives
    # way to the call, which it then names as its op. Sorted by thread, start, end descending, an
    # op is directly followed by the call it holds.
    order = lex_order((-e, s, tid, pid))
    nxt = order[1:]
    holds = (pid[order[:-1]] == pid[nxt]) & (tid[order[:-1]] == tid[nxt]) & (e[nxt] <= e[order[:-1]])
    inner = np.ones(s.size, dtype=bool)
    inner[order[:-1][holds]] = False
    s, e, names, pid, tid = s[inner], e[inner], names[inner], pid[inner], tid[inner]
    idle_ns = iv.overlap_per_interval(s, e, blocked)
    order = np.argsort(-idle_ns, kind="stable")[:top]
    order = order[idle_ns[order] > 0]
    rows = [
        SyncBlockedCall(
            call=trace.string(int(names[i])),
            op=_enclosing_name(trace, s[i], e[i], pid[i], tid[i], M.CPU_OP),
            annotation=_enclosing_name(trace, s[i], e[i], pid[i], tid[i], M.USER_ANNOTATION),
            start_ns=int(s[i]),
            dur_ns=int(e[i] - s[i]),
            idle_ns=int(idle_ns[i]),
        )
        for i in order.tolist()
    ]
    total = iv.total(blocked)
    return {
        "blocked_ns": total,
        "host_late_blocked_ns": iv.total(iv.intersect(host_late, blocked)),
        "longest_ns": rows[0].idle_ns if rows else 0,
        "rows": rows,
    }


def _enclosing_name(trace: Trace, start: int, end: int, pid: int, tid: int, kind: int) -> str | None:
    """The innermost CPU op of ``kind`` on thread (pid, tid) around [start, end), the call itself left out."""
    c = trace.cpu_ops
    if not len(c):
        return None
    around = np.flatnonzero(
        (c["kind"] == kind)
        & (c["pid"] == pid)
        & (c["tid"] == tid)
        & (c["start_ns"] <= start)
        & (c["end_ns"] >= end)
        & ~((c["start_ns"] == start) & (c["end_ns"] == end))
    )
    if not around.size:
        return None
    inner = around[lex_order((-c["end_ns"][around], c["start_ns"][around]))[-1]]
    return trace.string(int(c["name"][inner]))


@analysis(
    needs=("window", "idle_split", "blocking_calls"),
    produces=(
        "idle_blocked_in_sync_fraction",
        "idle_host_late_blocked_fraction",
        "sync_blocked_longest_call_ns",
        "sync_blocked_longest_call_fraction",
        "sync_blocked_longest_call",
    ),
    evidence=("sync_blocked_calls",),
)
def sync_blocked_idle(trace: Trace, inputs) -> Produced:
    lo, hi = inputs["window"].start_ns, inputs["window"].end_ns
    split = inputs["idle_split"]
    idle = iv.clip(split.idle, lo, hi)
    out = blocked_idle(trace, inputs["blocking_calls"], idle, split.host_late_long(lo, hi))
    length = hi - lo
    rows = out["rows"]
    m = {
        "idle_blocked_in_sync_fraction": out["blocked_ns"] / length if length > 0 else 0.0,
        "idle_host_late_blocked_fraction": out["host_late_blocked_ns"] / length if length > 0 else 0.0,
        "sync_blocked_longest_call_ns": out["longest_ns"],
        "sync_blocked_longest_call_fraction": out["longest_ns"] / out["blocked_ns"] if out["blocked_ns"] else None,
        "sync_blocked_longest_call": (
            f"{rows[0].call} in {rows[0].op}" if rows[0].op and rows[0].op != rows[0].call else rows[0].call
        )
        if rows
        else None,
    }
    return Produced(metrics=m, evidence={"sync_blocked_calls": rows})
