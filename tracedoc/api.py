"""Python API: ``load``, ``load_dir``, ``analyze`` and ``diff``.

``analyze`` accepts a trace file or a directory of per-rank traces; ranks are read and analysed in
parallel processes (per-rank work is a pure function of the file).
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any, Callable

from dataclasses import replace

from .analyses import RankAnalysis
from .checks import check_job, check_rank, check_verdict
from .engine.evaluate import Verdict, evaluate
from .engine.health import lowest
from .engine.params import resolve_params
from .engine.rulefile import Rule, load_rules, rules_version
from .errors import TraceError, TracedocError, warn
from .gcpause import with_paused_gc
from .infile import not_regular
from .ingest import load as _load_file
from .ingest import sniff
from .job import build_job
from .job.fanout import analyze_file, fan_out
from .job.view import JOB_METRICS, top_collective
from .model.trace import Trace
from .result import AnalysisResult, JobResult, RankResult
from .result import load as load_report
from .version import __version__


# A rank in a file name: a "rank" token, then a "worker" token, then an "r" token, then a short number
# right before ".pt.trace.json". Never a long number: torch.profiler's tensorboard handler names files
# "<worker>.<timestamp in ms>.pt.trace.json" (nw0_worker0.1623143089861.pt.trace.json is not rank
# 1623143089861), and pids and Unix times are just as long; no job has a million ranks.
_RANK_NAME_RES = (re.compile(r"rank[_\-]?(\d{1,6})(?!\d)", re.I), re.compile(r"worker[_\-]?(\d{1,6})(?!\d)", re.I),
                  re.compile(r"(?:^|[_\-.])r(\d{1,6})(?:[_\-.]|$)"),
                  re.compile(r"(?:^|[_\-.])(\d{1,6})\.(?:pt\.)?trace\.json", re.I))
_TRACE_FILE_RE = re.compile(r"\.(json|json\.gz|sqlite|sqlite3)$", re.I)


def load(path: str | os.PathLike, **options) -> Trace:
    """Read one trace file (Kineto JSON/.json.gz or nsys SQLite) into a ``Trace``."""
    return _load_file(os.fspath(path), **options)


def rank_files(directory: str) -> list[str]:
    """The trace files of a per-rank directory, sorted by name. An entry named like a trace that is not a
    regular file (a pipe, a directory, a link loop or a broken link) is skipped with a warning."""
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        raise TraceError(directory, "cannot be listed", exc.strerror, "check the path and its permissions") from None
    files = []
    for n in names:
        if not _TRACE_FILE_RE.search(n) or n.endswith(".report.json") or n.startswith("."):
            continue
        p = os.path.join(directory, n)
        why = not_regular(p)
        if why is None:
            files.append(p)
        else:
            warn(p, f"skipped: it is {why.replace('unreadable', 'a file that cannot be read')}, not a trace file")
    if not files:
        raise TraceError(directory, "holds no trace files", f"{len(names)} entries, none a regular file ending in "
                         ".json, .json.gz or .sqlite", "point tracedoc at the directory torch.profiler wrote its "
                         "rank traces to")
    return files


def rank_from_name(path: str) -> int | None:
    """The rank a file name gives, for traces without ``distributedInfo`` (which always wins); None
    when the name gives none."""
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


@with_paused_gc
def analyze(path: str | os.PathLike, *, jobs: int | None = None, params: dict | None = None,
            rule_dirs: tuple = (), progress: Callable[[int, int], None] | None = None,
            command: str | None = None, scheduler: str | None = None, log: str | None = None, estimate=None,
            **options) -> AnalysisResult:
    """Analyse a trace file or a directory of rank traces; evaluate the rules when available.

    Ranks fan out to a local process pool (``jobs`` processes), or, with ``scheduler`` set to a Dask
    scheduler address (``tcp://host:8786``) or a ``distributed.Client``, to a Dask cluster whose
    workers can read the same paths. A directory also gets the job view (``result.job.view``):
    collectives matched across ranks, waits, the straggler and its cause, and a job verdict.

    ``log`` names a training log whose findings join the first rank's; a ``tracedoc run`` directory
    brings its own ``steps.jsonl``.
    ``estimate`` (an ``estimate.EstimateRequest``) adds the model formula's FLOPs, tokens/s and
    memory beside each rank's measurements.
    """
    path = os.fspath(path)
    kind = sniff(path)
    files = rank_files(path) if kind == "directory" else [path]
    rules = _load_rules(params, rule_dirs)  # a bad rule file or --param fails now, not after the ranks
    failed: dict[str, str] = {}  # rank file -> why it could not be analysed (JSON: inputs[].error)
    if kind != "directory":
        by_fraction = (lambda f: progress(int(1000 * f), 1000)) if progress else None
        outputs = analyze_file(files[0], options, by_fraction, rank_of=rank_from_name, lead_in=False)
        if progress:
            progress(1000, 1000)
    else:
        done = fan_out(files, options, jobs=jobs, scheduler=scheduler, progress=progress, rank_of=rank_from_name)
        outputs = done.outputs
        failed = {f["source"]: f["error"] for f in done.failed}  # rank file -> why it could not be analysed
    for f, why in failed.items():
        warn(f, f"rank file not analysed, the other {len(files) - len(failed)} were: {why.removeprefix(f + ': ')}")
    outputs.sort(key=lambda o: (o.result.rank is None, o.result.rank if o.result.rank is not None else 0,
                                o.result.source))
    results = [o.result for o in outputs]
    _flag_duplicate_ranks(results)
    view = job_verdict = None
    if kind == "directory" or len(outputs) > 1:
        unreadable = {r for r in map(rank_from_name, failed) if r is not None}
        view = build_job([o.tables for o in outputs], unreadable_ranks=unreadable)
        for bug in check_job(view):
            warn(path, bug)
        if not view.not_a_job:  # files that share no collective are analysed each on its own
            for r in results:
                r.metrics.update(view.rank_context(r.rank))
            job_verdict = _evaluate_job(view, results, params, rules)
    else:
        for o in outputs:
            o.result.metrics.update({"comm_top_collective": top_collective(o.tables)})
    for r in results:  # the job metrics are None for a lone trace: every registered name is present
        for name in JOB_METRICS:
            r.metrics.setdefault(name, None)
    if estimate is not None:
        from .estimate import apply_estimate

        for r in results:
            apply_estimate(r, estimate)
    for r in results:
        check_rank(r)
    ranks = [RankResult.from_analysis(r, _evaluate(r, params, rules)) for r in results]
    for r in ranks:
        check_verdict(r, r.verdict)
    known = {r.source: r.meta.get("sha256") for r in results}
    hashes = {f: known.get(f) or (None if f in failed else _sha256_or_none(f)) for f in files}
    result = AnalysisResult.of(files, ranks, command=command, hashes=hashes, rules_version=_rules_version(),
                               failed=failed)
    if view is not None:
        if result.job is None:
            result.job = JobResult.from_ranks(ranks)
        result.job.view, result.job.verdict = view, job_verdict
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


def _evaluate_job(view, results: list[RankAnalysis], params: dict | None, rules: list[Rule]) -> Verdict:
    """The job verdict: job rules and the median rank's metrics, with the job's communication split."""
    median = next((r for r in results if r.rank == view.median_rank), results[0] if results else None)
    metrics = {**(median.metrics if median else {}), **view.metrics,
               "rank_comm_wait_fraction": None}  # the job verdict has no rank of its own: TD620 speaks for it
    evidence = {**(median.evidence if median else {}), **view.evidence}
    step = view.metrics.get("job_step_time_p50_ns") or (median.step_time_ns if median else None)
    # predictions: the job view's replay for the straggler, the median rank's for its own labels
    what_ifs, unavailable = median.what_ifs() if median else ({}, None)
    verdict = evaluate(metrics, evidence, step, params=params, rules=rules,
                       what_ifs={**what_ifs, **view.what_ifs()},
                       what_if_unavailable=view.what_if_unavailable or unavailable)
    # rules on job metrics alone do not lose confidence because the ranks have no GPU work
    job_only = {r.id for r in rules if r.metrics_used and r.metrics_used <= set(view.metrics)}
    kept = [h for h in verdict.health if not h.withhold]
    verdict.findings = [replace(f, confidence=lowest(h.confidence for h in kept if h.applies_to(view.metrics)))
                        if f.rule_id in job_only else f for f in verdict.findings]
    # a finding about the straggler is no surer than the job view is of the straggler
    sure = view.metrics.get("straggler_confidence")
    if sure:
        about = {r.id for r in rules if any(m.startswith("straggler_") for m in r.metrics_used)}
        verdict.findings = [replace(f, confidence=lowest((f.confidence, sure))) if f.rule_id in about else f
                            for f in verdict.findings]
    return verdict


def _load_rules(params: dict | None, rule_dirs: tuple) -> list[Rule]:
    """Load and validate the rules and the parameter overrides once, before any analysis."""
    rules = load_rules(rule_dirs)
    resolve_params(rules, params)
    return rules


def _evaluate(rank: RankAnalysis, params: dict | None, rules: list[Rule]) -> Verdict:
    what_ifs, unavailable = rank.what_ifs()
    return evaluate(rank.metrics, rank.evidence, rank.step_time_ns, params=params, rules=rules, what_ifs=what_ifs,
                    what_if_unavailable=unavailable)


@with_paused_gc
def analyze_log(path: str | os.PathLike, *, config: tuple | list = (), params: dict | None = None,
                rule_dirs: tuple = (), compute_capability: float | None = None, gpu_name: str | None = None,
                command: str | None = None, options: Any = None, jobs: int | None = None,
                log_format: str | None = None, fields: dict[str, str] | None = None):
    """Analyse a training log (and its config files): anomalies, config checks and the findings of the
    ``scope = "log"`` rules. Returns a ``tracedoc.logs.LogResult``. A large JSON Lines log is decoded in
    ``jobs`` processes (default: the CPU count, at most 4). ``log_format`` names the log's format instead
    of sniffing it (``tracedoc.logs.reader.FORMATS``); ``fields`` maps field names to the log's own
    (``{"loss": "train/lm_loss"}``)."""
    from .logs.analysis import LogOptions
    from .logs.report import build_log_result

    rules = _load_rules(params, rule_dirs)
    result = build_log_result(path, config=tuple(config), options=options or LogOptions(),
                              compute_capability=compute_capability, gpu_name=gpu_name, command=command,
                              jobs=jobs or min(4, os.cpu_count() or 1), fmt=log_format, fields=fields)
    result.verdict = evaluate(result.metrics, result.analysis.evidence, result.step_time_ns, params=params,
                              rules=rules, scope="log")
    result.tracedoc_version = __version__
    return result


@with_paused_gc
def diff(before, after, *, jobs: int | None = None, noise_pct: float | None = None, **options):
    """Compare two runs: each a trace file, a rank directory or a saved ``--format json`` report
    (or an ``AnalysisResult`` / report dict). Traces are analysed first; returns a ``DiffResult``."""
    from .diff import NOISE_FLOOR_PCT, diff_sides

    sides = [_diff_side(x, label, jobs, options) for x, label in ((before, "before"), (after, "after"))]
    result = diff_sides(sides[0], sides[1], NOISE_FLOOR_PCT if noise_pct is None else noise_pct)
    result.tracedoc_version = __version__
    return result


def _diff_side(value, label: str, jobs: int | None, options: dict):
    """One side as the diff reads it: the report's dict form, read back through ``AnalysisResult``."""
    from .diff import Side, check_report, is_report

    if isinstance(value, (str, os.PathLike)):
        path = os.fspath(value)
        if is_report(path):
            return Side(path=path, kind="report", report=check_report(load_report(path).to_dict(), path))
        return Side(path=path, kind="trace", report=analyze(path, jobs=jobs, **options).to_dict())
    if not isinstance(value, AnalysisResult):
        inputs = value.get("inputs") if isinstance(value, dict) else None
        first = inputs[0] if isinstance(inputs, list) and inputs and isinstance(inputs[0], dict) else {}
        value = AnalysisResult.from_dict(value, where=first.get("path") or label)
    where = value.inputs[0] if value.inputs else label
    return Side(path=where, kind="report", report=check_report(value.to_dict(), where))
