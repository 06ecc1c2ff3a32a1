"""Terminal summary: verdict first, then the numbers behind it, in under a screen."""

from __future__ import annotations

import io
import os
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from ..analyses.idle import CAUSES
from .format import fmt_bytes, fmt_ns, fmt_pct

if TYPE_CHECKING:  # pragma: no cover
    from ..api import AnalysisResult


def renderables(result: "AnalysisResult") -> list[Any]:
    out: list[Any] = []
    if len(result.ranks) > 1:
        out.append(_rank_table(result))
        # Verdict of the worst rank in full, the others by label in the table.
        worst = max(range(len(result.ranks)), key=lambda i: _top_impact(result.verdicts[i] if result.verdicts else None))
        out.append(Text(f"\nDetails for rank {result.ranks[worst].rank} ({os.path.basename(result.ranks[worst].source)}):",
                        style="bold"))
        out.extend(_rank_block(result.ranks[worst], result.verdicts[worst] if result.verdicts else None, brief=True))
        return out
    for r, v in zip(result.ranks, result.verdicts or [None] * len(result.ranks)):
        out.extend(_rank_block(r, v, brief=False))
    return out


def render_text(result: "AnalysisResult", width: int = 100) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, color_system=None, force_terminal=False, highlight=False)
    for item in renderables(result):
        console.print(item)
    return buf.getvalue()


def _top_impact(verdict) -> float:
    if verdict is None or not getattr(verdict, "findings", None):
        return 0.0
    return max((f.impact_fraction or 0.0) for f in verdict.findings)


def _header(r) -> Text:
    env = r.to_dict()["environment"]
    bits = [os.path.basename(r.source)]
    if r.rank is not None:
        bits.append(f"rank {r.rank}" + (f" of {env['world_size']}" if env.get("world_size") else ""))
    if env.get("gpu"):
        bits.append(f"{env['gpu']}" + (f" ×{r.metrics.get('gpu_count')}" if (r.metrics.get("gpu_count") or 0) > 1 else ""))
    if env.get("backend"):
        bits.append(str(env["backend"]))
    return Text("tracedoc · " + " · ".join(bits), style="bold")


def _verdict_lines(v, brief: bool) -> list[Any]:
    out: list[Any] = []
    if v is None:
        return out
    for h in getattr(v, "health", []) or []:
        level = getattr(h, "level", "warning")
        out.append(Text(f"⚠ trace health ({level}): {getattr(h, 'message', h)}", style="yellow"))
    findings = list(getattr(v, "findings", []) or [])
    labels = [f.label for f in findings if getattr(f, "is_verdict", True)]
    top = next((f for f in findings if getattr(f, "is_verdict", True)), None)
    conf = getattr(top, "confidence", None) or getattr(v, "confidence", None)
    if getattr(v, "withheld", False):
        out.append(Text("Verdict withheld: " + (getattr(v, "withheld_reason", "") or "see trace health"), style="bold yellow"))
    elif labels:
        uniq = list(dict.fromkeys(labels))
        out.append(Text(f"Verdict: {', '.join(uniq)}" + (f"  (confidence {conf})" if conf else ""), style="bold red"))
    else:
        out.append(Text("Verdict: no finding" + (f"  (confidence {conf})" if conf else ""), style="bold green"))
    shown = findings[: 3 if brief else 4]
    for i, f in enumerate(shown, 1):
        impact = ""
        if getattr(f, "impact_ms_per_step", None) is not None:
            impact = f" — {f.impact_ms_per_step:.1f} ms/step"
        if getattr(f, "impact_fraction", None) is not None:
            impact += f" ({fmt_pct(f.impact_fraction)} of the step)"
        out.append(Text(f"{i}. [{f.label}] {f.title}{impact}", style="bold"))
        if getattr(f, "what_if_text", None):
            out.append(Text(f"   if fixed: {f.what_if_text}"))
        out.append(Text(f"   {f.message}"))
        # The top finding gets its fixes in full; the others their first fix.
        for fix in (f.fixes or [])[: (2 if brief else 3) if i == 1 else 1]:
            out.append(Text(f"   fix: {fix}"))
        if getattr(f, "expect", None) and i == 1 and not brief:
            out.append(Text(f"   next profile should show: {f.expect}", style="dim"))
    if len(findings) > len(shown):
        rest = findings[len(shown):]
        out.append(Text(f"   +{len(rest)} more: " + ", ".join(f"{f.rule_id} {f.label}" for f in rest)
                        + " (all of them in --format md, html or json)", style="dim"))
    return out


def _rank_block(r, v, brief: bool) -> list[Any]:
    m = r.metrics
    out: list[Any] = [_header(r)]
    out.extend(_verdict_lines(v, brief))
    for w in r.warnings[:3]:
        out.append(Text(f"warning: {w}", style="yellow"))
    steps = m.get("steps") or 0
    step_txt = f"{steps} steps" + (f", step p50 {fmt_ns(m['step_time_p50_ns'])}" if steps else "")
    out.append(Text(f"Window: {fmt_ns(m['window_ns'])} ({r.window.describe()}); {step_txt}", style="dim"))
    if m.get("has_gpu_ops"):
        t = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
        for col in ("GPU busy", "compute", "comm", "exposed comm", "overlap", "memcpy", "idle"):
            t.add_column(col, justify="right")
        t.add_row(fmt_pct(m["gpu_busy_fraction"]), fmt_pct(m["compute_fraction"]), fmt_pct(m["comm_fraction"]),
                  fmt_pct(m["exposed_comm_fraction"]), fmt_pct(m["comm_overlap_fraction"]),
                  fmt_pct(m["memcpy_fraction"]), fmt_pct(m["idle_fraction"]))
        out.append(t)
        causes = ", ".join(f"{c.replace('_', ' ')} {fmt_pct(m[f'idle_{c}_fraction'])}"
                           for c in CAUSES
                           if (m.get(f"idle_{c}_fraction") or 0) >= 0.0005)
        if causes:
            out.append(Text(f"Idle by cause: {causes}"))
        out.append(Text(
            f"Kernels: {m['kernel_count']:,}, median {fmt_ns(m['kernel_median_ns'])}, "
            f"{fmt_pct(m['kernels_under_10us_fraction'])} under 10 µs; launch delay p50 {fmt_ns(m['launch_delay_p50_ns'])}; "
            f"Tensor Cores {fmt_pct(m['tensor_core_fraction'])} of compute"
            + (f" ({fmt_pct(m['tensor_core_unknown_fraction'])} unknown)" if (m.get("tensor_core_unknown_fraction") or 0) > 0.05 else "")))
        if m.get("dataloader_fraction"):
            out.append(Text(f"DataLoader: {fmt_pct(m['dataloader_fraction'])} of the window, "
                            f"stalling the GPU {fmt_pct(m['dataloader_stall_fraction'])}"))
        if m.get("memory_peak_allocated_bytes"):
            out.append(Text(f"Memory: peak allocated {fmt_bytes(m['memory_peak_allocated_bytes'])}, reserved "
                            f"{fmt_bytes(m['memory_peak_reserved_bytes'])} of {fmt_bytes(m['device_memory_bytes'])}"))
        if not brief:
            out.append(_top_table("Top kernels", r.evidence.get("top_kernels", [])[:4],
                                  [("name", "kernel"), ("count", "count"), ("total_ns", "time"), ("share", "share")]))
            out.append(_top_table("Top gaps", r.evidence.get("top_gaps", [])[:3],
                                  [("gap_ns", "gap"), ("stream", "stream"), ("cause", "cause"),
                                   ("after", "next op"), ("launched_by", "launched by")]))
    else:
        held = ", ".join(f"{row['rows']:,} {row['table'].replace('_', ' ')}" for row in r.evidence.get("contents", [])
                         if row["rows"] and row["table"] not in ("gpu_ops", "other_spans"))
        out.append(Text(f"No GPU ops in this trace, so GPU metrics do not apply. It holds {r.meta.get('events', 0):,} "
                        f"events: {held or 'nothing tracedoc analyses'}; {m.get('steps') or 0} steps.", style="yellow"))
    return out


def _top_table(title: str, rows: list[dict], cols: list[tuple[str, str]]) -> Any:
    if not rows:
        return Text("")
    t = Table(title=title, title_justify="left", title_style="bold", box=None, show_header=True,
              header_style="dim", pad_edge=False)
    for key, label in cols:
        wide = key in ("name", "after", "launched_by")
        t.add_column(label, overflow="ellipsis", no_wrap=True, max_width=60 if wide else None,
                     min_width=None if wide else len(label) + 7 if key in ("gap_ns", "total_ns") else None,
                     ratio=1 if wide else None,
                     justify="right" if key in ("count", "total_ns", "share", "gap_ns", "stream") else "left")
    for row in rows:
        t.add_row(*[_cell(key, row.get(key)) for key, _ in cols])
    return t


def _cell(key: str, v: Any) -> str:
    if v is None:
        return "—"
    if key.endswith("_ns"):
        return fmt_ns(v)
    if key == "share":
        return fmt_pct(v)
    return str(v)


def _rank_table(result) -> Any:
    t = Table(title=f"{len(result.ranks)} ranks", title_justify="left", title_style="bold", box=None,
              header_style="bold", pad_edge=False)
    for col in ("rank", "file", "window", "busy", "compute", "exp. comm", "overlap", "DL stall", "verdict"):
        if col == "file":
            t.add_column(col, overflow="ellipsis", no_wrap=True, min_width=8, max_width=24)
        elif col == "verdict":
            t.add_column(col, overflow="fold", ratio=2, min_width=12)
        else:
            t.add_column(col, justify="right", no_wrap=True, min_width=len(col))
    for r, v in zip(result.ranks, result.verdicts or [None] * len(result.ranks)):
        m = r.metrics
        labels = ", ".join(dict.fromkeys(f.label for f in (getattr(v, "findings", []) or [])
                                         if getattr(f, "is_verdict", True))) if v else ""
        if v is not None and getattr(v, "withheld", False):
            labels = "withheld"
        name = os.path.basename(r.source)
        if r.meta.get("pid") is not None and sum(x.source == r.source for x in result.ranks) > 1:
            name = f"pid {r.meta['pid']} · {name}"  # one export, one rank per process
        t.add_row(str(r.rank), name, fmt_ns(m["window_ns"]), fmt_pct(m["gpu_busy_fraction"]),
                  fmt_pct(m["compute_fraction"]), fmt_pct(m["exposed_comm_fraction"]),
                  fmt_pct(m["comm_overlap_fraction"]), fmt_pct(m["dataloader_stall_fraction"]), labels or "—")
    return Group(t)
