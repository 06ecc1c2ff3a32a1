"""Terminal summary: verdict first, then the numbers behind it, in under a screen.

Reads the same view model as the Markdown and HTML reports (``build_report``); this module only
chooses what fits on a screen and lays it out with rich.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .viewmodel import build_report
from .views import Caps, FindingView, RankView, ReportView, TableView

if TYPE_CHECKING:  # pragma: no cover
    from ..result import AnalysisResult

TEXT_CAPS = Caps(timeline=False)
BREAKDOWN = ("gpu_busy", "compute", "comm", "exposed_comm", "comm_overlap", "memcpy", "idle")
BREAKDOWN_HEADERS = {"gpu_busy": "GPU busy", "comm": "comm", "comm_overlap": "overlap"}
FINDINGS_SHOWN = {True: 3, False: 4}  # brief (one rank of many) / full
FIXES_OF_TOP = {True: 2, False: 3}
WARNINGS_SHOWN = 3
RANK_COLUMNS = ("rank", "file", "step p50", "GPU busy", "compute", "exposed comm", "DL stall", "verdict")  # fit 100 columns
_RIGHT = frozenset({"count", "total_ns", "share", "gap_ns", "stream"})


def renderables(result: "AnalysisResult") -> list[Any]:
    return view_renderables(build_report(result, TEXT_CAPS))


def render_text(result: "AnalysisResult", width: int = 100) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False, highlight=False)
    for item in renderables(result):
        console.print(item)
    return buf.getvalue()


def view_renderables(view: ReportView) -> list[Any]:
    if not view.ranks:
        return [Text("tracedoc: no ranks were analysed", style="yellow")]
    if view.job is not None:
        out = [*_job_block(view.job), _rank_table(view)] if view.rank_table is not None else _job_block(view.job)
        if not view.focus_asked:
            return [*out, Text("Per-rank details: --rank N", style="dim")]
        return [*out, Text(f"\nDetails for rank {view.focus_rank} ({view.focus_source_name}):", style="bold"),
                *_rank_block(view.ranks[0], brief=False)]
    if view.multi_rank and view.rank_table is not None:
        return [_rank_table(view),
                Text(f"\nDetails for rank {view.focus_rank} ({view.focus_source_name}):", style="bold"),
                *_rank_block(view.ranks[0], brief=True)]
    return _rank_block(view.ranks[0], brief=False)


def _job_block(job: dict) -> list[Any]:
    """The job verdict first: labels, the top findings with fixes, stragglers, what limits the view."""
    labels = job["labels"]
    out: list[Any] = [Text(f"tracedoc · job of {len(job['rank_table']['rows']) + job['rank_table']['left_out']} ranks",
                           style="bold")]
    out.append(Text(f"Verdict: {', '.join(labels)}" + (f"  (confidence {job['confidence']})" if job["confidence"] else ""),
                    style="bold red") if labels else Text("Verdict: no job-level finding", style="bold green"))
    for i, f in enumerate(job["findings"][:3], 1):
        out.append(Text(f"{i}. [{f['label']}] {f['title']}" + (f" — {f['impact']}" if f["impact"] else ""), style="bold"))
        out.append(Text(f"   {f['message']}"))
        for fix in f["fixes"][: 2 if i == 1 else 1]:
            out.append(Text(f"   fix: {fix}"))
        if i == 1 and f.get("expect"):
            out.append(Text(f"   next profile should show: {f['expect']}", style="dim"))
    for line in job["summary"]:
        out.append(Text(line, style="dim"))
    for s in job["stragglers"]:
        out.append(Text("Straggler: " + s["line"], style="bold"))
    for issue in job["issues"][:6]:
        out.append(Text("note: " + issue, style="yellow"))
    if len(job["issues"]) > 6:
        out.append(Text(f"note: {len(job['issues']) - 6} more (--format json lists them all)", style="yellow"))
    t = Table(title="Ranks in the job", title_justify="left", title_style="bold", box=None, header_style="bold",
              pad_edge=False)
    for col in job["rank_table"]["columns"]:
        t.add_column(col, justify="right", no_wrap=True)
    for row in job["rank_table"]["rows"][:32]:
        t.add_row(*row)
    out.append(t)
    more = len(job["rank_table"]["rows"]) + job["rank_table"]["left_out"] - 32
    if more > 0:
        out.append(Text(f"{more} more ranks in --format json/html", style="dim"))
    out.append(Text(""))
    return out


def _verdict_lines(r: RankView, brief: bool) -> list[Any]:
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
    shown = r.findings[: FINDINGS_SHOWN[brief]]
    for i, f in enumerate(shown, 1):
        out.append(Text(f"{i}. [{f.label}] {f.title}{_impact(f)}", style="bold"))
        if f.what_if:
            out.append(Text(f"   if fixed: {f.what_if}"))
        out.append(Text(f"   {f.message}"))
        # The top finding gets its fixes in full; the others their first fix.
        for fix in f.fixes[: FIXES_OF_TOP[brief] if i == 1 else 1]:
            out.append(Text(f"   fix: {fix}"))
        if f.expect and i == 1 and not brief:
            out.append(Text(f"   next profile should show: {f.expect}", style="dim"))
    rest = r.findings[len(shown):]
    if rest:
        out.append(Text(f"   +{len(rest)} more: " + ", ".join(f"{f.rule_id} {f.label}" for f in rest)
                        + " (all of them in --format md, html or json)", style="dim"))
    return out


def _impact(f: FindingView) -> str:
    text = f" — {f.impact_ms}" if f.impact_ms else ""
    if f.impact_pct:
        text += f" ({f.impact_pct} of {f.impact_of})"
    return text


def _rank_block(r: RankView, brief: bool) -> list[Any]:
    out: list[Any] = [Text("tracedoc · " + " · ".join(r.header), style="bold")]
    out.extend(_verdict_lines(r, brief))
    for w in r.warnings[:WARNINGS_SHOWN]:
        out.append(Text(f"warning: {w}", style="yellow"))
    w = r.window
    step_txt = f"{w.steps} steps" + (f", step p50 {w.step_p50}" if w.steps else "")
    out.append(Text(f"Window: {w.length} ({w.description}); {step_txt}", style="dim"))
    if not r.has_gpu_ops:
        out.append(Text(f"No GPU ops in this trace, so GPU metrics do not apply. It holds {r.events} events: "
                        f"{', '.join(r.contents) or 'nothing tracedoc analyses'}; {w.steps} steps.", style="yellow"))
        return out
    summary = {item.key: item for item in r.summary}
    t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for key in BREAKDOWN:
        t.add_column(BREAKDOWN_HEADERS.get(key, summary[key].label), justify="right")
    t.add_row(*(summary[key].value for key in BREAKDOWN))
    out.append(t)
    if r.idle_causes:
        out.append(Text("Idle by cause: " + ", ".join(f"{c.cause.replace('_', ' ')} {c.pct}" for c in r.idle_causes)))
    k, tc = r.kernels, r.tensor_cores
    out.append(Text(f"Kernels: {k.count}, median {k.median}, {k.under_10us} under 10 µs; launch delay p50 "
                    f"{k.launch_delay_p50}; Tensor Cores {tc.share} of compute"
                    + (f" ({tc.unknown} unknown)" if tc.unknown_notable else "")))
    if r.efficiency:
        out.append(Text(r.efficiency))
    if r.dataloader is not None:
        out.append(Text(f"DataLoader: {r.dataloader.share} of the window, stalling the GPU {r.dataloader.stall}"))
    if r.memory.has_data:
        out.append(Text(f"Memory: peak allocated {r.memory.peak_allocated}, reserved {r.memory.peak_reserved} "
                        f"of {r.memory.device_memory}"))
    if not brief:
        out.append(_top_table("Top kernels", r.tables["top_kernels"], 4,
                              [("name", "kernel"), ("count", "count"), ("total_ns", "time"), ("share", "share")]))
        out.append(_top_table("Top gaps", r.tables["top_gaps"], 3,
                              [("gap_ns", "gap"), ("stream", "stream"), ("cause", "cause"), ("after", "next op"),
                               ("launched_by", "launched by")]))
    return out


def _top_table(title: str, table: TableView, rows: int, cols: list[tuple[str, str]]) -> Any:
    if not table.rows:
        return Text("")
    t = Table(title=title, title_justify="left", title_style="bold", box=None, show_header=True,
              header_style="dim", pad_edge=False)
    for key, label in cols:
        wide = key in ("name", "after", "launched_by")
        t.add_column(label, overflow="ellipsis", no_wrap=True, max_width=60 if wide else None,
                     min_width=None if wide else len(label) + 7 if key in ("gap_ns", "total_ns") else None,
                     ratio=1 if wide else None, justify="right" if key in _RIGHT else "left")
    columns = [table.cells(key)[:rows] for key, _ in cols]
    for row in zip(*columns):
        t.add_row(*row)
    return t


def _rank_table(view: ReportView) -> Any:
    rt = view.rank_table
    t = Table(title=f"{view.rank_count} ranks", title_justify="left", title_style="bold", box=None,
              header_style="bold", pad_edge=False)
    keep = [rt.columns.index(c) for c in RANK_COLUMNS]
    for col in RANK_COLUMNS:
        if col == "file":
            t.add_column(col, overflow="ellipsis", no_wrap=True, min_width=8, max_width=24)
        elif col == "verdict":
            t.add_column(col, overflow="fold", ratio=2, min_width=12)
        else:
            t.add_column(col, justify="right", no_wrap=True, min_width=len(col))
    for row in rt.rows:
        t.add_row(*(row[i] for i in keep))
    items: list[Any] = [t]
    if rt.left_out:
        items.append(Text(f"{rt.left_out} more ranks in --format md, html or json", style="dim"))
    return Group(*items)
