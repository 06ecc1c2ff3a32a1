"""Many ranks at a glance (README: the job view, reports of many ranks).

From ``MANY_RANKS`` ranks a report cannot list every rank: the text and Markdown reports show the
ranks that matter -- the stragglers, the median rank and the ranks that wait most -- and one line
per measure summarising the rest (``digest``); the HTML report keeps every rank in a sortable table
and draws rank x step heatmaps of lateness and of wait as inline SVG (``heatmap_svgs``), each cell
one pixel of an embedded PNG (a 1,024 x 64 grid is a few kilobytes, no script, no network), the
straggler's rows marked beside it.

Plain values in (the job's rank table and heatmap grids), view values out; nothing here reads a trace.
"""

from __future__ import annotations

import base64
import struct
import zlib
from typing import TYPE_CHECKING, Any

from ..model.stats import percentile
from .format import fmt_ms, fmt_pct
from .views import DigestRow, DigestView, HeatmapSvgView

if TYPE_CHECKING:  # pragma: no cover
    from ..result import JobResult

MANY_RANKS = 64  # from this many ranks, text and Markdown show the digest, HTML the SVG heatmaps
TOP_WAITERS = 8  # ranks that wait most, shown in full
DIGEST_COLUMNS = ["rank", "why shown", "step p50", "wait/step", "lateness/step", "arrived last", "verdict"]
# pixels per cell: the image is scaled up so a cell is visible; rows of many ranks are thin
MAX_SVG_WIDTH, MAX_SVG_HEIGHT = 720, 1024


def _ms(ns: float | None) -> str:
    return fmt_ms(None if ns is None else ns / 1e6, 2)


def digest(job: "JobResult") -> DigestView:
    """The ranks that matter and a summary of the rest."""
    rows = [r for r in job.ranks if r.rank is not None and r.rank in set(job.ranks_used)]
    why: dict[int, list[str]] = {}
    for s in job.stragglers:
        why.setdefault(s["rank"], []).append(f"straggler ({s.get('confidence', 'high')})")
    if job.median_rank is not None:
        why.setdefault(job.median_rank, []).append("median rank")
    waiters = sorted((r for r in rows if r.wait_ns_per_step is not None), key=lambda r: (-r.wait_ns_per_step, r.rank))
    for r in waiters[:TOP_WAITERS]:
        why.setdefault(r.rank, []).append("waits most")
    latest = sorted(
        (r for r in rows if r.lateness_ns_per_step is not None), key=lambda r: (-r.lateness_ns_per_step, r.rank)
    )
    if latest and latest[0].rank not in why:
        why.setdefault(latest[0].rank, []).append("latest")
    shown = [r for r in rows if r.rank in why]
    order = {"straggler": 0, "latest": 1, "median rank": 3, "waits most": 2}
    shown.sort(key=lambda r: (min(order[w.split(" (")[0]] for w in why[r.rank]), -(r.wait_ns_per_step or 0.0), r.rank))
    out_rows = [
        DigestRow(
            r.rank,
            [
                str(r.rank),
                ", ".join(why[r.rank]),
                _ms(r.step_time_p50_ns),
                _ms(r.wait_ns_per_step),
                _ms(r.lateness_ns_per_step),
                fmt_pct(r.arrived_last_fraction),
                "withheld" if r.withheld else ", ".join(r.labels) or "—",
            ],
        )
        for r in shown
    ]
    rest = [r for r in rows if r.rank not in why]
    return DigestView(columns=list(DIGEST_COLUMNS), rows=out_rows, rest=_rest_lines(rest), total=len(rows))


def _spread(values: list[float]) -> str:
    """median (p10-p90, max) of values in ns, as ms."""
    return (
        f"{_ms(percentile(values, 50))} (p10–p90 {_ms(percentile(values, 10))}–{_ms(percentile(values, 90))}, "
        f"max {_ms(max(values))})"
    )


def _rest_lines(rest: list) -> list[str]:
    """One line per measure over the ranks not shown: its median, p10-p90 and max; their verdicts."""
    if not rest:
        return []
    out = [f"the other {len(rest)} ranks:"]
    for label, key in (
        ("step p50", "step_time_p50_ns"),
        ("wait/step", "wait_ns_per_step"),
        ("lateness/step", "lateness_ns_per_step"),
    ):
        values = [getattr(r, key) for r in rest if getattr(r, key) is not None]
        if values:
            out.append(f"{label} {_spread(values)}")
    last = [r.arrived_last_fraction for r in rest if r.arrived_last_fraction is not None]
    if last:
        out.append(f"arrived last: median {fmt_pct(percentile(last, 50))}, max {fmt_pct(max(last))}")
    labels: dict[str, int] = {}
    for r in rest:
        key = "withheld" if r.withheld else (r.labels[0] if r.labels else "no finding")
        labels[key] = labels.get(key, 0) + 1
    out.append("verdicts: " + ", ".join(f"{k} {n}" for k, n in sorted(labels.items(), key=lambda x: (-x[1], x[0]))))
    return out


# -- heatmaps ----------------------------------------------------------------------------------------

HEAT_KEYS = (
    ("late_ms", "Lateness at the collectives (ms), rank x step"),
    ("wait_ms", "Wait in collectives (ms), rank x step"),
)


def heatmap_svgs(job: "JobResult") -> list[HeatmapSvgView]:
    """Rank x step heatmaps of lateness and of wait, as inline SVG (an embedded PNG of the cells with
    the stragglers' and the top waiter's rows marked)."""
    h = job.heatmap or {}
    if not h or not h.get("ranks") or not h.get("steps"):
        return []
    ranks, steps = list(h["ranks"]), list(h["steps"])
    marks: dict[int, str] = {s["rank"]: "straggler" for s in job.stragglers}
    out = []
    for key, title in HEAT_KEYS:
        grid = h.get(key)
        if not grid:
            continue
        values = [x for row in grid for x in row if x is not None]
        hi = max(values) if values else 0.0
        shades = [[None if x is None else (x / hi if hi > 0 else 0.0) for x in row] for row in grid]
        if key == "wait_ms":  # the rank that waits most, marked too
            totals = [(sum(x for x in row if x is not None), r) for r, row in zip(ranks, grid)]
            if totals:
                top = max(totals)[1]
                marks_here = {**marks, top: marks.get(top, "waits most")}
            else:
                marks_here = marks
        else:
            marks_here = marks
        svg = _svg(shades, ranks, steps, marks_here, title)
        out.append(
            HeatmapSvgView(
                title=title,
                svg=svg,
                note=f"{len(ranks)} ranks x {len(steps)} steps; "
                f"darkest = {hi:.2f} ms; marked: "
                + ", ".join(f"rank {r} ({w})" for r, w in sorted(marks_here.items())),
            )
        )
    return out


def _svg(
    shades: list[list[float | None]], ranks: list[int], steps: list[int], marks: dict[int, str], title: str
) -> str:
    """An SVG of the grid: the cells as a pixel image scaled up, rank and step ticks, marked rows."""
    n_r, n_s = len(ranks), len(steps)
    cell_w = max(1, min(40, (MAX_SVG_WIDTH - 80) // max(n_s, 1)))
    cell_h = max(1, min(12, MAX_SVG_HEIGHT // max(n_r, 1)))
    left, top = 56, 18
    w, hgt = cell_w * n_s, cell_h * n_r
    png = _png(shades)
    uri = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="heat-svg" role="img" width="{left + w + 150}" '
        f'height="{top + hgt + 24}" viewBox="0 0 {left + w + 150} {top + hgt + 24}">',
        f"<title>{_esc(title)}</title>",
        f'<image x="{left}" y="{top}" width="{w}" height="{hgt}" preserveAspectRatio="none" '
        f'style="image-rendering: pixelated" href="{uri}"/>',
        f'<rect x="{left}" y="{top}" width="{w}" height="{hgt}" fill="none" stroke="#999" stroke-width="0.5"/>',
    ]
    tick = max(1, n_r // 8)
    for i in range(0, n_r, tick):
        y = top + i * cell_h + cell_h / 2
        parts.append(f'<text x="{left - 4}" y="{y + 3:.1f}" text-anchor="end" font-size="9">{ranks[i]}</text>')
    stick = max(1, n_s // 12)
    for j in range(0, n_s, stick):
        x = left + j * cell_w + cell_w / 2
        parts.append(f'<text x="{x:.1f}" y="{top - 5}" text-anchor="middle" font-size="9">{steps[j]}</text>')
    parts.append(f'<text x="4" y="{top - 5}" font-size="9">rank \\ step</text>')
    row_of = {r: i for i, r in enumerate(ranks)}
    for r, what in sorted(marks.items(), key=lambda x: row_of.get(x[0], 0)):
        if r not in row_of:
            continue
        y = top + row_of[r] * cell_h + cell_h / 2
        color = "#b00020" if what == "straggler" else "#1f5fa8"
        parts.append(
            f'<g class="heat-mark"><title>rank {r}: {_esc(what)}</title>'
            f'<line x1="{left + w + 2}" y1="{y:.1f}" x2="{left + w + 12}" y2="{y:.1f}" stroke="{color}" '
            f'stroke-width="2"/><text x="{left + w + 15}" y="{y + 3:.1f}" font-size="10" fill="{color}">'
            f"rank {r} {_esc(what)}</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _png(shades: list[list[float | None]]) -> bytes:
    """An RGB PNG, one pixel per cell: white (0) to red (1); grey where there is no value."""
    rows = []
    for row in shades:
        line = bytearray(b"\x00")  # filter: none
        for v in row:
            if v is None:
                line += b"\xdd\xdd\xdd"
            else:
                t = min(max(v, 0.0), 1.0)
                line += bytes((int(255 - 41 * t), int(255 - 186 * t), int(255 - 190 * t)))  # -> rgb(214, 69, 65)
        rows.append(bytes(line))
    width, height = len(shades[0]) if shades else 0, len(shades)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
        + chunk(b"IEND", b"")
    )


def sort_keys(rows: list, columns: list[str]) -> list[list[Any]]:
    """Raw values to sort the job's rank table by (numbers where the column holds numbers)."""
    keys = {
        "rank": "rank",
        "step p50": "step_time_p50_ns",
        "step p95": "step_time_p95_ns",
        "wait/step": "wait_ns_per_step",
        "arrived last": "arrived_last_fraction",
        "lateness/step": "lateness_ns_per_step",
    }
    out = []
    for r in rows:
        line = []
        for c in columns:
            if c in keys:
                v = getattr(r, keys[c])
                line.append(-1e30 if v is None else float(v))
            else:
                line.append("straggler" if r.straggler else "")
        out.append(line)
    return out
