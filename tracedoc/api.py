"""Python API: ``load``, ``load_dir`` and ``analyze``.

``analyze`` accepts a trace file or a directory of per-rank traces; ranks are read and analysed in
parallel processes (per-rank work is a pure function of the file).
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from . import __version__
from .analyses import RankResult, analyze_trace
from .errors import TraceError, UsageError
from .ingest import load as _load_file
from .ingest import sniff
from .model.trace import Trace

DASK_CONNECT_TIMEOUT_S = 20
SCHEMA_NAME = "tracedoc.analysis"
SCHEMA_VERSION = 1

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
        if t.meta.get("rank") is None:
            t.meta["rank"] = rank_from_name(t.source)
    return sorted(traces, key=lambda t: (t.meta.get("rank") is None, t.meta.get("rank") or 0, t.source))


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@dataclass
class AnalysisResult:
    """What ``tracedoc analyze`` prints: per-rank results and their verdicts."""

    inputs: list[str]
    ranks: list[RankResult]
    verdicts: list[Any] = field(default_factory=list)  # one engine Verdict per rank (None without the engine)
    command: str | None = None
    hashes: dict[str, str] = field(default_factory=dict)

    @property
    def metrics(self) -> dict[str, Any]:
        """The first rank's metrics (the common single-trace case)."""
        return self.ranks[0].metrics if self.ranks else {}

    def to_dict(self) -> dict[str, Any]:
        ranks = []
        for r, v in zip(self.ranks, self.verdicts or [None] * len(self.ranks)):
            d = r.to_dict()
            d["verdict"] = v.to_dict() if v is not None and hasattr(v, "to_dict") else None
            ranks.append(d)
        return {
            "schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION, "tracedoc_version": __version__,
            "rules_version": _rules_version(),
            "inputs": [{"path": p, "sha256": self.hashes.get(p)} for p in self.inputs],
            "command": self.command,
            "ranks": ranks,
        }

    def to_json(self) -> str:
        import orjson

        return orjson.dumps(self.to_dict(), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY,
                            default=_json_default).decode()

    def to_text(self, width: int = 100) -> str:
        from .render.text import render_text

        return render_text(self, width=width)


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, set):
        return sorted(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def _rules_version() -> str | None:
    try:
        from .engine import rules_version
    except ImportError:
        return None
    try:
        return rules_version()
    except Exception:  # noqa: BLE001 - version is informational only
        return None


def _analyze_file(path: str, options: dict, progress: Callable[[float], None] | None = None,
                  workers: int | None = None) -> list[RankResult]:
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
        if t.meta.get("rank") is None and len(traces) == 1:
            t.meta["rank"] = rank_from_name(path)
        out.append(analyze_trace(t))
    return out


def analyze(path: str | os.PathLike, *, jobs: int | None = None, params: dict | None = None,
            rule_dirs: tuple = (), progress: Callable[[int, int], None] | None = None,
            command: str | None = None, scheduler: str | None = None, **options) -> AnalysisResult:
    """Analyse a trace file or a directory of rank traces; evaluate the rules when available.

    Ranks fan out to a local process pool (``jobs`` processes), or, with ``scheduler`` set to a Dask
    scheduler address (``tcp://host:8786``) or a ``distributed.Client``, to a Dask cluster whose
    workers can read the same paths.
    """
    path = os.fspath(path)
    kind = sniff(path)
    files = rank_files(path) if kind == "directory" else [path]
    rules = _load_rules(params, rule_dirs)  # a bad rule file or --param fails now, not after the ranks
    results: list[RankResult] = []
    if scheduler is not None and len(files) > 1:
        results.extend(_analyze_on_dask(scheduler, files, options, progress))
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
                results.extend(fut.result())
                done += 1
                if progress:
                    progress(done, len(files))
    results.sort(key=lambda r: (r.rank is None, r.rank if r.rank is not None else 0, r.source))
    verdicts = [_evaluate(r, params, rules) for r in results]
    known = {r.source: r.meta.get("sha256") for r in results}
    hashes = {f: known.get(f) or sha256_of(f) for f in files}
    return AnalysisResult(inputs=files, ranks=results, verdicts=verdicts, command=command, hashes=hashes)


def _analyze_on_dask(scheduler, files: list[str], options: dict, progress) -> list[RankResult]:
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
        futures = [client.submit(_analyze_file, f, options, None, 1, pure=False) for f in files]
        out: list[RankResult] = []
        for done, fut in enumerate(as_completed(futures), 1):
            out.extend(fut.result())
            if progress:
                progress(done, len(files))
        return out
    finally:
        if own:
            client.close()


def _load_rules(params: dict | None, rule_dirs: tuple):
    """Load and validate the rules and the parameter overrides once, before any analysis."""
    try:
        from .engine import load_rules
        from .engine.params import resolve_params
    except ImportError:  # pragma: no cover - the engine ships with the package
        return None
    rules = load_rules(rule_dirs)
    resolve_params(rules, params)
    return rules


def _evaluate(rank: RankResult, params: dict | None, rules):
    if rules is None:  # pragma: no cover
        return None
    from .engine import evaluate

    return evaluate(rank.metrics, rank.evidence, rank.step_time_ns, params=params, rules=rules)


def diff(before, after, *, jobs: int | None = None, noise_pct: float | None = None, **options):
    """Compare two runs: each a trace file, a rank directory or a saved ``--format json`` report
    (or an ``AnalysisResult`` / report dict). Traces are analysed first; returns a ``DiffResult``."""
    from .diff import NOISE_FLOOR_PCT, diff_sides

    sides = [_diff_side(x, label, jobs, options) for x, label in ((before, "before"), (after, "after"))]
    result = diff_sides(sides[0], sides[1], NOISE_FLOOR_PCT if noise_pct is None else noise_pct)
    result.tracedoc_version = __version__
    return result


def _diff_side(value, label: str, jobs: int | None, options: dict):
    from .diff import Side, check_report, is_report
    from .diff.inputs import read_report

    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        if is_report(path):
            return Side(path=path, kind="report", report=read_report(path))
        return Side(path=path, kind="trace", report=analyze(path, jobs=jobs, **options).to_dict())
    report = value.to_dict() if hasattr(value, "to_dict") else value
    inputs = report.get("inputs") if isinstance(report, dict) else None
    where = inputs[0].get("path") if inputs and isinstance(inputs[0], dict) and inputs[0].get("path") else label
    return Side(path=where, kind="report", report=check_report(report, where))
