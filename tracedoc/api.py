"""Python API: ``load``, ``load_dir``, ``analyze``, ``analyze_log`` and ``diff``.

``analyze`` accepts a trace file or a directory of per-rank traces and runs the pipeline's stages
(``tracedoc.stages``): ``read_ranks -> join_job -> judge(ranks, ruleset)``; ranks are read and
analysed in parallel processes (per-rank work is a pure function of the file).
"""

from __future__ import annotations

import os
from typing import Any, Callable

from .engine.ruleset import load_ruleset
from .gcpause import with_trace_settings
from .ingest import load as _load_file
from .ingest import rank_files
from .model.trace import Trace
from .remote import fetched, is_url, renamed_text
from .result import AnalysisResult
from .result import load as load_report
from .stages import judge, judge_log, join_job, rank_from_name, read_ranks, read_step_log, sha256_of, url_rank_files

__all__ = [
    "analyze",
    "analyze_log",
    "diff",
    "load",
    "load_dir",
    "load_report",
    "rank_files",
    "rank_from_name",
    "sha256_of",
    "trend",
]


def load(path: str | os.PathLike, **options) -> Trace:
    """Read one trace file (Kineto JSON/.json.gz or nsys SQLite; a path or a URL) into a ``Trace``."""
    path = os.fspath(path)
    with fetched(path) as local:
        trace = _load_file(local, **options)
    if local != path:
        trace.source = renamed_text(trace.source, local, path)
    return trace


def load_dir(directory: str | os.PathLike, **options) -> list[Trace]:
    """Read every rank file in a directory or under a URL prefix (sequentially; ``analyze`` parallelises)."""
    directory = os.fspath(directory)
    files = url_rank_files(directory) if is_url(directory) else rank_files(directory)
    traces = [load(p, **options) for p in files]
    for t in traces:
        if t.meta.rank is None:
            t.meta.rank = rank_from_name(t.source)
    return sorted(traces, key=lambda t: (t.meta.rank is None, t.meta.rank or 0, t.source))


@with_trace_settings
def analyze(
    path: str | os.PathLike,
    *,
    jobs: int | None = None,
    params: dict | None = None,
    rule_dirs: tuple = (),
    progress: Callable[[int, int], None] | None = None,
    command: str | None = None,
    scheduler: str | None = None,
    log: str | None = None,
    estimate=None,
    rank: int | None = None,
    kind: str | None = None,
    **options,
) -> AnalysisResult:
    """Analyse a trace file or a directory of rank traces and evaluate the rules.

    Ranks fan out to a local process pool (``jobs`` processes), or, with ``scheduler`` set to a Dask
    scheduler address (``tcp://host:8786``) or a ``distributed.Client``, to a Dask cluster whose
    workers can read the same paths. A directory also gets the job view (``result.job``):
    collectives matched across ranks, waits, the straggler and its cause, a job verdict, and the
    rank shown in detail (``rank``, else the straggler, else the median rank).

    ``log`` names a training log whose findings join the first rank's; a ``tracedoc run`` directory
    brings its own ``steps.jsonl``. ``estimate`` (an ``estimate.EstimateRequest``) adds the model
    formula's FLOPs, tokens/s and memory beside each rank's measurements. ``kind``: the input's format when
    the caller has told it already (``tracedoc.ingest.sniff``), so that the file is not sniffed again.
    """
    ruleset = load_ruleset(params, rule_dirs)  # a bad rule file or --param fails now, not after the ranks
    ranks = read_ranks(
        path, jobs=jobs, scheduler=scheduler, progress=progress, estimate=estimate, options=options, kind=kind
    )
    result = judge(
        ranks, ruleset, job=join_job(ranks, ruleset), log=read_step_log(ranks, log, ruleset), command=command
    )
    return result.with_focus(rank) if rank is not None else result


@with_trace_settings
def analyze_log(
    path: str | os.PathLike | list | tuple,
    *,
    config: tuple | list = (),
    params: dict | None = None,
    rule_dirs: tuple = (),
    compute_capability: float | None = None,
    gpu_name: str | None = None,
    command: str | None = None,
    options: Any = None,
    jobs: int | None = None,
    log_format: str | None = None,
    fields: dict[str, str] | None = None,
):
    """Analyse a training log (and its config files): anomalies, config checks and the findings of the
    ``scope = "log"`` rules. Returns a ``tracedoc.logs.LogResult``. ``path`` may be a list of files (or a
    directory of Lightning ``version_N`` logs): segments of one run, joined in step order. A large JSON Lines log is
    decoded in ``jobs`` processes (default: the CPU count, at most 4). ``log_format`` names the log's format instead
    of sniffing it (``tracedoc.logs.reader.FORMATS``); ``fields`` maps field names to the log's own
    (``{"loss": "train/lm_loss"}``)."""
    return judge_log(
        path,
        load_ruleset(params, rule_dirs),
        config=config,
        options=options,
        compute_capability=compute_capability,
        gpu_name=gpu_name,
        command=command,
        jobs=jobs or min(4, os.cpu_count() or 1),
        log_format=log_format,
        fields=fields,
    )


@with_trace_settings
def diff(before, after, *, jobs: int | None = None, noise_pct: float | None = None, **options):
    """Compare two runs: each a trace file, a rank directory or a saved ``--format json`` report
    (or an ``AnalysisResult``). Traces are analysed first; returns a ``DiffResult``."""
    from .diff import NOISE_FLOOR_PCT, diff_sides
    from .version import __version__

    sides = [_diff_side(x, label, jobs, options) for x, label in ((before, "before"), (after, "after"))]
    result = diff_sides(sides[0], sides[1], NOISE_FLOOR_PCT if noise_pct is None else noise_pct)
    result.tracedoc_version = __version__
    return result


def trend(base, *runs, jobs: int | None = None, noise_pct: float | None = None, **options):
    """Compare a series of runs, each with the first (``base``): traces, rank directories, saved reports or
    results, as ``diff`` takes them; the base is analysed once. Returns a ``TrendResult``."""
    from .diff import NOISE_FLOOR_PCT, diff_sides
    from .diff.trend import TrendResult
    from .version import __version__

    if not runs:
        raise ValueError("trend() compares the base with one run or more; give at least one run after it")
    first = _diff_side(base, "base", jobs, options)
    diffs = []
    for i, run in enumerate(runs):
        d = diff_sides(
            first, _diff_side(run, f"run {i + 2}", jobs, options), NOISE_FLOOR_PCT if noise_pct is None else noise_pct
        )
        d.tracedoc_version = __version__
        diffs.append(d)
    return TrendResult.of(diffs)


def _diff_side(value, label: str, jobs: int | None, options: dict):
    """One side as the diff reads it: a typed result, with where it came from."""
    from .diff import Side, check_report, is_report

    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        if is_report(path):
            with fetched(path, what="report") as local:  # a report by URL is read from a local copy
                return Side(path=path, kind="report", result=check_report(load_report(local), path))
        return Side(path=path, kind="trace", result=analyze(path, jobs=jobs, **options))
    if not isinstance(value, AnalysisResult):
        value = AnalysisResult.from_dict(value, where=label)
    where = value.paths[0] if value.paths else label
    return Side(path=where, kind="report", result=check_report(value, where))
