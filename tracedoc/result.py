"""What an analysis produces, as a saved value: the report of ``tracedoc analyze``.

``AnalysisResult`` holds one ``RankResult`` per rank (``tracedoc.analyses.core.rank``), each with the
rules engine's ``Verdict``, and for a directory of ranks a ``JobResult``: the job view, the one rank
table (ns) and the job verdict. It is a typed record (``tracedoc.model.record``): its JSON document,
``--format json``, is its fields, and the schema in ``tracedoc/schema`` is generated from it.
``load(path)`` reads a saved report back into an equal value (reports of schema version 1 through a
migration, ``tracedoc.migrate``), so a saved report can be rendered again, compared with another,
or gate CI without the trace.

Renderers take a result (``tracedoc.render``); nothing here formats for people except the short
``repr``. The notebook conveniences ``to_text`` / ``to_markdown`` / ``to_html`` / ``_repr_html_`` /
``save`` hand the result to the output façade (``tracedoc.display``, filled by ``tracedoc.output`` above
the renderers): this module never imports a renderer.
"""

from __future__ import annotations

import os
from typing import Any, Literal

import msgspec

from . import display
from .analyses.core.rank import RankResult, short, type_rows, verdict_summary
from .checks import refuse_impossible
from .errors import TraceError
from .job.view import JobView
from .migrate import CURRENT as SCHEMA_VERSION  # the version history is there
from .migrate import SCHEMA_NAME, current
from .model.record import Record, replace, to_builtins, to_json_bytes
from .model.verdict import Verdict
from .version import __version__

__all__ = [
    "SCHEMA_NAME",
    "SCHEMA_VERSION",
    "AnalysisResult",
    "Input",
    "JobResult",
    "RankResult",
    "RankRow",
    "focus_rank",
    "load",
]


class Input(Record, omit_defaults=True, kw_only=True):
    """A trace file read: its path, SHA-256, and why it could not be analysed when it could not."""

    path: str  # as given, or as found in the directory
    sha256: str | None  # of the file's bytes; null when it could not be read
    # why this rank file was not analysed (the other ranks were; the job view leaves it out); absent when read
    error: str | None = None


class RankRow(Record, kw_only=True):
    """One rank's line in the job's rank table: its own numbers (ns, fractions of its window), the job
    view's columns (per step, ns; None for a rank the view left out) and its verdict's labels."""

    rank: int | None  # null unknown
    source: str  # the rank's trace file
    pid: int | None  # the process, when one file (an nsys export) holds several ranks
    steps: int  # steps found
    window_ns: int | None  # its analysis window
    step_time_p50_ns: float | None  # median step time (interval between step completions)
    step_time_p95_ns: float | None  # 95th percentile step time
    gpu_busy_fraction: float | None  # of its window
    compute_fraction: float | None  # of its window
    exposed_comm_fraction: float | None  # communication not overlapped by compute, of its window
    comm_overlap_fraction: float | None  # of its communication time
    dataloader_stall_fraction: float | None  # of its window
    idle_fraction: float | None  # of its window
    # the job view's columns: medians over the rank's matched steps (those holding a collective matched on
    # every member rank)
    matched_steps: int = 0  # its matched steps
    matched_step_p50_ns: float | None = None  # its median step time over them
    wait_fraction: float | None = None  # its waiting for the last rank, as a share of its step
    wait_ns_per_step: float | None  # its waiting for the last rank at matched collectives, per step
    arrived_last_fraction: float | None  # share of its matched collectives it arrived last at
    lateness_fraction: float | None = None  # its lateness against the median arrival, as a share of its step
    lateness_ns_per_step: float | None  # its arrival against the median arrival (negative: early), per step
    comm_wait_fraction: float | None = None  # share of its matched collective time spent waiting for the last rank
    dataloader_ns_per_step: float | None  # DataLoader time before its collectives
    straggler: bool  # the job view names it a straggler
    labels: list[str]  # its verdict's labels, most impactful first
    withheld: bool  # its verdict was withheld (trace health)
    top_impact_fraction: float | None  # None: the rank has no finding

    @classmethod
    def of(cls, r: RankResult, job: dict[str, Any] | None) -> "RankRow":
        m, v, job = r.metrics, r.verdict, job or {}
        return cls(
            rank=r.rank,
            source=r.source,
            pid=r.environment.pid,
            steps=int(m.get("steps") or 0),
            window_ns=m.get("window_ns"),
            step_time_p50_ns=m.get("step_time_p50_ns"),
            step_time_p95_ns=m.get("step_time_p95_ns"),
            gpu_busy_fraction=m.get("gpu_busy_fraction"),
            compute_fraction=m.get("compute_fraction"),
            exposed_comm_fraction=m.get("exposed_comm_fraction"),
            comm_overlap_fraction=m.get("comm_overlap_fraction"),
            dataloader_stall_fraction=m.get("dataloader_stall_fraction"),
            idle_fraction=m.get("idle_fraction"),
            matched_steps=int(job.get("matched_steps") or 0),
            matched_step_p50_ns=job.get("matched_step_p50_ns"),
            wait_fraction=job.get("wait_fraction"),
            wait_ns_per_step=job.get("wait_ns_per_step"),
            arrived_last_fraction=job.get("arrived_last_fraction"),
            lateness_fraction=job.get("lateness_fraction"),
            lateness_ns_per_step=job.get("lateness_ns_per_step"),
            comm_wait_fraction=job.get("comm_wait_fraction"),
            dataloader_ns_per_step=job.get("dataloader_ns_per_step"),
            straggler=bool(job.get("straggler")),
            labels=list(v.labels) if v is not None else [],
            withheld=bool(v is not None and v.withheld),
            top_impact_fraction=v.top_impact_fraction if v is not None and v.findings else None,
        )


class JobResult(JobView, kw_only=True):
    """What a directory of ranks adds to the per-rank results: the job view, the one rank table, the
    rank a report shows in detail (``focus_rank``) and the job verdict."""

    ranks: list[RankRow]  # every rank analysed, in rank order
    focus_rank: int | None = None  # by the focus rule: --rank N, else the straggler, else the median rank
    focus_asked: bool = False  # the focus was asked for (--rank N)
    verdict: Verdict | None = None  # the job rules on the job view and the median rank's metrics

    def __repr__(self) -> str:
        return f"<JobResult {len(self.ranks)} ranks, stragglers {self.straggler_ranks}, focus rank {self.focus_rank}>"

    def df(self):
        """The rank table as a pandas DataFrame, one row per rank."""
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.ranks])


def focus_rank(ranks: list[RankResult], job: JobView | None, asked: int | None = None) -> tuple[int, str]:
    """The one focus rule: the index of the rank a report (and ``AnalysisResult.focus``, its repr and
    ``table()``) shows in detail, and why: ``--rank N`` when asked, else the straggler, else the
    job's median rank, else the first rank."""
    index = {r.rank: i for i, r in enumerate(ranks)}
    if asked is not None and asked in index:
        return index[asked], "asked for with --rank"
    if job is not None and job.not_a_job and ranks:  # files that are not one job: no straggler, no median rank
        top = max(range(len(ranks)), key=lambda i: (ranks[i].top_impact_fraction, -i))
        return top, "whose top finding explains the most of its step"
    if job is not None and job.straggler_ranks and job.straggler_ranks[0] in index:
        return index[job.straggler_ranks[0]], "the straggler; --rank N shows another"
    if job is not None and job.median_rank in index:
        return index[job.median_rank], "the job's median rank; --rank N shows another"
    return 0, "the first rank" if len(ranks) > 1 else "the only rank"


class AnalysisResult(Record, dict=True, kw_only=True):
    """What ``tracedoc analyze`` reports: the inputs, one ``RankResult`` per rank (by rank), and for
    more than one rank the job over them. Not saved: ``overlays``, what a fresh analysis of one trace file
    draws on it, and ``job_instances``, a job's matched collectives for the merged timeline (``--perfetto``)."""

    schema: Literal["tracedoc.analysis"] = SCHEMA_NAME  # names this document type
    schema_version: Literal[2] = SCHEMA_VERSION  # bumped on any incompatible change (tracedoc/migrate.py)
    tracedoc_version: str = __version__  # the tracedoc that wrote it
    rules_version: str | None = None  # digest of the rule files used ('sha256:aa2c4b1f632c')
    inputs: list[Input]  # the trace files read, in order: one file, or every rank file of a directory
    command: str | None = None  # the command line that wrote it; None from the Python API
    # the pyproject.toml files whose [tool.tracedoc] settings (thresholds, rule directories) it used
    config_files: list[str] = []
    ranks: list[RankResult]  # one per rank (per file, or per process of an nsys export), by rank
    job: JobResult | None = None  # a directory's job view, rank table and job verdict; None for one trace

    def __repr__(self) -> str:
        focus = self.focus
        where = f" (rank {focus.rank} shown)" if self.job is not None and focus is not None else ""
        paths = self.paths
        name = os.path.basename(paths[0]) if len(paths) == 1 else f"{len(paths)} files"
        return short(
            f"<AnalysisResult {name}: {len(self.ranks)} rank{'' if len(self.ranks) == 1 else 's'}{where}; "
            f"{verdict_summary(focus.verdict if focus else None)}>"
        )

    @property
    def paths(self) -> list[str]:
        return [i.path for i in self.inputs]

    @property
    def hashes(self) -> dict[str, str | None]:
        return {i.path: i.sha256 for i in self.inputs}

    @property
    def failed(self) -> dict[str, str]:
        """Rank file -> why it could not be analysed (the other ranks were)."""
        return {i.path: i.error for i in self.inputs if i.error}

    @property
    def verdicts(self) -> list[Verdict | None]:
        return [r.verdict for r in self.ranks]

    @property
    def metrics(self) -> dict[str, Any]:
        """The first rank's metrics (the common single-trace case)."""
        return self.ranks[0].metrics if self.ranks else {}

    @property
    def focus_index(self) -> int:
        """The index of the rank shown in detail (``focus_rank``, the one focus rule)."""
        if self.job is not None and self.job.focus_rank is not None:
            return next((i for i, r in enumerate(self.ranks) if r.rank == self.job.focus_rank), 0)
        return focus_rank(self.ranks, self.job)[0]

    @property
    def focus(self) -> RankResult | None:
        """The rank a report shows in detail."""
        return self.ranks[self.focus_index] if self.ranks else None

    @property
    def focus_reason(self) -> str:
        asked = self.job.focus_rank if self.job is not None and self.job.focus_asked else None
        return focus_rank(self.ranks, self.job, asked)[1]

    def with_focus(self, rank: int) -> "AnalysisResult":
        """This result showing rank ``rank`` in detail (``--rank N``); a ``KeyError`` names the ranks there are."""
        have = [r.rank for r in self.ranks]
        if rank not in have:
            raise KeyError(f"no rank {rank} in this result; ranks {have[:16]}")
        if self.job is None:
            return self
        out = replace(self, job=replace(self.job, focus_rank=rank, focus_asked=True))
        for kept in ("overlays", "job_instances"):  # what a fresh analysis holds besides the saved value
            if hasattr(self, kept):
                setattr(out, kept, getattr(self, kept))
        return out

    def table(self, name: str | None = None, rank: int | None = None):
        """An evidence table of the focus rank (or of the rank at index ``rank``) as a pandas DataFrame;
        without a name, the names of the tables there are."""
        r = self.focus if rank is None else self.ranks[rank]
        if r is None:
            if name is None:
                return []
            raise KeyError("this result has no ranks")
        return r.tables if name is None else r.table(name)

    def roofline(self, rank: int | None = None):
        """The per-op roofline of the focus rank (or of the rank at index ``rank``) as a pandas DataFrame."""
        r = self.focus if rank is None else self.ranks[rank]
        if r is None:
            raise KeyError("this result has no ranks")
        return r.roofline()

    def to_text(self, **options: Any) -> str:
        """The terminal summary as a string (laid out for a file: nothing cut, no colour)."""
        return display.show(self, "analysis", "text", **options)

    def to_markdown(self, **options: Any) -> str:
        """The Markdown report (a ticket comment)."""
        return display.show(self, "analysis", "md", **options)

    def to_html(self, **options: Any) -> str:
        """The self-contained HTML report."""
        return display.show(self, "analysis", "html", **options)

    def _repr_html_(self) -> str:
        """A compact verdict card for notebooks (the full report is ``to_html()``)."""
        return display.show(self, "analysis", "card")

    def _saved(self, timeline: bool) -> "AnalysisResult":
        return self if timeline else replace(self, ranks=[replace(r, timeline={}) for r in self.ranks])

    def to_dict(self, timeline: bool = True) -> dict[str, Any]:
        """The schema-versioned document; ``timeline=False`` leaves out each rank's timeline excerpts."""
        return to_builtins(self._saved(timeline))

    def to_json(self, timeline: bool = True) -> str:
        return msgspec.json.format(to_json_bytes(self._saved(timeline)), indent=2).decode()

    def save(self, path: str | os.PathLike, format: str | None = None) -> None:
        """Write the report to ``path``: JSON by default (timeline included; ``load`` reads it back into an
        equal value), or the format its extension (or ``format``: text, json, md, html) names."""
        display.save(self, path, "analysis", format)

    @classmethod
    def from_dict(cls, data: Any, where: str = "report") -> "AnalysisResult":
        """The value a report's document describes (schema version 1 migrated); a ``TraceError`` says
        what is wrong with a document that is not a report this tracedoc reads, or names the first field
        whose value is not of its type or outside its domain (``checks.refuse_impossible``)."""
        doc = current(data, where)
        try:
            result = msgspec.convert(doc, cls)
        except msgspec.ValidationError as exc:
            raise TraceError(
                where,
                "is a tracedoc report with a missing or malformed field",
                str(exc),
                "write it again with `tracedoc analyze --format json`",
            ) from None
        except RecursionError:
            raise TraceError(
                where,
                "is a tracedoc report nested too deeply to be one",
                None,
                "write it again with `tracedoc analyze --format json`",
            ) from None
        refuse_impossible(result, where)  # every value of its type and in its domain, or one line naming it
        for i, rank in enumerate(result.ranks):  # evidence rows as their row types (tracedoc.model.evidence)
            _typed(rank.type_rows, where, f"ranks[{i}]")
        if result.job is not None:
            _typed(lambda: type_rows(result.job.verdict), where, "job.verdict")
        return result


def _typed(convert, where: str, part: str) -> None:
    """Run ``convert`` (evidence rows to their row types); a row that does not fit is one ``TraceError``."""
    try:
        convert()
    except msgspec.ValidationError as exc:
        raise TraceError(
            where,
            f"is a tracedoc report with a malformed evidence row in {part}",
            str(exc),
            "write it again with `tracedoc analyze --format json`",
        ) from None


def load(path: str | os.PathLike) -> AnalysisResult:
    """Read a report saved by ``tracedoc analyze --format json`` (or ``AnalysisResult.save``; gzip too)."""
    import orjson

    from .infile import read_input

    path = os.fspath(path)
    raw = read_input(path, TraceError, "report")  # regular files only; gzip inflation bounded
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise TraceError(path, "is not valid JSON", str(exc), "pass a report written with --format json") from None
    return AnalysisResult.from_dict(data, where=path)
