"""A compact verdict card: the notebook view of a result (``AnalysisResult._repr_html_``; a diff's, a
trend's and a log's too).

The verdict, its confidence, the window and step time, and the top findings with their impact and
first fix; the full report is ``result.to_html()``. Built from the same view model as every report.
"""

from __future__ import annotations

from html import escape
from typing import TYPE_CHECKING

from .viewmodel import build_report
from .views import Caps, FindingView

if TYPE_CHECKING:  # pragma: no cover
    from ..diff.trend import TrendResult
    from ..result import AnalysisResult

CARD_CAPS = Caps(
    table_rows=5, evidence_rows=0, steps=0, ranks=16, name_chars=120, timeline=False, slowest_excerpt=False
)
CARD_FINDINGS = 3
_BOX = "font-family:system-ui,sans-serif;border:1px solid #ccc;border-radius:6px;padding:8px 12px;max-width:900px"
_COLOURS = {"findings": "#b00020", "advice": "#8a6d00", "clean": "#1b7f3b", "withheld": "#8a6d00", "none": "#555"}


def render_card(result: "AnalysisResult") -> str:
    view = build_report(result, CARD_CAPS)
    if not view.ranks:
        return f'<div style="{_BOX}">tracedoc: no ranks were analysed</div>'
    r = view.ranks[0]
    v = r.verdict
    if v.status == "withheld":
        head = "Verdict withheld" + (f": {escape(r.health[0].message)}" if r.health else "")
    elif v.labels:
        head = "Verdict: " + ", ".join(f"<code>{escape(label)}</code>" for label in v.labels)
    else:
        head = "Verdict: no finding"
    conf = f" <small>(confidence {escape(v.confidence)})</small>" if v.confidence else ""
    where = f"rank {view.focus_rank} of {view.rank_count} · " if view.multi_rank else ""
    w = r.window
    steps = w.steps_text or f"{w.steps} step{'' if w.steps == 1 else 's'}"
    rows = "".join(_finding_row(f) for f in r.findings[:CARD_FINDINGS])
    more = len(r.findings) - CARD_FINDINGS
    parts = [
        f'<div style="{_BOX}">',
        f'<div style="font-weight:600;color:{_COLOURS.get(v.status, "#555")}">{head}{conf}</div>',
        f'<div style="color:#555;font-size:90%">{escape(where + " · ".join(r.header))}<br>'
        f"window {escape(w.length)} ({escape(w.description)}); {escape(steps)}</div>",
    ]
    if rows:
        parts.append(f'<ol style="margin:6px 0 0 0;padding-left:20px">{rows}</ol>')
    if more > 0:
        parts.append(
            f'<div style="color:#555;font-size:90%">+{more} more findings: result.to_html() has them all</div>'
        )
    parts.append("</div>")
    return "".join(parts)


def _finding_row(f: FindingView) -> str:
    impact = f" — {escape(f.impact_ms)}" if f.impact_ms else ""
    if f.impact_pct:
        impact += f" ({escape(f.impact_pct)} of {escape(f.impact_of)})"
    fix = f'<br><span style="font-size:90%">fix: {escape(f.fixes[0])}</span>' if f.fixes else ""
    return f"<li><b>[{escape(f.label)}]</b> {escape(f.title)}{impact}{fix}</li>"


def render_diff_card(d) -> str:
    """The notebook view of a ``DiffResult``: the headline, the step split by category before and after,
    labels gone and new, and the base's predictions checked; the full report is ``render_diff_html``."""
    from .diffview import build_diff_view

    v = build_diff_view(d, rows=5, name_chars=120)
    colour = {"regression": "#b00020", "improvement": "#1b7f3b"}.get(v.verdict, "#555")
    rows = "".join(
        f"<tr><td>{escape(c.category)}</td><td style='text-align:right'>{escape(c.before_ms)}</td>"
        f"<td style='text-align:right'>{escape(c.after_ms)}</td>"
        f"<td style='text-align:right'>{escape(c.delta_ms)}</td></tr>"
        for c in v.categories
    )
    parts = [
        f'<div style="{_BOX}">',
        f'<div style="font-weight:600;color:{colour}">tracedoc diff: {escape(v.verdict_words)}</div>',
        f"<div>{escape(v.headline)}</div>",
        f'<div style="color:#555;font-size:90%">{escape(v.before_path)} → {escape(v.after_path)}</div>',
        '<table style="font-size:90%;margin-top:6px"><tr><th>category</th><th>before ms</th><th>after ms</th>'
        f'<th>Δ ms</th></tr>{rows}<tr><th>step</th><th style="text-align:right">{escape(v.step_before)}</th>'
        f'<th style="text-align:right">{escape(v.step_after)}</th>'
        f'<th style="text-align:right">{escape(v.step_delta)} ({escape(v.step_pct)})</th></tr></table>',
    ]
    for p in v.predictions:
        parts.append(f'<div style="font-size:90%">{escape(p.sentence)}</div>')
    if v.warnings:
        parts.append(
            f'<div style="color:#8a6d00;font-size:90%">{len(v.warnings)} warning'
            f"{'s' if len(v.warnings) != 1 else ''}: {escape(v.warnings[0])}</div>"
        )
    parts.append(
        '<div style="color:#555;font-size:90%">tables: d.table("kernels"), d.table("metrics") ...; '
        "the full report: render_diff_html(d)</div></div>"
    )
    return "".join(parts)


def render_log_card(result) -> str:
    """The notebook view of a ``LogResult``: its labels, the first summary lines, the anomalies by kind and
    the top findings; the full report is ``render_log_html``."""
    from collections import Counter

    m = result.metrics
    head = (
        ("Findings: " + ", ".join(f"<code>{escape(x)}</code>" for x in result.labels))
        if result.labels
        else "No finding"
    )
    kinds = Counter(a.get("kind", "?") for a in result.anomalies)
    parts = [
        f'<div style="{_BOX}">',
        f'<div style="font-weight:600;color:{_COLOURS["findings" if result.labels else "clean"]}">{head}</div>',
        f'<div style="color:#555;font-size:90%">{escape(result.source)} ({escape(result.input.format)}): '
        f"{escape(str(m.get('log_points')))} logged steps, {escape(str(m.get('log_first_step')))}-"
        f"{escape(str(m.get('log_last_step')))}</div>",
    ]
    if kinds:
        parts.append(
            '<div style="font-size:90%">anomalies: '
            + ", ".join(f"{escape(k)} ×{n}" for k, n in kinds.most_common())
            + "</div>"
        )
    items = "".join(f"<li><b>[{escape(f.label)}]</b> {escape(f.title)}</li>" for f in result.findings[:CARD_FINDINGS])
    if items:
        parts.append(f'<ol style="margin:6px 0 0 0;padding-left:20px">{items}</ol>')
    parts.append("</div>")
    return "".join(parts)


def render_trend_card(t: "TrendResult") -> str:
    """The notebook view of a ``TrendResult``: the chart, then each run's step and verdict."""
    from .trend import build_trend_view
    from .trendchart import trend_chart

    v = build_trend_view(t)
    rows = "".join(
        f"<tr><td>{escape(r.run)}</td><td>{escape(r.name)}</td><td style='text-align:right'>"
        f"{escape(r.step_ms)}</td><td style='text-align:right'>{escape(r.delta_ms)}</td>"
        f"<td>{escape(r.verdict)}</td><td>{escape(r.labels)}</td></tr>"
        for r in v.rows
    )
    return (
        f'<div style="{_BOX}"><div style="font-weight:600">tracedoc diff: {len(v.rows)} runs, each against the '
        f"first</div>{trend_chart(t)}<table style='font-size:90%'><tr><th>run</th><th>name</th><th>step ms</th>"
        f"<th>Δ ms</th><th>verdict</th><th>labels</th></tr>{rows}</table>"
        '<div style="color:#555;font-size:90%">tables: t.table("runs"), t.table("predictions"); '
        "the full page: t.to_html()</div></div>"
    )
