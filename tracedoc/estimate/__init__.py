"""Model-formula estimates beside a trace: FLOPs per token, tokens/s, model MFU and memory.

``apply_estimate`` adds to a rank result what a model config and the tokens each step processes
say: the formula's FLOPs per step and MFU (compared with the FLOPs counted from the trace's
shapes), tokens and samples per second, and the memory the training state and activations need
set beside the trace's measured peak, with the largest micro-batch that fits the device.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from .config import ModelSpec, load_model_spec
from .formulas import flops_per_token, param_count
from .memory import USABLE_FRACTION, TrainSetup, estimate_memory, largest_micro_batch

__all__ = ["EstimateRequest", "ModelSpec", "TrainSetup", "apply_estimate", "load_model_spec"]

METRIC_NAMES = ("formula_flops_per_step", "formula_mfu", "tokens_per_s", "samples_per_s",
                "trace_to_formula_flops_ratio", "memory_estimate_bytes", "max_micro_batch")
# Trace and formula counts within this of each other agree: the formula leaves out norms, softmax and
# element-wise work, and the trace may miss ops whose shapes were not recorded.
AGREEMENT = 0.10


@dataclass(frozen=True)
class EstimateRequest:
    spec: ModelSpec
    tokens_per_step: int  # tokens this rank processes per step (micro-batch x sequence x accumulation)
    setup: TrainSetup = field(default_factory=TrainSetup)


def _step_time_ns(per_step: list[dict]) -> float | None:
    """Mean step time: last completion - first step start, over the steps (DESIGN.md: Step time)."""
    if not per_step:
        return None
    span = max(r["end_ns"] for r in per_step) - min(r["start_ns"] for r in per_step)
    return span / len(per_step) if span > 0 else None


def _compare(ratio: float | None, counted_fraction) -> str:
    if ratio is None:
        return "no trace FLOPs to compare with (the trace records no shapes, or no steps)"
    if abs(ratio - 1) <= AGREEMENT:
        return f"the trace's count agrees with the formula ({ratio:.2f}x)"
    share = f"{counted_fraction:.0%} of compute time has known FLOPs" if counted_fraction is not None else \
        "the counted share of compute time is unknown"
    if ratio < 1:
        return (f"the trace counts {ratio:.2f}x the formula: ops without shapes or without a FLOP model "
                f"(custom/Triton/Transformer Engine kernels; {share}), or fewer tokens per step on this rank "
                "than given")
    return (f"the trace counts {ratio:.2f}x the formula: recomputation the trace could not tell apart, "
            "attention without a causal mask where the formula assumes one, layers the config does not list, or "
            "more tokens per step on this rank than given")


def apply_estimate(rank, request: EstimateRequest) -> None:
    """Fill the formula metrics and the ``model_estimate`` / ``memory_estimate`` evidence of a rank."""
    from ..model.peaks import device_peak

    spec, setup, tokens = request.spec, request.setup, request.tokens_per_step
    m = rank.metrics
    if setup.dp_size is None:
        setup = replace(setup, dp_size=m.get("world_size") or 1)
    step_ns = rank.metrics.get("step_time_p50_ns") or _step_time_ns(rank.per_step)  # the report's step
    per_token = flops_per_token(spec, setup.seq_len)
    formula = per_token.training * tokens
    params = param_count(spec, setup.seq_len)
    devices = rank.meta.get("devices") or []
    device = next((d.get("name") for d in devices if d.get("name")), None)
    peak_row = device_peak(device)
    peak = m.get("peak_tflops") or (peak_row.tensor_core_tflops if peak_row else None)
    m["formula_flops_per_step"] = formula
    if step_ns:
        m["tokens_per_s"] = tokens / step_ns * 1e9
        m["samples_per_s"] = tokens / setup.seq_len / step_ns * 1e9
        if peak and m.get("has_gpu_ops"):
            m["formula_mfu"] = formula / step_ns / 1e3 / peak
    trace_flops = m.get("model_flops_per_step")
    ratio = trace_flops / formula if trace_flops and formula else None
    m["trace_to_formula_flops_ratio"] = ratio
    rank.evidence["model_estimate"] = [{
        "family": spec.family, "source": spec.source, "params": params.total, "active_params": params.active,
        "seq_len": setup.seq_len, "tokens_per_step": tokens, "training_flops_per_token": per_token.training,
        "attention_flops_share": per_token.attention_scores / per_token.forward,
        "formula_flops_per_step": formula, "trace_flops_per_step": trace_flops, "step_time_ns": step_ns,
        "tokens_per_s": m["tokens_per_s"], "samples_per_s": m["samples_per_s"], "formula_mfu": m["formula_mfu"],
        "peak_tflops": peak, "trace_to_formula_flops_ratio": ratio,
        "comparison": _compare(ratio, m.get("flops_counted_fraction")),
    }]
    if m["formula_mfu"] is not None and m["formula_mfu"] > 1:
        rank.warnings.append(
            f"--model: the formula's {formula:.3g} FLOPs per step would need {m['formula_mfu']:.0%} of the GPU's "
            f"{peak:g} TFLOP/s peak in the measured step time; the model config or --tokens-per-step does not "
            "describe this trace (tokens per step are this rank's)")
    mem = estimate_memory(spec, setup)
    m["memory_estimate_bytes"] = mem.total_bytes
    device_bytes = m.get("device_memory_bytes")
    m["max_micro_batch"] = largest_micro_batch(mem, device_bytes) if device_bytes else None
    measured = m.get("memory_peak_allocated_bytes")
    rank.evidence["memory_estimate"] = [
        {"part": "weights", "bytes": mem.weights_bytes, "note": f"{setup.precision}, ZeRO stage {setup.zero_stage}"},
        {"part": "gradients", "bytes": mem.gradients_bytes, "note": ""},
        {"part": "optimizer states", "bytes": mem.optimizer_bytes,
         "note": f"{setup.optimizer}, over {setup.dp_size} data-parallel ranks" if setup.zero_stage else setup.optimizer},
        {"part": "activations", "bytes": mem.activations_bytes,
         "note": f"micro-batch {setup.micro_batch} x {setup.seq_len} tokens, "
                 f"{'full checkpointing' if setup.checkpointing else 'no checkpointing'}"},
        {"part": "total (estimate)", "bytes": mem.total_bytes, "note": ""},
        {"part": "measured peak allocated", "bytes": measured,
         "note": "from the trace's memory events" if measured is not None else "the trace has no memory events"},
        {"part": "device memory", "bytes": device_bytes,
         "note": (f"largest micro-batch that fits in {USABLE_FRACTION:.0%} of it: {m['max_micro_batch']}"
                  if device_bytes else "the trace does not record the device's memory")},
    ]
