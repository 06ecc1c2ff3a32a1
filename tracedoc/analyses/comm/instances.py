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

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..gputime import breakdown as B
from ..kernels import classify as C
from ..host import dataloader, links, syncs
from .calls import CALL_RE, call_columns
from ..core.registry import Produced, analysis
from ..gputime.window import find_steps
from ...model.vocab import PROFILER_STEP_RE as STEP_RE
from ...model import intervals as iv
from ...model import trace as M
from ...model.trace import Trace

# Lead-in categories, first match wins (GPU work first: a GPU rank reaches its collective kernel when
# its stream gets there; then why the GPU was idle; CPU-only ranks have only the host categories).
LEAD_CATEGORIES = ("compute", "copy", "dataloader", "sync", "host", "other")

COLUMNS = (
    "group",
    "type",
    "dtype",
    "seq",
    "group_size",
    "in_nelems",
    "out_nelems",
    "bytes",
    "call_start_ns",
    "call_end_ns",
    "work_end_ns",
    "gpu_start_ns",
    "gpu_end_ns",
    "kernels",
    "step",
    *(f"lead_{c}_ns" for c in LEAD_CATEGORIES),
    "lead_kernels",
)


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
    calls = call_columns(trace)
    steps = _steps(trace)
    cols = calls.pop("cols")
    _assign_steps(cols, steps)
    _lead_in(trace, cols, steps, compute=lead_in)
    order = np.argsort(_arrival(cols), kind="stable")
    cols = {k: np.asarray(v, dtype=np.int64)[order] for k, v in cols.items()}
    meta = trace.meta
    extra = meta.extra or {}
    span = (
        int(min((t["start_ns"].min() for t in (trace.cpu_ops, trace.gpu_ops) if len(t)), default=0)),
        int(max((t["end_ns"].max() for t in (trace.cpu_ops, trace.gpu_ops) if len(t)), default=0)),
    )
    info = {
        "host": extra.get("host_name") or extra.get("hostname"),
        "world_size": meta.world_size,
        "backend": meta.backend,
        "pg_config": None if meta.process_groups is None else [g.properties for g in meta.process_groups],
        "has_gpu": bool(len(trace.gpu_ops)),
        "span_ns": span,
        "trace_id": extra.get("trace_id"),
        "gpu": meta.devices[0].properties.get("name") if meta.devices else None,
        "group_ranks": calls["group_ranks"],
        "time_origin_ns": int(meta.time_origin_ns or 0),
    }
    return RankTables(
        rank=meta.rank if rank is None else rank,
        source=trace.source,
        collectives=cols,
        groups=calls["groups"],
        types=calls["types"],
        dtypes=calls["dtypes"],
        steps=steps,
        info=info,
    )


def gpu_figures(metrics: dict) -> dict[str, float | None]:
    """What the job view's straggler cause reads from a rank's own analysis (joined to its tables'
    ``info``): how busy its GPU is, and the share of its window idle in long host-late gaps not blocked
    in a sync (TD104's quantity): host launch starvation."""
    late = [
        metrics.get(k)
        for k in ("idle_host_launch_fraction", "idle_short_launch_fraction", "idle_host_late_blocked_fraction")
    ]
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
    return {
        "number": numbers,
        "start_ns": start,
        "completion_ns": completion,
        "step_time_ns": step_time,
        "timed": timed,
    }


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
        cols["lead_kernels"] = (np.searchsorted(compute_starts, hi) - np.searchsorted(compute_starts, lo)).astype(
            np.int64
        )
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
