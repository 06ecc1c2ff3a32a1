"""Terminal summary: verdict first, then the numbers behind it, in under a screen.

Reads the same view model as the Markdown and HTML reports (``build_report``); this module only
chooses what fits on a screen and lays it out with rich.
"""

from __future__ import annotations

import io
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from rich.table import Table
from rich.text import Text

from ..neutral import clean_view
from .format import plural
from .text_many import cut_rank_table, digest_renderables
from .console import TextOptions, make_console, print_item
from .summaryline import summary_line
from .text_tables import job_table, rank_table, roofline_table, top_table
from .viewmodel import build_report
from .views import Caps, FindingView, JobSectionView, RankView, ReportView

if TYPE_CHECKING:  # pragma: no cover
    from ..result import AnalysisResult

PIPE_CAPS = Caps(timeline=False, name_chars=100_000)  # names whole in the view; cut to their column here
TEXT_CAPS = PIPE_CAPS
BREAKDOWN = ("gpu_busy", "compute", "comm", "exposed_comm", "comm_overlap", "memcpy", "idle")
BREAKDOWN_HEADERS = {"gpu_busy": "GPU busy", "comm": "comm", "comm_overlap": "overlap"}
FINDINGS_SHOWN = {True: 3, False: 4}  # brief (one rank of many) / full
FIXES_OF_TOP = {True: 2, False: 3}
WARNINGS_SHOWN = 3
TABLE_ROWS = {"top_kernels": 4, "top_gaps": 3, "roofline": 8}  # rows without --top; --verbose shows VERBOSE_ROWS
VERBOSE_ROWS = 10


def renderables(result: "AnalysisResult", options: TextOptions = TextOptions()) -> list[Any]:
    # Every string of the view came from a trace or a file: cleaned here, before it is laid out (tracedoc.neutral).
    view = clean_view(build_report(result, replace(PIPE_CAPS, full_names=options.full_names)))
    out = view_renderables(view, options)
    if view.config_files and not options.quiet:  # whose thresholds these findings used
        out.append(Text(f"Settings from {', '.join(view.config_files)}", style="dim"))
    if view.ranks and not options.quiet:  # a long summary scrolls its verdict away: it ends by repeating it
        out += [Text(""), summary_line(view, options.width)]
    return out


def render_text(
    result: "AnalysisResult", width: int | None = None, options: TextOptions | None = None, **flags: Any
) -> str:
    """The terminal summary as a string; by default laid out for a pipe (100 columns, no colour)."""
    options = options or TextOptions(width=width, **flags)
    buf = io.StringIO()
    _print(result, options, make_console(options, buf, markup=False))
    return buf.getvalue()


def print_text(result: "AnalysisResult", options: TextOptions) -> None:
    """Print the summary to stdout laid out for it (a terminal or not)."""
    _print(result, options, make_console(options, markup=False))


def _print(result: "AnalysisResult", options: TextOptions, console: Any) -> None:
    options = replace(options, width=options.width or console.width)  # tables are fitted to this width
    for item in renderables(result, options):
        print_item(console, item, options, widen=options.full_names)


def view_renderables(view: ReportView, options: TextOptions = TextOptions()) -> list[Any]:
    if not view.ranks:
        return [Text("tracedoc: no ranks were analysed", style="yellow")]
    if options.quiet:
        return [verdict_line(view)]
    if view.job is not None:
        out = _job_block(view.job, options)
        if view.rank_table is not None and view.job.digest is not None:  # many ranks: the digest's ranks
            out.append(rank_table(replace(view, rank_table=cut_rank_table(view.rank_table, view.job.digest)), options))
        elif view.rank_table is not None:
            out.append(rank_table(view, options))
        if not view.focus_asked:
            return [*out, Text("Per-rank details: --rank N", style="dim")]
        return [
            *out,
            Text(f"\nDetails for rank {view.focus_rank} ({view.focus_source_name}):", style="bold"),
            *_rank_block(view.ranks[0], brief=False, options=options),
        ]
    if view.multi_rank and view.rank_table is not None:
        lead = (
            [
                Text(f"tracedoc · {view.rank_count} trace files, not one job", style="bold"),
                Text(view.not_a_job, style="yellow"),
                *(Text(x, style="yellow") for x in view.not_analysed),
            ]
            if view.not_a_job
            else []
        )
        return [
            *lead,
            rank_table(view, options),
            Text(f"\nDetails for rank {view.focus_rank} ({view.focus_source_name}):", style="bold"),
            *_rank_block(view.ranks[0], brief=not options.verbose, options=options),
        ]
    return _rank_block(view.ranks[0], brief=False, options=options)


def verdict_line(view: ReportView) -> Text:
    """One line: the verdict, its confidence and the top finding's impact (``--quiet``)."""
    if view.job is not None:
        job = view.job
        conf = f" (confidence {job.confidence})" if job.confidence else ""
        return (
            Text(f"Job verdict: {', '.join(job.labels)}{conf}", style="bold red")
            if job.labels
            else Text("Job verdict: no job-level finding", style="bold green")
        )
    r = view.ranks[0]
    v = r.verdict
    where = f"rank {view.focus_rank}: " if view.multi_rank else ""
    if v.status == "withheld":
        return Text(
            f"{where}Verdict withheld: {r.health[0].message if r.health else 'see trace health'}", style="bold yellow"
        )
    if v.status == "none":
        return Text(f"{where}No verdict: no rules were evaluated", style="yellow")
    conf = f" (confidence {v.confidence})" if v.confidence else ""
    if not v.labels:
        return Text(f"{where}Verdict: no finding{conf}", style="bold green")
    top = next((f for f in r.findings if f.is_verdict), None)
    impact = _impact(top) if top is not None else ""
    return Text(f"{where}Verdict: {', '.join(v.labels)}{conf}{impact}", style="bold red")


def _job_block(job: JobSectionView, options: TextOptions = TextOptions()) -> list[Any]:
    """The job verdict first: labels, the top findings with fixes, stragglers, what limits the view."""
    labels = job.labels
    out: list[Any] = [
        Text(f"tracedoc · job of {len(job.rank_table.rows) + job.rank_table.left_out} ranks", style="bold")
    ]
    out.append(
        Text(
            f"Verdict: {', '.join(labels)}" + (f"  (confidence {job.confidence})" if job.confidence else ""),
            style="bold red",
        )
        if labels
        else Text("Verdict: no job-level finding", style="bold green")
    )
    for i, f in enumerate(job.findings[:3], 1):
        out.append(Text(f"{i}. [{f.label}] {f.title}" + (f" — {f.impact}" if f.impact else ""), style="bold"))
        if f.what_if:
            out.append(Text(f"   if fixed: {f.what_if}"))
        out.append(Text(f"   {f.message}"))
        for fix in f.fixes[: 2 if i == 1 else 1]:
            out.append(Text(f"   fix: {fix}"))
        if i == 1 and f.expect:
            out.append(Text(f"   next profile should show: {f.expect}", style="dim"))
    for line in job.summary:
        out.append(Text(line, style="dim"))
    for s in job.stragglers:
        out.append(Text("Straggler: " + s.line, style="bold"))
    for issue in job.issues[:6]:
        out.append(Text("note: " + issue, style="yellow"))
    if len(job.issues) > 6:
        out.append(Text(f"note: {len(job.issues) - 6} more (--format json lists them all)", style="yellow"))
    if job.digest is not None:
        out.extend(digest_renderables(job.digest, lambda title, header, rows: job_table(title, header, rows, options)))
        return out
    out.append(job_table("Ranks in the job", job.rank_table.columns, job.rank_table.rows[:32], options))
    more = len(job.rank_table.rows) + job.rank_table.left_out - 32
    if more > 0:
        out.append(Text(f"{more} more ranks in --format json/html", style="dim"))
    out.append(Text(""))
    return out


def _verdict_lines(r: RankView, brief: bool, verbose: bool = False) -> list[Any]:
    v = r.verdict
    out: list[Any] = []
    if v.status == "none":
        return out
    for h in r.health:
        out.append(Text(f"⚠ trace health ({h.level}): {h.message}", style="yellow"))
    conf = f"  (confidence {v.confidence})" if v.confidence else ""
    if v.status == "withheld":
        out.append(Text("Verdict withheld: see trace health", style="bold yellow"))  # its message is just above
    elif v.labels:
        out.append(Text(f"Verdict: {', '.join(v.labels)}{conf}", style="bold red"))
    else:
        out.append(Text(f"Verdict: no finding{conf}", style="bold green"))
    shown = r.findings if verbose else r.findings[: FINDINGS_SHOWN[brief]]
    for i, f in enumerate(shown, 1):
        out.append(Text(f"{i}. [{f.label}] {f.title}{_impact(f)}", style="bold"))
        if f.what_if:
            out.append(Text(f"   if fixed: {f.what_if}"))
        out.append(Text(f"   {f.message}"))
        # The top finding gets its fixes in full; the others their first fix (all of them with --verbose).
        for fix in f.fixes if verbose else f.fixes[: FIXES_OF_TOP[brief] if i == 1 else 1]:
            out.append(Text(f"   fix: {fix}"))
        if f.expect and (verbose or (i == 1 and not brief)):
            out.append(Text(f"   next profile should show: {f.expect}", style="dim"))
    if r.minor_findings:
        out.append(
            Text(
                f"   minor (under {r.minor_threshold}): "
                + "; ".join(f"{f.rule_id} {f.title}{_impact(f)}" for f in r.minor_findings),
                style="dim",
            )
        )
    rest = r.findings[len(shown) :]
    if rest:
        out.append(
            Text(
                f"   +{len(rest)} more: "
                + ", ".join(f"{f.rule_id} {f.label}" for f in rest)
                + " (all of them in --format md, html or json)",
                style="dim",
            )
        )
    return out


def _impact(f: FindingView) -> str:
    text = f" — {f.impact_ms}" if f.impact_ms else ""
    if f.impact_pct:
        text += f" ({f.impact_pct} of {f.impact_of})"
    return text


def _rank_block(r: RankView, brief: bool, options: TextOptions = TextOptions()) -> list[Any]:
    out: list[Any] = [Text("tracedoc · " + " · ".join(r.header), style="bold")]
    out.extend(_verdict_lines(r, brief, options.verbose))
    warnings = [] if options.warnings_shown else r.warnings if options.verbose else r.warnings[:WARNINGS_SHOWN]
    for w in warnings:
        out.append(Text(f"warning: {w}", style="yellow"))
    w = r.window
    step_txt = w.steps_text or plural(w.steps, "step")
    out.append(Text(f"Window: {w.length} ({w.description}); {step_txt}", style="dim"))
    if not r.has_gpu_ops:
        out.append(
            Text(
                f"No GPU ops in this trace, so GPU metrics do not apply. It holds {r.events} events: "
                f"{', '.join(r.contents) or 'nothing tracedoc analyses'}; {plural(w.steps, 'step')}.",
                style="yellow",
            )
        )
        out.extend(Text(line) for line in cpu_only_lines(r))
        return out
    summary = {item.key: item for item in r.summary}
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    shown = [key for key in BREAKDOWN if key in summary]  # no communication columns on a single GPU
    for key in shown:
        t.add_column(BREAKDOWN_HEADERS.get(key, summary[key].label), justify="right")
    t.add_row(*(summary[key].value for key in shown))
    out.append(t)
    if r.idle_causes:
        out.append(Text("Idle by cause: " + ", ".join(f"{c.cause.replace('_', ' ')} {c.pct}" for c in r.idle_causes)))
    k, tc = r.kernels, r.tensor_cores
    out.append(
        Text(
            f"Kernels: {k.count}, median {k.median}, {k.under_10us} under 10 µs; launch delay p50 "
            f"{k.launch_delay_p50}{_queue_note(r)}; Tensor Cores {tc.share} of compute"
            + (f" ({tc.unknown} unknown)" if tc.unknown_notable else "")
        )
    )
    out.extend(_queue_lines(r))
    if r.efficiency:
        out.append(Text(r.efficiency))
    if r.dataloader is not None:
        out.append(Text(f"DataLoader: {r.dataloader.share} of the window, stalling the GPU {r.dataloader.stall}"))
    if r.memory.has_data:
        out.append(
            Text(
                f"Memory: peak allocated {r.memory.peak_allocated}, reserved {r.memory.peak_reserved} "
                f"of {r.memory.device_memory}"
            )
        )
    if not brief or options.verbose or options.top:
        out.append(
            top_table(
                "Top kernels",
                r.tables["top_kernels"],
                _rows(options, "top_kernels"),
                options,
                [("name", "kernel"), ("count", "count"), ("total_ns", "time"), ("share", "share")],
            )
        )
        out.append(
            top_table(
                "Top gaps",
                r.tables["top_gaps"],
                _rows(options, "top_gaps"),
                options,
                [
                    ("gap_ns", "gap"),
                    ("device_idle_ns", "device idle"),
                    ("stream", "stream"),
                    ("cause", "cause"),
                    ("after", "next op"),
                    ("launched_by", "launched by"),
                ],
            )
        )
    if r.roofline is not None and (options.top or options.verbose):
        out.append(roofline_table(r.roofline, _rows(options, "roofline"), options))
    return out


def _queue_lines(r: RankView) -> list[Any]:
    """The launch queue in a line or two: the deepest streams with their depth over time, and what a full
    queue means (shown when a queue filled, or when launch calls blocked)."""
    q = r.launch_queue
    if q is None or not q.full:
        return []
    out = [Text(f"Launch queue: {q.note}")]
    for s in q.streams[:2]:
        out.append(
            Text(
                f"  stream {s.stream}: up to {s.depth_max} of {q.capacity} ops queued (mean {s.depth_mean}), "
                f"host blocked {s.blocked} in {s.blocked_calls} calls  |{s.spark}|"
            )
        )
    return out


QUEUE_DELAY_NS = 1_000_000  # a median launch delay above 1 ms is queueing behind GPU work, not launch cost


def _queue_note(r: RankView) -> str:
    """What a long median launch delay means: the launch queue's depth while the GPU is busy."""
    if r.kernels.launch_delay_p50_ns is None or r.kernels.launch_delay_p50_ns < QUEUE_DELAY_NS:
        return ""
    return (
        " (time kernels wait in the launch queue: the CPU runs ahead of a busy GPU, which is healthy; "
        "it is not launch overhead)"
    )


def _rows(options: TextOptions, key: str) -> int:
    if options.top is not None:
        return options.top
    return VERBOSE_ROWS if options.verbose else TABLE_ROWS[key]


def cpu_only_lines(r: RankView) -> list[str]:
    """What a profile without GPU ops still tells: the DataLoader's share and host time by operator."""
    out = []
    if r.dataloader is not None:
        out.append(f"DataLoader: the main thread spends {r.dataloader.share} of the window in DataLoader.__next__")
    ops = r.tables.get("host_operators")
    if ops is not None and ops.rows:
        top = ", ".join(f"{n} {s}" for n, s in zip(ops.cells("name")[:5], ops.cells("share")[:5]))
        out.append(f"Host time by operator (self time, share of the window): {top}")
    return out


def answer_lines(result: "AnalysisResult") -> list[str]:
    """The answer in a few plain lines: the verdict line, then the top finding with its first fix, or for
    a profile without GPU ops what it can tell. Printed when a capture's report is written."""
    view = build_report(result, PIPE_CAPS)
    if not view.ranks:
        return ["no ranks were analysed"]
    r = view.ranks[0]
    lines = [verdict_line(view).plain]
    top = next((f for f in r.findings if f.is_verdict), r.findings[0] if r.findings else None)
    if top is not None:
        lines.append(f"top finding: [{top.label}] {top.title}{_impact(top)}")
        if top.fixes:
            lines.append(f"fix: {top.fixes[0]}")
    if not r.has_gpu_ops:  # a run on the CPU alone: what its host side shows
        if r.verdict.status != "withheld":
            lines.insert(
                1,
                "GPU-side metrics were not recorded (the trace holds CPU activity only): "
                "the verdict rests on the host side",
            )
        lines += cpu_only_lines(r) or ["the trace holds no DataLoader or CPU operator time to report either"]
    return lines
