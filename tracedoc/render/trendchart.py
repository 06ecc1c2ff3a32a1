"""The trend page's chart (``tracedoc diff A B C -o trend.html``): each run's typical step as one bar,
stacked by category (compute, exposed communication, memcpy, idle by cause), with the verdict labels
that appear or disappear against the base marked above the run where they do. Also the trend's
notebook card (``TrendResult._repr_html_``). Inline SVG, hover text in ``<title>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING

from .format import ms_figure
from .svg import CATEGORY_COLOURS, CATEGORY_WORDS, label, nice_ticks, svg_open, text_width, tick_text, title

if TYPE_CHECKING:  # pragma: no cover
    from ..diff.trend import TrendResult

W = 760.0
LEFT, RIGHT, PLOT_H, BOTTOM = 58.0, 12.0, 220.0, 40.0
FONT = 11.0
LINE = 14.0
MAX_MARK_LINES = 3  # label changes listed above a bar; more are counted in one line


@dataclass
class TrendBar:
    run: str  # "base", "2", "3", ...
    name: str  # the run's path as given
    step_ms: float
    parts_ms: dict[str, float]  # category -> its part of the typical step
    new: list[str] = field(default_factory=list)  # verdict labels this run has and the base has not
    gone: list[str] = field(default_factory=list)  # and the other way round


def trend_bars(t: "TrendResult") -> list[TrendBar]:
    base = t.base
    bars = [
        TrendBar(
            run="base",
            name=base.path,
            step_ms=base.step_ns / 1e6,
            parts_ms={c: v / 1e6 for c, v in (base.category_ns or {}).items()},
        )
    ]
    for i, r in enumerate(t.runs):  # a trend saved by version 1 kept no split: figures only
        bars.append(
            TrendBar(
                run=str(i + 2),
                name=r.path,
                step_ms=r.step_ns / 1e6,
                parts_ms={c: v / 1e6 for c, v in (r.category_ns or {}).items()},
                new=list(r.labels.new),
                gone=list(r.labels.gone),
            )
        )
    return bars


def _marks(bar: TrendBar, slot: float) -> list[tuple[str, str, str]]:
    """(text, colour, hover) lines above a bar: each label that appeared (+) or disappeared (−)."""
    items = [("+ " + x, "#c2352b", f"run {bar.run}: {x} appeared (not in the base)") for x in bar.new] + [
        ("− " + x, "#2f7d32", f"run {bar.run}: {x} disappeared (in the base, not here)") for x in bar.gone
    ]
    if not items:
        return []
    hover = "; ".join(h for _, _, h in items)
    if any(text_width(t, FONT) > slot - 4 for t, _, _ in items):  # too wide for the bar's slot: counts only
        short = " ".join(filter(None, [f"+{len(bar.new)}" if bar.new else "", f"−{len(bar.gone)}" if bar.gone else ""]))
        return [(short, "#c2352b" if bar.new else "#2f7d32", hover)]
    if len(items) > MAX_MARK_LINES:
        items = items[: MAX_MARK_LINES - 1] + [(f"+{len(items) - MAX_MARK_LINES + 1} more", "#5b6577", hover)]
    return [(t, c, hover) for t, c, _ in items]


def trend_chart_svg(bars: list[TrendBar]) -> str:
    """The stacked bars as one ``<svg>``: y is ms per step, one bar per run, base first."""
    if not bars:
        return ""
    slot = (W - LEFT - RIGHT) / len(bars)
    marks = [_marks(b, slot) for b in bars]
    top_h = LINE * (max(len(m) for m in marks) + 1) + 6  # the marks, then the step figure above each bar
    h = top_h + PLOT_H + BOTTOM
    y0, y1 = top_h, top_h + PLOT_H
    ticks = nice_ticks(max(max(b.step_ms, sum(b.parts_ms.values())) for b in bars) or 1.0)
    top = ticks[-1]

    def y(v: float) -> float:
        return y1 - v / top * PLOT_H

    out = [svg_open(W, h, f"step time per run, stacked by category, for {len(bars)} runs", "trend-chart")]
    for v in ticks:
        out.append(f'<line x1="{LEFT:.1f}" x2="{W - RIGHT:.1f}" y1="{y(v):.1f}" y2="{y(v):.1f}" stroke="#dde2ea"/>')
        out.append(label(LEFT - 6, y(v) + 4, tick_text(v), size=FONT, anchor="end", cls="tick"))
    out.append(
        label(14, (y0 + y1) / 2, "ms per step", size=FONT, anchor="middle", cls="axis-title").replace(
            "<text ", f'<text transform="rotate(-90 14 {(y0 + y1) / 2:.1f})" ', 1
        )
    )
    bar_w = min(90.0, slot * 0.6)
    for i, (b, m) in enumerate(zip(bars, marks)):
        cx = LEFT + slot * (i + 0.5)
        x = cx - bar_w / 2
        base = 0.0
        out.append(f'<g class="bar" data-run="{escape(b.run)}">')
        for cat, v in b.parts_ms.items():
            if v <= 0:
                continue
            out.append(
                f'<rect x="{x:.1f}" y="{y(base + v):.2f}" width="{bar_w:.1f}" '
                f'height="{max(0.0, y(base) - y(base + v)):.2f}" fill="{CATEGORY_COLOURS.get(cat, "#999")}">'
                + title(
                    f"run {b.run} ({b.name}): {CATEGORY_WORDS.get(cat, cat)} {ms_figure(v * 1e6)} ms "
                    f"of {ms_figure(b.step_ms * 1e6)} ms"
                )
                + "</rect>"
            )
            base += v
        out.append("</g>")
        figure = ms_figure(b.step_ms * 1e6)
        out.append(
            label(
                cx,
                y(max(base, b.step_ms)) - 4,
                figure if text_width(figure, FONT) < slot - 2 else "",
                size=FONT,
                anchor="middle",
                cls="value",
            )
        )
        for k, (text, colour, hover) in enumerate(m):
            out.append(
                f'<g class="mark">{title(hover)}'
                + label(
                    cx, LINE * (k + 1), text, size=FONT, anchor="middle", cls="mark-text", fill=colour, weight="600"
                )
                + "</g>"
            )
        run_text = "base" if b.run == "base" else f"run {b.run}"
        if text_width(run_text, FONT) > slot - 2:
            run_text = b.run if b.run != "base" else "B"
        out.append(
            f'<g class="run">{title(b.name)}'
            + label(cx, y1 + 16, run_text, size=FONT, anchor="middle", cls="run-text")
            + "</g>"
        )
    out.append(f'<line x1="{LEFT:.1f}" x2="{W - RIGHT:.1f}" y1="{y1:.1f}" y2="{y1:.1f}" stroke="#5b6577"/>')
    out.append("</svg>")
    return "".join(out)


def legend_html(bars: list[TrendBar]) -> str:
    shown = [c for c in CATEGORY_COLOURS if any(b.parts_ms.get(c, 0) > 0 for b in bars)]
    items = "".join(
        f'<span class="key"><i class="swatch" style="background:{CATEGORY_COLOURS[c]}"></i>'
        f"{escape(CATEGORY_WORDS[c])}</span>"
        for c in shown
    )
    return (
        f'<p class="chart-legend">{items}<span class="key"><b style="color:#c2352b">+ label</b> appeared, '
        f'<b style="color:#2f7d32">− label</b> disappeared against the base</span></p>'
    )


def trend_chart(t: "TrendResult") -> str:
    """The chart and its legend, as HTML for the trend page."""
    bars = trend_bars(t)
    return trend_chart_svg(bars) + legend_html(bars)
