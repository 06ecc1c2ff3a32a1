"""The per-op roofline as a picture: a log-log plot of arithmetic intensity (FLOP/B) against achieved
TFLOP/s, with the device's memory roof (bandwidth × intensity) and its compute roofs (one per peak the
rows are measured against), one point per roofline row sized by its share of the step. Hovering a point
shows the op, its input shapes, dtype and numbers (an SVG ``<title>``: no script).

Reads the ``roofline`` evidence rows (tracedoc/analyses/flops/roofline.py) as ``roofline.build_roofline`` does;
computes nothing new. Rows without both a FLOP count and a byte count have no place on the plot and
are counted under it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from ..model.evidence import RooflineRow
from .format import fmt_pct
from .svg import decades, label, svg_open, text_width, tick_text, title

W, H = 760.0, 420.0
LEFT, RIGHT, TOP, BOTTOM = 64.0, 14.0, 14.0, 46.0
FONT = 11.0
R_MIN, R_MAX = 3.0, 16.0
# One colour per op class (analyses/flops/roofline.py); others grey.
CLASS_COLOURS = {
    "matmul": "#2b5fb3",
    "conv": "#16a085",
    "attention": "#8e44ad",
    "elementwise": "#d35400",
    "reduction": "#c0392b",
    "normalization": "#e67e22",
    "softmax": "#f1c40f",
    "copy": "#7f8c8d",
    "optimizer": "#27ae60",
    "pooling": "#1abc9c",
    "embedding": "#9b59b6",
    "compiled": "#e84393",
}
OTHER = "#95a5a6"


@dataclass
class Roof:
    label: str
    tflops: float
    ridge: float | None  # FLOP/B where the memory roof meets it (None without a bandwidth)


def _roofs(rows: list[RooflineRow]) -> tuple[float | None, list[Roof]]:
    bw = next((float(r.bandwidth_tb_per_s) for r in rows if r.bandwidth_tb_per_s), None)
    roofs: dict[str, Roof] = {}
    for r in rows:
        peak = r.peak_tflops
        if not peak or not r.dtype:
            continue
        matrix = r.op_class in ("matmul", "conv", "attention")
        name = f"{r.dtype} matrix peak" if matrix else "CUDA-core peak"
        roofs.setdefault(name, Roof(name, float(peak), float(peak) / bw if bw else None))
    merged: dict[float, Roof] = {}  # roofs at one height are one line with one label
    for roof in roofs.values():
        if roof.tflops in merged:
            merged[roof.tflops].label = f"{merged[roof.tflops].label.removesuffix(' peak')} / {roof.label}"
        else:
            merged[roof.tflops] = roof
    return bw, sorted(merged.values(), key=lambda x: -x.tflops)


def plottable(rows: list[RooflineRow]) -> list[RooflineRow]:
    return [r for r in rows if (r.flop_per_byte or 0) > 0 and (r.tflops or 0) > 0]


def roofline_svg(rows: list[RooflineRow] | None) -> str:
    """The plot as one ``<svg>``, or "" when no row has both FLOPs and bytes."""
    rows = list(rows or [])
    points = plottable(rows)
    if not points:
        return ""
    bw, roofs = _roofs(rows)
    xs = [float(r.flop_per_byte) for r in points] + [x.ridge for x in roofs if x.ridge]
    ys = [float(r.tflops) for r in points] + [x.tflops for x in roofs]
    gx, gy = decades(min(xs) / 2, max(xs) * 2), decades(min(ys) / 2, max(ys) * 2)
    x0, x1, y0, y1 = math.log10(gx[0]), math.log10(gx[-1]), math.log10(gy[0]), math.log10(gy[-1])
    pl, pr, pt, pb = LEFT, W - RIGHT, TOP, H - BOTTOM

    def px(v: float) -> float:
        return pl + (math.log10(v) - x0) / (x1 - x0) * (pr - pl)

    def py(v: float) -> float:
        return pb - (math.log10(v) - y0) / (y1 - y0) * (pb - pt)

    out = [
        svg_open(
            W, H, f"roofline: achieved TFLOP/s against arithmetic intensity for {len(points)} op rows", "roofline-plot"
        ),
        f'<rect x="{pl:.1f}" y="{pt:.1f}" width="{pr - pl:.1f}" height="{pb - pt:.1f}" fill="#fafbfc" '
        'stroke="#dde2ea"/>',
    ]
    for k, v in enumerate(gx):  # the end ticks' labels inside the plot's width: clear of the y labels and the edge
        out.append(f'<line x1="{px(v):.1f}" x2="{px(v):.1f}" y1="{pt:.1f}" y2="{pb:.1f}" stroke="#e6e9ef"/>')
        anchor = "start" if k == 0 else "end" if k == len(gx) - 1 else "middle"
        out.append(label(px(v), pb + 15, tick_text(v), size=FONT, anchor=anchor, cls="tick", fill="#5b6577"))
    for v in gy:
        out.append(f'<line x1="{pl:.1f}" x2="{pr:.1f}" y1="{py(v):.1f}" y2="{py(v):.1f}" stroke="#e6e9ef"/>')
        out.append(label(pl - 6, py(v) + 4, tick_text(v), size=FONT, anchor="end", cls="tick", fill="#5b6577"))
    out.append(
        label(
            (pl + pr) / 2,
            H - 8,
            "arithmetic intensity (FLOP/B, log)",
            size=FONT,
            anchor="middle",
            cls="axis-title",
            fill="#5b6577",
        )
    )
    mid = (pt + pb) / 2
    out.append(
        label(14, mid, "achieved TFLOP/s (log)", size=FONT, anchor="middle", cls="axis-title", fill="#5b6577").replace(
            "<text ", f'<text transform="rotate(-90 14 {mid:.1f})" ', 1
        )
    )
    share_max = max(float(r.step_fraction or 0) for r in points) or 1.0

    def radius(r: RooflineRow) -> float:
        return R_MIN + (R_MAX - R_MIN) * math.sqrt(float(r.step_fraction or 0) / share_max)

    dots = [(px(float(r.flop_per_byte)), py(float(r.tflops)), radius(r)) for r in points]
    out += _roof_marks(
        bw,
        roofs,
        px,
        py,
        (pl, pr, pt, pb),
        (gx[0], gx[-1]),
        (gy[0], gy[-1]),
        [(x - d, y - d, x + d, y + d) for x, y, d in dots],
    )
    for r in sorted(points, key=lambda r: -(r.step_fraction or 0)):  # small points drawn over large ones
        share = float(r.step_fraction or 0)
        rad = radius(r)
        colour = CLASS_COLOURS.get(str(r.op_class), OTHER)
        hover = (
            f"{r.op} · {r.input_shapes or 'no shapes'} · {r.dtype or 'no dtype'}\n"
            f"{float(r.tflops):.3g} TFLOP/s at {float(r.flop_per_byte):.3g} FLOP/B; "
            f"{r.bound or 'no roof'}-bound, {fmt_pct(r.of_roof_fraction)} of the roof; "
            f"{r.calls} calls, {fmt_pct(share)} of the step"
        )
        out.append(
            f'<circle class="op-point" cx="{px(float(r.flop_per_byte)):.1f}" '
            f'cy="{py(float(r.tflops)):.1f}" r="{rad:.1f}" fill="{colour}" fill-opacity="0.6" '
            f'stroke="{colour}">{title(hover)}</circle>'
        )
    out.append("</svg>")
    return "".join(out)


def _roof_marks(bw, roofs: list[Roof], px, py, box, xrange, yrange, taken: list) -> list[str]:
    """The memory roof (a diagonal up to the highest peak) and each compute roof (flat from its ridge),
    each labelled where no other label is."""
    pl, pr, pt, pb = box
    out: list[str] = []
    used: list[tuple[float, float, float, float]] = list(taken)  # the points: no label covers one

    y_lo, y_hi = math.log10(yrange[0]), math.log10(yrange[1])

    def diagonal_x(y_px: float) -> float:  # where the memory roof is at this height
        value = 10 ** (y_lo + (pb - y_px) / (pb - pt) * (y_hi - y_lo))
        return px(value / bw)

    def crosses(b: tuple[float, float, float, float]) -> bool:
        if not bw:
            return False
        xs = sorted((diagonal_x(b[1]), diagonal_x(b[3])))
        return xs[1] >= b[0] and xs[0] <= b[2] and b[3] >= py(top if top else yrange[1])

    def place(x: float, y: float, texts: list[str], anchor: str) -> tuple[float, float, str] | None:
        for text in texts:
            w = text_width(text, FONT)
            left = x - w if anchor == "end" else x
            for dy in (0, -13, 13, -26, 26, -39, 39):
                b = (left, y + dy - FONT, left + w, y + dy + 2)
                if b[1] < pt or b[3] > pb or b[0] < pl or b[2] > pr or crosses(b):
                    continue
                if all(b[2] <= u[0] or b[0] >= u[2] or b[3] <= u[1] or b[1] >= u[3] for u in used):
                    used.append(b)
                    return x, y + dy, text
        return None

    top = roofs[0].tflops if roofs else None
    if bw:
        lo_x = xrange[0]
        hi_x = min(xrange[1], top / bw) if top else xrange[1]
        lo_y = bw * lo_x
        while py(lo_y) > pb and lo_x < hi_x:  # clip the diagonal at the plot's floor
            lo_x *= 1.05
            lo_y = bw * lo_x
        out.append(
            f'<line class="roof memory-roof" x1="{px(lo_x):.1f}" y1="{py(lo_y):.1f}" x2="{px(hi_x):.1f}" '
            f'y2="{py(bw * hi_x):.1f}" stroke="#1d2330" stroke-width="2">'
            f"{title(f'memory roof: {bw:g} TB/s × intensity')}</line>"
        )
        text = f"memory {bw:g} TB/s"
        mid = math.sqrt(lo_x * hi_x)  # above and left of the diagonal's middle: the line runs below the label
        at = place(px(mid) - 6, py(bw * mid) - 6, [text, f"{bw:g} TB/s"], "end")
        if at:
            out.append(label(at[0], at[1], at[2], size=FONT, anchor="end", cls="roof-label", fill="#1d2330"))
    for roof in roofs:
        start = roof.ridge if roof.ridge else xrange[0]
        y = py(roof.tflops)
        out.append(
            f'<line class="roof compute-roof" x1="{px(start):.1f}" y1="{y:.1f}" x2="{pr:.1f}" y2="{y:.1f}" '
            f'stroke="#1d2330" stroke-width="1.5" stroke-dasharray="{"0" if roof is roofs[0] else "6 3"}">'
            f"{title(f'{roof.label}: {roof.tflops:g} TFLOP/s')}</line>"
        )
        at = place(pr - 4, y - 4, [f"{roof.label} {roof.tflops:g} TFLOP/s", f"{roof.tflops:g} TFLOP/s"], "end")
        if at:
            out.append(label(at[0], at[1], at[2], size=FONT, anchor="end", cls="roof-label", fill="#1d2330"))
    return out


def roofline_legend(rows: list[RooflineRow] | None) -> str:
    """The op classes on the plot, and how many rows it leaves out, as HTML under it."""
    rows = list(rows or [])
    points = plottable(rows)
    if not points:
        return ""
    classes = sorted({str(r.op_class) for r in points})
    keys = "".join(
        f'<span class="key"><i class="swatch" style="background:{CLASS_COLOURS.get(c, OTHER)}"></i>{escape(c)}</span>'
        for c in classes
    )
    missing = len(rows) - len(points)
    note = (
        (
            f' <span class="key">{missing} row{"s" if missing != 1 else ""} without both FLOPs and bytes not '
            "plotted</span>"
        )
        if missing
        else ""
    )
    return (
        f'<p class="chart-legend">{keys}<span class="key">point area: share of the step; hover a point for '
        f"its op, shapes and dtype</span>{note}</p>"
    )
