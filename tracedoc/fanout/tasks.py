"""One rank file's task: load it, run the per-rank analyses, reduce the trace to the compact job tables
(``analyses.read_rank``) and pack what travels back (``rank_task``), a few tenths of a percent of a
large rank file. ``fanout.fan_out`` runs these tasks in a local process pool, ``cluster.on_dask`` on a
Dask cluster; ``collect`` takes one finished task's bytes back into the ``FanOut``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from ..analyses import RankRead, read_rank
from ..errors import TracedocError, UsageError
from ..gcpause import with_trace_settings
from ..ingest import check_kineto_options, check_nsys_options, load, sniff
from ..remote import fetched, renamed_text
from .wire import WireError, pack, unpack


@dataclass
class FanOut:
    """What reading a file's or directory's ranks gave: each rank's read, and the files that failed."""

    outputs: list[RankRead]
    failed: list[dict] = field(default_factory=list)  # {"source", "error"}
    received: dict[str, int] = field(default_factory=dict)  # file -> bytes its worker sent back


@with_trace_settings
def analyze_file(
    path: str,
    options: dict,
    progress: Callable[[float], None] | None = None,
    workers: int | None = None,
    rank_of: Callable[[str], int | None] | None = None,
    job: bool = True,
    given: dict | None = None,
) -> list[RankRead]:
    """Load and analyse one file (one rank, or one per process of a multi-process nsys export).

    ``path`` may be a URL (``s3://...``): the file is copied and read here, by the process that analyses
    it, and every name in the result is the URL's. ``workers=1`` when ranks are already spread over a
    process pool: no nested decode pools. ``job=False`` for a lone file: the straggler's cause is a
    job-view question. ``given``: the rank analyses' stage inputs (the ``estimate_request``).
    """
    with fetched(path) as local:
        return read_local(local, options, progress, workers, rank_of, job, given, shown=path)


def read_local(
    path: str,
    options: dict,
    progress: Callable[[float], None] | None = None,
    workers: int | None = None,
    rank_of: Callable[[str], int | None] | None = None,
    job: bool = True,
    given: dict | None = None,
    shown: str | None = None,
    kind: str | None = None,
) -> list[RankRead]:
    """``analyze_file`` of a local file; ``shown``: the name the results give it (a URL it was copied from);
    ``kind``: its format when the caller has sniffed it (``ingest.sniff``), else sniffed here, once."""
    shown = shown or path
    options = dict(options)
    steps = options.pop("steps", None)
    kind = kind or sniff(path)
    if kind == "nsys":
        from ..ingest import nsys

        check_kineto_options(path, steps)
        traces = [load(path, kind=kind, **options)] if "pid" in options else nsys.read_nsys_ranks(path, **options)
    else:
        check_nsys_options(path, options)
        traces = [load(path, progress=progress, workers=workers, kind=kind, steps=steps)]
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
        return pack(
            [], {"source": path, "error": f"{path}: not read: its results cannot be sent back from the worker ({exc})"}
        )


def collect(done: FanOut, path: str, blob: bytes) -> None:
    """One finished file: its ranks' outputs, or why it could not be read; the bytes it sent are counted.
    Bytes that are not a rank task's answer (cut or altered on the way) cost that file's ranks alone."""
    try:
        outs, failure = unpack(blob)
    except WireError as exc:
        outs, failure = (
            [],
            {"source": path, "error": f"{path}: not read: what its worker sent back cannot be read: {exc}"},
        )
    done.outputs.extend(outs)
    done.received[path] = len(blob)
    if failure:
        done.failed.append(failure)
