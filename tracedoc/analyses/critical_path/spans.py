"""CPU spans the dependency graph is built from: launch calls, host syncs, ``.item()`` ops,
DataLoader waits and steps, per thread; and the thread that runs the steps."""

from __future__ import annotations

import numpy as np

from ...model import trace as M
from ...model import vocab as V
from ...model.trace import Trace
from ..kernels import classify as C
from ..gputime.window import Steps, step_name_mask
from ..host.nesting import nest_order
from .kinds import SPAN_BLOCKED, SPAN_DATALOADER, SPAN_LAUNCH, SPAN_STEP, SPAN_SYNC

_HOST_SYNC_RE_EXTRA = ("cudaFree", "hipFree", "cuMemFree", "cuMemFree_v2")


def host_sync_mask(trace: Trace, ids: np.ndarray | None = None) -> np.ndarray:
    """Per string id: a runtime call that blocks the host until GPU work is done. With ``ids`` (a
    column of names), only the strings it holds are tested."""
    sync = C.name_mask(trace, V.SYNC_CALL_RE, ids=ids)
    wait = trace.string_ids(V.STREAM_WAIT_CALL_RE.match, ids)
    free = trace.string_ids(lambda s: s in _HOST_SYNC_RE_EXTRA, ids)
    return (sync & ~wait) | free


def main_thread(trace: Trace, steps: Steps) -> tuple[int, int]:
    c = trace.cpu_ops
    first = np.flatnonzero(c["start_ns"] == steps.cpu_start_ns[0])
    row = int(first[0]) if first.size else 0
    return int(c["pid"][row]), int(c["tid"][row])


def cpu_spans(
    trace: Trace,
    steps: Steps,
    ops: np.ndarray,
    lo: int,
    hi: int,
    main: tuple[int, int],
    blocked_rows: np.ndarray | None = None,
    blocked_ns: np.ndarray | None = None,
) -> dict:
    """Launch calls of the graph's ops (``blocked_rows``: those that blocked on a full launch queue, for
    ``blocked_ns`` each), host syncs, ``.item()`` ops, DataLoader waits and steps."""
    g, r, c = trace.gpu_ops, trace.runtime, trace.cpu_ops
    parts = []
    host_sync = host_sync_mask(trace, r["name"]) if len(r) else None
    blocked_for = np.zeros(len(r), dtype=np.int64)
    if len(r):
        launches = np.zeros(len(r), dtype=bool)
        if ops.size:
            launch_rows = g["launch"][ops]
            launches[launch_rows[launch_rows >= 0]] = True
        blocked = np.zeros(len(r), dtype=bool)
        if blocked_rows is not None and blocked_rows.size:
            blocked[blocked_rows] = True
            blocked_for[blocked_rows] = blocked_ns
        blocked &= launches
        sync = host_sync[r["name"]] & (r["start_ns"] >= lo) & (r["start_ns"] < hi)
        rows = np.flatnonzero(launches | sync)
        kind = (
            np.where(launches[rows], SPAN_LAUNCH, 0)
            | np.where(sync[rows], SPAN_SYNC, 0)
            | np.where(blocked[rows], SPAN_BLOCKED, 0)
        )
        parts.append((r["start_ns"][rows], r["end_ns"][rows], kind, r["pid"][rows], r["tid"][rows], rows))
    if len(c):
        in_win = (c["start_ns"] >= lo) & (c["start_ns"] < hi)
        item = C.name_mask(trace, V.SYNC_OP_RE, ids=c["name"])[c["name"]] & in_win & (c["kind"] == M.CPU_OP)
        item_rows = _ops_without_runtime_sync(trace, np.flatnonzero(item), host_sync)
        dl = C.name_mask(trace, V.DATALOADER_RE, ids=c["name"])[c["name"]] & in_win & (c["kind"] != M.PYTHON_FUNCTION)
        dl_rows = outermost(c, np.flatnonzero(dl))
        for rows, kind in ((item_rows, SPAN_SYNC), (dl_rows, SPAN_DATALOADER)):
            parts.append(
                (
                    c["start_ns"][rows],
                    c["end_ns"][rows],
                    np.full(rows.size, kind),
                    c["pid"][rows],
                    c["tid"][rows],
                    np.full(rows.size, -1),
                )
            )
    n = len(steps)
    parts.append(
        (
            steps.cpu_start_ns,
            steps.cpu_end_ns,
            np.full(n, SPAN_STEP),
            np.full(n, main[0]),
            np.full(n, main[1]),
            np.full(n, -1),
        )
    )
    cat = [np.concatenate([p[i] for p in parts]) for i in range(6)]
    runtime = cat[5].astype(np.int64)
    return {
        "start": cat[0].astype(np.int64),
        "end": np.maximum(cat[1], cat[0]).astype(np.int64),
        "kind": cat[2].astype(np.int64),
        "pid": cat[3].astype(np.int64),
        "tid": cat[4].astype(np.int64),
        "runtime": runtime,
        "main": main,
        "blocked_ns": np.where(runtime >= 0, blocked_for[np.maximum(runtime, 0)], 0)
        if len(r)
        else np.zeros(runtime.size, dtype=np.int64),
    }


def outermost(c, rows: np.ndarray) -> np.ndarray:
    """Rows not contained in an earlier row of the same thread (nested DataLoader marks count once)."""
    if not rows.size:
        return rows
    order = nest_order(c, rows)
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


def _ops_without_runtime_sync(trace: Trace, rows: np.ndarray, host_sync: np.ndarray | None) -> np.ndarray:
    """``.item()``-style ops that hold no host-sync runtime call (those are the sync themselves);
    ``host_sync``: ``host_sync_mask`` of the runtime calls' names."""
    r, c = trace.runtime, trace.cpu_ops
    if not rows.size or not len(r):
        return rows
    sync_rows = np.flatnonzero(host_sync[r["name"]])
    if not sync_rows.size:
        return rows
    key_r = r["pid"][sync_rows] * (1 << 32) + (r["tid"][sync_rows] & 0xFFFFFFFF)
    key_c = c["pid"][rows] * (1 << 32) + (c["tid"][rows] & 0xFFFFFFFF)
    keys, inv = np.unique(np.r_[key_r, key_c], return_inverse=True)
    t0 = min(int(r["start_ns"][sync_rows].min()), int(c["start_ns"][rows].min()))
    span = max(int(r["start_ns"][sync_rows].max()), int(c["end_ns"][rows].max())) - t0 + 1
    # (thread, time) as one sortable number: the first sync call at or after each op's start
    calls = np.sort(inv[: sync_rows.size] * span + (r["start_ns"][sync_rows] - t0))
    op_start = inv[sync_rows.size :] * span + (c["start_ns"][rows] - t0)
    op_end = inv[sync_rows.size :] * span + (c["end_ns"][rows] - t0)
    j = np.minimum(np.searchsorted(calls, op_start, side="left"), calls.size - 1)
    inside = (calls[j] >= op_start) & (calls[j] <= op_end)
    return rows[~inside]


def step_mask(trace: Trace) -> np.ndarray:
    return step_name_mask(trace)
