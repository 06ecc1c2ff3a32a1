"""One rank's collective calls as columns: each CPU-side call (torch's ops and annotations, NCCL's NVTX
ranges) with its group, type, size, dtype and sequence number, the end of its CPU-backend work and its GPU
kernel span (``call_columns``); and the canonical collective type and message size of a call."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ..kernels import classify as C
from ..host import links
from ..host.nesting import nest_order
from .collectives import DTYPE_BYTES
from ...model import trace as M
from ...model.groups import distinct, isin
from ...model.trace import StringTable, Trace

_TYPE_PATTERNS = (  # (regex on the lower-case name with non-letters removed, canonical type)
    ("reducescatter", "reduce_scatter"),
    ("allreduce", "all_reduce"),
    ("allgather", "all_gather"),
    ("alltoall", "all_to_all"),
    ("sendrecv", "send_recv"),
    ("broadcast", "broadcast"),
    ("barrier", "barrier"),
    ("gather", "gather"),
    ("scatter", "scatter"),
    ("reduce", "reduce"),
    ("send", "send"),
    ("recv", "recv"),
)
_NOT_A_CALL_RE = re.compile(r"wait|work|init|destroy|allocate|record_param_comms_noop", re.I)
# CPU-side collective calls: torch's ops and annotations, and NCCL's own NVTX ranges (nsys exports of
# jobs run with NCCL's NVTX enabled: ncclAllReduce, ncclSend, ...; group markers are not calls)
CALL_RE = re.compile(
    r"^(record_param_comms$|nccl:|c10d::|gloo:|"
    r"nccl(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|Send|Recv|AllToAll|Alltoall)\b)"
)


def collective_type(name: str) -> str:
    """Canonical collective type of an op, kernel or ``Collective name``: ``all_reduce``, ``send_recv``..."""
    key = re.sub(r"[^a-z]", "", name.lower().replace("ncclkernel", "").replace("nccldevkernel", ""))
    for pattern, canon in _TYPE_PATTERNS:
        if pattern in key:
            return canon
    return "unknown"


def message_bytes(ctype: str, in_nelems: int, out_nelems: int, dtype: str | None) -> int:
    """Bytes by the nccl-tests convention (all-gather: total output; others: the input buffer); -1 unknown."""
    width = DTYPE_BYTES.get((dtype or "").lower(), 0)
    nelems = out_nelems if ctype == "all_gather" else in_nelems
    return int(nelems) * width if width and nelems >= 0 else -1


def call_columns(trace: Trace) -> dict:
    """Group collective CPU ops into calls, pair gloo work spans with them, attach their kernels."""
    c, g = trace.cpu_ops, trace.gpu_ops
    strings = trace.strings
    rows = np.zeros(0, dtype=np.int64)
    if len(c):
        is_coll = C.name_mask(trace, CALL_RE, _NOT_A_CALL_RE, ids=c["name"])[c["name"]]
        rows = np.flatnonzero(is_coll & isin(c["kind"], (M.CPU_OP, M.USER_ANNOTATION)))
    # collective type per string id, worked out for the names of collective ops only (id -1: "unknown")
    ctype_of_string = np.full(len(strings) + 1, "unknown", dtype=object)
    used = distinct(c["name"][rows]) if rows.size else np.zeros(0, dtype=np.int64)
    used = used[(used >= 0) & (used < len(strings))]
    ctype_of_string[used] = [collective_type(strings[i]) for i in used.tolist()]
    # Outermost collective op per thread: an op starting inside an earlier one on its thread is part of it.
    call_of_row = np.full(len(c), -1, dtype=np.int64)
    if rows.size:
        order = nest_order(c, rows)
        thread = c["pid"][order] * (1 << 32) + c["tid"][order]
        new_thread = np.append(True, thread[1:] != thread[:-1])
        ends = c["end_ns"][order]
        # running max of ends within a thread: offset each thread's values so they cannot mix
        tid_idx = np.cumsum(new_thread) - 1
        span = int(ends.max() - min(c["start_ns"][order].min(), 0) + 1)
        shifted = np.maximum.accumulate(ends + tid_idx * span) - tid_idx * span
        prev_max = np.append(np.iinfo(np.int64).min, shifted[:-1])
        nested = ~new_thread & (c["start_ns"][order] < prev_max)
        call_idx = np.cumsum(~nested) - 1
        call_of_row[order] = call_idx
        heads = order[~nested]
    else:
        heads = rows
    n = heads.size
    names = c["name"][heads] if n else np.zeros(0, dtype=np.int64)
    types = ctype_of_string[np.where(names >= 0, names, -1)] if n else np.zeros(0, dtype=object)
    cols: dict[str, Any] = {
        "call_start_ns": c["start_ns"][heads].copy() if n else np.zeros(0, np.int64),
        "call_end_ns": c["end_ns"][heads].copy() if n else np.zeros(0, np.int64),
        "pid": c["pid"][heads] if n else np.zeros(0, np.int64),
        "tid": c["tid"][heads] if n else np.zeros(0, np.int64),
    }
    # type: the first known type among the call's ops (nccl:/gloo:/c10d:: names), then Collective name
    ctypes = np.array(types, dtype=object)
    if rows.size:
        member_types = ctype_of_string[c["name"][rows]]
        known = member_types != "unknown"
        for r, t in zip(call_of_row[rows][known], member_types[known]):
            if ctypes[r] == "unknown":
                ctypes[r] = t
    is_work = np.array([strings[i].startswith("gloo:") for i in names], dtype=bool) if n else np.zeros(0, bool)
    kern = _kernels(trace, call_of_row, cols, n)
    # comm kernels that belong to no call become instances of their own (nsys without NVTX, filtered
    # traces, work launched before the profiler opened); their own collective args, where recorded,
    # give them a group, size and sequence number like a call's
    lone = kern["lone_rows"]
    call_of_gpu_row = kern["call_of_gpu_row"].copy()
    call_of_gpu_row[lone] = n + np.arange(lone.size)
    lone_types = np.array([collective_type(strings[i]) for i in g["name"][lone].tolist()], dtype=object)
    all_types = np.concatenate([ctypes, lone_types])
    meta = _metadata(trace, call_of_row, call_of_gpu_row, n + lone.size, all_types)  # fills unknown types
    ctypes, lone_types = all_types[:n], all_types[n:]
    lone_meta = {k: v[n:] for k, v in meta.items()}
    meta = {k: v[:n] for k, v in meta.items()}
    # CPU-backend work spans (gloo runs them on a worker thread): pair the k-th work span of a type
    # with the k-th call of that type that launched no kernel; the call gets the work's end.
    work_end = cols["call_end_ns"].copy()
    issue = ~is_work
    absorbed = np.zeros(n, dtype=bool)
    for t in distinct(ctypes[is_work]).tolist() if is_work.any() else []:
        w = np.flatnonzero(is_work & (ctypes == t))
        i = np.flatnonzero(issue & (ctypes == t) & (kern["kernels"] == 0))
        w = w[np.argsort(cols["call_start_ns"][w], kind="stable")]
        i = i[np.argsort(cols["call_start_ns"][i], kind="stable")]
        k = min(w.size, i.size)
        if k:
            work_end[i[:k]] = np.maximum(cols["call_end_ns"][w[:k]], cols["call_end_ns"][i[:k]])
            absorbed[w[:k]] = True  # a paired work span is part of its call; unpaired ones stay calls
    # a call of no known type that launched nothing (e.g. record_param_comms of a "wait") is not a collective
    unknown_cpu_only = (ctypes == "unknown") & (kern["kernels"] == 0) if n else np.zeros(0, dtype=bool)
    keep = np.flatnonzero(~absorbed & ~unknown_cpu_only)
    groups, dtypes, type_names = StringTable(), StringTable(), StringTable()

    def both(col: str) -> np.ndarray:
        return np.concatenate([meta[col][keep], lone_meta[col]])

    out = {
        "group": _codes(groups, both("group")),
        "type": _codes(type_names, np.concatenate([ctypes[keep], lone_types])),
        "dtype": _codes(dtypes, both("dtype")),
        "seq": both("seq"),
        "group_size": both("group_size"),
        "in_nelems": both("in_nelems"),
        "out_nelems": both("out_nelems"),
        "bytes": both("bytes"),
        "call_start_ns": np.concatenate([cols["call_start_ns"][keep], np.full(lone.size, -1)]),
        "call_end_ns": np.concatenate([cols["call_end_ns"][keep], np.full(lone.size, -1)]),
        "work_end_ns": np.concatenate([work_end[keep], np.full(lone.size, -1)]),
        "gpu_start_ns": np.concatenate([kern["gpu_start_ns"][keep], g["start_ns"][lone]]),
        "gpu_end_ns": np.concatenate([kern["gpu_end_ns"][keep], g["end_ns"][lone]]),
        "kernels": np.concatenate([kern["kernels"][keep], np.ones(lone.size, dtype=np.int64)]),
    }
    group_ranks = {str(g): str(r) for g, r in zip(meta["group"][keep], meta["ranks"][keep]) if r}
    return {
        "cols": out,
        "groups": groups.strings,
        "types": type_names.strings,
        "dtypes": dtypes.strings,
        "group_ranks": group_ranks,
    }


def _codes(table: StringTable, words) -> np.ndarray:
    """Ids of ``words`` in ``table`` (None as the empty word), interned as they come."""
    return np.fromiter((table.intern("" if w is None else str(w)) for w in words), dtype=np.int64)


def _metadata(
    trace: Trace, call_of_row: np.ndarray, call_of_gpu_row: np.ndarray, n: int, ctypes: np.ndarray
) -> dict[str, np.ndarray]:
    """Group, dtype, sizes and sequence number of each call from the collective args of its ops and kernels."""
    out = {
        "group": np.full(n, "", dtype=object),
        "dtype": np.full(n, "", dtype=object),
        "ranks": np.full(n, "", dtype=object),
        "seq": np.full(n, -1, dtype=np.int64),
        "group_size": np.full(n, -1, dtype=np.int64),
        "in_nelems": np.full(n, -1, dtype=np.int64),
        "out_nelems": np.full(n, -1, dtype=np.int64),
        "bytes": np.full(n, -1, dtype=np.int64),
    }
    coll = trace.collectives
    if not n or not len(coll):
        return out
    from_op = coll["source"] == M.COLLECTIVE_FROM_CPU_OP
    call = np.full(len(coll), -1, dtype=np.int64)
    call[from_op] = call_of_row[coll["row"][from_op]]
    if call_of_gpu_row.size:
        from_kernel = coll["source"] == M.COLLECTIVE_FROM_KERNEL
        call[from_kernel] = call_of_gpu_row[coll["row"][from_kernel]]
    has = np.flatnonzero(call >= 0)
    for j in has[np.argsort(call[has], kind="stable")].tolist():
        k = int(call[j])
        if out["in_nelems"][k] < 0 and coll["in_nelems"][j] >= 0:
            out["in_nelems"][k] = coll["in_nelems"][j]
        if out["out_nelems"][k] < 0 and coll["out_nelems"][j] >= 0:
            out["out_nelems"][k] = coll["out_nelems"][j]
        if out["group_size"][k] < 0 and coll["group_size"][j] > 0:
            out["group_size"][k] = coll["group_size"][j]
        if not out["dtype"][k] and coll["dtype"][j] >= 0:
            out["dtype"][k] = trace.string(int(coll["dtype"][j]))
        if not out["group"][k] and coll["pg_name"][j] >= 0:
            out["group"][k] = trace.string(int(coll["pg_name"][j]))
        if ctypes[k] == "unknown" and coll["collective"][j] >= 0:
            ctypes[k] = collective_type(trace.string(int(coll["collective"][j])))
        if out["seq"][k] < 0 and coll["seq"][j] >= 0:
            out["seq"][k] = coll["seq"][j]
        if not out["ranks"][k] and coll["pg_ranks"][j] >= 0:
            out["ranks"][k] = trace.string(int(coll["pg_ranks"][j]))
    out["bytes"] = np.array(
        [message_bytes(t, i, o, d) for t, i, o, d in zip(ctypes, out["in_nelems"], out["out_nelems"], out["dtype"])],
        dtype=np.int64,
    )
    return out


def _kernels(trace: Trace, call_of_row: np.ndarray, cols: dict, n: int) -> dict[str, np.ndarray]:
    """GPU span and kernel count of each call; comm kernels linked to no call are returned apart."""
    g, c, r = trace.gpu_ops, trace.cpu_ops, trace.runtime
    out = {
        "gpu_start_ns": np.full(n, -1, dtype=np.int64),
        "gpu_end_ns": np.full(n, -1, dtype=np.int64),
        "kernels": np.zeros(n, dtype=np.int64),
        "lone_rows": np.zeros(0, dtype=np.int64),
        "call_of_gpu_row": np.full(len(g), -1, dtype=np.int64),
    }
    if not len(g):
        return out
    gpu_ext = links.gpu_external_ids(trace)
    comm = np.flatnonzero(C.comm_kernel_mask(trace, gpu_ext))
    if not comm.size:
        return out
    kcall = np.full(comm.size, -1, dtype=np.int64)
    if n:
        # 1. External id of the kernel (or its launch) equals a collective op's
        op_rows = np.flatnonzero((call_of_row >= 0) & (c["external_id"] >= 0)) if len(c) else np.zeros(0, np.int64)
        if op_rows.size:
            ext_sorted = np.argsort(c["external_id"][op_rows], kind="stable")
            keys = c["external_id"][op_rows][ext_sorted]
            ext = gpu_ext[comm]
            pos = np.minimum(np.searchsorted(keys, ext), keys.size - 1)
            hit = (ext >= 0) & (keys[pos] == ext)
            kcall[hit] = call_of_row[op_rows[ext_sorted[pos[hit]]]]
        # 2. the launch call starts inside a call's span on the same thread
        launch = g["launch"][comm]
        todo = np.flatnonzero((kcall < 0) & (launch >= 0))
        if todo.size and len(r):
            lthread = r["pid"][launch[todo]] * (1 << 32) + r["tid"][launch[todo]]
            cthread = cols["pid"] * (1 << 32) + cols["tid"]
            for th in distinct(lthread).tolist():
                cs = np.flatnonzero(cthread == th)
                if not cs.size:
                    continue
                cs = cs[np.argsort(cols["call_start_ns"][cs], kind="stable")]
                sel = todo[lthread == th]
                t = r["start_ns"][g["launch"][comm[sel]]]
                pos = np.searchsorted(cols["call_start_ns"][cs], t, side="right") - 1
                ok = (pos >= 0) & (t <= cols["call_end_ns"][cs[np.maximum(pos, 0)]])
                kcall[sel[ok]] = cs[pos[ok]]
    linked = kcall >= 0
    out["call_of_gpu_row"][comm] = kcall
    if linked.any():
        k = kcall[linked]
        rows = comm[linked]
        start = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(start, k, g["start_ns"][rows])
        end = np.full(n, -1, dtype=np.int64)
        np.maximum.at(end, k, g["end_ns"][rows])
        has = end >= 0
        out["gpu_start_ns"][has] = start[has]
        out["gpu_end_ns"][has] = end[has]
        out["kernels"] = np.bincount(k, minlength=n).astype(np.int64)
    out["lone_rows"] = comm[~linked]
    return out
