"""The merged multi-rank timeline: every rank of a job in one Perfetto / chrome://tracing trace.

Input: an ``AnalysisResult`` of a directory of torch.profiler rank traces with its job view. Output: one
Chrome trace JSON (gzip when the path ends in ``.gz``) where each rank is one process, named ``rank R``
and sorted by rank, holding its original events (every thread and GPU stream a thread of it), moved
onto one clock by the job view's clock offsets; plus, per rank, a ``tracedoc · collectives`` thread:

- each matched collective as a ``wait`` slice (own arrival to the last arrival, shaded as waiting)
  and a ``transfer`` slice (last arrival to its end);
- on a straggler, a ``late`` slice from the collective's median arrival to its own, where it is late;
- flow arrows from the last arriver's collective to every other member's: the collective the others
  waited for, linked across ranks.

Rank files are read and written one at a time, so memory holds one rank's events, not the job's.

A job of more than ``MAX_FULL_RANKS`` ranks stays bounded: only the stragglers, the median rank and
the ranks that wait most are drawn in full (their events and collectives thread); every matched
collective is one slice of an ``all ranks · matched collectives`` process (first arrival to end,
its last arriver named), with arrows to the drawn ranks' slices, so every matched collective's flow
is there. What was left out is said in the file: an instant event at the start of that process and
the top-level ``tracedoc`` object (ranks drawn in full, ranks left out and why).
"""

from __future__ import annotations

import gzip
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import TracedocError, UsageError
from ..outfiles import replace_atomically

if TYPE_CHECKING:  # pragma: no cover
    from ..result import AnalysisResult

MAX_FLOWS = 20_000  # arrows in all; past it the arrows are left out (the slices are all there)
MAX_FULL_RANKS = 16  # a larger job draws the ranks that matter in full (see the module docstring)
WAIT_COLOUR, TRANSFER_COLOUR, LATE_COLOUR = "bad", "good", "terrible"
TRACK_TID = 0  # the tracedoc thread of each rank's process; original threads are numbered from 1
# A thread's label in the merged timeline is its process's name and its own: each is cut to this many
# characters, so that a long process name is not copied into every thread's label (1 MiB x 2,000 threads).
MAX_LABEL_CHARS = 200


def write_job_perfetto(result: "AnalysisResult", out_path: str) -> str:
    """Write the merged timeline of ``result``'s job to ``out_path``."""
    import orjson

    view = result.job
    if view is None or view.not_a_job:
        raise UsageError(
            "--perfetto",
            "merges the ranks of one job",
            "files that are not one job",
            "run --perfetto on one trace file, or on a directory of one job's rank traces",
        )
    inst = getattr(result, "job_instances", None)  # a fresh analysis's; a saved report has none
    if inst is None:
        raise UsageError(
            "--perfetto",
            "needs the job's collectives as analysed, not a saved report",
            None,
            "run tracedoc analyze on the directory of rank traces with --perfetto",
        )
    offsets = {int(r): int(v) for r, v in (view.alignment.get("clock_offsets_ns") or {}).items()}
    ranks = [r for r in result.ranks if r.rank is not None and r.rank in set(view.ranks_used)]
    if not ranks:
        raise UsageError("--perfetto", "found no rank of the job to draw", None, "check the directory's rank files")
    every = sorted(ranks, key=lambda x: x.rank)
    full = full_ranks(view, [r.rank for r in every])
    ranks = [r for r in every if r.rank in full]
    summary_pid = rank_pid(len(ranks)) if len(ranks) < len(every) else None
    flows = _Flows(inst, {r.rank: rank_pid(i) for i, r in enumerate(ranks)}, summary_pid)
    left_out = sorted(set(r.rank for r in every) - full)

    def write(raw) -> None:
        f = gzip.GzipFile(os.path.basename(out_path)[:-3], "wb", 6, raw) if out_path.lower().endswith(".gz") else raw
        with f:
            head = {
                "ranks": len(every),
                "ranks_in_full": sorted(full),
                "ranks_left_out": len(left_out),
                "left_out": (
                    f"{len(left_out)} of {len(every)} ranks are not drawn in full (only the stragglers, "
                    f"the median rank and the ranks that wait most are); every matched collective is a "
                    f"slice of 'all ranks · matched collectives', linked to the ranks drawn"
                )
                if left_out
                else None,
            }
            f.write(b'{"displayTimeUnit":"ms","tracedoc":' + orjson.dumps(head) + b',"traceEvents":[')
            first = True
            if summary_pid is not None:
                f.write(orjson.dumps(summary_events(summary_pid, inst, head["left_out"], flows))[1:-1])
                first = False
            for order, r in enumerate(sorted(ranks, key=lambda x: x.rank)):
                if r.environment.format != "kineto":
                    raise UsageError(
                        "--perfetto",
                        "merges torch.profiler Chrome traces",
                        f"rank {r.rank}: a {r.environment.format} file",
                        "export the run with torch.profiler",
                    )
                doc = _read_json(r.source)
                events = doc.get("traceEvents") if isinstance(doc, dict) else None
                if not isinstance(events, list):
                    raise TracedocError(
                        r.source,
                        "has no traceEvents array to merge",
                        None,
                        "pass the torch.profiler trace files themselves",
                    )
                out = rank_events(r.rank, order, events, offsets.get(r.rank, 0))
                out += collective_events(r.rank, order, inst, view.straggler_ranks, flows)
                chunk = orjson.dumps(out)[1:-1]
                del events, doc, out
                if chunk:
                    f.write(chunk if first else b"," + chunk)
                    first = False
            f.write(b"]}")

    try:
        replace_atomically(out_path, write)
    except OSError as exc:
        raise TracedocError(out_path, "cannot be written", exc.strerror, "choose another --perfetto path") from None
    return out_path


def rank_pid(order: int) -> int:
    """The process id of the rank drawn ``order``-th (its original pids become threads of it)."""
    return 1 + order


def rank_events(rank: int, order: int, events: list, offset_ns: int) -> list[dict]:
    """One rank's original events as threads of one process ``rank R``, moved by ``offset_ns``."""
    pid = rank_pid(order)
    shift_us = offset_ns / 1000.0
    tids: dict[tuple, int] = {}
    names: dict[Any, str] = {}
    thread_names: dict[tuple, str] = {}
    out: list[dict] = []
    for e in events:
        if not isinstance(e, dict):
            continue
        ph = e.get("ph")
        if ph == "M":
            args = e.get("args") if isinstance(e.get("args"), dict) else {}
            if e.get("name") == "process_name":
                names[_key(e.get("pid"))] = _label(args.get("name", e.get("pid")))
            elif e.get("name") == "thread_name":
                thread_names[(_key(e.get("pid")), _key(e.get("tid")))] = _label(args.get("name", e.get("tid")))
            continue
        key = (_key(e.get("pid")), _key(e.get("tid")))
        tid = tids.get(key)
        if tid is None:
            tid = tids[key] = len(tids) + 1
        ev = dict(e)
        ev["pid"], ev["tid"] = pid, tid
        if isinstance(ev.get("ts"), (int, float)) and not isinstance(ev.get("ts"), bool):
            ev["ts"] = ev["ts"] - shift_us
        for k in ("id", "bind_id"):
            if k in ev:
                ev[k] = f"r{rank}.{ev[k]}"
        out.append(ev)
    meta = [
        _meta(pid, None, "process_name", f"rank {rank}"),
        _meta(pid, None, "process_sort_index", order),
        _meta(pid, TRACK_TID, "thread_name", "tracedoc · collectives"),
        _meta(pid, TRACK_TID, "thread_sort_index", -1),
    ]
    for (opid, otid), tid in tids.items():
        label = thread_names.get((opid, otid), _label(f"thread {otid}"))
        meta.append(_meta(pid, tid, "thread_name", f"{names.get(opid) or _label(f'pid {opid}')} · {label}"))
    return meta + out


def _label(value: Any) -> str:
    """A process or thread name as a label: at most ``MAX_LABEL_CHARS`` characters."""
    text = value if isinstance(value, str) else repr(value)[: MAX_LABEL_CHARS + 1]
    return text if len(text) <= MAX_LABEL_CHARS else text[: MAX_LABEL_CHARS - 1] + "…"


def _key(value: Any) -> Any:
    """A pid or tid as a dictionary key, whatever the file gives (a list or an object is not hashable)."""
    return value if value is None or isinstance(value, (int, float, str)) else repr(value)[:MAX_LABEL_CHARS]


def full_ranks(view, ranks: list[int]) -> set[int]:
    """The ranks drawn in full: all of them up to ``MAX_FULL_RANKS``; else the stragglers, the median rank
    and the ranks that wait most (per step), up to that many."""
    if len(ranks) <= MAX_FULL_RANKS:
        return set(ranks)
    present = set(ranks)
    chosen = [r for r in view.straggler_ranks if r in present]
    if view.median_rank in present and view.median_rank not in chosen:
        chosen.append(view.median_rank)
    waits = sorted(
        ((row.wait_ns_per_step or 0.0, row.rank) for row in view.ranks if row.rank in present),
        key=lambda x: (-x[0], x[1]),
    )
    for _, r in waits:
        if len(chosen) >= MAX_FULL_RANKS:
            break
        if r not in chosen:
            chosen.append(r)
    return set(chosen)


class _Flows:
    """The arrows drawn so far, and where each collective's last arriver starts to transfer; with a
    summary process (``summary_pid``), each collective's span there, where arrows start whose last
    arriver is not drawn."""

    def __init__(self, inst: dict, pid_of: dict[int, int], summary_pid: int | None = None) -> None:
        self.count = 0
        self.pid_of = pid_of
        self.summary_pid = summary_pid
        m = inst["last_ns"].size
        self.last_end = np.full(m, -1, dtype=np.int64)  # per instance: the last arriver's end
        is_last = inst["rank"] == inst["last_rank"][inst["inst"]]
        self.last_end[inst["inst"][is_last]] = inst["end_ns"][is_last]
        self.first = np.full(m, np.iinfo(np.int64).max, dtype=np.int64)  # per instance: the first arrival
        np.minimum.at(self.first, inst["inst"], inst["arrival_ns"])
        self.end = np.full(m, np.iinfo(np.int64).min, dtype=np.int64)  # ... and the last end
        np.maximum.at(self.end, inst["inst"], np.maximum(inst["end_ns"], inst["arrival_ns"]))


def summary_events(pid: int, inst: dict, note: str, flows: _Flows) -> list[dict]:
    """The ``all ranks · matched collectives`` process: one slice per matched collective, and the note
    saying what was left out."""
    m = inst["last_ns"].size
    members = np.bincount(inst["inst"], minlength=m)
    out = [
        _meta(pid, None, "process_name", "all ranks · matched collectives"),
        _meta(pid, None, "process_sort_index", -1),
        _meta(pid, TRACK_TID, "thread_name", "every matched collective"),
    ]
    t0 = int(flows.first.min()) if m else 0
    out.append(
        {
            "ph": "i",
            "s": "p",
            "cat": "tracedoc.collective",
            "name": "left out: " + note,
            "pid": pid,
            "tid": TRACK_TID,
            "ts": t0 / 1000,
            "args": {"note": note},
        }
    )
    for k in range(m):
        out.append(
            _slice(
                pid,
                f"{inst['type'][k]} · last rank {int(inst['last_rank'][k])}",
                int(flows.first[k]),
                int(flows.end[k]),
                WAIT_COLOUR,
                {
                    "instance": k,
                    "last_rank": int(inst["last_rank"][k]),
                    "members": int(members[k]),
                    "skew_ms": (int(inst["last_ns"][k]) - int(flows.first[k])) / 1e6,
                },
            )
        )
    return out


def collective_events(rank: int, order: int, inst: dict, stragglers: list[int], flows: _Flows) -> list[dict]:
    """The tracedoc thread of one rank: wait and transfer of each matched collective, lateness on a
    straggler, and the flow arrows that link the collective to the last arriver's."""
    pid = rank_pid(order)
    mine = np.flatnonzero(inst["rank"] == rank)
    out: list[dict] = []
    late_rank = set(stragglers)
    for row in mine.tolist():
        k = int(inst["inst"][row])
        a, e = int(inst["arrival_ns"][row]), int(inst["end_ns"][row])
        last, last_rank = int(inst["last_ns"][k]), int(inst["last_rank"][k])
        what = inst["type"][k]
        waited = max(0, min(last, e) - a)
        if waited:
            out.append(
                _slice(
                    pid,
                    f"wait · {what}",
                    a,
                    a + waited,
                    WAIT_COLOUR,
                    {"instance": k, "last_rank": last_rank, "wait_ms": waited / 1e6},
                )
            )
        start = a + waited
        out.append(_slice(pid, f"transfer · {what}", start, max(e, start), TRANSFER_COLOUR, {"instance": k}))
        med = int(inst["median_ns"][k])
        if rank in late_rank and a > med:
            out.append(
                _slice(
                    pid,
                    f"late · {(a - med) / 1e6:.2f} ms",
                    med,
                    a,
                    LATE_COLOUR,
                    {"instance": k, "median_arrival_us": med / 1000},
                )
            )
        # an arrow from the last arriver's collective to this member's, where it starts to transfer (from
        # the collective's slice on the summary process when the last arriver is not drawn)
        src = flows.pid_of.get(last_rank)
        at = _inside(last, int(flows.last_end[k]))
        if src is None and flows.summary_pid is not None:
            src, at = flows.summary_pid, _inside(int(flows.first[k]), int(flows.end[k]))
        if last_rank >= 0 and last_rank != rank and src is not None and flows.count < MAX_FLOWS:
            flows.count += 1
            fid = f"tdc{k}.{rank}"
            out.append(
                {
                    "ph": "s",
                    "cat": "tracedoc.collective",
                    "name": "collective",
                    "id": fid,
                    "pid": src,
                    "tid": TRACK_TID,
                    "ts": at / 1000,
                }
            )
            out.append(
                {
                    "ph": "f",
                    "bp": "e",
                    "cat": "tracedoc.collective",
                    "name": "collective",
                    "id": fid,
                    "pid": pid,
                    "tid": TRACK_TID,
                    "ts": _inside(start, max(e, start)) / 1000,
                }
            )
    return out


def _inside(start: int, end: int) -> int:
    """A time just inside the slice [start, end] (ns), so that a flow event binds to it."""
    return start + max(0, min(1000, (end - start) // 2))


def _slice(pid: int, name: str, s_ns: int, e_ns: int, colour: str, args: dict) -> dict:
    return {
        "ph": "X",
        "cat": "tracedoc.collective",
        "name": name,
        "pid": pid,
        "tid": TRACK_TID,
        "ts": s_ns / 1000,
        "dur": max(e_ns - s_ns, 0) / 1000,
        "cname": colour,
        "args": args,
    }


def _meta(pid: int, tid: int | None, name: str, value) -> dict:
    ev = {"ph": "M", "pid": pid, "name": name, "args": {"sort_index" if name.endswith("sort_index") else "name": value}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _read_json(path: str) -> Any:
    """A whole trace file's JSON, read through the bounded reader (a merged timeline reads one rank at a time)."""
    import orjson

    from ..infile import read_input

    raw = read_input(path, TracedocError, "trace file")
    try:
        return orjson.loads(raw)
    except (orjson.JSONDecodeError, RecursionError) as exc:
        raise TracedocError(
            path,
            "is not complete JSON, so it cannot be overlaid",
            str(exc).split(":")[0],
            "overlay an intact copy of the trace",
        ) from None
