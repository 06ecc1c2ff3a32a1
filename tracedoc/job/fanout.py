"""Rank fan-out: analyse the files of a run directory in parallel, one pure task per file.

Each task loads one file, runs the per-rank analyses and reduces the trace to the compact job
tables (``analyses.read_rank``), so only results travel back, never traces. Tasks run in a local process pool, or on a Dask
cluster when a scheduler is given (its workers must see the same paths). In a directory, a file
that cannot be read costs only that rank: it is reported in ``failed`` (the analysis result's
``failed``, JSON ``inputs[].error``), the others go on.
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

DASK_CONNECT_TIMEOUT_S = 20


@dataclass
class FanOut:
    """What reading a file's or directory's ranks gave: each rank's read, and the files that failed."""

    outputs: list[RankRead]
    failed: list[dict] = field(default_factory=list)  # {"source", "error"}


@with_paused_gc
def analyze_file(path: str, options: dict, progress: Callable[[float], None] | None = None,
                 workers: int | None = None, rank_of: Callable[[str], int | None] | None = None,
                 job: bool = True, given: dict | None = None) -> list[RankRead]:
    """Load and analyse one file (one rank, or one per process of a multi-process nsys export).

    ``workers=1`` when ranks are already spread over a process pool: no nested decode pools.
    ``job=False`` for a lone file: the straggler's cause is a job-view question. ``given``: the rank
    analyses' stage inputs (the ``estimate_request``).
    """
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
            t.meta.rank = rank_of(path)
        out.append(read_rank(t, job=job or len(traces) > 1, given=given, workers=workers))
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


def fan_out(files: list[str], options: dict, *, jobs: int | None = None, scheduler: Any = None,
            progress: Callable[[int, int], None] | None = None,
            rank_of: Callable[[str], int | None] | None = None, given: dict | None = None) -> FanOut:
    """Analyse many files in parallel; failures of single files are collected, not raised."""
    if scheduler is not None:
        return _on_dask(scheduler, files, options, progress, rank_of, given)
    done = FanOut([])
    workers = max(1, min(jobs or os.cpu_count() or 1, len(files)))
    with cf.ProcessPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(_guarded, f, options, rank_of, given): f for f in files}
        for n, fut in enumerate(cf.as_completed(futures), 1):
            try:
                outs, failure = fut.result()
            except cf.process.BrokenProcessPool:  # a worker died (out of memory, killed): these ranks are lost
                outs, failure = [], {"source": futures[fut], "error": f"{futures[fut]}: not read: a worker process "
                                     "died while the ranks were read (out of memory, or killed)"}
            _collect(done, outs, failure)
            if progress:
                progress(n, len(files))
    _all_failed(done, files)
    return done


def _collect(done: FanOut, outs: list, failure: dict | None) -> None:
    """One finished file: its ranks' outputs, or why it could not be read."""
    done.outputs.extend(outs)
    if failure:
        done.failed.append(failure)


def _all_failed(done: FanOut, files: list[str]) -> None:
    if not done.outputs and done.failed:
        first = done.failed[0]["error"]
        raise TraceError(os.path.dirname(files[0]) or ".", f"no rank file could be read ({len(files)} tried)",
                         first, "check the files; each failure is listed with --format json")


def _on_dask(scheduler, files: list[str], options: dict, progress, rank_of, given) -> FanOut:
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise UsageError("--scheduler", "needs Dask's distributed package", None,
                         "pip install 'tracedoc[dask]'") from None
    client = scheduler if isinstance(scheduler, Client) else None
    own = client is None
    if own:
        try:
            client = Client(scheduler, timeout=DASK_CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise TraceError(str(scheduler), "cannot reach the Dask scheduler", str(exc),
                             "check the address (tcp://host:8786) and that the scheduler is running") from None
    try:
        futures = [client.submit(_guarded, f, options, rank_of, given, pure=False) for f in files]
        done = FanOut([])
        for n, fut in enumerate(as_completed(futures), 1):
            outs, failure = fut.result()
            _collect(done, outs, failure)
            if progress:
                progress(n, len(files))
        _all_failed(done, files)
        return done
    finally:
        if own:
            client.close()
