"""The figures of the HTML report's kernel and memory sections: GPU utilisation figures, kernel time by
class as one stacked bar, and the memory curve with its y-axis. Numbers in, view objects out."""

from __future__ import annotations

import math
from typing import Any

from ..model.evidence import KernelClass, MemoryPoint
from .format import fmt_bytes, fmt_ns, fmt_pct
from .views import Caps, Item, MemoryView, Segment

# Kernel classes (``vocab.KERNEL_CLASSES``) as the chart's legend names them.
CLASS_LABELS = {
    "GEMM": "GEMM",
    "convolution": "convolution",
    "attention": "attention",
    "elementwise": "elementwise",
    "reduction": "reduction / norm",
    "communication": "communication",
    "memory": "memory copies and sets",
    "other": "other",
}
# The memory chart's drawing area inside its SVG viewBox (0 0 CHART_W CHART_H): room on the left for
# the y-axis labels, none of the lines on the box's edge.
CHART_W, CHART_H = 640.0, 170.0
PLOT_X0, PLOT_X1, PLOT_Y0, PLOT_Y1 = 78.0, 630.0, 10.0, 150.0


def gpu_figures(m: dict) -> list[Item]:
    """GPU utilisation, SM efficiency and achieved occupancy as labelled figures ("not recorded" when the
    trace lacks the kernel launch statistics they come from)."""
    occupancy = m.get("est_occupancy_mean")
    rows = [
        ("gpu_busy_fraction", "GPU utilisation", fmt_pct(m.get("gpu_busy_fraction"))),
        (
            "sm_efficiency",
            "SM efficiency (est.)",
            fmt_pct(m["sm_efficiency"]) if m.get("sm_efficiency") is not None else "not recorded",
        ),
        (
            "est_occupancy_mean",
            "achieved occupancy (est.)",
            f"{occupancy:.1f}%" if occupancy is not None else "not recorded",
        ),
        (
            "blocks_per_sm_mean",
            "blocks per SM (mean)",
            f"{m['blocks_per_sm_mean']:.2f}" if m.get("blocks_per_sm_mean") is not None else "not recorded",
        ),
    ]
    return [Item(key=k, label=label, value=value) for k, label, value in rows]


def kernel_class_bar(rows: list[KernelClass]) -> list[Segment]:
    """GPU op time by class as segments of one bar; widths are shares of the classes' total time."""
    total = sum(r.total_ns or 0 for r in rows)
    if total <= 0:
        return []
    return [
        Segment(
            key=str(r.kernel_class).lower(),
            label=CLASS_LABELS.get(r.kernel_class, r.kernel_class),
            pct=fmt_pct(r.total_ns / total),
            width=round(100 * r.total_ns / total, 3),
            ns=int(r.total_ns),
            time=fmt_ns(r.total_ns),
        )
        for r in rows
        if (r.total_ns or 0) > 0
    ]


def nice_ceiling(value: float) -> float:
    """The smallest 1, 2, 2.5 or 5 × 10^k at or above ``value`` (the top of an axis)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(f * power for f in (1, 2, 2.5, 5, 10) if f * power >= value)


def memory_view(m: dict, curve: list[MemoryPoint], origin: int, caps: Caps) -> MemoryView:
    out = MemoryView(
        peak_allocated=fmt_bytes(m.get("memory_peak_allocated_bytes")),
        peak_reserved=fmt_bytes(m.get("memory_peak_reserved_bytes")),
        device_memory=fmt_bytes(m.get("device_memory_bytes")),
        peak_fraction=fmt_pct(m.get("memory_peak_fraction")),
        has_data=bool(m.get("memory_peak_allocated_bytes") or curve),
    )
    if not curve:
        return out
    dev = curve[0].device
    pts = [p for p in curve if p.device == dev]
    if len(pts) > caps.curve_points:
        step = len(pts) / caps.curve_points
        pts = [pts[int(i * step)] for i in range(caps.curve_points)] + [pts[-1]]
    t0, t1 = pts[0].ts_ns, pts[-1].ts_ns
    peak = max(max(p.reserved or 0, p.allocated or 0) for p in pts)
    top = nice_ceiling(peak * 1.05) if peak > 0 else 1.0  # headroom: the highest line stays off the frame
    xs = [
        PLOT_X0 + ((p.ts_ns - t0) / (t1 - t0) if t1 > t0 else i / max(1, len(pts) - 1)) * (PLOT_X1 - PLOT_X0)
        for i, p in enumerate(pts)
    ]

    def y(v: float) -> float:
        return PLOT_Y1 - v / top * (PLOT_Y1 - PLOT_Y0)

    def line(values: list[int | None]) -> str:
        return " ".join(f"{x:.1f},{y(v or 0):.1f}" for x, v in zip(xs, values))

    allocated, reserved = line([p.allocated for p in pts]), line([p.reserved for p in pts])

    ticks: list[dict[str, Any]] = [
        {"y": round(y(top * f), 1), "label": fmt_bytes(top * f)} for f in (0, 0.25, 0.5, 0.75, 1)
    ]
    out.curve = {
        "allocated": allocated,
        "reserved": reserved,
        "reserved_area": f"{PLOT_X0:.1f},{PLOT_Y1:.1f} {reserved} {xs[-1]:.1f},{PLOT_Y1:.1f}",
        "device": dev,
        "top": fmt_bytes(top),
        "span": fmt_ns(t1 - t0),
        "start": "+" + fmt_ns(t0 - origin),
        "points": len(pts),
        "ticks": ticks,
        "width": CHART_W,
        "height": CHART_H,
        "x0": PLOT_X0,
        "x1": PLOT_X1,
        "y0": PLOT_Y0,
        "y1": PLOT_Y1,
    }
    return out
