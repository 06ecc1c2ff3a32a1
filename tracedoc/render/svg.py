"""Small helpers for the inline SVG charts of the HTML reports (roofline, trend, job timeline).

Each chart is one ``<svg>`` element written into the page: no script, no network. It scales with its
container (``viewBox`` with ``width: 100%``), so it never makes the page scroll sideways; hover text
is an SVG ``<title>`` inside the mark it describes, which browsers show without any script (the
reports' Content-Security-Policy allows no inline handlers). Labels are placed from an estimate of
their width (``text_width``) so that none runs into another or past the chart's edge.
"""

from __future__ import annotations

import math
from html import escape

CHAR_W = 0.6  # a character's width in ems, generous for the system sans-serif fonts (digits are ~0.55)
# One colour per step category (diff.steps.CATEGORIES), idle causes in greys and warm tones.
CATEGORY_COLOURS = {
    "compute": "#2b5fb3",
    "exposed_comm": "#8e44ad",
    "memcpy": "#16a085",
    "dataloader": "#d35400",
    "host_launch": "#c0392b",
    "sync": "#f1c40f",
    "launch_latency": "#e67e22",
    "other": "#95a5a6",
}
CATEGORY_WORDS = {
    "compute": "compute",
    "exposed_comm": "exposed comm",
    "memcpy": "memcpy",
    "dataloader": "dataloader",
    "host_launch": "host launch",
    "sync": "sync",
    "launch_latency": "launch latency",
    "other": "other idle",
}


def text_width(text: str, font_px: float) -> float:
    """An upper estimate of ``text``'s width in px at ``font_px`` (what label placement avoids)."""
    return len(text) * font_px * CHAR_W


def attr(value: object) -> str:
    return escape(str(value), quote=True)


def title(text: str) -> str:
    """A hover text: the ``<title>`` child of the mark it belongs to (direction controls from a trace
    string isolated, as everywhere in the reports)."""
    from .templating import isolate_bidi

    return f"<title>{escape(isolate_bidi(text), quote=False)}</title>"


def label(
    x: float,
    y: float,
    text: str,
    *,
    size: float = 11,
    anchor: str = "start",
    cls: str = "lbl",
    fill: str | None = None,
    weight: str | None = None,
) -> str:
    extra = (f' fill="{attr(fill)}"' if fill else "") + (f' font-weight="{attr(weight)}"' if weight else "")
    from .templating import isolate_bidi

    return (
        f'<text class="{cls}" x="{x:.1f}" y="{y:.1f}" font-size="{size:g}" text-anchor="{anchor}"{extra}>'
        f"{escape(isolate_bidi(text), quote=False)}</text>"
    )


def svg_open(width: float, height: float, aria: str, cls: str) -> str:
    return (
        f'<svg class="chart {cls}" viewBox="0 0 {width:.0f} {height:.0f}" width="100%" role="img" '
        f'preserveAspectRatio="xMinYMin meet" aria-label="{attr(aria)}" '
        f'style="display:block;max-width:{width:.0f}px;height:auto;font-family:system-ui,sans-serif">'
    )


def nice_ticks(top: float, count: int = 5) -> list[float]:
    """Round ticks from 0 to at least ``top`` (1, 2, 2.5 or 5 × 10^k apart)."""
    if top <= 0:
        return [0.0, 1.0]
    raw = top / max(1, count - 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(f * power for f in (1, 2, 2.5, 5, 10) if f * power >= raw)
    n = math.ceil(top / step - 1e-9)
    return [i * step for i in range(n + 1)]


def decades(lo: float, hi: float) -> list[float]:
    """Powers of ten spanning [lo, hi] (the gridlines of a log axis); lo and hi positive."""
    a, b = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    return [10.0**k for k in range(a, b + 1)]


def tick_text(value: float) -> str:
    """A tick's label: 0.01, 0.5, 10, 2.5k, 1M."""
    if value == 0:
        return "0"
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= div:
            return f"{value / div:g}{suffix}"
    return f"{value:g}"
