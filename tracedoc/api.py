"""Python API: ``load``, ``load_dir`` and ``analyze``.

``analyze`` accepts a trace file or a directory of per-rank traces; ranks are read and analysed in
parallel processes (per-rank work is a pure function of the file).
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import os
import re
from typing import Any, Callable

from .analyses import RankAnalysis, analyze_trace
from .checks import check_rank, check_verdict
from .engine.evaluate import Verdict, evaluate
from .engine.params import resolve_params
from .engine.rulefile import Rule, load_rules, rules_version
from .errors import TraceError, TracedocError, UsageError, warn
from .ingest import load as _load_file
from .ingest import sniff
from .model.trace import Trace
from .result import AnalysisResult, RankResult
from .version import __version__

DASK_CONNECT_TIMEOUT_S = 20

_RANK_NAME_RES = (re.compile(r"rank[_\-]?(\d+)", re.I), re.compile(r"(?:^|[_\-.])r(\d+)(?:[_\-.]|$)"),
                  re.compile(r"(?:^|[_\-.])(\d+)\.(?:pt\.)?trace\.json", re.I))
_TRACE_FILE_RE = re.compile(r"\.(json|json\.gz|sqlite|sqlite3)$", re.I)


def load(path: str | os.PathLike, **options) -> Trace:
    """Read one trace file (Kineto JSON/.json.gz or nsys SQLite) into a ``Trace``."""
    return _load_file(os.fspath(path), **options)


def rank_files(directory: str) -> list[str]:
    """The trace files of a per-rank directory, sorted by name."""
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        raise TraceError(directory, "cannot be listed", exc.strerror, "check the path and its permissions") from None
    files = [os.path.join(directory, n) for n in names
             if _TRACE_FILE_RE.search(n) and os.path.isfile(os.path.join(directory, n))
             and not n.endswith((".report.json",)) and not n.startswith(".")]
    if not files:
        raise TraceError(directory, "holds no trace files", f"{len(names)} entries, none ending in .json, "
                         ".json.gz or .sqlite", "point tracedoc at the directory torch.profiler wrote its rank traces to")
    return files


def rank_from_name(path: str) -> int | None:
    base = os.path.basename(path)
    for rx in _RANK_NAME_RES:
        m = rx.search(base)
        if m:
            return int(m.group(1))
    return None


def load_dir(directory: str | os.PathLike, **options) -> list[Trace]:
    """Read every rank file in a directory (sequentially; ``analyze`` parallelises)."""
    traces = [load(p, **options) for p in rank_files(os.fspath(directory))]
    for t in traces:
        if t.meta.rank is None:
            t.meta.rank = rank_from_name(t.source)
    return sorted(traces, key=lambda t: (t.meta.rank is None, t.meta.rank or 0, t.source))


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _rules_version() -> str | None:
    try:
        return rules_version()
    except Exception:  # noqa: BLE001 - the version is informational only
        return None


def _analyze_file(path: str, options: dict, progress: Callable[[float], None] | None = None,
                  workers: int | None = None) -> list[RankAnalysis]:
    """Load and analyse one file (one rank, or one per process for a multi-process nsys export).

    ``workers=1`` when ranks are already spread over a process pool: no nested decode pools.
    """
    if sniff(path) == "nsys":
        from .ingest import nsys

        traces = [load(path, **options)] if "pid" in options else nsys.read_nsys_ranks(path, **options)
    else:
        if options:
            raise UsageError(path, f"{', '.join('--' + k.replace('_', '-') for k in options)} applies to nsys "
                             "SQLite exports only", None, "drop the option for torch.profiler traces")
        traces = [load(path, progress=progress, workers=workers)]
    out = []
    for t in traces:
        if t.meta.rank is None and len(traces) == 1:
            t.meta.rank = rank_from_name(path)
        out.append(analyze_trace(t))
    return out


def analyze(path: str | os.PathLike, *, jobs: int | None = None, params: dict | None = None,
            rule_dirs: tuple = (), progress: Callable[[int, int], None] | None = None,
            command: str | None = None, scheduler: str | None = None, log: str | None = None,
            **options) -> AnalysisResult:
    """Analyse a trace file or a directory of rank traces; evaluate the rules when available.

    Ranks fan out to a local process pool (``jobs`` processes), or, with ``scheduler`` set to a Dask
    scheduler address (``tcp://host:8786``) or a ``distributed.Client``, to a Dask cluster whose
    workers can read the same paths.

    ``log`` names a training log whose findings join the first rank's; a ``tracedoc run`` directory
    brings its own ``steps.jsonl``.
    """
    path = os.fspath(path)
    kind = sniff(path)
    files = rank_files(path) if kind == "directory" else [path]
    rules = _load_rules(params, rule_dirs)  # a bad rule file or --param fails now, not after the ranks
    results: list[RankAnalysis] = []
    failed: dict[str, str] = {}  # rank file -> why it could not be analysed
    if scheduler is not None and len(files) > 1:
        results.extend(_analyze_on_dask(scheduler, files, options, progress, failed))
    elif len(files) == 1:
        by_fraction = (lambda f: progress(int(1000 * f), 1000)) if progress else None
        results.extend(_analyze_file(files[0], options, by_fraction))
        if progress:
            progress(1000, 1000)
    else:
        workers = max(1, min(jobs or os.cpu_count() or 1, len(files)))
        with cf.ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(_analyze_file, f, options, None, 1): f for f in files}
            done = 0
            for fut in cf.as_completed(futures):
                _collect(fut, futures[fut], results, failed)
                done += 1
                if progress:
                    progress(done, len(files))
    if failed and not results:
        raise TraceError(path, f"none of its {len(files)} rank files could be analysed",
                         "; ".join(list(failed.values())[:3]), "check the files named above")
    for f, why in failed.items():
        warn(f, f"rank file not analysed, the other {len(files) - len(failed)} were: {why}")
    results.sort(key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.source))
    _flag_duplicate_ranks(results)
    for r in results:
        check_rank(r)
    ranks = [RankResult.from_analysis(r, _evaluate(r, params, rules)) for r in results]
    for r in ranks:
        check_verdict(r, r.verdict)
    known = {r.source: r.meta.get("sha256") for r in results}
    hashes = {f: known.get(f) or _sha256_or_none(f) for f in files}
    result = AnalysisResult.of(files, ranks, command=command, hashes=hashes, rules_version=_rules_version(),
                               failed=failed)
    step_log = os.path.join(path, "steps.jsonl") if kind == "directory" else None
    if log is not None or (step_log and os.path.isfile(step_log)):
        _attach_log(result, log or step_log, params, rule_dirs, required=log is not None)
    return result


def _attach_log(result: AnalysisResult, log: str, params: dict | None, rule_dirs: tuple, required: bool) -> None:
    """Add a training log's findings to the first rank's verdict and its anomalies to its evidence."""
    if not result.ranks or result.ranks[0].verdict is None:
        return
    first = result.ranks[0]
    try:
        log_result = analyze_log(log, params=params, rule_dirs=rule_dirs,
                                 compute_capability=first.metrics.get("compute_capability"))
    except TracedocError as exc:
        if required:
            raise
        first.warnings.append(f"step log not analysed: {exc.message()}")
        return
    first.verdict.findings.extend(log_result.findings)
    first.evidence["log_anomalies"] = [dict(a, source=log_result.source) for a in log_result.anomalies[:200]]
    first.warnings.extend(f"{log_result.source}: {w}" for w in log_result.warnings)


def _collect(fut, path: str, results: list[RankAnalysis], failed: dict[str, str]) -> None:
    """One rank's results, or why it failed: a bad rank file costs that rank, never the job."""
    try:
        results.extend(fut.result())
    except TracedocError as exc:
        failed[path] = exc.message()
    except cf.process.BrokenProcessPool:
        failed[path] = f"{path}: not read: a worker process died while the ranks were read (out of memory, or killed)"


def _flag_duplicate_ranks(results: list[RankAnalysis]) -> None:
    """Two files claiming one rank: say so on each, naming the other (both stay in the result).

    nsys exports are left out: their rank is a process's order within its own file."""
    by_rank: dict[int, list[RankAnalysis]] = {}
    for r in results:
        if r.rank is not None and r.meta.get("format") != "nsys":
            by_rank.setdefault(r.rank, []).append(r)
    for rank, same in by_rank.items():
        if len(same) > 1 and len({r.source for r in same}) > 1:
            for r in same:
                others = ", ".join(o.source for o in same if o is not r)
                r.warnings.append(f"{r.source}: claims rank {rank}, as does {others}; both are shown, but a job has "
                                  "one file per rank: check for a copy or a rank from another run")


def _sha256_or_none(path: str) -> str | None:
    try:
        return sha256_of(path)
    except OSError:
        return None


def _analyze_on_dask(scheduler, files: list[str], options: dict, progress,
                     failed: dict[str, str]) -> list[RankAnalysis]:
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
        futures = {client.submit(_analyze_file, f, options, None, 1, pure=False): f for f in files}
        out: list[RankAnalysis] = []
        for done, fut in enumerate(as_completed(futures), 1):
            _collect(fut, futures[fut], out, failed)
            if progress:
                progress(done, len(files))
        return out
    finally:
        if own:
            client.close()


def _load_rules(params: dict | None, rule_dirs: tuple) -> list[Rule]:
    """Load and validate the rules and the parameter overrides once, before any analysis."""
    rules = load_rules(rule_dirs)
    resolve_params(rules, params)
    return rules


def _evaluate(rank: RankAnalysis, params: dict | None, rules: list[Rule]) -> Verdict:
    return evaluate(rank.metrics, rank.evidence, rank.step_time_ns, params=params, rules=rules)


def analyze_log(path: str | os.PathLike, *, config: tuple | list = (), params: dict | None = None,
                rule_dirs: tuple = (), compute_capability: float | None = None, gpu_name: str | None = None,
                command: str | None = None, options: Any = None, jobs: int | None = None):
    """Analyse a training log (and its config files): anomalies, config checks and the findings of the
    ``scope = "log"`` rules. Returns a ``tracedoc.logs.LogResult``. A large JSON Lines log is decoded in
    ``jobs`` processes (default: the CPU count, at most 4)."""
    from .logs.analysis import LogOptions
    from .logs.report import build_log_result

    rules = _load_rules(params, rule_dirs)
    result = build_log_result(path, config=tuple(config), options=options or LogOptions(),
                              compute_capability=compute_capability, gpu_name=gpu_name, command=command,
                              jobs=jobs or min(4, os.cpu_count() or 1))
    result.verdict = evaluate(result.metrics, result.analysis.evidence, result.step_time_ns, params=params,
                              rules=rules, scope="log")
    result.tracedoc_version = __version__
    return result
