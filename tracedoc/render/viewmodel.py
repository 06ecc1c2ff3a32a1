"""The report view model: ``AnalysisResult`` -> ``ReportView`` (``render.views``), every value formatted once.

The terminal, Markdown and HTML renderers all read this view model; their templates and layout code
only arrange it. Every cap on table rows, name length, steps and timeline ops lives in ``Caps``, so a
renderer can shrink its output by building the view model again with smaller caps.
"""

from __future__ import annotations

import os
import shlex
from typing import TYPE_CHECKING

from ..analyses.gputime.idle import CAUSES as IDLE_CAUSES
from .charts import gpu_figures, kernel_class_bar, memory_view
from .cells import MAIN_TABLES, build_table, fmt_cell, shorten, version_text
from .efficiency import efficiency_items, efficiency_line
from .findingview import MIN_IMPACT_FRACTION, build_finding, build_verdict
from .format import fmt_ns, fmt_pct
from .stepview import build_steps, step_p50, steps_text, window_bar
from .tiles import tiles
from .roofline import build_roofline
from .queueview import launch_queue_view
from .timeline import CAUSE_LABELS, build_timeline
from .views import (
    Caps,
    DataLoaderView,
    HealthView,
    IdleCause,
    InputView,
    Item,
    KernelsView,
    RankTableView,
    RankView,
    ReportView,
    TensorCoreView,
    WindowView,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..result import AnalysisResult, RankResult, RankRow

__all__ = ["Caps", "build_rank", "build_report"]

TENSOR_CORE_UNKNOWN_NOTABLE = 0.05  # above this share of compute, "unknown" Tensor Core use is worth saying
IDLE_CAUSE_SHOWN = 0.0005  # idle causes under 0.05% of the window are left out of the lists


def build_report(result: "AnalysisResult", caps: Caps = Caps(), overlay_href: str | None = None) -> ReportView:
    """The report view model: everything the renderers show, already formatted. ``overlay_href``: the
    Perfetto overlay written beside the report, which the HTML page links to."""
    from dataclasses import replace as _replace

    from .jobview import build_job_view, not_analysed, paired_excerpts

    focus, focus_reason = result.focus, result.focus_reason
    paths = result.paths
    inputs = [
        InputView(name=os.path.basename(i.path), path=i.path, sha256=i.sha256 or "not computed") for i in result.inputs
    ]
    command = result.command or (
        "tracedoc analyze " + shlex.quote(paths[0])
        if len(paths) == 1
        else "tracedoc analyze <directory of the rank traces>"
    )
    name = (os.path.basename(os.path.dirname(paths[0])) + "/" if len(paths) > 1 and paths else "") + (
        inputs[0].name if len(inputs) == 1 else f"{len(inputs)} rank files"
    )
    view = ReportView(
        title=f"tracedoc · {name}" if paths else "tracedoc",
        input_name=name,
        tracedoc_version=result.tracedoc_version,
        rules_version=result.rules_version or "unknown",
        command=command,
        config_files=list(result.config_files),
        inputs=inputs,
        rank_count=len(result.ranks),
        multi_rank=len(result.ranks) > 1,
        rank_table=_rank_table(result, caps) if result.job is not None else None,
        focus_rank=None if focus is None else focus.rank,
        focus_source_name=None if focus is None else os.path.basename(focus.source),
        ranks=[build_rank(focus, caps)] if focus is not None else [],
        job=build_job_view(result, caps.ranks),
        job_rank_rows=min(caps.ranks, 64),
        focus_reason=focus_reason,
        focus_asked=bool(result.job is not None and result.job.focus_asked),
        overlay_href=local_href(overlay_href) if overlay_href else None,
        not_a_job=result.job.not_a_job if result.job is not None else None,
        not_analysed=not_analysed(result),
    )
    paired = paired_excerpts(result, focus) if caps.timeline and focus is not None else None
    if paired:  # the straggler's step beside the median rank's
        view.ranks[0] = _replace(view.ranks[0], timeline=build_timeline(paired, _replace(caps, slowest_excerpt=True)))
    return view


def build_rank(r: "RankResult", caps: Caps) -> RankView:
    m = r.metrics
    v = r.verdict
    env = r.environment
    origin = int(r.window.start_ns)
    # Without steps, impact is per detected iteration, else a share of the window.
    per = "step" if m.get("steps") else ("iteration" if m.get("iterations") else "window")
    every = [build_finding(f, caps, origin, per) for f in (v.findings if v is not None else [])]
    findings = [f for f in every if not f.minor]
    return RankView(
        minor_findings=[f for f in every if f.minor],
        minor_threshold=f"{fmt_pct(MIN_IMPACT_FRACTION, 0)} of the {per}",
        rank=r.rank,
        source_name=os.path.basename(r.source),
        header=_header_bits(r),
        verdict=build_verdict(v, findings, every),
        findings=findings,
        health=[
            HealthView(code=h.code, level=h.level, message=h.message, confidence=h.confidence)
            for h in (v.health if v is not None else [])
        ],
        warnings=[shorten(w, 1000) for w in r.warnings[: caps.table_rows]],
        warnings_left_out=max(0, len(r.warnings) - caps.table_rows),
        window=WindowView(
            length=fmt_ns(m.get("window_ns")),
            description=r.window.describe(),
            kind=r.window.kind,
            steps=int(m.get("steps") or 0),
            step_p50=step_p50(m),
            steps_text=steps_text(m),
        ),
        summary=tiles(
            _summary(m) + [Item(key=f"flops:{a}", label=a, value=b) for a, b in efficiency_items(m, r.evidence)],
            bool(m.get("has_gpu_ops")),
        ),
        efficiency=efficiency_line(m, r.evidence),
        window_bar=window_bar(m),
        has_gpu_ops=bool(m.get("has_gpu_ops")),
        idle_causes=[
            IdleCause(cause=c, label=CAUSE_LABELS[c], pct=fmt_pct(m.get(f"idle_{c}_fraction") or 0.0))
            for c in IDLE_CAUSES
            if (m.get(f"idle_{c}_fraction") or 0) >= IDLE_CAUSE_SHOWN
        ],
        steps=build_steps(r.per_step, caps),
        timeline=build_timeline(r.timeline.get("excerpts") or [], caps) if caps.timeline else None,
        tables={
            key: build_table(
                title,
                r.evidence.get(key) or [],
                cols,
                caps.table_rows,
                origin,
                caps.name_chars,
                key=key,
                short_names=not caps.full_names,
            )
            for key, (title, cols) in MAIN_TABLES.items()
        },
        tensor_cores=_tensor_cores(m),
        memory=memory_view(m, r.evidence.get("memory_curve") or [], origin, caps),
        gpu_figures=tiles(gpu_figures(m), bool(m.get("has_gpu_ops"))),
        kernel_classes=kernel_class_bar(r.evidence.get("kernel_classes") or []),
        roofline=build_roofline(r.evidence.get("roofline"), caps.table_rows, caps.name_chars),
        launch_queue=launch_queue_view(m, r.evidence.get("launch_queue") or []),
        kernels=KernelsView(
            count=fmt_cell("count", m.get("kernel_count")),
            median=fmt_ns(m.get("kernel_median_ns")),
            under_10us=fmt_pct(m.get("kernels_under_10us_fraction")),
            launch_delay_p50=fmt_ns(m.get("launch_delay_p50_ns")),
            launch_delay_p50_ns=m.get("launch_delay_p50_ns"),
        ),
        dataloader=(
            DataLoaderView(share=fmt_pct(m["dataloader_fraction"]), stall=fmt_pct(m.get("dataloader_stall_fraction")))
            if m.get("dataloader_fraction")
            else None
        ),
        contents=[
            f"{row.rows:,} {row.table.replace('_', ' ')}"
            for row in r.evidence.get("contents", [])
            if row.rows and row.table not in ("gpu_ops", "other_spans")
        ],
        events=f"{env.events:,}" if isinstance(env.events, int) else "unknown",
        environment=_environment(r),
        metrics=[
            {"key": k, "value": fmt_cell(k, val) if not isinstance(val, bool) else str(val).lower()}
            for k, val in m.items()
        ],
    )


def _header_bits(r: "RankResult") -> list[str]:
    env = r.environment
    bits = [os.path.basename(r.source)]
    if r.rank is not None:
        bits.append(f"rank {r.rank}" + (f" of {env.world_size}" if env.world_size else ""))
    if env.gpu:
        n = r.metrics.get("gpu_count") or 0
        bits.append(str(env.gpu) + (f" ×{n}" if n > 1 else ""))
    if env.backend:
        bits.append(str(env.backend))
    return [shorten(b, 200) for b in bits]


def _summary(m: dict) -> list[Item]:
    items = [
        ("step_time_p50", "step time p50", fmt_ns(m.get("step_time_p50_ns")) if m.get("steps") else "no steps"),
        ("gpu_busy", "GPU busy", fmt_pct(m.get("gpu_busy_fraction"))),
        ("compute", "compute", fmt_pct(m.get("compute_fraction"))),
        ("comm", "communication", fmt_pct(m.get("comm_fraction"))),
        ("exposed_comm", "exposed comm", fmt_pct(m.get("exposed_comm_fraction"))),
        ("comm_overlap", "comm overlap", fmt_pct(m.get("comm_overlap_fraction"))),
        ("memcpy", "memcpy", fmt_pct(m.get("memcpy_fraction"))),
        ("idle", "idle", fmt_pct(m.get("idle_fraction"))),
        ("dataloader_stall", "DataLoader stall", fmt_pct(m.get("dataloader_stall_fraction"))),
        ("tensor_core", "Tensor Core share", fmt_pct(m.get("tensor_core_fraction"))),
    ]
    # a single-GPU run without communication kernels has no communication to show
    single = not m.get("comm_fraction") and (m.get("world_size") or 1) <= 1 and (m.get("gpu_count") or 0) <= 1
    return [Item(key=k, label=a, value=b) for k, a, b in items if not (single and k in COMM_ITEMS)]


COMM_ITEMS = ("comm", "exposed_comm", "comm_overlap")


def _tensor_cores(m: dict) -> TensorCoreView:
    unknown = m.get("tensor_core_unknown_fraction")
    return TensorCoreView(
        share=fmt_pct(m.get("tensor_core_fraction")),
        unknown=fmt_pct(unknown),
        eligible_off_tc=fmt_pct(m.get("tc_eligible_non_tc_fraction")),
        capable={True: "yes", False: "no", None: "unknown"}.get(m.get("tensor_core_capable"), "unknown"),
        width=round(100 * max(0.0, min(1.0, m.get("tensor_core_fraction") or 0.0)), 2),
        unknown_width=round(100 * max(0.0, min(1.0, unknown or 0.0)), 2),
        unknown_notable=(unknown or 0) > TENSOR_CORE_UNKNOWN_NOTABLE,
    )


def _environment(r: "RankResult") -> list[Item]:
    m, env = r.metrics, r.environment
    rows = [
        ("GPU", env.gpu or "not recorded"),
        ("devices in the trace", f"{env.device_count or 0} described, {m.get('gpu_count') or 0} with GPU ops"),
        ("compute capability", env.compute_capability or "unknown"),
        ("world size", env.world_size if env.world_size is not None else "unknown"),
        ("rank", r.rank if r.rank is not None else "unknown"),
        ("backend", env.backend or "none recorded"),
        ("torch", env.torch_version or "not recorded in the trace"),
        ("CUDA runtime", version_text(env.cuda_runtime_version) or "not recorded"),
        ("CUDA driver", version_text(env.cuda_driver_version) or "not recorded"),
        ("NCCL", version_text(env.nccl_version) or "not recorded"),
        ("trace format", env.format or "unknown"),
        ("events", f"{env.events:,}" if isinstance(env.events, int) else "unknown"),
        ("steps captured", str(m.get("steps") or 0)),
        ("analysis window", f"{fmt_ns(m.get('window_ns'))}: {r.window.describe()}"),
    ]
    return [Item(label=a, value=shorten(b, 300)) for a, b in rows]


RANK_TABLE_COLUMNS = (
    "rank",
    "file",
    "window",
    "step p50",
    "GPU busy",
    "compute",
    "exposed comm",
    "overlap",
    "DL stall",
    "idle",
    "verdict",
    "top impact",
)


def _rank_table(result: "AnalysisResult", caps: Caps) -> RankTableView:
    rows = result.job.ranks if result.job is not None else []
    shared = {}
    for row in rows:
        shared[row.source] = shared.get(row.source, 0) + 1
    return RankTableView(
        columns=list(RANK_TABLE_COLUMNS),
        rows=[rank_row(row, shared[row.source] > 1) for row in rows[: caps.ranks]],
        total=len(rows),
        left_out=max(0, len(rows) - caps.ranks),
    )


def rank_row(row: "RankRow", file_shared: bool) -> list[str]:
    name = shorten(os.path.basename(row.source), 60)
    if file_shared and row.pid is not None:
        name = f"pid {row.pid} · {name}"  # one export, one rank per process
    labels = "withheld" if row.withheld else ", ".join(row.labels) or "—"
    return [
        str(row.rank) if row.rank is not None else "?",
        name,
        fmt_ns(row.window_ns),
        fmt_ns(row.step_time_p50_ns) if row.step_time_p50_ns is not None else "—",
        fmt_pct(row.gpu_busy_fraction),
        fmt_pct(row.compute_fraction),
        fmt_pct(row.exposed_comm_fraction),
        fmt_pct(row.comm_overlap_fraction),
        fmt_pct(row.dataloader_stall_fraction),
        fmt_pct(row.idle_fraction),
        labels,
        fmt_pct(row.top_impact_fraction) if row.top_impact_fraction is not None else "—",
    ]


def local_href(path: str) -> str:
    """A link to a local file: a relative path (``./name``, percent-encoded) or a ``file:`` URL, never another
    URL scheme, so that a file named ``javascript:alert(1)`` is that file, not a script."""
    from urllib.parse import quote

    if path.startswith("file:"):
        return "file:" + quote(path[5:])
    if os.path.isabs(path):
        return "file://" + quote(path)
    return "./" + quote(path)
