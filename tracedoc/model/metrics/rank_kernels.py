"""One rank's kernel metrics: kernels and launches, Tensor Cores, FLOPs and MFU, the roofline, the model
formula's estimate."""

from __future__ import annotations

import math

from .metric import HIGHER, LOWER, Metric, topic

KERNEL_METRICS: tuple[Metric, ...] = (
    *topic(
        "rank",
        "kernels",
        (
            Metric("kernel_count", "count", None, "kernels in the trace"),
            Metric("kernel_median_ns", "ns", HIGHER, "median kernel duration over the trace's kernels"),
            Metric(
                "kernels_under_10us_fraction",
                "fraction",
                LOWER,
                "share of the trace's kernels shorter than 10 us (of kernel count)",
            ),
            Metric("launches_per_ms", "1/ms", None, "GPU op launches per millisecond of window"),
            Metric("launch_delay_p50_ns", "ns", None, "median of GPU op start minus end of its launch call"),
            Metric("launch_delay_p95_ns", "ns", None, "95th percentile launch delay"),
            Metric(
                "cpu_launch_overhead_fraction",
                "fraction",
                LOWER,
                "CPU time in launch calls / window, less the time "
                "they blocked on a full launch queue (back-pressure, not launch cost)",
            ),
            Metric(
                "launch_queue_depth_max",
                "count",
                None,
                "most GPU ops launched and not yet finished on one stream at "
                "once, from the first step's start (the window's start without a pre-window backlog) to the window's "
                "end",
            ),
            Metric(
                "launch_blocked_calls",
                "count",
                None,
                "launch calls from the first step's start to the window's end "
                "that blocked because their stream's launch queue was full (a Command Buffer Full record, or a call "
                "that began with the queue at capacity and outlasted its kind)",
            ),
            Metric(
                "launch_blocked_fraction",
                "fraction",
                None,
                "host time blocked in launch calls on a full launch "
                "queue, from the first step's start to the window's end, / that span: back-pressure from a busy GPU, "
                "not launch overhead",
            ),
            Metric(
                "launch_period_ns",
                "ns",
                None,
                "the host's time per launch: median interval between consecutive "
                "launch calls of a launching thread, from the first step's start to the window's end; None with fewer "
                "than 3",
            ),
            Metric(
                "host_gap_long_ns",
                "ns",
                None,
                "length from which a GPU idle gap the host launched late for is long "
                "(host work, not dispatch): 10 launch periods, or 1 ms without a launch period",
            ),
            Metric(
                "blocks_per_sm_mean",
                "blocks",
                HIGHER,
                "duration-weighted mean of est. blocks per SM; None when unrecorded",
            ),
            Metric(
                "est_occupancy_mean",
                "percent",
                HIGHER,
                "duration-weighted mean est. achieved occupancy; None when unrecorded",
            ),
            Metric(
                "sm_efficiency",
                "fraction",
                HIGHER,
                "est. SM efficiency over the window, TensorBoard-plugin "
                "definition: min(sum of blocks per SM of running kernels, 1), time-averaged; first GPU; None when "
                "unrecorded",
            ),
            Metric("graph_launches", "count", None, "cudaGraphLaunch calls"),
            Metric("graph_kernels", "count", None, "kernels that ran inside CUDA graphs"),
            Metric(
                "graph_kernel_fraction",
                "fraction",
                None,
                "kernels that ran inside CUDA graphs / kernels; None without kernels",
            ),
        ),
    ),
    *topic(
        "rank",
        "tensor_cores",
        (
            Metric("tensor_core_fraction", "fraction", HIGHER, "compute time in Tensor Core kernels / compute time"),
            Metric(
                "tensor_core_unknown_fraction",
                "fraction",
                None,
                "compute time in kernels whose Tensor Core use is unknown / compute time",
            ),
            Metric(
                "tc_eligible_non_tc_fraction",
                "fraction",
                LOWER,
                "compute time in matmul/conv/attention kernels not on Tensor Cores / compute time",
            ),
            Metric(
                "tensor_core_capable",
                "bool",
                None,
                "the device has Tensor Cores (compute capability >= 7.0); None unknown",
            ),
        ),
    ),
    *topic(
        "rank",
        "flops",
        (
            Metric(
                "model_flops_per_step",
                "FLOPs",
                None,
                "FLOPs of the model's matmul/conv/attention ops per step, "
                "forward and backward as recorded, recomputation excluded; None without shapes or steps",
            ),
            Metric(
                "hardware_flops_per_step",
                "FLOPs",
                None,
                "FLOPs the GPU executed per step: model FLOPs plus "
                "recomputation (activation checkpointing, fused attention backward)",
            ),
            Metric("achieved_tflops", "TFLOP/s", HIGHER, "model FLOPs / step time (window length without steps)"),
            Metric(
                "mfu",
                "fraction",
                HIGHER,
                "achieved_tflops / the device's dense 16-bit Tensor Core peak (the "
                "peak of the dtype carrying most FLOPs where that is higher, fp8, or the device has no 16-bit "
                "peak); None for an unknown GPU. A model in fp32 is not measured against the fp32 peak: that is "
                "dtype_peak_fraction",
            ),
            Metric("hfu", "fraction", HIGHER, "hardware FLOPs per second / the same peak as mfu"),
            Metric(
                "peak_tflops",
                "TFLOP/s",
                None,
                "dense peak used for mfu (device and basis in the flops_summary evidence)",
            ),
            Metric("dtype_peak_tflops", "TFLOP/s", None, "the device's dense peak for the dtype carrying most FLOPs"),
            Metric(
                "dtype_peak_fraction",
                "fraction",
                HIGHER,
                "achieved_tflops / dtype_peak_tflops: how close the "
                "model runs to the peak of the precision it uses (not MFU, which is against peak_tflops)",
            ),
            Metric(
                "tensor_core_mfu",
                "fraction",
                HIGHER,
                "achieved_tflops / the device's dense bf16/fp16 Tensor Core "
                "peak: the rate against what mixed precision can reach",
            ),
            Metric(
                "flops_counted_fraction",
                "fraction",
                None,
                "compute kernel time launched by ops whose FLOPs are counted / compute kernel time",
            ),
            Metric(
                "fp32_flops_fraction",
                "fraction",
                LOWER,
                "share of model FLOPs in fp32 ops that did not run on Tensor Cores (not TF32)",
            ),
            Metric(
                "small_gemm_fraction",
                "fraction",
                LOWER,
                "compute time in matrix products whose shapes are "
                "memory-bound on this device (arithmetic intensity below peak / memory bandwidth) / compute time",
            ),
            Metric(
                "unfused_attention_fraction",
                "fraction",
                LOWER,
                "compute time in explicit softmax and unfused (math) attention ops / compute time",
            ),
        ),
    ),
    *topic(
        "rank",
        "roofline",
        (
            Metric(
                "roofline_gaps",
                "name",
                None,
                "the ops (class, name, input shapes, dtype) whose distance to their roof "
                "costs the most step time, with the share of the roof each reaches and the share of the step it "
                "takes; None without a roofline",
            ),
        ),
    ),
    *topic(
        "rank",
        "estimate",
        (
            Metric(
                "formula_flops_per_step",
                "FLOPs",
                None,
                "training FLOPs per step from the model config: 3 x forward per token x tokens per step",
            ),
            # above 1 when the config given does not describe the trace (the estimate warns), so no upper bound
            Metric(
                "formula_mfu",
                "fraction",
                HIGHER,
                "formula FLOPs per second / the same dense peak as mfu (the 16-bit "
                "Tensor Core peak when the trace gives no dtype)",
                bounds=(0.0, math.inf),
            ),
            Metric("tokens_per_s", "1/s", HIGHER, "tokens per step / step time"),
            Metric("samples_per_s", "1/s", HIGHER, "sequences per step / step time"),
            Metric(
                "trace_to_formula_flops_ratio",
                "x",
                None,
                "model_flops_per_step counted from the trace / formula_flops_per_step",
            ),
            Metric(
                "memory_estimate_bytes",
                "bytes",
                None,
                "estimated weights + gradients + optimizer states + activations per GPU",
            ),
            Metric("max_micro_batch", "count", None, "largest micro-batch whose memory estimate fits the device"),
        ),
    ),
)
