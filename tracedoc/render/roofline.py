"""The per-op roofline as a view every renderer shows: formatted cells, a raw sort key per cell (the
HTML table sorts on them), and the device roof it is measured against. Reads the ``roofline``
evidence rows (tracedoc/analyses/flops/roofline.py); computes nothing new."""

from __future__ import annotations

from dataclasses import dataclass

from ..model.evidence import RooflineRow, check_fields
from .cells import shorten
from .format import fmt_bytes_si, fmt_flops, fmt_ns, fmt_pct, fmt_rate
from .rooflineplot import roofline_legend, roofline_svg


@dataclass(frozen=True)
class RoofColumn:
    """A column of the roofline table."""

    key: str
    label: str
    num: bool
    title: str = ""


COLUMNS = (
    RoofColumn("op", "op", False),
    RoofColumn("input_shapes", "input shapes", False),
    RoofColumn("dtype", "dtype", False),
    RoofColumn("op_class", "class", False),
    RoofColumn("calls", "calls", True),
    RoofColumn("gpu_ns_per_call", "GPU time/call", True),
    RoofColumn("flops_per_call", "FLOPs/call", True),
    RoofColumn("bytes_per_call", "bytes/call", True, "lower bound: each tensor read or written once"),
    RoofColumn("tflops", "TFLOP/s", True),
    RoofColumn("tb_per_s", "TB/s", True),
    RoofColumn("flop_per_byte", "FLOP/B", True, "arithmetic intensity"),
    RoofColumn("bound", "bound", False, "compute- or memory-bound by the device's ridge point (peak / bandwidth)"),
    RoofColumn(
        "of_roof_fraction",
        "% of roof",
        True,
        "share of the roof reached: of the peak when compute-bound, of the bandwidth when memory-bound",
    ),
    RoofColumn("step_fraction", "% of step", True, "the row's kernel time (overlaps once) / the analysis window"),
)
TEXT_COLUMNS = (
    "op",
    "input_shapes",
    "dtype",
    "calls",
    "gpu_ns_per_call",
    "tflops",
    "tb_per_s",
    "bound",
    "of_roof_fraction",
    "step_fraction",
)
check_fields(RooflineRow, [c.key for c in COLUMNS], "the roofline's COLUMNS")  # a misspelt column fails at import


@dataclass
class RooflineView:
    """The roofline table: cells, sort keys and per-row notes."""

    columns: list[RoofColumn]
    rows: list[list[str]]
    keys: list[list[float | str]]  # sort key per cell: the raw number (or text)
    notes: list[str]  # per row: what the numbers rest on ("" none)
    total: int
    left_out: int
    roof: str  # "H100 SXM: 3.35 TB/s; bf16 989.4 TFLOP/s (ridge 295 FLOP/B) ..."
    coverage: str  # "rows with FLOPs or bytes: 92.1% of compute time"
    plot: str = ""  # the log-log plot as inline SVG and its legend (render/rooflineplot.py); "" with nothing to plot


def cell(key: str, v) -> str:
    if v is None:
        return "—"
    if key == "gpu_ns_per_call":
        return fmt_ns(v)
    if key == "flops_per_call":
        return fmt_flops(v)
    if key == "bytes_per_call":
        return fmt_bytes_si(v)
    if key in ("tflops", "tb_per_s"):
        return fmt_rate(v)
    if key == "flop_per_byte":
        return f"{v:,.1f}" if v >= 1 else f"{v:.3f}"
    if key.endswith("_fraction"):
        return fmt_pct(v)
    if key == "calls":
        return f"{v:,}"
    return str(v)


def _roof_text(rows: list[RooflineRow]) -> str:
    """The device roofs the rows are measured against, once per distinct peak."""
    bw = next((r.bandwidth_tb_per_s for r in rows if r.bandwidth_tb_per_s), None)
    peaks: dict[str, tuple] = {}
    for r in rows:
        if r.peak_tflops and r.dtype:
            kind = "matrix" if r.op_class in ("matmul", "conv", "attention") else "vector"
            label = f"{r.dtype} {kind}" if kind == "matrix" else "CUDA cores"
            peaks.setdefault(label, (r.peak_tflops, r.ridge_flop_per_byte))
    if bw and not peaks:
        return f"memory {bw:g} TB/s"
    if bw is None and not peaks:
        return "none, the device is not in tracedoc's peak table (rates only)"
    parts = [f"memory {bw:g} TB/s"] if bw else []
    parts += [
        f"{k} {p:g} TFLOP/s" + (f" (ridge {ridge:.3g} FLOP/B)" if ridge else "") for k, (p, ridge) in peaks.items()
    ]
    return "; ".join(parts)


def build_roofline(rows: list[RooflineRow] | None, cap: int, name_chars: int = 300) -> RooflineView | None:
    rows = list(rows or [])
    if not rows:
        return None
    shown = rows[:cap]
    total_ns = sum(r.gpu_ns or 0 for r in rows) or 1
    modelled = sum(r.gpu_ns or 0 for r in rows if r.flops is not None or r.bytes is not None)
    return RooflineView(
        columns=list(COLUMNS),
        rows=[[shorten(cell(c.key, getattr(r, c.key)), name_chars) for c in COLUMNS] for r in shown],
        keys=[[_key(getattr(r, c.key), c.num) for c in COLUMNS] for r in shown],
        notes=[r.note or "" for r in shown],
        total=len(rows),
        left_out=max(0, len(rows) - len(shown)),
        roof=_roof_text(rows),
        coverage=f"rows with FLOPs or bytes: {fmt_pct(modelled / total_ns)} of compute time",
        plot=roofline_svg(rows) + roofline_legend(rows),
    )


def _key(v, num: bool):
    if num:
        return -1.0 if v is None else float(v)
    return "" if v is None else str(v)


def text_cells(view: RooflineView, n: int) -> tuple[list[str], list[list[str]]]:
    """Header and the first ``n`` rows of the terminal table (fewer columns)."""
    at = [next(i for i, c in enumerate(view.columns) if c.key == k) for k in TEXT_COLUMNS]
    return [view.columns[i].label for i in at], [[row[i] for i in at] for row in view.rows[:n]]
