"""Evidence rows of the FLOP tables: the per-op roofline, the ops furthest below their roof, the FLOP summary."""

from __future__ import annotations

from .row import Row


class RooflineRow(Row):
    """``roofline``: one op, input shapes and dtype, measured against the device's roof (or the row summing
    the rows past the table's cap, whose rates are None)."""

    op: str  # the launching operator (or what stands for it)
    op_class: str  # matmul, conv, attention, elementwise, ... (the FLOP and byte model's class)
    input_shapes: str | None  # the tensor inputs' shapes, "[4096, 2048] x [2048, 8192]"
    dtype: str | None  # the inputs' dtype
    calls: int | None  # calls whose kernels ran in the window
    gpu_ns: int | None  # their kernels' time
    gpu_ns_per_call: float | None  # gpu_ns / calls
    flops: float | None  # FLOPs of the calls (None: not modelled, or some call's unknown)
    bytes: float | None  # bytes moved, by the same rule
    step_fraction: float | None  # the kernels' time (overlaps once) / the analysis window
    note: str | None  # what the numbers rest on
    flops_per_call: float | None  # flops / calls
    bytes_per_call: float | None  # bytes / calls (a lower bound: each tensor read or written once)
    tflops: float | None  # achieved TFLOP/s
    tb_per_s: float | None  # achieved TB/s
    flop_per_byte: float | None  # arithmetic intensity
    ridge_flop_per_byte: float | None  # the device's ridge point for the row's peak
    peak_tflops: int | float | None  # the peak the row is measured against
    bandwidth_tb_per_s: int | float | None  # the device's memory bandwidth
    bound: str | None  # compute or memory
    roof_tflops: int | float | None  # the roof the row can reach at its intensity
    of_roof_fraction: float | None  # share of that roof reached


class BelowRoof(Row):
    """``roofline_below_roof``: a roofline row by the step time its distance to its roof costs."""

    op_class: str  # the FLOP and byte model's class
    op: str  # the launching operator
    input_shapes: str | None  # the tensor inputs' shapes
    dtype: str | None  # the inputs' dtype
    bound: str | None  # compute or memory
    of_roof_fraction: float | None  # share of its roof reached
    step_fraction: float | None  # its kernels' time / the analysis window
    below_roof_step_fraction: float | None  # step_fraction x (1 - of_roof_fraction): the step it would gain at its roof
    calls: int | None  # calls whose kernels ran in the window
    gpu_ns_per_call: float | None  # kernel time per call


class FlopsSummary(Row):
    """``flops_summary``: the one row of model and hardware FLOPs per step, the rate and MFU, the peak they
    are measured against, and what they rest on or why there are none."""

    model_flops_per_step: int | float | None  # FLOPs the model's counted ops need per step
    hardware_flops_per_step: int | float | None  # the same with recomputation
    achieved_tflops: float | None  # model FLOPs per step / the step time
    mfu: float | None  # achieved_tflops / peak_tflops
    hfu: float | None  # with the hardware FLOPs
    dtype: str | None  # the dtype most counted FLOPs ran in
    peak_tflops: int | float | None  # the dense peak MFU is measured against
    peak_basis: str | None  # which peak that is
    dtype_peak_tflops: int | float | None  # the dense peak of the dtype used, where another
    dtype_peak_fraction: float | None  # achieved_tflops / dtype_peak_tflops
    device: str | None  # the GPU the trace names
    peak_device: str | None  # the peak table's entry for it
    peak_source: str | None  # the datasheet the peak comes from
    counted_ops: int | None  # ops with counted FLOPs
    recomputed_ops: int | None  # of them, recomputed (activation checkpointing)
    counted_gpu_ns: int | None  # kernel time of the counted ops
    compute_gpu_ns: int | None  # compute kernel time
    counted_fraction: float | None  # counted_gpu_ns / compute_gpu_ns
    steps: int | None  # steps the rate is over
    mfu_missing: str | None  # why there is no MFU
    note: str | None  # what the numbers rest on


class FlopsByOpClass(Row):
    """``flops_by_op_class``: counted ops whose kernels ran in the window, of one class, pass and dtype."""

    op_class: str  # class and pass, "matmul forward", "attention recompute"
    dtype: str  # the ops' dtype ("unknown" where not recorded)
    ops: int | None  # the ops
    model_flops: float | None  # model FLOPs their kernels in the window ran
    hardware_flops: float | None  # the same with recomputation
    gpu_ns: int | None  # their kernels' time in the window
    tflops: float | None  # hardware FLOPs / that time, ops faster than the peak left out
    peak_tflops: int | float | None  # the dtype's dense peak
    of_peak_fraction: float | None  # tflops / peak_tflops
    note: str | None  # the ops left out of the rate, and why


class FlopsByKernelClass(Row):
    """``flops_by_kernel_class``: kernels of counted ops, of one kind (Tensor Core use) and dtype."""

    kernel_class: str  # "GEMM kernel on Tensor Cores", "helper (elementwise, layout)", ...
    dtype: str  # their ops' dtype ("unknown" where not recorded)
    kernels: int | None  # the kernels
    flops: float | None  # FLOPs they ran (each op's split over its kernels by duration)
    gpu_ns: int | None  # their time
    tflops: float | None  # flops / that time; None for the kernels of ops faster than the peak
    peak_tflops: int | float | None  # the dtype's dense peak
    of_peak_fraction: float | None  # tflops / peak_tflops
    note: str | None  # why a row has no rate


class FlopsNotCounted(Row):
    """``flops_not_counted``: an op left uncounted (with why), or an operator whose kernels take compute time
    without a FLOP model."""

    op: str  # the op
    calls: int | None  # its calls
    gpu_ns: int | None  # its kernels' compute time; None for an op whose shapes do not resolve
    gpu_fraction: float | None  # of the compute time
    reason: str  # why it is not counted


class FlopsPerStep(Row):
    """``flops_per_step``: one step's model FLOPs over its own step time."""

    step: str  # the step's name
    model_flops: float | None  # its model FLOPs
    step_time_ns: int | None  # completion to completion; None for a step a pre-window backlog ran ahead of
    achieved_tflops: float | None  # model_flops / step_time_ns
    mfu: float | None  # achieved_tflops / the MFU's peak


class ModelEstimate(Row):
    """``model_estimate``: with ``--model``, the one row of the formula's parameters, training FLOPs per token
    and per step, the rates over the measured step and how the trace's counted FLOPs compare."""

    family: str  # the model family ("gpt", "llama", "qwen", "moe")
    source: str | None  # where the config came from
    params: int | float | None  # parameters
    active_params: int | float | None  # parameters a token passes through (MoE: the routed experts only)
    seq_len: int | None  # sequence length
    tokens_per_step: int | None  # tokens this rank processes per step
    training_flops_per_token: int | float | None  # forward and backward FLOPs per token
    attention_flops_share: float | None  # attention scores' share of the forward FLOPs
    formula_flops_per_step: int | float | None  # training_flops_per_token x tokens_per_step
    trace_flops_per_step: int | float | None  # the trace's counted model FLOPs per step
    step_time_ns: int | float | None  # the measured step time (a median may fall between two)
    tokens_per_s: float | None  # tokens_per_step / step_time_ns
    samples_per_s: float | None  # sequences per second
    formula_mfu: float | None  # formula FLOPs per step / the step time / the peak
    peak_tflops: int | float | None  # the peak formula_mfu is measured against
    trace_to_formula_flops_ratio: float | None  # trace_flops_per_step / formula_flops_per_step
    comparison: str | None  # what the ratio says
