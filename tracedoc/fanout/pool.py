"""Rank fan-out: analyse the files of a run directory in parallel, one pure task per file.

Each task loads one file, runs the per-rank analyses and reduces the trace to the compact job tables
(``analyses.read_rank``), so only results travel back, never traces; what a task sends back is packed
(``rank_task``): a few tenths of a percent of a large rank file. Tasks run in a local process pool, or
on a Dask cluster when a scheduler is given (``tracedoc.fanout.cluster``; its workers must see the same
paths, or read the same URLs). In a directory, a file that cannot be read costs only that rank: it is
reported in ``failed`` (the analysis result's ``failed``, JSON ``inputs[].error``), the others go on.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
from typing import Any, Callable

from ..errors import TraceError
from .tasks import FanOut, analyze_file, collect, rank_task, read_local

__all__ = ["FanOut", "analyze_file", "collect", "fan_out", "rank_task", "read_local"]


def fan_out(
    files: list[str],
    options: dict,
    *,
    jobs: int | None = None,
    scheduler: Any = None,
    progress: Callable[[int, int], None] | None = None,
    rank_of: Callable[[str], int | None] | None = None,
    given: dict | None = None,
) -> FanOut:
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
                done.failed.append(
                    {
                        "source": path,
                        "error": f"{path}: not read: a worker process died while the "
                        "ranks were read (out of memory, or killed)",
                    }
                )
            if progress:
                progress(n, len(files))
    _all_failed(done, files)
    return done


def _all_failed(done: FanOut, files: list[str]) -> None:
    if not done.outputs and done.failed:
        first = done.failed[0]["error"]
        where = files[0].rsplit("/", 1)[0] if "/" in files[0] else "."
        raise TraceError(
            where,
            f"no rank file could be read ({len(files)} tried)",
            first,
            "check the files; each failure is listed with --format json",
        )
