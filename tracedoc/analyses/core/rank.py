"""One rank's result: what the analyses measured on one trace and, once judged, the rules' verdict.

``analyze_trace`` returns a ``RankResult`` without a verdict; the judge stage (``tracedoc.stages``)
returns the same value with its verdict (and, in a job, the job view's communication metrics). It
is a saved value (``tracedoc.model.record``): the rank's object in ``tracedoc analyze --format json``.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec

from ...model.evidence import RooflineRow, check_fields, plain_rows, typed_evidence
from ...model.meta import TraceMeta, torch_version
from ...model.record import Record
from ...model.reportstep import report_step
from ...model.verdict import Verdict
from ..critical_path import CriticalPath
from ..gputime.window import Window

REPR_CHARS = 400  # a repr is a one-line summary, never the data (a 2-rank result holds megabytes)
ROOFLINE_COLUMNS = (
    "op",
    "op_class",
    "input_shapes",
    "dtype",
    "calls",
    "gpu_ns",
    "gpu_ns_per_call",
    "flops",
    "bytes",
    "flops_per_call",
    "bytes_per_call",
    "tflops",
    "tb_per_s",
    "flop_per_byte",
    "ridge_flop_per_byte",
    "peak_tflops",
    "bandwidth_tb_per_s",
    "bound",
    "roof_tflops",
    "of_roof_fraction",
    "step_fraction",
    "note",
)
check_fields(RooflineRow, ROOFLINE_COLUMNS, "ROOFLINE_COLUMNS")  # a misspelt column fails at import


class Environment(Record, kw_only=True):
    """Where the trace came from, as its metadata records it (None: not recorded)."""

    format: str | None  # "kineto" or "nsys"
    gpu: str | None  # the first device's name
    device_count: int  # devices the trace describes
    compute_capability: str | None  # of the first device, "major.minor"
    world_size: int | None  # ranks in the job, as recorded
    rank: int | None  # as recorded
    backend: str | None  # distributed backend as recorded (may list several)
    nccl_version: int | str | None  # as recorded
    cuda_runtime_version: int | str | None  # as CUPTI records it (12080 for 12.8)
    cuda_driver_version: int | str | None  # as CUPTI records it
    events: int | None  # events in this rank's trace
    torch_version: str | None  # recorded by tracedoc's capture (Kineto itself does not record it)
    pid: int | None  # the OS process (nsys exports hold several)


def environment(meta: TraceMeta) -> Environment:
    """The report's environment summary of a trace's metadata."""
    first = meta.devices[0].properties if meta.devices else {}
    v = meta.versions
    return Environment(
        format=meta.format,
        gpu=first.get("name"),
        device_count=len(meta.devices),
        compute_capability=(
            f"{first.get('computeMajor')}.{first.get('computeMinor')}"
            if first.get("computeMajor") is not None
            else None
        ),
        world_size=meta.world_size,
        rank=meta.rank,
        backend=meta.backend,
        nccl_version=v.nccl,
        cuda_runtime_version=v.cuda_runtime,
        cuda_driver_version=v.cuda_driver,
        events=meta.events,
        torch_version=torch_version(meta.extra),
        pid=meta.pid,
    )


def short(text: str, limit: int = REPR_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def verdict_summary(v: Verdict | None) -> str:
    if v is None:
        return "no verdict"
    if v.withheld:
        return "verdict withheld"
    return (", ".join(v.labels) or "no finding") + f" ({v.confidence}; {len(v.findings)} findings)"


def evidence_frame(evidence: dict[str, list[dict]], name: str, where: str = "this result"):
    """One evidence table as a pandas DataFrame; an unknown name lists the tables there are."""
    import pandas as pd

    if name not in evidence:
        raise KeyError(f"no evidence table {name!r} in {where}; tables: {', '.join(sorted(evidence)) or 'none'}")
    return pd.DataFrame(plain_rows(evidence[name]))


def type_rows(verdict: Verdict | None) -> None:
    """A verdict read from JSON, its findings' evidence rows as their row types (``model.evidence``), in place."""
    for f in verdict.findings if verdict is not None else ():
        msgspec.structs.force_setattr(f, "evidence", typed_evidence(f.evidence))  # findings are frozen values


class RankResult(Record, omit_defaults=True, kw_only=True):
    """One rank: its window, metrics (every name of the metric table's rank and job scopes; None where not
    measurable), evidence tables, per-step and per-device rows, environment, warnings, timeline
    excerpts (left out of the JSON unless asked for), critical path and verdict (None until judged)."""

    source: str  # the trace file
    rank: int | None  # from the trace's distributedInfo or the file name; null unknown
    window: Window
    metrics: dict[str, Any]
    per_step: list[dict[str, Any]]  # one row per step (ProfilerStep or NVTX range), measured over its own span
    per_device: list[dict[str, Any]]  # one row per GPU with GPU ops
    evidence: dict[str, list[Any]]  # rows of a typed table (model.evidence.ROW_TYPES) as its row type, else dicts
    warnings: list[str]  # what was wrong with the trace, what was left out, and failed internal checks
    environment: Environment
    # optional: op-level data of a few steps for the HTML report ({"excerpts": [...]}); present only with
    # `tracedoc analyze -f json --timeline` and in reports saved with AnalysisResult.save
    timeline: dict[str, Any] = {}
    critical_path: CriticalPath | None  # each step's critical path by cause, and the step after each fix
    verdict: Verdict | None  # the rules engine's answer; null when no rules ran

    def __repr__(self) -> str:
        steps = int(self.metrics.get("steps") or 0)
        return short(
            f"<RankResult rank {self.rank} of {os.path.basename(self.source)!r}: "
            f"{verdict_summary(self.verdict)}; {steps} step{'' if steps == 1 else 's'}, "
            f"{len(self.metrics)} metrics, evidence tables {', '.join(sorted(self.evidence))}>"
        )

    @classmethod
    def from_dict(cls, data: Any) -> "RankResult":
        """The value a rank's JSON object describes, its evidence rows typed (``model.evidence``)."""
        rank = msgspec.convert(data, cls)
        rank.type_rows()
        return rank

    def type_rows(self) -> None:
        """Evidence rows read from JSON (dicts) as their row types, the verdict's too (in place);
        ``msgspec.ValidationError`` names the field of a row that does not fit."""
        self.evidence = typed_evidence(self.evidence)
        type_rows(self.verdict)

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

        return pd.DataFrame(plain_rows(self.evidence.get("roofline") or []), columns=list(ROOFLINE_COLUMNS))

    @property
    def step_time_ns(self) -> float | None:
        """The report's step: the median step time (docs/definitions.md: the report's step); the window without one."""
        return report_step(self.metrics.get("step_time_p50_ns"), self.window.length_ns, self.metrics.get("steps")).ns

    @property
    def top_impact_fraction(self) -> float:
        """The largest share of the step a finding explains (0 without verdict or findings)."""
        return self.verdict.top_impact_fraction if self.verdict is not None else 0.0

    def what_ifs(self) -> tuple[dict[str, dict], str | None]:
        """Predicted step time per verdict label (the fix's replay), and why there is none when not."""
        cp = self.critical_path
        if cp is None or not cp.available:
            return {}, (cp.reason if cp is not None else None)
        return cp.what_ifs(), None
