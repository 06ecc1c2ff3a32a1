"""How fast the model computes, in words for every renderer: model FLOPs, TFLOP/s, MFU and its basis."""

from __future__ import annotations

from ..model.evidence import FlopsSummary
from .format import fmt_bytes, fmt_flops, fmt_pct, fmt_tflops


def _summary(evidence: dict) -> FlopsSummary | None:
    """The ``flops_summary`` row; None where the trace has none."""
    rows = evidence.get("flops_summary")
    return rows[0] if rows else None


def mfu_text(m: dict, evidence: dict) -> str:
    """MFU with the peak, dtype and device it was measured against, or why there is none."""
    row = _summary(evidence)
    if m.get("mfu") is None:
        return "n/a" + (f" ({row.mfu_missing})" if row is not None and row.mfu_missing else "")
    device, basis, dtype = (row.peak_device, row.peak_basis, row.dtype) if row is not None else (None, None, None)
    text = f"{fmt_pct(m['mfu'])} of the {device} {basis or f'dense {dtype}'} peak, {m['peak_tflops']:g} TFLOP/s"
    if m.get("hfu") is not None and fmt_pct(m["hfu"]) != fmt_pct(m["mfu"]):
        text += f"; HFU {fmt_pct(m['hfu'])} with recomputation"
    return text


def dtype_peak_text(m: dict, evidence: dict) -> str | None:
    """The rate against the peak of the dtype used, where that is not the MFU's peak: a different figure,
    shown under the label ``of the fp32 peak`` (``60.4% (67 TFLOP/s dense)``)."""
    frac, peak = m.get("dtype_peak_fraction"), m.get("dtype_peak_tflops")
    if frac is None or peak is None or peak == m.get("peak_tflops"):
        return None
    return f"{fmt_pct(frac)} ({peak:g} TFLOP/s dense)"


def efficiency_items(m: dict, evidence: dict) -> list[tuple[str, str]]:
    """Summary label/value pairs; empty when the trace has nothing to count FLOPs from."""
    row = _summary(evidence)
    if row is None:
        return []
    if m.get("achieved_tflops") is None and m.get("formula_flops_per_step") is None:
        return [("MFU", mfu_text(m, evidence))]
    items = [
        ("model FLOPs/step", fmt_flops(m.get("model_flops_per_step"))),
        ("achieved", fmt_tflops(m.get("achieved_tflops"))),
        ("MFU", mfu_text(m, evidence)),
    ]
    own = dtype_peak_text(m, evidence)
    if own is not None:
        items.append((f"of the {row.dtype} peak", own))
    items += [
        (
            "FLOPs known for",
            "n/a"
            if m.get("flops_counted_fraction") is None
            else f"{fmt_pct(m['flops_counted_fraction'])} of compute time",
        )
    ]
    if m.get("formula_flops_per_step") is not None:
        items += [
            ("tokens/s", "n/a" if m.get("tokens_per_s") is None else f"{m['tokens_per_s']:,.0f}"),
            ("samples/s", "n/a" if m.get("samples_per_s") is None else f"{m['samples_per_s']:,.1f}"),
            ("model MFU (formula)", fmt_pct(m.get("formula_mfu"))),
            (
                "trace / formula FLOPs",
                "n/a" if m.get("trace_to_formula_flops_ratio") is None else f"{m['trace_to_formula_flops_ratio']:.2f}x",
            ),
            ("memory (estimate)", _memory_text(m)),
        ]
    return items


def _memory_text(m: dict) -> str:
    text = fmt_bytes(m.get("memory_estimate_bytes"))
    if m.get("memory_peak_allocated_bytes") is not None:
        text += f" vs {fmt_bytes(m['memory_peak_allocated_bytes'])} measured peak"
    if m.get("max_micro_batch") is not None:
        text += f"; largest micro-batch that fits: {m['max_micro_batch']}"
    return text


def efficiency_line(m: dict, evidence: dict) -> str | None:
    """One line for the terminal summary (the full statement when there is nothing to count)."""
    row = _summary(evidence)
    if row is None:
        return None
    if m.get("achieved_tflops") is None and m.get("formula_flops_per_step") is None:
        return f"Model FLOPs: n/a: {row.note}"
    return "Model FLOPs: " + "; ".join(f"{label} {value}" for label, value in efficiency_items(m, evidence))
