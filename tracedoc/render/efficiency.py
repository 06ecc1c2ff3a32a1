"""How fast the model computes, in words for every renderer: model FLOPs, TFLOP/s, MFU and its basis."""

from __future__ import annotations

from .format import fmt_bytes, fmt_flops, fmt_pct, fmt_tflops


def mfu_text(m: dict, evidence: dict) -> str:
    """MFU with the peak, dtype and device it was measured against, or why there is none."""
    row = (evidence.get("flops_summary") or [{}])[0]
    if m.get("mfu") is None:
        return "n/a" + (f" ({row['mfu_missing']})" if row.get("mfu_missing") else "")
    basis = row.get("peak_basis") or f"dense {row.get('dtype')}"
    text = f"{fmt_pct(m['mfu'])} of the {row.get('peak_device')} {basis} peak, {m['peak_tflops']:g} TFLOP/s"
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
    row = (evidence.get("flops_summary") or [{}])[0]
    if not row:
        return []
    if m.get("achieved_tflops") is None and m.get("formula_flops_per_step") is None:
        return [("MFU", mfu_text(m, evidence))]
    items = [("model FLOPs/step", fmt_flops(m.get("model_flops_per_step"))),
             ("achieved", fmt_tflops(m.get("achieved_tflops"))),
             ("MFU", mfu_text(m, evidence))]
    own = dtype_peak_text(m, evidence)
    if own is not None:
        items.append((f"of the {(evidence.get('flops_summary') or [{}])[0].get('dtype')} peak", own))
    items += [("FLOPs known for", "n/a" if m.get("flops_counted_fraction") is None
              else f"{fmt_pct(m['flops_counted_fraction'])} of compute time")]
    if m.get("formula_flops_per_step") is not None:
        items += [("tokens/s", "n/a" if m.get("tokens_per_s") is None else f"{m['tokens_per_s']:,.0f}"),
                  ("samples/s", "n/a" if m.get("samples_per_s") is None else f"{m['samples_per_s']:,.1f}"),
                  ("model MFU (formula)", fmt_pct(m.get("formula_mfu"))),
                  ("trace / formula FLOPs", "n/a" if m.get("trace_to_formula_flops_ratio") is None
                   else f"{m['trace_to_formula_flops_ratio']:.2f}x"),
                  ("memory (estimate)", _memory_text(m))]
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
    row = (evidence.get("flops_summary") or [{}])[0]
    if not row:
        return None
    if m.get("achieved_tflops") is None and m.get("formula_flops_per_step") is None:
        return f"Model FLOPs: n/a: {row.get('note')}"
    return "Model FLOPs: " + "; ".join(f"{label} {value}" for label, value in efficiency_items(m, evidence))
