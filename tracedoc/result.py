"""What an analysis produces, as plain values you can save, load and render again.

``AnalysisResult`` (the report of ``tracedoc analyze``) holds one ``RankResult`` per rank, each with
the rules engine's ``Verdict``, and for more than one rank a ``JobResult`` (the rank table).
``to_dict`` writes the schema-versioned JSON document of ``tracedoc analyze --format json``;
``from_dict`` and ``load(path)`` read one back into an equal value, so a saved report can be
rendered again, compared with another, or gate CI without the trace.

Renderers take a result (``tracedoc.render``); nothing here formats for people except the short
``repr`` and, for notebooks, ``to_text`` / ``to_markdown`` / ``to_html`` / ``_repr_html_``, which
hand the result to a renderer when called (the only place this module reaches up to ``render``).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from .analyses.critical_path import CriticalPath
from .analyses.rank import RankAnalysis, environment
from .analyses.window import Window
from .engine.evaluate import Verdict
from .errors import TraceError
from .job.view import JobView
from .version import __version__

SCHEMA_NAME = "tracedoc.analysis"
SCHEMA_VERSION = 1
REPR_CHARS = 400  # a repr is a one-line summary, never the data (a 2-rank result holds megabytes)


def _short(text: str, limit: int = REPR_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _verdict_summary(v: Verdict | None) -> str:
    if v is None:
        return "no verdict"
    if v.withheld:
        return "verdict withheld"
    return (", ".join(v.labels) or "no finding") + f" ({v.confidence}; {len(v.findings)} findings)"


ROOFLINE_COLUMNS = ("op", "op_class", "input_shapes", "dtype", "calls", "gpu_ns", "gpu_ns_per_call", "flops",
                    "bytes", "flops_per_call", "bytes_per_call", "tflops", "tb_per_s", "flop_per_byte",
                    "ridge_flop_per_byte", "peak_tflops", "bandwidth_tb_per_s", "bound", "roof_tflops",
                    "of_roof_fraction", "step_fraction", "note")


def evidence_frame(evidence: dict[str, list[dict]], name: str, where: str = "this result"):
    """One evidence table as a pandas DataFrame; an unknown name lists the tables there are."""
    import pandas as pd

    if name not in evidence:
        raise KeyError(f"no evidence table {name!r} in {where}; tables: {', '.join(sorted(evidence)) or 'none'}")
    return pd.DataFrame(evidence[name])


@dataclass
class RankResult:
    """One rank: its window, metrics, evidence tables, per-step and per-device rows, and verdict."""

    source: str
    rank: int | None
    window: Window
    metrics: dict[str, Any]
    evidence: dict[str, list[dict]]
    per_step: list[dict]
    per_device: list[dict]
    environment: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    timeline: dict[str, Any] = field(default_factory=dict)
    verdict: Verdict | None = None
    critical_path: CriticalPath | None = None  # per-step critical paths and what-if predictions
    # cause -> idle interval set, for the Perfetto overlay of a fresh analysis; not saved
    idle_intervals: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def from_analysis(cls, analysis: RankAnalysis, verdict: Verdict | None) -> "RankResult":
        return cls(source=analysis.source, rank=analysis.rank, window=analysis.window,
                   metrics={k: plain(v) for k, v in analysis.metrics.items()}, evidence=analysis.evidence,
                   per_step=analysis.per_step, per_device=analysis.per_device,
                   environment=environment(analysis.meta), warnings=list(analysis.warnings),
                   timeline=analysis.timeline, verdict=verdict, critical_path=analysis.critical_path,
                   idle_intervals=analysis.idle_intervals)

    def __repr__(self) -> str:
        steps = int(self.metrics.get("steps") or 0)
        return _short(f"<RankResult rank {self.rank} of {os.path.basename(self.source)!r}: "
                      f"{_verdict_summary(self.verdict)}; {steps} step{'' if steps == 1 else 's'}, "
                      f"{len(self.metrics)} metrics, evidence tables {', '.join(sorted(self.evidence))}>")

    def table(self, name: str):
        """An evidence table (``top_kernels``, ``top_gaps``, ...) as a pandas DataFrame."""
        return evidence_frame(self.evidence, name, f"rank {self.rank}")

    @property
    def tables(self) -> list[str]:
        """The names of the evidence tables ``table(name)`` gives."""
        return sorted(self.evidence)

    def roofline(self):
        """The per-op roofline as a pandas DataFrame: one row per (op, input shapes, dtype), most GPU
        time first (columns: ``ROOFLINE_COLUMNS``; empty without GPU kernels or in a report saved
        before the roofline existed)."""
        import pandas as pd

        return pd.DataFrame(self.evidence.get("roofline") or [], columns=list(ROOFLINE_COLUMNS))

    @property
    def step_time_ns(self) -> float | None:
        """The report's step: the median step time (DESIGN.md, one step time); the window without one."""
        v = self.metrics.get("step_time_p50_ns")
        return float(v) if v else (float(self.window.length_ns) or None)

    @property
    def top_impact_fraction(self) -> float:
        """The largest share of the step a finding explains (0 without verdict or findings)."""
        return self.verdict.top_impact_fraction if self.verdict is not None else 0.0

    def to_dict(self, timeline: bool = True) -> dict[str, Any]:
        """The rank's JSON object; ``timeline=False`` leaves out the timeline excerpts (the bulk of it)."""
        out = {
            "source": self.source, "rank": self.rank,
            "window": {"start_ns": self.window.start_ns, "end_ns": self.window.end_ns,
                       "length_ns": self.window.length_ns, "kind": self.window.kind,
                       "description": self.window.describe(), "span_start_ns": self.window.span_lo},
            "metrics": {k: plain(v) for k, v in self.metrics.items()},
            "per_step": self.per_step, "per_device": self.per_device,
            "evidence": self.evidence, "warnings": self.warnings,
            "environment": self.environment, "timeline": self.timeline,
            "critical_path": self.critical_path.to_dict() if self.critical_path is not None else None,
            "verdict": self.verdict.to_dict() if self.verdict is not None else None,
        }
        if not timeline or not self.timeline:  # optional in the schema: absent rather than empty
            del out["timeline"]
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RankResult":
        w = d["window"]
        return cls(source=d["source"], rank=d["rank"],
                   window=Window(w["start_ns"], w["end_ns"], w["kind"], w.get("span_start_ns")),
                   metrics=dict(d["metrics"]), evidence=dict(d["evidence"]), per_step=list(d["per_step"]),
                   per_device=list(d["per_device"]), environment=dict(d["environment"]),
                   warnings=list(d["warnings"]), timeline=dict(d.get("timeline") or {}),
                   verdict=Verdict.from_dict(d["verdict"]) if d.get("verdict") is not None else None,
                   critical_path=(CriticalPath.from_dict(d["critical_path"]) if d.get("critical_path") is not None
                                  else None))


@dataclass
class RankRow:
    """One rank's line in the job's rank table."""

    rank: int | None
    source: str
    pid: int | None
    steps: int
    window_ns: int | None
    step_time_p50_ns: float | None
    step_time_p95_ns: float | None
    gpu_busy_fraction: float | None
    compute_fraction: float | None
    exposed_comm_fraction: float | None
    comm_overlap_fraction: float | None
    dataloader_stall_fraction: float | None
    idle_fraction: float | None
    labels: list[str]
    withheld: bool
    top_impact_fraction: float | None  # None: the rank has no finding

    @classmethod
    def of(cls, r: RankResult) -> "RankRow":
        m, v = r.metrics, r.verdict
        return cls(rank=r.rank, source=r.source, pid=r.environment.get("pid"), steps=int(m.get("steps") or 0),
                   window_ns=m.get("window_ns"), step_time_p50_ns=m.get("step_time_p50_ns"),
                   step_time_p95_ns=m.get("step_time_p95_ns"), gpu_busy_fraction=m.get("gpu_busy_fraction"),
                   compute_fraction=m.get("compute_fraction"), exposed_comm_fraction=m.get("exposed_comm_fraction"),
                   comm_overlap_fraction=m.get("comm_overlap_fraction"),
                   dataloader_stall_fraction=m.get("dataloader_stall_fraction"), idle_fraction=m.get("idle_fraction"),
                   labels=list(v.labels) if v is not None else [], withheld=bool(v is not None and v.withheld),
                   top_impact_fraction=v.top_impact_fraction if v is not None and v.findings else None)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RankRow":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})


@dataclass
class JobResult:
    """What a directory of ranks adds to the per-rank results: the rank table and the rank to look at."""

    ranks: list[RankRow]
    focus_index: int  # the rank whose top finding explains the most of its step
    view: JobView | None = None  # collectives matched across ranks, waits, stragglers (tracedoc.job)
    verdict: Verdict | None = None  # the job verdict: job rules and the median rank's metrics
    focus_asked: bool = False  # focus_index set by --rank N

    def __repr__(self) -> str:
        return f"<JobResult {len(self.ranks)} ranks, focus rank index {self.focus_index}>"

    def df(self):
        """The rank table as a pandas DataFrame, one row per rank."""
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.ranks])

    @classmethod
    def from_ranks(cls, ranks: list[RankResult]) -> "JobResult":
        return cls(ranks=[RankRow.of(r) for r in ranks], focus_index=focus_index(ranks))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ranks": [r.to_dict() for r in self.ranks], "focus_index": self.focus_index}
        if self.view is not None:
            out.update(self.view.to_dict())
            out["verdict"] = self.verdict.to_dict() if self.verdict is not None else None
        return out

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "JobResult":
        view = JobView.from_dict(d) if "straggler_ranks" in d else None
        verdict = Verdict.from_dict(d["verdict"]) if view is not None and d.get("verdict") is not None \
            and hasattr(Verdict, "from_dict") else None
        return cls(ranks=[RankRow.from_dict(r) for r in d["ranks"]], focus_index=int(d["focus_index"]),
                   view=view, verdict=verdict)


def focus_index(ranks: list[RankResult]) -> int:
    """The rank shown in detail: the one whose top finding explains the most of its step (first on ties)."""
    return max(range(len(ranks)), key=lambda i: (ranks[i].top_impact_fraction, -i)) if ranks else 0


@dataclass
class AnalysisResult:
    """What ``tracedoc analyze`` reports: inputs, one ``RankResult`` per rank, and the job over them."""

    inputs: list[str]
    ranks: list[RankResult]
    command: str | None = None
    hashes: dict[str, str | None] = field(default_factory=dict)
    job: JobResult | None = None
    tracedoc_version: str = __version__
    rules_version: str | None = None
    # rank file -> why it could not be analysed: the one record of failed ranks (JSON inputs[].error;
    # the reports list them with the job view, which leaves them out of matching and stragglers)
    failed: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, inputs: list[str], ranks: list[RankResult], **kwargs) -> "AnalysisResult":
        """A result for ``ranks``, with the job table when there is more than one."""
        return cls(inputs=inputs, ranks=ranks, job=JobResult.from_ranks(ranks) if len(ranks) > 1 else None, **kwargs)

    def __repr__(self) -> str:
        focus = self.focus
        where = f" (rank {focus.rank} shown)" if self.job is not None and focus is not None else ""
        name = os.path.basename(self.inputs[0]) if len(self.inputs) == 1 else f"{len(self.inputs)} files"
        return _short(f"<AnalysisResult {name}: {len(self.ranks)} rank{'' if len(self.ranks) == 1 else 's'}{where}; "
                      f"{_verdict_summary(focus.verdict if focus else None)}>")

    def table(self, name: str, rank: int | None = None):
        """An evidence table of the focus rank (or of the rank at index ``rank``) as a pandas DataFrame."""
        r = self.focus if rank is None else self.ranks[rank]
        if r is None:
            raise KeyError("this result has no ranks")
        return r.table(name)

    def roofline(self, rank: int | None = None):
        """The per-op roofline of the focus rank (or of the rank at index ``rank``) as a pandas DataFrame."""
        r = self.focus if rank is None else self.ranks[rank]
        if r is None:
            raise KeyError("this result has no ranks")
        return r.roofline()

    def to_text(self, **options: Any) -> str:
        """The terminal summary as a string (laid out for a file: nothing cut, no colour)."""
        from .render import render_text

        return render_text(self, **options)

    def to_markdown(self) -> str:
        """The Markdown report (a ticket comment)."""
        from .render import render_md

        return render_md(self)

    def to_html(self) -> str:
        """The self-contained HTML report."""
        from .render import render_html

        return render_html(self)

    def _repr_html_(self) -> str:
        """A compact verdict card for notebooks (the full report is ``to_html()``)."""
        from .render.card import render_card

        return render_card(self)

    @property
    def verdicts(self) -> list[Verdict | None]:
        return [r.verdict for r in self.ranks]

    @property
    def metrics(self) -> dict[str, Any]:
        """The first rank's metrics (the common single-trace case)."""
        return self.ranks[0].metrics if self.ranks else {}

    @property
    def focus(self) -> RankResult | None:
        """The rank a report shows in detail."""
        if not self.ranks:
            return None
        return self.ranks[self.job.focus_index if self.job is not None else focus_index(self.ranks)]

    def to_dict(self, timeline: bool = True) -> dict[str, Any]:
        """The schema-versioned document; ``timeline=False`` leaves out each rank's timeline excerpts."""
        return {
            "schema": SCHEMA_NAME, "schema_version": SCHEMA_VERSION, "tracedoc_version": self.tracedoc_version,
            "rules_version": self.rules_version,
            "inputs": [{"path": p, "sha256": self.hashes.get(p), **({"error": self.failed[p]} if p in self.failed else {})}
                       for p in self.inputs],
            "command": self.command,
            "ranks": [r.to_dict(timeline=timeline) for r in self.ranks],
            "job": self.job.to_dict() if self.job is not None else None,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], where: str = "report") -> "AnalysisResult":
        if not isinstance(d, dict) or d.get("schema") != SCHEMA_NAME:
            seen = repr(d.get("schema")) if isinstance(d, dict) else type(d).__name__
            raise TraceError(where, f"is not a tracedoc report (schema {SCHEMA_NAME!r})", f"schema {seen}",
                             "pass the JSON written by `tracedoc analyze --format json`")
        if d.get("schema_version") != SCHEMA_VERSION:
            wrote = d.get("tracedoc_version")
            raise TraceError(where, f"is a report of schema version {d.get('schema_version')!r}; this tracedoc "
                             f"reads version {SCHEMA_VERSION}", f"written by tracedoc {wrote}" if wrote else None,
                             "analyse the trace again with this tracedoc, or read the report with the version "
                             "that wrote it")
        try:
            return cls(inputs=[i["path"] for i in d["inputs"]], ranks=[RankResult.from_dict(r) for r in d["ranks"]],
                       command=d["command"], hashes={i["path"]: i["sha256"] for i in d["inputs"]},
                       failed={i["path"]: i["error"] for i in d["inputs"] if i.get("error")},
                       job=JobResult.from_dict(d["job"]) if d.get("job") is not None else None,
                       tracedoc_version=d["tracedoc_version"], rules_version=d["rules_version"])
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceError(where, "is a tracedoc report with a missing or malformed field",
                             f"{type(exc).__name__}: {exc}", "write it again with `tracedoc analyze --format json`") from None

    def to_json(self, timeline: bool = True) -> str:
        import orjson

        return orjson.dumps(self.to_dict(timeline=timeline), option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY,
                            default=_json_default).decode()

    def save(self, path: str | os.PathLike) -> None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(self.to_json())


def load(path: str | os.PathLike) -> AnalysisResult:
    """Read a report saved by ``tracedoc analyze --format json`` (or ``AnalysisResult.save``; gzip too)."""
    import gzip

    import orjson

    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            raw = f.read()
        data = orjson.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except OSError as exc:  # gzip.BadGzipFile and EOFError of a cut-off gzip file included
        raise TraceError(path, "cannot be read", getattr(exc, "strerror", None) or str(exc), "check the path") from None
    except EOFError as exc:
        raise TraceError(path, "is a gzip file cut short", str(exc) or None, "write the report again") from None
    except orjson.JSONDecodeError as exc:
        raise TraceError(path, "is not valid JSON", str(exc), "pass a report written with --format json") from None
    return AnalysisResult.from_dict(data, where=path)


def plain(v: Any) -> Any:
    """numpy scalars as Python values; NaN as None (JSON has no NaN)."""
    if v is not None and not isinstance(v, (bool, int, float, str)) and hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _json_default(obj: Any) -> Any:
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, set):
        return sorted(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
