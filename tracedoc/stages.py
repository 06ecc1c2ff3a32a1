"""The analysis pipeline as plain stages: ``read_ranks -> join_job -> judge(ranks, ruleset)``.

- ``read_ranks``: every rank of a trace file or directory, analysed in parallel processes (each a
  pure function of its file): ``Ranks``, whose results carry no verdict yet.
- ``join_job``: for a directory (or a multi-process nsys export), the job view over the ranks'
  compact tables: a ``JobJoin``; None for one trace.
- ``judge``: checks every result, evaluates the rules once per rank and for the job, and returns
  the ``AnalysisResult``. Its inputs are all it uses: the job view's context for each rank's rules,
  and a training log whose findings join the first rank's (``read_step_log``).

Nothing is written into a finished result afterwards; ``tracedoc.api.analyze`` composes the stages.
"""

from __future__ import annotations

import hashlib
import contextlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from .analyses import RankRead, RankResult
from .checks import check_job, check_rank, check_verdict
from .engine.evaluate import evaluate
from .engine.health import lowest
from .engine.ruleset import Ruleset
from .errors import TraceError, TracedocError, warn
from .ingest import is_trace_name, rank_files, sniff
from .job import JobJoin
from .job import join_job as _join
from .fanout.pool import fan_out, read_local
from .job.view import job_evidence
from .model.plain import plain
from .model.record import replace
from .model.verdict import Verdict
from .remote import fetched, is_prefix, is_url, list_files, renamed_text
from .result import AnalysisResult, Input, JobResult, RankRow, focus_rank
from .version import __version__

if TYPE_CHECKING:
    from .job.straggler import Starvation

# A rank in a file name: a "rank" token, then a "worker" token, then an "r" token, then a short number
# right before ".pt.trace.json". Never a long number: torch.profiler's tensorboard handler names files
# "<worker>.<timestamp in ms>.pt.trace.json" (nw0_worker0.1623143089861.pt.trace.json is not rank
# 1623143089861), and pids and Unix times are just as long; no job has a million ranks.
_RANK_NAME_RES = (
    re.compile(r"rank[_\-]?(\d{1,6})(?!\d)", re.I),
    re.compile(r"worker[_\-]?(\d{1,6})(?!\d)", re.I),
    re.compile(r"(?:^|[_\-.])r(\d{1,6})(?:[_\-.]|$)"),
    re.compile(r"(?:^|[_\-.])(\d{1,6})\.(?:pt\.)?trace\.json", re.I),
)
LOG_ANOMALY_ROWS = 200


def rank_from_name(path: str) -> int | None:
    """The rank a file's name gives (``rank3``, ``worker3``, ``_r3.``, ``3.pt.trace.json``), for traces without
    ``distributedInfo`` (which always wins); None when the name gives none."""
    base = os.path.basename(path)
    for rx in _RANK_NAME_RES:
        m = rx.search(base)
        if m:
            return int(m.group(1))
    return None


_HEAD_BYTES = 1 << 16  # Kineto writes distributedInfo before its events, within the first few KB
_HEAD_RANK_RE = re.compile(
    rb'"distributedInfo"\s*:\s*\{\s*(?:"[^"]{0,64}"\s*:\s*(?:"[^"]{0,256}"|[-+.\w]{1,32})\s*,\s*){0,16}'
    rb'"rank"\s*:\s*(-?\d{1,9})\s*[,}]'
)


def directory_ranks(path: str) -> set[int] | None:
    """The ranks of a directory's rank files, told from each file's head (its ``distributedInfo`` rank, else
    its name) before any is analysed, so that ``--rank`` can be checked first; None when some file's rank
    cannot be told that way (the analysis then says)."""
    from .infile import InputStream

    ranks: set[int] = set()
    for f in rank_files(path):
        try:
            with InputStream(f, TracedocError, "trace file") as src:
                head = src.read(_HEAD_BYTES)
        except (TracedocError, OSError):
            return None
        if b'"distributedInfo"' in head:
            m = _HEAD_RANK_RE.search(head)
            if m is None:
                return None
            ranks.add(int(m.group(1)))
        elif f.endswith((".sqlite", ".nsys-rep")) or rank_from_name(f) is None:
            return None  # an export holds processes, ranked in it; a file without a rank: the analysis says
        else:
            ranks.add(rank_from_name(f))  # type: ignore[arg-type]
    return ranks


@dataclass
class Ranks:
    """What ``read_ranks`` read: the input, its files, each rank as read (sorted by rank) and the files
    that could not be read (path -> why)."""

    path: str
    kind: str  # "kineto", "nsys" or "directory"
    files: list[str]
    reads: list[RankRead]
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def results(self) -> list[RankResult]:
        return [r.result for r in self.reads]


def read_ranks(
    path: str | os.PathLike,
    *,
    jobs: int | None = None,
    scheduler: Any = None,
    progress: Callable[[int, int], None] | None = None,
    estimate: Any = None,
    options: dict | None = None,
    kind: str | None = None,
) -> Ranks:
    """Read and analyse a trace file or every rank file of a directory (in ``jobs`` processes, or on the
    Dask cluster ``scheduler`` names). ``estimate``: an ``EstimateRequest``, a stage input of the rank
    analyses (``--model``); ``options``: the nsys reader's; ``kind``: what ``ingest.sniff`` told of a local
    ``path`` already (each file is sniffed once: a directory's files by the task that reads each)."""
    path = os.fspath(path)
    url = is_url(path)
    kind = ("directory" if is_prefix(path) else "file") if url else (kind or sniff(path))
    files = (url_rank_files(path) if url else rank_files(path)) if kind == "directory" else [path]
    options = dict(options or {})
    given = {"estimate_request": estimate} if estimate is not None else None
    failed: dict[str, str] = {}
    if kind != "directory":
        by_fraction = (lambda f: progress(int(1000 * f), 1000)) if progress else None
        with fetched(path) as local:  # a URL's file is copied here; a local path is read in place
            kind = sniff(local) if url else kind
            reads = read_local(
                local, options, by_fraction, rank_of=rank_from_name, job=False, given=given, shown=path, kind=kind
            )
        if progress:
            progress(1000, 1000)
    else:
        done = fan_out(
            files, options, jobs=jobs, scheduler=scheduler, progress=progress, rank_of=rank_from_name, given=given
        )
        reads, failed = done.outputs, {f["source"]: f["error"] for f in done.failed}
    for f, why in failed.items():
        warn(f, f"rank file not analysed, the other {len(files) - len(failed)} were: {why.removeprefix(f + ': ')}")
    reads.sort(
        key=lambda o: (o.result.rank is None, o.result.rank if o.result.rank is not None else 0, o.result.source)
    )
    _flag_duplicate_ranks(reads)
    return Ranks(path, kind, files, reads, failed)


def url_rank_files(prefix: str) -> list[str]:
    """The rank trace files under a URL prefix (``s3://bucket/run/``), as ``rank_files`` picks them in a
    directory; an error when there are none."""
    files = list_files(prefix, is_trace_name)
    if not files:
        raise TraceError(
            prefix,
            "holds no trace files",
            "no object directly under it ends in .json, .json.gz or .sqlite",
            "check the prefix: the URL of the folder the rank traces were written to, ending in /",
        )
    return files


def _flag_duplicate_ranks(reads: list[RankRead]) -> None:
    """Two files claiming one rank: say so on each, naming the other (both stay in the result).

    nsys exports are left out: their rank is a process's order within its own file."""
    by_rank: dict[int, list[RankResult]] = {}
    for r in (o.result for o in reads):
        if r.rank is not None and r.environment.format != "nsys":
            by_rank.setdefault(r.rank, []).append(r)
    for rank, same in by_rank.items():
        if len(same) > 1 and len({r.source for r in same}) > 1:
            for r in same:
                others = ", ".join(o.source for o in same if o is not r)
                r.warnings.append(
                    f"{r.source}: claims rank {rank}, as does {others}; both are shown, but a job has "
                    "one file per rank: check for a copy or a rank from another run"
                )


def join_job(ranks: Ranks, ruleset: Ruleset) -> JobJoin | None:
    """The job view over a directory's ranks (or the processes of one nsys export); None for one trace.
    The straggler's cause reads the run's rule parameters (``starvation``)."""
    if ranks.kind != "directory" and len(ranks.reads) <= 1:
        return None
    unreadable = {r for r in map(rank_from_name, ranks.failed) if r is not None}
    return _join([o.tables for o in ranks.reads], unreadable_ranks=unreadable, starved=starvation(ruleset))


def starvation(ruleset: Ruleset) -> Starvation:
    """Host launch starvation as the rules define it, with the run's overrides: a GPU busy less than
    TD101's ``busy_threshold`` of the window, idle at least TD104's ``host_idle_threshold`` of it in long
    host-late gaps."""
    from .job.straggler import Starvation  # the module that judges starvation; loaded only for a job

    return Starvation(
        busy_below=ruleset.values["TD101"]["busy_threshold"],
        host_late_from=ruleset.values["TD104"]["host_idle_threshold"],
    )


class StepLog(NamedTuple):
    """A training log as a stage input of ``judge``: its result (findings, anomalies, warnings), or why
    an optional one (a run directory's ``steps.jsonl``) could not be read."""

    result: Any = None  # tracedoc.logs.LogResult
    problem: str | None = None


def judge_log(
    path: str | os.PathLike,
    ruleset: Ruleset,
    *,
    config: tuple | list = (),
    options: Any = None,
    compute_capability: float | None = None,
    gpu_name: str | None = None,
    command: str | None = None,
    jobs: int = 1,
    log_format: str | None = None,
    fields: dict[str, str] | None = None,
):
    """A training log (and its config files) read, analysed and judged by the ``scope = "log"`` rules:
    a ``tracedoc.logs.LogResult``."""
    from .logs.analysis import LogOptions
    from .logs.report import build_log_result

    several = isinstance(path, (list, tuple))  # the segments of one run, joined in step order
    shown = [os.fspath(p) for p in path] if several else [os.fspath(path)]
    with contextlib.ExitStack() as stack:  # a log by URL is read from a local copy
        local = [stack.enter_context(fetched(p, what="training log")) for p in shown]
        result = build_log_result(
            local if several else local[0],
            config=tuple(config),
            options=options or LogOptions(),
            compute_capability=compute_capability,
            gpu_name=gpu_name,
            command=command,
            jobs=jobs,
            fmt=log_format,
            fields=fields,
        )
    if local != shown:  # in place: a fresh result carries unsaved attributes a copy would drop
        if not several:
            result.input.path = shown[0]
        for copy, name in zip(local, shown):
            result.warnings[:] = [renamed_text(w, copy, name) for w in result.warnings]
    verdict = evaluate(result.metrics, result.analysis.evidence, result.step_time_ns, ruleset=ruleset, scope="log")
    return result.judged(verdict, __version__)


def read_step_log(ranks: Ranks, log: str | None, ruleset: Ruleset) -> StepLog | None:
    """The log ``--log`` names, or a ``tracedoc run`` directory's own ``steps.jsonl``; None without one."""
    step_log = os.path.join(ranks.path, "steps.jsonl") if ranks.kind == "directory" else None
    path = log or (step_log if step_log and os.path.isfile(step_log) else None)
    if path is None or not ranks.reads:
        return None
    try:
        result = judge_log(
            path,
            ruleset,
            compute_capability=ranks.reads[0].result.metrics.get("compute_capability"),
            jobs=min(4, os.cpu_count() or 1),
        )
    except TracedocError as exc:
        if log is not None:
            raise
        return StepLog(problem=f"step log not analysed: {exc.message()}")
    return StepLog(result=result)


def judge(
    ranks: Ranks,
    ruleset: Ruleset,
    *,
    job: JobJoin | None = None,
    log: StepLog | None = None,
    command: str | None = None,
) -> AnalysisResult:
    """Check every rank's result and evaluate the rules on it (with the job view's communication metrics,
    ``job``), then the job's rules; a training log's findings (``log``) join the first rank's verdict."""
    if job is not None:
        for bug in check_job(job):
            warn(ranks.path, bug)
    # files that share no collective are not one job: each is judged on its own
    joined = job is not None and not job.view.not_a_job
    judged = [
        _judge_rank(o.result, ruleset, job.rank_context(o.result.rank) if joined else {}, log if i == 0 else None)
        for i, o in enumerate(ranks.reads)
    ]
    known = {o.result.source: o.sha256 for o in ranks.reads}
    inputs = [
        Input(
            path=f,
            sha256=known.get(f) or (None if f in ranks.failed else _sha256_or_none(f)),
            error=ranks.failed.get(f),
        )
        for f in ranks.files
    ]
    job_result = _judge_job(job, judged, ruleset, joined) if job is not None else None
    result = AnalysisResult(
        tracedoc_version=__version__,
        rules_version=ruleset.version,
        inputs=inputs,
        command=command,
        ranks=judged,
        job=job_result,
    )
    if len(ranks.reads) == 1 and ranks.reads[0].overlay is not None:
        result.overlays = {0: ranks.reads[0].overlay}
    if job is not None:
        result.job_instances = job.instances  # the matched collectives for the merged timeline; not saved
    return result


def _judge_rank(read: RankResult, ruleset: Ruleset, context: dict, log: StepLog | None) -> RankResult:
    r = replace(read, metrics={**read.metrics, **context}, warnings=list(read.warnings))
    check_rank(r)
    r.metrics = {k: plain(v) for k, v in r.metrics.items()}
    what_ifs, unavailable = r.what_ifs()
    verdict = evaluate(
        r.metrics, r.evidence, r.step_time_ns, ruleset=ruleset, what_ifs=what_ifs, what_if_unavailable=unavailable
    )
    check_verdict(r, verdict)
    if log is not None and log.problem:
        r.warnings.append(log.problem)
    if log is not None and log.result is not None:
        lr = log.result
        verdict = verdict.with_findings(verdict.findings + lr.findings)
        r.evidence = {
            **r.evidence,
            "log_anomalies": [dict(a, source=lr.source) for a in lr.anomalies[:LOG_ANOMALY_ROWS]],
        }
        r.warnings.extend(f"{lr.source}: {w}" for w in lr.warnings)
    r.verdict = verdict
    return r


def _judge_job(job: JobJoin, ranks: list[RankResult], ruleset: Ruleset, joined: bool) -> JobResult:
    """The one rank table, the job verdict (job rules on the job view and the median rank's metrics; none
    when the files are not one job) and the focus rank."""
    view = job.view
    rows = [RankRow.of(r, job.rank_columns.get(r.rank)) for r in ranks]
    verdict = (
        _job_verdict(job, ranks, [row.to_dict() for row in rows if row.rank in job.rank_columns], ruleset)
        if joined
        else None
    )
    index = focus_rank(ranks, view)[0]
    return JobResult(
        **{f: getattr(view, f) for f in view.__struct_fields__},
        ranks=rows,
        focus_rank=ranks[index].rank if ranks else None,
        verdict=verdict,
    )


def _job_verdict(job: JobJoin, ranks: list[RankResult], rows: list[dict], ruleset: Ruleset) -> Verdict:
    view = job.view
    median = next((r for r in ranks if r.rank == view.median_rank), ranks[0] if ranks else None)
    metrics = {
        **(median.metrics if median else {}),
        **view.metrics,
        "rank_comm_wait_fraction": None,
    }  # the job verdict has no rank of its own: TD620 speaks for it
    evidence = {**(median.evidence if median else {}), **job_evidence(view, rows)}
    step = view.metrics.get("job_step_time_p50_ns") or (median.step_time_ns if median else None)
    # predictions: the job view's replay for the straggler, the median rank's for its own labels
    what_ifs, unavailable = median.what_ifs() if median else ({}, None)
    verdict = evaluate(
        metrics,
        evidence,
        step,
        ruleset=ruleset,
        what_ifs={**what_ifs, **view.what_ifs()},
        what_if_unavailable=job.what_if_unavailable or unavailable,
    )
    # rules on job metrics alone do not lose confidence because the ranks have no GPU work
    job_only = {r.id for r in ruleset.rules if r.metrics_used and r.metrics_used <= set(view.metrics)}
    kept = [h for h in verdict.health if not h.withhold]
    findings = [
        replace(f, confidence=lowest(h.confidence for h in kept if h.applies_to(view.metrics)))
        if f.rule_id in job_only
        else f
        for f in verdict.findings
    ]
    # a finding about the straggler is no surer than the job view is of the straggler
    sure = view.metrics.get("straggler_confidence")
    if sure:
        about = {r.id for r in ruleset.rules if any(m.startswith("straggler_") for m in r.metrics_used)}
        findings = [replace(f, confidence=lowest((f.confidence, sure))) if f.rule_id in about else f for f in findings]
    return verdict.with_findings(findings)


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _sha256_or_none(path: str) -> str | None:
    try:
        return sha256_of(path)
    except OSError:
        return None
