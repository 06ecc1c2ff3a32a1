"""Rank fan-out: analyse the files of a run directory in parallel, one pure task per file.

Each task loads one file, runs the per-rank analyses and reduces the trace to the compact job tables
(``analyses.read_rank``), so only results travel back, never traces; what a task sends back is packed
(``rank_task``) as plain data (``tracedoc.job.wire``: never pickle): a few tenths of a percent of a large
rank file. Tasks run in a local process pool, or
on a Dask cluster when a scheduler is given (``tracedoc.job.cluster``; its workers must see the same
paths, or read the same URLs). In a directory, a file that cannot be read costs only that rank: it is
reported in ``failed`` (the analysis result's ``failed``, JSON ``inputs[].error``), the others go on.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
from dataclasses import dataclass, field
from typing import Any, Callable

from ..analyses import RankRead, read_rank
from ..errors import TraceError, TracedocError, UsageError
from ..gcpause import with_paused_gc
from ..ingest import check_kineto_options, check_nsys_options, load, sniff
from ..remote import fetched, renamed_text
from .wire import WireError, pack, unpack

@dataclass
class FanOut:
    """What reading a file's or directory's ranks gave: each rank's read, and the files that failed."""

    outputs: list[RankRead]
    failed: list[dict] = field(default_factory=list)  # {"source", "error"}
    received: dict[str, int] = field(default_factory=dict)  # file -> bytes its worker sent back


@with_paused_gc
def analyze_file(path: str, options: dict, progress: Callable[[float], None] | None = None,
                 workers: int | None = None, rank_of: Callable[[str], int | None] | None = None,
                 job: bool = True, given: dict | None = None) -> list[RankRead]:
    """Load and analyse one file (one rank, or one per process of a multi-process nsys export).

    ``path`` may be a URL (``s3://...``): the file is copied and read here, by the process that analyses
    it, and every name in the result is the URL's. ``workers=1`` when ranks are already spread over a
    process pool: no nested decode pools. ``job=False`` for a lone file: the straggler's cause is a
    job-view question. ``given``: the rank analyses' stage inputs (the ``estimate_request``).
    """
    with fetched(path) as local:
        return read_local(local, options, progress, workers, rank_of, job, given, shown=path)


def read_local(path: str, options: dict, progress: Callable[[float], None] | None = None,
               workers: int | None = None, rank_of: Callable[[str], int | None] | None = None,
               job: bool = True, given: dict | None = None, shown: str | None = None) -> list[RankRead]:
    """``analyze_file`` of a local file; ``shown``: the name the results give it (a URL it was copied from)."""
    shown = shown or path
    options = dict(options)
    steps = options.pop("steps", None)
    if sniff(path) == "nsys":
        from ..ingest import nsys

        check_kineto_options(path, steps)
        traces = [load(path, **options)] if "pid" in options else nsys.read_nsys_ranks(path, **options)
    else:
        check_nsys_options(path, options)
        traces = [load(path, progress=progress, workers=workers, steps=steps)]
    out = []
    for t in traces:
        if t.meta.rank is None and len(traces) == 1 and rank_of is not None:
            t.meta.rank = rank_of(shown)
        if shown != path:
            t.source = renamed_text(t.source, path, shown)
        read = read_rank(t, job=job or len(traces) > 1, given=given, workers=workers)
        if shown != path:
            read.result.warnings[:] = [renamed_text(w, path, shown) for w in read.result.warnings]
        out.append(read)
    return out


def _guarded(path: str, options: dict, rank_of, given: dict | None) -> tuple[list[RankRead], dict | None]:
    """A worker's task: the file's ranks without their overlays (only a fresh lone file draws one)."""
    try:
        return [r._replace(overlay=None) for r in analyze_file(path, options, None, 1, rank_of, given=given)], None
    except UsageError:
        raise
    except TracedocError as exc:
        return [], {"source": path, "error": exc.message()}
    except (OSError, EOFError, ValueError) as exc:  # a file that vanished or broke mid-read
        return [], {"source": path, "error": f"{path}: cannot be read ({type(exc).__name__}: {exc})"}


def rank_task(path: str, options: dict, rank_of, given: dict | None) -> bytes:
    """What a worker process sends back for one file: its ranks' compact results (or why it failed),
    packed as plain data and deflated (``wire.pack``). The results are summaries (metrics, evidence tables,
    timeline excerpts, the job view's collective tables): about 1% of a large rank file (1.06% of a 25 MB
    one), a third of that packed. Reading them back (``wire.unpack``) builds values, never runs code."""
    reads, failure = _guarded(path, options, rank_of, given)
    try:
        return pack(reads, failure)
    except (TypeError, ValueError, OverflowError) as exc:  # a value plain data cannot carry: this file alone
        return pack([], {"source": path, "error": f"{path}: not read: its results cannot be sent back from the "
                                                  f"worker ({exc})"})


def fan_out(files: list[str], options: dict, *, jobs: int | None = None, scheduler: Any = None,
            progress: Callable[[int, int], None] | None = None,
            rank_of: Callable[[str], int | None] | None = None, given: dict | None = None) -> FanOut:
    """Analyse many files in parallel; failures of single files are collected, not raised."""
    if scheduler is not None:
        from .cluster import on_dask

        done = on_dask(scheduler, files, options, progress, rank_of, given)
        _all_failed(done, files)
        return done
    done = FanOut([])
    workers = max(1, min(jobs or os.cpu_count() or 1, len(files)))
    with cf.ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(rank_task, f, options, rank_of, given): f for f in files}
        for n, fut in enumerate(cf.as_completed(futures), 1):
            path = futures[fut]
            try:
                collect(done, path, fut.result())
            except cf.process.BrokenProcessPool:  # a worker died (out of memory, killed): these ranks are lost
                done.failed.append({"source": path, "error": f"{path}: not read: a worker process died while the "
                                    "ranks were read (out of memory, or killed)"})
            if progress:
                progress(n, len(files))
    _all_failed(done, files)
    return done


def collect(done: FanOut, path: str, blob: bytes) -> None:
    """One finished file: its ranks' outputs, or why it could not be read; the bytes it sent are counted.
    Bytes that are not a rank task's answer (cut or altered on the way) cost that file's ranks alone."""
    try:
        outs, failure = unpack(blob)
    except WireError as exc:
        outs, failure = [], {"source": path, "error": f"{path}: not read: what its worker sent back cannot be "
                                                      f"read: {exc}"}
    done.outputs.extend(outs)
    done.received[path] = len(blob)
    if failure:
        done.failed.append(failure)


def _all_failed(done: FanOut, files: list[str]) -> None:
    if not done.outputs and done.failed:
        first = done.failed[0]["error"]
        where = files[0].rsplit("/", 1)[0] if "/" in files[0] else "."
        raise TraceError(where, f"no rank file could be read ({len(files)} tried)",
                         first, "check the files; each failure is listed with --format json")
