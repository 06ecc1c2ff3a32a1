"""Per-rank compact tables for the job view: collective instances and steps.

``rank_tables(trace)`` is a pure function of one rank's ``Trace``; it runs in the per-rank worker
and returns a few numpy columns per collective call (docs/job.md: collective instance) and per step,
so the job step never needs the traces. Registered as analyses: ``collective_calls`` (the value of
that name, and a rank's top collective), and on demand ``rank_tables``, the same with each call's
lead-in, which only the job view's straggler cause reads. A collective instance is one call on one rank: its group,
type, size, dtype, sequence number where recorded, CPU call span, the end of its CPU-backend work
(gloo runs the collective on a worker thread) and its GPU kernel span, plus how the time since the
rank's previous collective was spent (the lead-in), by category, for the straggler's cause.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from . import breakdown as B
from . import classify as C
from . import dataloader, links, syncs
from .comm import DTYPE_BYTES
from .registry import Produced, analysis
from .window import find_steps
from ..model.vocab import PROFILER_STEP_RE as STEP_RE
from ..model import intervals as iv
from ..model import trace as M
from ..model.groups import distinct, isin
from ..model.trace import StringTable, Trace

# Lead-in categories, first match wins (GPU work first: a GPU rank reaches its collective kernel when
# its stream gets there; then why the GPU was idle; CPU-only ranks have only the host categories).
LEAD_CATEGORIES = ("compute", "copy", "dataloader", "sync", "host", "other")

_TYPE_PATTERNS = (  # (regex on the lower-case name with non-letters removed, canonical type)
    ("reducescatter", "reduce_scatter"), ("allreduce", "all_reduce"), ("allgather", "all_gather"),
    ("alltoall", "all_to_all"), ("sendrecv", "send_recv"), ("broadcast", "broadcast"), ("barrier", "barrier"),
    ("gather", "gather"), ("scatter", "scatter"), ("reduce", "reduce"), ("send", "send"), ("recv", "recv"),
)
_NOT_A_CALL_RE = re.compile(r"wait|work|init|destroy|allocate|record_param_comms_noop", re.I)
# CPU-side collective calls: torch's ops and annotations, and NCCL's own NVTX ranges (nsys exports of
# jobs run with NCCL's NVTX enabled: ncclAllReduce, ncclSend, ...; group markers are not calls)
CALL_RE = re.compile(r"^(record_param_comms$|nccl:|c10d::|gloo:|"
                     r"nccl(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|Send|Recv|AllToAll|Alltoall)\b)")
COLUMNS = ("group", "type", "dtype", "seq", "group_size", "in_nelems", "out_nelems", "bytes",
                "call_start_ns", "call_end_ns", "work_end_ns", "gpu_start_ns", "gpu_end_ns", "kernels", "step",
                *(f"lead_{c}_ns" for c in LEAD_CATEGORIES), "lead_kernels")


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


@dataclass
class RankTables:
    """One rank's compact tables: what the job step needs, never the trace."""

    rank: int | None
    source: str
    collectives: dict[str, np.ndarray]  # columns COLUMNS, int64, one row per call, by arrival
    groups: list[str]  # vocabularies of the coded columns
    types: list[str]
    dtypes: list[str]
    steps: dict[str, np.ndarray]  # number, start_ns, completion_ns, step_time_ns, timed (1: has a step time)
    info: dict[str, Any] = field(default_factory=dict)  # host, world_size, backend, pg_config, has_gpu, span

    def __len__(self) -> int:
        return len(self.collectives["type"])

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.collectives.values()) + sum(a.nbytes for a in self.steps.values())


def rank_tables(trace: Trace, rank: int | None = None, lead_in: bool = True) -> RankTables:
    """Collective instances and steps of one rank (pure; vectorised over events).

    ``lead_in=False`` skips the lead-in breakdown (zeros), which only the job view's straggler
    cause needs: a single trace does not pay for it.
    """
    calls = _calls(trace)
    steps = _steps(trace)
    cols = calls.pop("cols")
    _assign_steps(cols, steps)
    _lead_in(trace, cols, steps, compute=lead_in)
    order = np.argsort(_arrival(cols), kind="stable")
    cols = {k: np.asarray(v, dtype=np.int64)[order] for k, v in cols.items()}
    meta = trace.meta
    extra = meta.extra or {}
    span = (int(min((t["start_ns"].min() for t in (trace.cpu_ops, trace.gpu_ops) if len(t)), default=0)),
            int(max((t["end_ns"].max() for t in (trace.cpu_ops, trace.gpu_ops) if len(t)), default=0)))
    info = {"host": extra.get("host_name") or extra.get("hostname"), "world_size": meta.world_size,
            "backend": meta.backend,
            "pg_config": None if meta.process_groups is None else [g.properties for g in meta.process_groups],
            "has_gpu": bool(len(trace.gpu_ops)), "span_ns": span, "trace_id": extra.get("trace_id"),
            "gpu": meta.devices[0].properties.get("name") if meta.devices else None,
            "group_ranks": calls["group_ranks"], "time_origin_ns": int(meta.time_origin_ns or 0)}
    return RankTables(rank=meta.rank if rank is None else rank, source=trace.source, collectives=cols,
                      groups=calls["groups"], types=calls["types"], dtypes=calls["dtypes"], steps=steps, info=info)


def gpu_figures(metrics: dict) -> dict[str, float | None]:
    """What the job view's straggler cause reads from a rank's own analysis (joined to its tables'
    ``info``): how busy its GPU is, and the share of its window idle in long host-late gaps not blocked
    in a sync (TD104's quantity): host launch starvation."""
    late = [metrics.get(k) for k in ("idle_host_launch_fraction", "idle_short_launch_fraction",
                                     "idle_host_late_blocked_fraction")]
    host_late = max(0.0, late[0] - late[1] - late[2]) if all(isinstance(x, (int, float)) for x in late) else None
    return {"gpu_busy_fraction": metrics.get("gpu_busy_fraction"), "host_late_idle_fraction": host_late}


def with_lead_in(trace: Trace, tables: RankTables) -> RankTables:
    """``tables`` with each call's lead-in worked out (the calls' order is kept)."""
    cols = dict(tables.collectives)
    _lead_in(trace, cols, tables.steps)
    return replace(tables, collectives={k: np.asarray(v, dtype=np.int64) for k, v in cols.items()})


def top_collective(tables: RankTables) -> str | None:
    """One rank's collective type with the most time (GPU kernel span, else CPU call to work end)."""
    c = tables.collectives
    if not len(tables):
        return None
    dur = np.where(c["gpu_start_ns"] >= 0, c["gpu_end_ns"] - c["gpu_start_ns"], c["work_end_ns"] - c["call_start_ns"])
    by_type = np.bincount(c["type"], weights=np.maximum(dur, 0).astype(np.float64), minlength=len(tables.types))
    return tables.types[int(np.argmax(by_type))] if by_type.sum() > 0 else None


@analysis(provides=("collective_calls",), produces=("comm_top_collective",))
def collective_calls(trace: Trace, inputs) -> Produced:
    """The rank's collective calls and steps (no lead-in), and the collective type it spends most time in
    (in a job, the job view's top collective, by transfer time across the ranks, takes its place)."""
    tables = rank_tables(trace, lead_in=False)
    return Produced(metrics={"comm_top_collective": top_collective(tables)}, values={"collective_calls": tables})


@analysis(needs=("collective_calls",), provides=("rank_tables",), on_demand=True)
def collective_lead_in(trace: Trace, inputs) -> Produced:
    """The job view's compact tables: the collective calls with their lead-in by category."""
    return Produced(values={"rank_tables": with_lead_in(trace, inputs["collective_calls"])})


def _arrival(cols: dict) -> np.ndarray:
    gpu = np.asarray(cols["gpu_start_ns"])
    return np.where(gpu >= 0, gpu, np.asarray(cols["call_start_ns"]))


# -- calls -----------------------------------------------------------------------------------------

def _calls(trace: Trace) -> dict:
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
        order = rows[np.lexsort((-c["end_ns"][rows], c["start_ns"][rows], c["tid"][rows], c["pid"][rows]))]
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
        "pid": c["pid"][heads] if n else np.zeros(0, np.int64), "tid": c["tid"][heads] if n else np.zeros(0, np.int64),
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
        "seq": both("seq"), "group_size": both("group_size"), "in_nelems": both("in_nelems"),
        "out_nelems": both("out_nelems"), "bytes": both("bytes"),
        "call_start_ns": np.concatenate([cols["call_start_ns"][keep], np.full(lone.size, -1)]),
        "call_end_ns": np.concatenate([cols["call_end_ns"][keep], np.full(lone.size, -1)]),
        "work_end_ns": np.concatenate([work_end[keep], np.full(lone.size, -1)]),
        "gpu_start_ns": np.concatenate([kern["gpu_start_ns"][keep], g["start_ns"][lone]]),
        "gpu_end_ns": np.concatenate([kern["gpu_end_ns"][keep], g["end_ns"][lone]]),
        "kernels": np.concatenate([kern["kernels"][keep], np.ones(lone.size, dtype=np.int64)]),
    }
    group_ranks = {str(g): str(r) for g, r in zip(meta["group"][keep], meta["ranks"][keep]) if r}
    return {"cols": out, "groups": groups.strings, "types": type_names.strings, "dtypes": dtypes.strings,
            "group_ranks": group_ranks}


def _codes(table: StringTable, words) -> np.ndarray:
    """Ids of ``words`` in ``table`` (None as the empty word), interned as they come."""
    return np.fromiter((table.intern("" if w is None else str(w)) for w in words), dtype=np.int64)


def _metadata(trace: Trace, call_of_row: np.ndarray, call_of_gpu_row: np.ndarray, n: int,
              ctypes: np.ndarray) -> dict[str, np.ndarray]:
    """Group, dtype, sizes and sequence number of each call from the collective args of its ops and kernels."""
    out = {"group": np.full(n, "", dtype=object), "dtype": np.full(n, "", dtype=object),
           "ranks": np.full(n, "", dtype=object),
           "seq": np.full(n, -1, dtype=np.int64), "group_size": np.full(n, -1, dtype=np.int64),
           "in_nelems": np.full(n, -1, dtype=np.int64), "out_nelems": np.full(n, -1, dtype=np.int64),
           "bytes": np.full(n, -1, dtype=np.int64)}
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
    out["bytes"] = np.array([message_bytes(t, i, o, d) for t, i, o, d in
                             zip(ctypes, out["in_nelems"], out["out_nelems"], out["dtype"])], dtype=np.int64)
    return out


def _kernels(trace: Trace, call_of_row: np.ndarray, cols: dict, n: int) -> dict[str, np.ndarray]:
    """GPU span and kernel count of each call; comm kernels linked to no call are returned apart."""
    g, c, r = trace.gpu_ops, trace.cpu_ops, trace.runtime
    out = {"gpu_start_ns": np.full(n, -1, dtype=np.int64), "gpu_end_ns": np.full(n, -1, dtype=np.int64),
           "kernels": np.zeros(n, dtype=np.int64), "lone_rows": np.zeros(0, dtype=np.int64),
           "call_of_gpu_row": np.full(len(g), -1, dtype=np.int64)}
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


# -- steps and lead-in ----------------------------------------------------------------------------

def _steps(trace: Trace) -> dict[str, np.ndarray]:
    """Step number, CPU start, completion, step time (completion interval, docs/definitions.md) and whether the
    step has one (``timed``: 0 for the steps a pre-window backlog ran ahead of, docs/definitions.md)."""
    steps = find_steps(trace)
    if not len(steps):
        z = np.zeros(0, dtype=np.int64)
        return {"number": z, "start_ns": z, "completion_ns": z, "step_time_ns": z, "timed": z}
    numbers = []
    for i, name in enumerate(steps.names):
        m = STEP_RE.match(name)
        numbers.append(int(m.group(1)) if m else i)
    start = steps.cpu_start_ns.astype(np.int64)
    completion = steps.end_ns.astype(np.int64)
    order = np.argsort(start, kind="stable")
    start, completion, numbers = start[order], completion[order], np.asarray(numbers, dtype=np.int64)[order]
    step_time = np.empty_like(completion)
    step_time[0] = completion[0] - start[0]
    step_time[1:] = np.diff(np.maximum.accumulate(completion))
    timed = steps.timed()[order].astype(np.int64)
    return {"number": numbers, "start_ns": start, "completion_ns": completion, "step_time_ns": step_time,
            "timed": timed}


def _assign_steps(cols: dict, steps: dict) -> None:
    """Number of the step whose CPU span holds each call's start (-1 outside every step)."""
    t = np.where(cols["call_start_ns"] >= 0, cols["call_start_ns"], cols["gpu_start_ns"])
    out = np.full(t.size, -1, dtype=np.int64)
    if steps["number"].size and t.size:
        idx = np.searchsorted(steps["start_ns"], t, side="right") - 1
        # a step's CPU span ends where the next begins at the latest
        nxt = np.append(steps["start_ns"][1:], np.iinfo(np.int64).max)
        ok = (idx >= 0) & (t < nxt[np.maximum(idx, 0)])
        out[ok] = steps["number"][idx[ok]]
    cols["step"] = out


def _lead_in(trace: Trace, cols: dict, steps: dict, compute: bool = True) -> None:
    """Split the time from each call's previous collective end to its arrival into categories."""
    n = len(cols["type"])
    arrival = _arrival(cols)
    end = np.where(cols["gpu_end_ns"] >= 0, cols["gpu_end_ns"], cols["work_end_ns"])
    order = np.argsort(arrival, kind="stable")
    prev_end = np.empty(n, dtype=np.int64)
    if n:
        first = int(steps["start_ns"][0]) if steps["start_ns"].size else int(arrival[order[0]])
        prev_end[order] = np.append(min(first, int(arrival[order[0]])), np.maximum.accumulate(end[order])[:-1])
    lo = np.minimum(prev_end, arrival)
    hi = arrival
    for cat in LEAD_CATEGORIES:
        cols[f"lead_{cat}_ns"] = np.zeros(n, dtype=np.int64)
    cols["lead_kernels"] = np.zeros(n, dtype=np.int64)
    if not n or not compute:
        return
    g, c = trace.gpu_ops, trace.cpu_ops
    sets: dict[str, iv.IntervalSet] = {}
    if len(g):
        comm_mask = C.comm_kernel_mask(trace, links.gpu_external_ids(trace))
        ops = B.op_sets(trace, comm_mask)
        sets["compute"], sets["copy"] = ops.compute, ops.memcpy
        compute_starts = np.sort(g["start_ns"][(g["kind"] == M.KERNEL) & ~comm_mask])
        cols["lead_kernels"] = (np.searchsorted(compute_starts, hi) - np.searchsorted(compute_starts, lo)).astype(np.int64)
    else:
        sets["compute"], sets["copy"] = iv.empty(), iv.empty()
    sets["dataloader"] = dataloader.dataloader_spans(trace)[0]
    sets["sync"] = syncs.sync_calls(trace, int(lo.min()), int(hi.max()) + 1)[0]
    if len(c):
        skip = C.name_mask(trace, CALL_RE, ids=c["name"]) | C.name_mask(trace, STEP_RE, ids=c["name"])
        mask = (c["kind"] == M.CPU_OP) & ~skip[c["name"]]
        sets["host"] = iv.union(c["start_ns"][mask], c["end_ns"][mask])
    else:
        sets["host"] = iv.empty()
    taken = iv.empty()
    total = np.zeros(n, dtype=np.int64)
    for cat in LEAD_CATEGORIES[:-1]:
        own = iv.subtract(sets[cat], taken)
        cols[f"lead_{cat}_ns"] = iv.overlap_per_interval(lo, hi, own)
        total += cols[f"lead_{cat}_ns"]
        taken = iv.union(np.concatenate([taken[0], own[0]]), np.concatenate([taken[1], own[1]]))
    cols["lead_other_ns"] = np.maximum(hi - lo - total, 0)
