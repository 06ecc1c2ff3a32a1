"""The model formula's numbers beside the trace's (``--model CONFIG --tokens-per-step N``).

A stage input, ``estimate_request`` (``tracedoc.estimate.EstimateRequest``), turns this analysis on:
the formula's FLOPs per step and MFU (compared with the FLOPs counted from the trace's shapes),
tokens and samples per second, and the memory the training state and activations need set beside
the trace's measured peak, with the largest micro-batch that fits the device. Without the request
its metrics are None.
"""

from __future__ import annotations

from dataclasses import replace

from ...estimate import AGREEMENT, EstimateRequest
from ...estimate.formulas import flops_per_token, param_count
from ...estimate.memory import USABLE_FRACTION, estimate_memory, largest_micro_batch
from ...model.evidence import MemoryEstimatePart, ModelEstimate
from ...model.metrics import metric_names
from ...model.peaks import device_peak
from ...model.reportstep import report_step
from ...model.trace import Trace
from ..core.registry import Produced, analysis

METRIC_NAMES = metric_names(topic="estimate")  # the metric table's model-formula section


def _compare(ratio: float | None, counted_fraction) -> str:
    if ratio is None:
        return "no trace FLOPs to compare with (the trace records no shapes, or no steps)"
    if abs(ratio - 1) <= AGREEMENT:
        return f"the trace's count agrees with the formula ({ratio:.2f}x)"
    share = (
        f"{counted_fraction:.0%} of compute time has known FLOPs"
        if counted_fraction is not None
        else "the counted share of compute time is unknown"
    )
    if ratio < 1:
        return (
            f"the trace counts {ratio:.2f}x the formula: ops without shapes or without a FLOP model "
            f"(custom/Triton/Transformer Engine kernels; {share}), or fewer tokens per step on this rank "
            "than given"
        )
    return (
        f"the trace counts {ratio:.2f}x the formula: recomputation the trace could not tell apart, "
        "attention without a causal mask where the formula assumes one, layers the config does not list, or "
        "more tokens per step on this rank than given"
    )


@analysis(
    needs=("estimate_request",),
    produces=METRIC_NAMES,
    evidence=("model_estimate", "memory_estimate"),
    reads=(
        "world_size",
        "step_time_p50_ns",
        "window_ns",
        "steps",
        "peak_tflops",
        "has_gpu_ops",
        "model_flops_per_step",
        "flops_counted_fraction",
        "device_memory_bytes",
        "memory_peak_allocated_bytes",
    ),
)
def model_estimate(trace: Trace, inputs) -> Produced:
    """The formula metrics and the ``model_estimate`` / ``memory_estimate`` evidence of a rank."""
    request: EstimateRequest = inputs["estimate_request"]
    spec, setup, tokens = request.spec, request.setup, request.tokens_per_step
    m = dict.fromkeys(METRIC_NAMES)
    warnings = []
    if setup.dp_size is None:
        setup = replace(setup, dp_size=inputs["world_size"] or 1)
    step_ns = report_step(inputs["step_time_p50_ns"], inputs["window_ns"], inputs["steps"]).ns
    per_token = flops_per_token(spec, setup.seq_len)
    formula = per_token.training * tokens
    params = param_count(spec, setup.seq_len)
    device = next((d.name for d in trace.meta.devices if d.name), None)
    peak_row = device_peak(device)
    peak = inputs["peak_tflops"] or (peak_row.tensor_core_tflops if peak_row else None)
    m["formula_flops_per_step"] = formula
    if step_ns:
        m["tokens_per_s"] = tokens / step_ns * 1e9
        m["samples_per_s"] = tokens / setup.seq_len / step_ns * 1e9
        if peak and inputs["has_gpu_ops"]:
            m["formula_mfu"] = formula / step_ns / 1e3 / peak
    trace_flops = inputs["model_flops_per_step"]
    ratio = trace_flops / formula if trace_flops and formula else None
    m["trace_to_formula_flops_ratio"] = ratio
    model_rows = [
        ModelEstimate(
            family=spec.family,
            source=spec.source,
            params=params.total,
            active_params=params.active,
            seq_len=setup.seq_len,
            tokens_per_step=tokens,
            training_flops_per_token=per_token.training,
            attention_flops_share=per_token.attention_scores / per_token.forward,
            formula_flops_per_step=formula,
            trace_flops_per_step=trace_flops,
            step_time_ns=step_ns,
            tokens_per_s=m["tokens_per_s"],
            samples_per_s=m["samples_per_s"],
            formula_mfu=m["formula_mfu"],
            peak_tflops=peak,
            trace_to_formula_flops_ratio=ratio,
            comparison=_compare(ratio, inputs["flops_counted_fraction"]),
        )
    ]
    if m["formula_mfu"] is not None and m["formula_mfu"] > 1:
        warnings.append(
            f"--model: the formula's {formula:.3g} FLOPs per step would need {m['formula_mfu']:.0%} of the GPU's "
            f"{peak:g} TFLOP/s peak in the measured step time; the model config or --tokens-per-step does not "
            "describe this trace (tokens per step are this rank's)"
        )
    mem = estimate_memory(spec, setup)
    m["memory_estimate_bytes"] = mem.total_bytes
    device_bytes = inputs["device_memory_bytes"]
    m["max_micro_batch"] = largest_micro_batch(mem, device_bytes) if device_bytes else None
    measured = inputs["memory_peak_allocated_bytes"]
    memory_rows = [
        MemoryEstimatePart(
            part="weights", bytes=mem.weights_bytes, note=f"{setup.precision}, ZeRO stage {setup.zero_stage}"
        ),
        MemoryEstimatePart(part="gradients", bytes=mem.gradients_bytes, note=""),
        MemoryEstimatePart(
            part="optimizer states",
            bytes=mem.optimizer_bytes,
            note=f"{setup.optimizer}, over {setup.dp_size} data-parallel ranks"
            if setup.zero_stage
            else setup.optimizer,
        ),
        MemoryEstimatePart(
            part="activations",
            bytes=mem.activations_bytes,
            note=f"micro-batch {setup.micro_batch} x {setup.seq_len} tokens, "
            f"{'full checkpointing' if setup.checkpointing else 'no checkpointing'}",
        ),
        MemoryEstimatePart(part="total (estimate)", bytes=mem.total_bytes, note=""),
        MemoryEstimatePart(
            part="measured peak allocated",
            bytes=measured,
            note="from the trace's memory events" if measured is not None else "the trace has no memory events",
        ),
        MemoryEstimatePart(
            part="device memory",
            bytes=device_bytes,
            note=(
                f"largest micro-batch that fits in {USABLE_FRACTION:.0%} of it: {m['max_micro_batch']}"
                if device_bytes
                else "the trace does not record the device's memory"
            ),
        ),
    ]
    return Produced(
        metrics=m, evidence={"model_estimate": model_rows, "memory_estimate": memory_rows}, warnings=warnings
    )
