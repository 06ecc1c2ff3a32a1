"""Reader for Nsight Systems SQLite exports (``nsys export --type sqlite``), every generation.

The database is opened read-only. Each table is read once, column by column as named by
``PRAGMA table_info`` (column order and presence change between exports), with NULLs turned into
``-1`` inside SQLite so every integer column arrives as exact int64 (``globalTid`` does not fit a
float). Names stay nsys ``StringIds`` ids until a ``Trace`` is built; then the distinct ids of that
trace are resolved once and mapped to the trace's own string table through a lookup array.

One process is one rank. ``read_nsys`` returns the process that did GPU work (the busiest one
when several did, with a warning); ``read_nsys_ranks`` returns one ``Trace`` per GPU process.

Time: values stay the export's raw nanoseconds. Events with ``start <= 0`` are dropped (NVIDIA's
rules filter them: they are NCCL-init and similar records logged before the capture started), and so
are events that end before ``ANALYSIS_DETAILS.startTime`` when the events are on that clock. Some
exports are zero-based instead (their events all lie below ``startTime``); then only ``start <= 0``
is dropped. ``meta.time_origin_ns`` maps trace time to Unix time: ``epoch = origin + t``.

Modules: ``db`` (connection, columns), ``events`` (raw columns of the whole file, time rules),
``build`` (one ``Trace`` per set of processes), ``metadata`` (devices, names), ``steps`` (NVTX steps).
"""

from __future__ import annotations

import os
from typing import Callable

import numpy as np

from ...errors import TraceError
from ...model.groups import distinct, lex_order
from ...model.trace import Trace
from ..launches import link_by_correlation
from .build import _build
from .db import _check_kind, _Db
from .events import OSRT_MAX_ROWS, _PID_SHIFT, _TID_MASK, _n, _os_pid, _Raw, _read_all
from .metadata import _read_info

__all__ = ["OSRT_MAX_ROWS", "link_by_correlation", "read_nsys", "read_nsys_ranks"]


def _open(path: str | os.PathLike) -> _Db:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise TraceError(path, "does not exist", None, "check the path")
    db = _Db(path)
    try:
        _check_kind(db)
    except Exception:
        db.close()
        raise
    return db


def _gpu_processes(raw: _Raw) -> list[tuple[int, int]]:
    """(globalPid, GPU op count) of every process with GPU work, ordered by OS pid."""
    if not _n(raw.gpu):
        return []
    vals, counts = np.unique(raw.gpu["gpid"], return_counts=True)
    order = lex_order((vals, _os_pid(vals)))
    return [(int(vals[i]), int(counts[i])) for i in order]


def _load(path, progress, options):
    db = _open(path)
    try:
        raw, names = _read_all(
            db, progress, bool(options.get("osrt", True)), int(options.get("osrt_max_rows", OSRT_MAX_ROWS))
        )
        info = _read_info(db)
    except Exception:
        db.close()
        raise
    return db, raw, names, info


_KNOWN_OPTIONS = {"step_range", "pid", "osrt", "osrt_max_rows"}


def _check_options(path: str, options: dict) -> None:
    unknown = set(options) - _KNOWN_OPTIONS
    if unknown:
        raise TraceError(
            os.fspath(path),
            f"unknown nsys reader option(s): {', '.join(sorted(unknown))}",
            None,
            f"use one of {', '.join(sorted(_KNOWN_OPTIONS))}",
        )


def read_nsys(path: str | os.PathLike, progress: Callable[[float], None] | None = None, **options) -> Trace:
    """Read an nsys SQLite export into one ``Trace``.

    Options: ``step_range="NAME"`` names the NVTX range that marks a step (default: detected by
    name); ``pid=N`` picks a process by OS pid, ``pid="all"`` keeps every process in one trace;
    ``osrt=False`` skips OS runtime calls; ``osrt_max_rows`` caps them (default 5,000,000).
    """
    _check_options(path, options)
    path = os.fspath(path)
    db, raw, names, info = _load(path, progress, options)
    try:
        procs = _gpu_processes(raw)
        want = options.get("pid")
        warn = None
        rank = world = None
        if want == "all" or (want is None and not procs):
            gpids = None
        elif want is not None:
            try:
                want = int(want)
            except (TypeError, ValueError):
                raise TraceError(
                    path, f"pid={want!r} is not a process id", None, "pass an integer OS pid, or pid='all'"
                ) from None
            match = [g for g in _all_gpids(raw) if (g >> _PID_SHIFT) & _TID_MASK == want]
            if not match:
                seen = ", ".join(str((g >> _PID_SHIFT) & _TID_MASK) for g, _ in procs) or "none with GPU work"
                raise TraceError(
                    path, f"has no process with pid {want}", f"pids {seen}", "pass one of those pids, or pid='all'"
                )
            gpids = np.asarray(match, dtype=np.int64)
            gp = [g for g, _ in procs]
            if len(procs) > 1 and match[0] in gp:
                rank, world = gp.index(match[0]), len(procs)
        elif len(procs) == 1:
            gpids = np.asarray([procs[0][0]], dtype=np.int64)
        else:
            best = max(range(len(procs)), key=lambda i: (procs[i][1], -i))
            gpids = np.asarray([procs[best][0]], dtype=np.int64)
            rank, world = best, len(procs)
            others = ", ".join(
                f"pid {(g >> _PID_SHIFT) & _TID_MASK} ({k:,} GPU ops)" for j, (g, k) in enumerate(procs) if j != best
            )
            warn = (
                f"{path}: the export holds {len(procs)} processes with GPU work; read pid "
                f"{(procs[best][0] >> _PID_SHIFT) & _TID_MASK} ({procs[best][1]:,} GPU ops) and left out "
                f"{others}; use read_nsys_ranks() / `tracedoc analyze` on all ranks, or pid=N / pid='all'"
            )
        trace = _build(path, db, raw, names, gpids, options, info)
        trace.meta.rank, trace.meta.world_size = rank, world
        if warn:
            trace.warnings.insert(0, warn)
        trace.warnings.extend(db.text_warnings())
    finally:
        db.close()
    if progress:
        progress(1.0)
    return trace


def _all_gpids(raw: _Raw) -> list[int]:
    found: set[int] = set()
    for t in (raw.gpu, raw.runtime, raw.syncs, raw.cpu):
        if _n(t):
            found.update(distinct(t["gpid"]).tolist())
    return sorted(g for g in found if g >= 0)


def read_nsys_ranks(path: str | os.PathLike, progress: Callable[[float], None] | None = None, **options) -> list[Trace]:
    """One ``Trace`` per process with GPU work, ordered by OS pid; ``meta.rank`` is that order.

    An export without GPU work gives a single trace of every process.
    """
    options.pop("pid", None)
    _check_options(path, options)
    path = os.fspath(path)
    db, raw, names, info = _load(path, progress, options)
    try:
        procs = _gpu_processes(raw)
        out = []
        if not procs:
            t = _build(path, db, raw, names, None, options, info)
            t.meta.rank, t.meta.world_size = 0, 1
            out.append(t)
        for rank, (gpid, _) in enumerate(procs):
            t = _build(path, db, raw, names, np.asarray([gpid], dtype=np.int64), options, info)
            t.meta.rank, t.meta.world_size = rank, len(procs)
            out.append(t)
        for t in out:
            t.warnings.extend(db.text_warnings())
    finally:
        db.close()
    if progress:
        progress(1.0)
    return out
