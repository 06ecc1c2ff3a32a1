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
