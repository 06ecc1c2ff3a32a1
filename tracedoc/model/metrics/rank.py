"""One rank's metrics: what the analyses measure on one trace (docs/definitions.md)."""

from __future__ import annotations

import math

from .metric import HIGHER, LOWER, Metric, topic

RANK_METRICS: tuple[Metric, ...] = (
    *topic("rank", "steps", (
        Metric("window_ns", "ns", None, "length of the analysis window"),
        Metric("steps", "count", None, "ProfilerStep spans (or NVTX step ranges) in the window"),
        Metric("iterations", "count", None, "step times the step statistics are taken over: one per step (one fewer "
               "after a pre-window backlog, whose first step has no step time), or without step spans per repeating "
               "annotation or Optimizer.step stretch the trace shows"),
        Metric("iteration_name", "name", None, "without step spans, the repeating op the iterations were detected "
               "from; None otherwise"),
        Metric("step_time_mean_ns", "ns", LOWER, "mean step time: interval between consecutive step completions"),
        Metric("step_time_p50_ns", "ns", LOWER, "median step time (interval between consecutive step completions)"),
        Metric("step_time_p95_ns", "ns", LOWER, "95th percentile step time (interval between consecutive step "
               "completions)"),
        Metric("backlog_ns", "ns", None, "pre-window backlog: from the capture's start until the GPU began the first "
               "work launched inside it (before that it ran work launched before the profiler opened); None without "
               "one"),
        Metric("backlog_ops", "count", None, "GPU ops of the pre-window backlog (recorded without a launch call: "
               "launched before the capture)"),
        Metric("step_time_tail_ratio", "x", LOWER, "(step_time_p95_ns - step_time_p50_ns) / step_time_p50_ns: how much "
               "longer the slow steps are than the typical one (0: steady steps); None without a step time"),
    )),
    *topic("rank", "breakdown", (
        Metric("gpu_busy_fraction", "fraction", HIGHER, "union of GPU ops (kernels, memcpy, memset) / window"),
        Metric("compute_fraction", "fraction", HIGHER, "union of compute kernels / window"),
        Metric("comm_fraction", "fraction", None, "union of communication kernels / window"),
        Metric("exposed_comm_fraction", "fraction", LOWER, "communication not overlapped by compute / window"),
        Metric("comm_overlap_fraction", "fraction", HIGHER, "share of communication time overlapped by compute; None "
               "without communication"),
        Metric("memcpy_fraction", "fraction", LOWER, "union of memcpy ops / window"),
        Metric("h2d_fraction", "fraction", LOWER, "union of host-to-device copies / window"),
        Metric("exposed_h2d_fraction", "fraction", LOWER, "host-to-device copy time not overlapped by compute / "
               "window"),
        Metric("pageable_memcpy_fraction", "fraction", LOWER, "union of copies from or to pageable host memory / "
               "window"),
        Metric("pageable_memcpy_count", "count", LOWER, "copies from or to pageable host memory"),
        Metric("memset_fraction", "fraction", LOWER, "union of memset ops / window"),
    )),
    *topic("rank", "idle", (
        Metric("idle_fraction", "fraction", LOWER, "window minus GPU busy, / window"),
        Metric("idle_dataloader_fraction", "fraction", LOWER, "idle while the main thread is in DataLoader __next__ / "
               "window"),
        Metric("idle_host_launch_fraction", "fraction", LOWER, "idle because the next op was launched late by the CPU "
               "/ window"),
        Metric("idle_sync_fraction", "fraction", LOWER, "idle while the CPU blocks in a synchronizing call / window"),
        Metric("idle_launch_latency_fraction", "fraction", LOWER, "idle in gaps < 30 us between back-to-back launched "
               "ops / window"),
        Metric("idle_other_fraction", "fraction", LOWER, "idle with no other cause / window"),
        Metric("idle_short_launch_fraction", "fraction", LOWER, "host_launch and launch_latency idle inside idle "
               "gaps shorter than host_gap_long_ns / window: the many-small-gaps signature of a launch-bound loop"),
        Metric("idle_host_long_fraction", "fraction", LOWER, "host_launch idle inside idle gaps of host_gap_long_ns "
               "or more / window: the host launched late because it was busy with other work than launching"),
    )),
    *topic("rank", "dataloader", (
        Metric("dataloader_fraction", "fraction", LOWER, "union of DataLoader __next__ spans / window"),
        Metric("dataloader_stall_fraction", "fraction", LOWER, "DataLoader spans while the GPU is idle / window"),
        Metric("dataloader_multiprocess", "bool", None, "True when the iterator is multi-process, False "
               "single-process, None unknown"),
    )),
    *topic("rank", "kernels", (
        Metric("kernel_count", "count", None, "kernels in the trace"),
        Metric("kernel_median_ns", "ns", HIGHER, "median kernel duration over the trace's kernels"),
        Metric("kernels_under_10us_fraction", "fraction", LOWER, "share of the trace's kernels shorter than 10 us (of "
               "kernel count)"),
        Metric("launches_per_ms", "1/ms", None, "GPU op launches per millisecond of window"),
        Metric("launch_delay_p50_ns", "ns", None, "median of GPU op start minus end of its launch call"),
        Metric("launch_delay_p95_ns", "ns", None, "95th percentile launch delay"),
        Metric("cpu_launch_overhead_fraction", "fraction", LOWER, "CPU time in launch calls / window, less the time "
               "they blocked on a full launch queue (back-pressure, not launch cost)"),
        Metric("launch_queue_depth_max", "count", None, "most GPU ops launched and not yet finished on one stream at "
               "once, from the first step's start (the window's start without a pre-window backlog) to the window's "
               "end"),
        Metric("launch_blocked_calls", "count", None, "launch calls from the first step's start to the window's end "
               "that blocked because their stream's launch queue was full (a Command Buffer Full record, or a call "
               "that began with the queue at capacity and outlasted its kind)"),
        Metric("launch_blocked_fraction", "fraction", None, "host time blocked in launch calls on a full launch "
               "queue, from the first step's start to the window's end, / that span: back-pressure from a busy GPU, "
               "not launch overhead"),
        Metric("launch_period_ns", "ns", None, "the host's time per launch: median interval between consecutive "
               "launch calls of a launching thread, from the first step's start to the window's end; None with fewer "
               "than 3"),
        Metric("host_gap_long_ns", "ns", None, "length from which a GPU idle gap the host launched late for is long "
               "(host work, not dispatch): 10 launch periods, or 1 ms without a launch period"),
        Metric("blocks_per_sm_mean", "blocks", HIGHER, "duration-weighted mean of est. blocks per SM; None when "
               "unrecorded"),
        Metric("est_occupancy_mean", "percent", HIGHER, "duration-weighted mean est. achieved occupancy; None when "
               "unrecorded"),
        Metric("sm_efficiency", "fraction", HIGHER, "est. SM efficiency over the window, TensorBoard-plugin "
               "definition: min(sum of blocks per SM of running kernels, 1), time-averaged; first GPU; None when "
               "unrecorded"),
        Metric("graph_launches", "count", None, "cudaGraphLaunch calls"),
        Metric("graph_kernels", "count", None, "kernels that ran inside CUDA graphs"),
        Metric("graph_kernel_fraction", "fraction", None, "kernels that ran inside CUDA graphs / kernels; None "
               "without kernels"),
    )),
    *topic("rank", "tensor_cores", (
        Metric("tensor_core_fraction", "fraction", HIGHER, "compute time in Tensor Core kernels / compute time"),
        Metric("tensor_core_unknown_fraction", "fraction", None, "compute time in kernels whose Tensor Core use is "
               "unknown / compute time"),
        Metric("tc_eligible_non_tc_fraction", "fraction", LOWER, "compute time in matmul/conv/attention kernels not "
               "on Tensor Cores / compute time"),
        Metric("tensor_core_capable", "bool", None, "the device has Tensor Cores (compute capability >= 7.0); None "
               "unknown"),
    )),
    *topic("rank", "flops", (
        Metric("model_flops_per_step", "FLOPs", None, "FLOPs of the model's matmul/conv/attention ops per step, "
               "forward and backward as recorded, recomputation excluded; None without shapes or steps"),
        Metric("hardware_flops_per_step", "FLOPs", None, "FLOPs the GPU executed per step: model FLOPs plus "
               "recomputation (activation checkpointing, fused attention backward)"),
        Metric("achieved_tflops", "TFLOP/s", HIGHER, "model FLOPs / step time (window length without steps)"),
        Metric("mfu", "fraction", HIGHER, "achieved_tflops / the device's dense 16-bit Tensor Core peak (the "
               "peak of the dtype carrying most FLOPs where that is higher, fp8, or the device has no 16-bit "
               "peak); None for an unknown GPU. A model in fp32 is not measured against the fp32 peak: that is "
               "dtype_peak_fraction"),
        Metric("hfu", "fraction", HIGHER, "hardware FLOPs per second / the same peak as mfu"),
        Metric("peak_tflops", "TFLOP/s", None, "dense peak used for mfu (device and basis in the flops_summary "
               "evidence)"),
        Metric("dtype_peak_tflops", "TFLOP/s", None, "the device's dense peak for the dtype carrying most FLOPs"),
        Metric("dtype_peak_fraction", "fraction", HIGHER, "achieved_tflops / dtype_peak_tflops: how close the "
               "model runs to the peak of the precision it uses (not MFU, which is against peak_tflops)"),
        Metric("tensor_core_mfu", "fraction", HIGHER, "achieved_tflops / the device's dense bf16/fp16 Tensor Core "
               "peak: the rate against what mixed precision can reach"),
        Metric("flops_counted_fraction", "fraction", None, "compute kernel time launched by ops whose FLOPs are "
               "counted / compute kernel time"),
        Metric("fp32_flops_fraction", "fraction", LOWER, "share of model FLOPs in fp32 ops that did not run on Tensor "
               "Cores (not TF32)"),
        Metric("small_gemm_fraction", "fraction", LOWER, "compute time in matrix products whose shapes are "
               "memory-bound on this device (arithmetic intensity below peak / memory bandwidth) / compute time"),
        Metric("unfused_attention_fraction", "fraction", LOWER, "compute time in explicit softmax and unfused (math) "
               "attention ops / compute time"),
    )),
    *topic("rank", "roofline", (
        Metric("roofline_gaps", "name", None, "the ops (class, name, input shapes, dtype) whose distance to their roof "
               "costs the most step time, with the share of the roof each reaches and the share of the step it "
               "takes; None without a roofline"),
    )),
    *topic("rank", "estimate", (
        Metric("formula_flops_per_step", "FLOPs", None, "training FLOPs per step from the model config: 3 x forward "
               "per token x tokens per step"),
        # above 1 when the config given does not describe the trace (the estimate warns), so no upper bound
        Metric("formula_mfu", "fraction", HIGHER, "formula FLOPs per second / the same dense peak as mfu (the 16-bit "
               "Tensor Core peak when the trace gives no dtype)", bounds=(0.0, math.inf)),
        Metric("tokens_per_s", "1/s", HIGHER, "tokens per step / step time"),
        Metric("samples_per_s", "1/s", HIGHER, "sequences per step / step time"),
        Metric("trace_to_formula_flops_ratio", "x", None, "model_flops_per_step counted from the trace / "
               "formula_flops_per_step"),
        Metric("memory_estimate_bytes", "bytes", None, "estimated weights + gradients + optimizer states + "
               "activations per GPU"),
        Metric("max_micro_batch", "count", None, "largest micro-batch whose memory estimate fits the device"),
    )),
    *topic("rank", "sync", (
        Metric("sync_fraction", "fraction", LOWER, "CPU time in synchronizing calls / window"),
        Metric("sync_calls", "count", LOWER, "synchronizing calls (stream/device/event sync, sync memcpy, .item())"),
        Metric("sync_memcpy_count", "count", LOWER, "synchronous cudaMemcpy calls"),
        Metric("implicit_sync_calls", "count", LOWER, "calls that synchronize as a side effect (cudaFree/hipFree, "
               "cudaHostAlloc, empty_cache, pageable-copy launches, cudaMalloc while the allocator frees)"),
        Metric("implicit_sync_fraction", "fraction", LOWER, "CPU time in implicitly synchronizing calls / window"),
        Metric("idle_blocked_in_sync_fraction", "fraction", LOWER, "GPU idle while a launching thread is blocked in a "
               "synchronizing call, explicit or implicit (frees, allocations under pressure, pinned allocations, "
               "pageable copies, empty_cache), whatever idle cause the canonical split gave it / window"),
        Metric("idle_host_late_blocked_fraction", "fraction", LOWER, "host_launch idle in gaps of host_gap_long_ns "
               "or more while a launching thread is blocked in a synchronizing call / window: the part of the long "
               "host-late idle that is a sync stall"),
        Metric("sync_blocked_longest_call_ns", "ns", LOWER, "GPU idle time inside the one synchronizing call (on a "
               "launching thread) that holds the most of it"),
        Metric("sync_blocked_longest_call_fraction", "fraction", None, "sync_blocked_longest_call_ns / the idle time "
               "while blocked in synchronizing calls (of that idle, not of the window); None when there is none"),
        Metric("sync_blocked_longest_call", "name", None, "that call and the innermost CPU op around it, e.g. "
               "'cudaFree in aten::cudnn_convolution'; None when there is none"),
    )),
    *topic("rank", "memory", (
        Metric("memory_peak_allocated_bytes", "bytes", LOWER, "peak allocated device memory from [memory] events"),
        Metric("memory_peak_reserved_bytes", "bytes", LOWER, "peak reserved device memory from [memory] events"),
        Metric("device_memory_bytes", "bytes", None, "total memory of the device"),
        Metric("memory_peak_fraction", "fraction", LOWER, "peak reserved (else allocated) / device memory; None when "
               "unknown"),
    )),
    *topic("rank", "gaps", (
        Metric("gap_max_ns", "ns", LOWER, "longest gap between GPU ops on one stream"),
        Metric("idle_gap_max_ns", "ns", LOWER, "longest stretch with no GPU op on any stream of the device, inside "
               "the window"),
        Metric("gap_p95_ns", "ns", LOWER, "95th percentile gap between GPU ops on a stream"),
    )),
    *topic("rank", "environment", (
        Metric("gpu_count", "count", None, "devices with GPU ops"),
        Metric("compute_capability", "version", None, "major.minor of the first GPU, e.g. 8.0; None unknown"),
        Metric("world_size", "count", None, "ranks in the job; None unknown"),
        Metric("backend", "name", None, "distributed backend used for CUDA tensors (nccl, gloo, ...); None unknown"),
        Metric("uses_data_parallel", "bool", None, "torch.nn.DataParallel (single-process multi-GPU) ops are present"),
    )),
    *topic("rank", "health", (
        Metric("has_gpu_ops", "bool", None, "the trace has CUDA/HIP kernels, memcpy or memset"),
        Metric("gpu_op_count", "count", None, "kernels, memcpy and memset in the trace"),
        Metric("has_host_events", "bool", None, "the trace has CPU ops or runtime (launch/sync) calls"),
        Metric("launch_link_fraction", "fraction", None, "GPU ops linked to their launch call; None without GPU ops"),
        Metric("unlinked_gpu_ops", "name", None, "the GPU ops without a launch call (most frequent names) and why, "
               "as far as the trace tells (no correlation id, or one no recorded call has; a torch version only "
               "where the trace records one); None when all are linked"),
        Metric("truncated", "bool", None, "the file ended before the trace was complete"),
        Metric("runtime_calls", "count", None, "CUDA/HIP runtime and driver API calls recorded on the host"),
        Metric("profiler_range_events", "count", None, "CUPTI range-profiler records (per-kernel hardware counters, "
               "no kernel timings)"),
        Metric("clock_anomaly", "bool", None, "GPU ops start before their launch call by more than 1 ms (clock skew)"),
    )),
)
