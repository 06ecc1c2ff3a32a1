"""What the analyses produce and who produces it.

``METRICS``: every per-rank metric, name -> (unit, meaning). Rules may reference exactly these
names; the engine validates rule files against this table. Fractions are of the analysis window
unless the meaning says otherwise. A value of ``None`` means "not measurable on this trace" (e.g.
overlap with no communication), never zero.

``EVIDENCE``: every evidence table (lists of row dicts that reports show and rules cite).

``ANALYSES``: the analyses, each registered with ``@analysis(produces=..., evidence=..., needs=...)``
on a function ``(trace, inputs) -> dict``. ``inputs`` holds exactly the named values it needs;
the dict it returns holds exactly the metrics, evidence tables and values (``provides``) it
declares. ``tracedoc.analyses.pipeline`` runs the analyses a request needs, in dependency order,
and raises :class:`ContractError` when an analysis returns more or less than it declared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

METRICS: dict[str, tuple[str, str]] = {
    # window and steps
    "window_ns": ("ns", "length of the analysis window"),
    "steps": ("count", "ProfilerStep spans (or NVTX step ranges) in the window"),
    "iterations": ("count", "step times the step statistics are taken over: one per step (one fewer after a pre-window backlog, whose first step has no step time), or without step spans per repeating annotation or Optimizer.step stretch the trace shows"),
    "iteration_name": ("name", "without step spans, the repeating op the iterations were detected from; None otherwise"),
    "step_time_mean_ns": ("ns", "mean step time: interval between consecutive step completions"),
    "step_time_p50_ns": ("ns", "median step time (interval between consecutive step completions)"),
    "step_time_p95_ns": ("ns", "95th percentile step time (interval between consecutive step completions)"),
    "backlog_ns": ("ns", "pre-window backlog: from the capture's start until the GPU began the first work launched inside it (before that it ran work launched before the profiler opened); None without one"),
    "backlog_ops": ("count", "GPU ops of the pre-window backlog (recorded without a launch call: launched before the capture)"),
    # time breakdown
    "gpu_busy_fraction": ("fraction", "union of GPU ops (kernels, memcpy, memset) / window"),
    "compute_fraction": ("fraction", "union of compute kernels / window"),
    "comm_fraction": ("fraction", "union of communication kernels / window"),
    "exposed_comm_fraction": ("fraction", "communication not overlapped by compute / window"),
    "comm_overlap_fraction": ("fraction", "share of communication time overlapped by compute; None without communication"),
    "memcpy_fraction": ("fraction", "union of memcpy ops / window"),
    "h2d_fraction": ("fraction", "union of host-to-device copies / window"),
    "exposed_h2d_fraction": ("fraction", "host-to-device copy time not overlapped by compute / window"),
    "pageable_memcpy_fraction": ("fraction", "union of copies from or to pageable host memory / window"),
    "pageable_memcpy_count": ("count", "copies from or to pageable host memory"),
    "memset_fraction": ("fraction", "union of memset ops / window"),
    # idle
    "idle_fraction": ("fraction", "window minus GPU busy, / window"),
    "idle_dataloader_fraction": ("fraction", "idle while the main thread is in DataLoader __next__ / window"),
    "idle_host_launch_fraction": ("fraction", "idle because the next op was launched late by the CPU / window"),
    "idle_sync_fraction": ("fraction", "idle while the CPU blocks in a synchronizing call / window"),
    "idle_launch_latency_fraction": ("fraction", "idle in gaps < 30 us between back-to-back launched ops / window"),
    "idle_other_fraction": ("fraction", "idle with no other cause / window"),
    "idle_short_launch_fraction": ("fraction", "host_launch and launch_latency idle inside idle gaps shorter than host_gap_long_ns / window: the many-small-gaps signature of a launch-bound loop"),
    "idle_host_long_fraction": ("fraction", "host_launch idle inside idle gaps of host_gap_long_ns or more / window: the host launched late because it was busy with other work than launching"),
    # DataLoader
    "dataloader_fraction": ("fraction", "union of DataLoader __next__ spans / window"),
    "dataloader_stall_fraction": ("fraction", "DataLoader spans while the GPU is idle / window"),
    "dataloader_multiprocess": ("bool", "True when the iterator is multi-process, False single-process, None unknown"),
    # kernels and launches
    "kernel_count": ("count", "kernels in the trace"),
    "kernel_median_ns": ("ns", "median kernel duration over the trace's kernels"),
    "kernels_under_10us_fraction": ("fraction", "share of the trace's kernels shorter than 10 us (of kernel count)"),
    "launches_per_ms": ("1/ms", "GPU op launches per millisecond of window"),
    "launch_delay_p50_ns": ("ns", "median of GPU op start minus end of its launch call"),
    "launch_delay_p95_ns": ("ns", "95th percentile launch delay"),
    "cpu_launch_overhead_fraction": ("fraction", "CPU time in launch calls / window, less the time they blocked on a full launch queue (back-pressure, not launch cost)"),
    "launch_queue_depth_max": ("count", "most GPU ops launched and not yet finished on one stream at once, from the first step's start (the window's start without a pre-window backlog) to the window's end"),
    "launch_blocked_calls": ("count", "launch calls from the first step's start to the window's end that blocked because their stream's launch queue was full (a Command Buffer Full record, or a call that began with the queue at capacity and outlasted its kind)"),
    "launch_blocked_fraction": ("fraction", "host time blocked in launch calls on a full launch queue, from the first step's start to the window's end, / that span: back-pressure from a busy GPU, not launch overhead"),
    "launch_period_ns": ("ns", "the host's time per launch: median interval between consecutive launch calls of a launching thread, from the first step's start to the window's end; None with fewer than 3"),
    "host_gap_long_ns": ("ns", "length from which a GPU idle gap the host launched late for is long (host work, not dispatch): 10 launch periods, or 1 ms without a launch period"),
    "blocks_per_sm_mean": ("blocks", "duration-weighted mean of est. blocks per SM; None when unrecorded"),
    "est_occupancy_mean": ("percent", "duration-weighted mean est. achieved occupancy; None when unrecorded"),
    "sm_efficiency": ("fraction", "est. SM efficiency over the window, TensorBoard-plugin definition: min(sum of blocks per SM of running kernels, 1), time-averaged; first GPU; None when unrecorded"),
    "graph_launches": ("count", "cudaGraphLaunch calls"),
    "graph_kernels": ("count", "kernels that ran inside CUDA graphs"),
    "graph_kernel_fraction": ("fraction", "kernels that ran inside CUDA graphs / kernels; None without kernels"),
    # Tensor Cores
    "tensor_core_fraction": ("fraction", "compute time in Tensor Core kernels / compute time"),
    "tensor_core_unknown_fraction": ("fraction", "compute time in kernels whose Tensor Core use is unknown / compute time"),
    "tc_eligible_non_tc_fraction": ("fraction", "compute time in matmul/conv/attention kernels not on Tensor Cores / compute time"),
    "tensor_core_capable": ("bool", "the device has Tensor Cores (compute capability >= 7.0); None unknown"),
    # model FLOPs and MFU (from recorded shapes; None when the trace records none)
    "model_flops_per_step": ("FLOPs", "FLOPs of the model's matmul/conv/attention ops per step, forward and backward as recorded, recomputation excluded; None without shapes or steps"),
    "hardware_flops_per_step": ("FLOPs", "FLOPs the GPU executed per step: model FLOPs plus recomputation (activation checkpointing, fused attention backward)"),
    "achieved_tflops": ("TFLOP/s", "model FLOPs / step time (window length without steps)"),
    "mfu": ("fraction", "achieved_tflops / the device's dense peak for the dtype carrying most FLOPs; None for an unknown GPU"),
    "hfu": ("fraction", "hardware FLOPs per second / the same peak as mfu"),
    "peak_tflops": ("TFLOP/s", "dense peak used for mfu (device and dtype in the flops_summary evidence)"),
    "tensor_core_mfu": ("fraction", "achieved_tflops / the device's dense bf16/fp16 Tensor Core peak: the rate against what mixed precision can reach"),
    "flops_counted_fraction": ("fraction", "compute kernel time launched by ops whose FLOPs are counted / compute kernel time"),
    "fp32_flops_fraction": ("fraction", "share of model FLOPs in fp32 ops that did not run on Tensor Cores (not TF32)"),
    "small_gemm_fraction": ("fraction", "compute time in matrix products whose shapes are memory-bound on this device (arithmetic intensity below peak / memory bandwidth) / compute time"),
    "unfused_attention_fraction": ("fraction", "compute time in explicit softmax and unfused (math) attention ops / compute time"),
    "roofline_gaps": ("name", "the ops (class, name, input shapes, dtype) whose distance to their roof costs the most step time, with the share of the roof each reaches and the share of the step it takes; None without a roofline"),
    # model-formula estimates (tracedoc analyze --model CONFIG --tokens-per-step N; None otherwise)
    "formula_flops_per_step": ("FLOPs", "training FLOPs per step from the model config: 3 x forward per token x tokens per step"),
    "formula_mfu": ("fraction", "formula FLOPs per second / the same dense peak as mfu (the 16-bit Tensor Core peak when the trace gives no dtype)"),
    "tokens_per_s": ("1/s", "tokens per step / step time"),
    "samples_per_s": ("1/s", "sequences per step / step time"),
    "trace_to_formula_flops_ratio": ("x", "model_flops_per_step counted from the trace / formula_flops_per_step"),
    "memory_estimate_bytes": ("bytes", "estimated weights + gradients + optimizer states + activations per GPU"),
    "max_micro_batch": ("count", "largest micro-batch whose memory estimate fits the device"),
    # host sync
    "sync_fraction": ("fraction", "CPU time in synchronizing calls / window"),
    "sync_calls": ("count", "synchronizing calls (stream/device/event sync, sync memcpy, .item())"),
    "sync_memcpy_count": ("count", "synchronous cudaMemcpy calls"),
    "implicit_sync_calls": ("count", "calls that synchronize as a side effect (cudaFree/hipFree, cudaHostAlloc, empty_cache, pageable-copy launches, cudaMalloc while the allocator frees)"),
    "implicit_sync_fraction": ("fraction", "CPU time in implicitly synchronizing calls / window"),
    "idle_blocked_in_sync_fraction": ("fraction", "GPU idle while a launching thread is blocked in a synchronizing call, explicit or implicit (frees, allocations under pressure, pinned allocations, pageable copies, empty_cache), whatever idle cause the canonical split gave it / window"),
    "idle_host_late_blocked_fraction": ("fraction", "host_launch idle in gaps of host_gap_long_ns or more while a launching thread is blocked in a synchronizing call / window: the part of the long host-late idle that is a sync stall"),
    "sync_blocked_longest_call_ns": ("ns", "GPU idle time inside the one synchronizing call (on a launching thread) that holds the most of it"),
    "sync_blocked_longest_call_fraction": ("fraction", "sync_blocked_longest_call_ns / the idle time while blocked in synchronizing calls (of that idle, not of the window); None when there is none"),
    "sync_blocked_longest_call": ("name", "that call and the innermost CPU op around it, e.g. 'cudaFree in aten::cudnn_convolution'; None when there is none"),
    # memory
    "memory_peak_allocated_bytes": ("bytes", "peak allocated device memory from [memory] events"),
    "memory_peak_reserved_bytes": ("bytes", "peak reserved device memory from [memory] events"),
    "device_memory_bytes": ("bytes", "total memory of the device"),
    "memory_peak_fraction": ("fraction", "peak reserved (else allocated) / device memory; None when unknown"),
    # gaps
    "gap_max_ns": ("ns", "longest gap between GPU ops on one stream"),
    "idle_gap_max_ns": ("ns", "longest stretch with no GPU op on any stream of the device, inside the window"),
    "gap_p95_ns": ("ns", "95th percentile gap between GPU ops on a stream"),
    # environment
    "gpu_count": ("count", "devices with GPU ops"),
    "compute_capability": ("version", "major.minor of the first GPU, e.g. 8.0; None unknown"),
    "world_size": ("count", "ranks in the job; None unknown"),
    "backend": ("name", "distributed backend used for CUDA tensors (nccl, gloo, ...); None unknown"),
    "uses_data_parallel": ("bool", "torch.nn.DataParallel (single-process multi-GPU) ops are present"),
    # trace health
    "has_gpu_ops": ("bool", "the trace has CUDA/HIP kernels, memcpy or memset"),
    "gpu_op_count": ("count", "kernels, memcpy and memset in the trace"),
    "has_host_events": ("bool", "the trace has CPU ops or runtime (launch/sync) calls"),
    "launch_link_fraction": ("fraction", "GPU ops linked to their launch call; None without GPU ops"),
    "truncated": ("bool", "the file ended before the trace was complete"),
    "runtime_calls": ("count", "CUDA/HIP runtime and driver API calls recorded on the host"),
    "profiler_range_events": ("count", "CUPTI range-profiler records (per-kernel hardware counters, no kernel timings)"),
    "clock_anomaly": ("bool", "GPU ops start before their launch call by more than 1 ms (clock skew)"),
    # job view (tracedoc.job): None for a single trace; ranks of a job see the comm_*/link_* ones
    "job_ranks": ("count", "ranks in the job view"),
    "collectives_matched": ("count", "collective instances found on every member rank of their group"),
    "job_step_time_p50_ns": ("ns", "the job's step: median over ranks of each rank's median step time over its matched steps (those holding a collective matched on every member rank)"),
    "comm_wait_fraction": ("fraction", "share of the job's communication time spent waiting for the last rank to arrive (wait / (wait + transfer)), over matched collectives; per rank a union of intervals, so overlapping collectives count once"),
    "rank_comm_wait_fraction": ("fraction", "share of this rank's matched collective time (union of arrival-to-end intervals) spent waiting for the last rank to arrive; None for a single trace"),
    "comm_top_collective": ("name", "collective type with the most transfer time in the job (all_reduce, all_gather, reduce_scatter, all_to_all, send_recv, ...)"),
    "comm_busbw_gbps": ("GB/s", "median bus bandwidth of the top collective's matched instances of 1 MB or more, from their transfer time"),
    "link_busbw_gbps": ("GB/s", "typical bus bandwidth the job's links give (nccl-tests figures: NVLink by GPU inside one host, InfiniBand across hosts); None unknown"),
    "straggler_count": ("count", "ranks that arrive last at most matched collectives and cost the others a significant wait"),
    "straggler_rank": ("rank", "the straggler that costs the others the most wait"),
    "straggler_confidence": ("name", "how sure the job view is of the straggler: high (the chance test passes over steps), medium (too few steps; it passes over collectives), low (the rank that arrives last most often; too few collectives for a test)"),
    "straggler_cause": ("name", "category in which the straggler's time before its collectives exceeds the median rank's: compute, copy, dataloader, sync, host, other, unknown; host_launch when it is host work that leaves its GPU idle in long host-late gaps"),
    "straggler_cause_ms_per_step": ("ms", "how much longer per step the straggler spends in its cause category than the median rank"),
    "straggler_wait_ms_per_step": ("ms", "wait per step each other rank spends for the straggler: straggler_wait_fraction x the job's step"),
    "straggler_wait_fraction": ("fraction", "share of their step the other ranks spend waiting for the straggler: per rank the median over its matched steps of that wait (a union of intervals) over its median step, then the mean over the ranks"),
    "straggler_arrived_last_fraction": ("fraction", "share of matched collectives the straggler arrives last at"),
}


EVIDENCE: dict[str, str] = {
    "host_operators": "Traces without GPU ops: CPU operators by self time (and total time) in the window.",
    "idle_causes": "Idle time by cause (dataloader, host_launch, sync, launch_latency, other).",
    "idle_other_cpu_ops": "The outermost CPU ops running while the GPU idled for no identified cause, by overlapping time.",
    "host_late_cpu_ops": "CPU operators and user annotations running in the long host-late idle gaps (the GPU waited "
                         "for a launch the host made late, host_gap_long_ns or longer), by name: calls, time inside "
                         "the gaps and self time inside them (less the ops nested in them).",
    "host_late_python": "Python frames (recorded with with_stack) running in the long host-late idle gaps, by name: "
                        "calls, time inside the gaps and self time inside them (less the frames and ops they "
                        "called); empty without with_stack.",
    "top_gaps": "Gaps between GPU ops on one stream holding the most device-idle time (then the longest), with "
                "the ops on both sides, the CPU op that launched the second, the part of the gap the device was "
                "idle (device_idle_ns) and its cause: the idle cause the canonical split gave most of that part, or "
                "device_busy when other streams kept the device busy throughout.",
    "stream_gaps": "Gap statistics per stream; causes_ns splits each stream's gap time by idle cause, the "
                   "rest device_busy (other streams running).",
    "launch_queue": "Per stream: GPU ops launched and not finished from the first step's start to the window's end (maximum, time-weighted mean, and "
                    "the maximum over each of 120 equal stretches, series_step_ns apart), launches, and the launch "
                    "calls that blocked on a full queue and the host time they blocked.",
    "top_kernels": "Kernels (and copies) by total time in the window.",
    "top_operators": "CPU operators by the GPU time of the ops they launched.",
    "kernel_classes": "GPU op time by what the ops compute (GEMM, convolution, attention, elementwise, reduction, "
                      "communication, memory copies and sets, other): count, time, share of GPU op time.",
    "operators_by_shape": "CPU operators grouped by name and recorded input shapes (shapes are kept for matmul, "
                          "convolution and attention ops and for the memory-bound ops the roofline models: "
                          "element-wise, copies, reductions, softmax, normalisation, pooling, optimizers, Triton "
                          "kernels): calls, CPU time, the GPU ops they launched and their time.",
    "operators_by_module": "nn.Module spans (recorded with with_stack or with_modules) grouped by module: calls, "
                           "CPU time, and the GPU time of the ops launched inside them (innermost module).",
    "kernel_totals": "Every GPU op name in the window: kind, category, count and total time (what a diff aligns).",
    "operator_totals": "Every CPU operator name starting in the window: calls, CPU time, and the GPU ops it "
                       "launched and their time (what a diff aligns).",
    "collectives": "Collectives by type: count, time, message sizes, bandwidth.",
    "sync_calls": "Synchronizing calls grouped by operator and call.",
    "implicit_syncs": "Implicitly synchronizing calls grouped by the operator that triggered them and call, with calls per step.",
    "sync_blocked_calls": "The synchronizing calls on the launching threads that hold the most GPU idle time: call, the "
                          "innermost CPU op and user annotation around it, start, duration and the idle time inside it.",
    "memcpy": "Copies by direction: count, time, bytes, pageable and pinned host memory where recorded, "
              "achieved GB/s, and the ops and calls that issued them.",
    "memory_top_allocs": "Largest allocations by operator.",
    "memory_per_device": "Peak memory per device.",
    "memory_curve": "Allocated and reserved bytes over time (ts_ns in the trace's clock).",
    "dataloader": "DataLoader iterator span names seen.",
    "per_step": "Same rows as the rank's per_step.",
    "step_stats": "Total, p50, p95 and max across steps of each per-step quantity.",
    "contents": "Rows per table of the trace, and events of categories tracedoc does not analyse.",
    "launch": "One row of launch totals.",
    "flops_summary": "One row: model and hardware FLOPs per step, achieved TFLOP/s, MFU and HFU, the dtype, peak, "
                     "device and datasheet they are measured against, the share of compute time with known FLOPs, "
                     "and what the numbers rest on or why there are none.",
    "flops_by_op_class": "Counted ops by class (matmul, conv, attention), pass (forward, backward, recompute) and "
                         "dtype: FLOPs, kernel time, TFLOP/s and the share of that dtype's peak.",
    "flops_by_kernel_class": "Kernels of counted ops by Tensor Core use and dtype: FLOPs (each op's split over its "
                             "kernels by duration), time, TFLOP/s, share of peak.",
    "flops_not_counted": "Matmul/conv/attention ops whose recorded shapes do not resolve (with the reason), and the "
                         "operators whose kernels take compute time without a FLOP model.",
    "flops_per_step": "Per step: model FLOPs, step time (completion to completion), achieved TFLOP/s and MFU.",
    "roofline": "Per op, input shapes and dtype: calls, GPU time (total and per call), FLOPs and bytes moved (total "
                "and per call), TFLOP/s, TB/s, arithmetic intensity (FLOP/byte) against the device's ridge point, "
                "compute- or memory-bound, the roof it can reach and the share of it reached, and the share of the "
                "step time its kernels take. Every compute kernel of the window is in one row.",
    "roofline_below_roof": "The roofline rows whose distance to their roof costs the most step time (share of the "
                           "step x (1 - share of the roof reached)): op class, op, shapes, dtype, bound, share of the "
                           "roof, share of the step.",
}


def describe(name: str) -> str:
    unit, meaning = METRICS[name]
    return f"{name} [{unit}]: {meaning}"


class ContractError(RuntimeError):
    """An analysis broke its declaration (a bug in tracedoc, not bad input)."""


@dataclass
class Produced:
    """What one analysis (or a whole run) returns: metrics, evidence tables and values, by name."""

    metrics: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, list[dict]] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Analysis:
    """A registered analysis: the function and what it declares."""

    name: str
    run: Callable[[Any, Mapping[str, Any]], Produced]
    produces: tuple[str, ...]  # metric names (keys of METRICS)
    evidence: tuple[str, ...]  # evidence table names (keys of EVIDENCE)
    provides: tuple[str, ...]  # values other analyses or the result read
    needs: tuple[str, ...]  # values it reads, provided by other analyses
    on_demand: bool  # run only when one of its outputs is asked for by name
    offload: bool = False  # may run in a forked child process while the others run (see offload.py)


ANALYSES: dict[str, Analysis] = {}
# Who produces what: metric, evidence table and value names -> the producing analysis's name.
PRODUCERS: dict[str, dict[str, str]] = {"metrics": {}, "evidence": {}, "values": {}}


def analysis(*, produces: tuple[str, ...] = (), evidence: tuple[str, ...] = (), provides: tuple[str, ...] = (),
             needs: tuple[str, ...] = (), on_demand: bool = False, offload: bool = False) -> Callable:
    """Register ``fn(trace, inputs) -> Produced`` as an analysis with its declared inputs and outputs.

    ``inputs`` maps each name in ``needs`` to the value another analysis provides. ``on_demand``
    analyses (costly ones) are left out of a full run unless an output of theirs is asked for. ``offload``
    ones (long, and waited for by few others) may run in a child process beside the others. Every
    output has one producer; a metric or evidence table must be described in ``METRICS`` / ``EVIDENCE``.
    """

    def register(fn: Callable) -> Callable:
        name = f"{fn.__module__.rsplit('.', 1)[-1]}.{fn.__name__}"
        entry = Analysis(name, fn, tuple(produces), tuple(evidence), tuple(provides), tuple(needs), on_demand,
                         offload)
        undescribed = [m for m in entry.produces if m not in METRICS] + [t for t in entry.evidence if t not in EVIDENCE]
        if undescribed:
            raise ContractError(f"analysis {name} declares {', '.join(map(repr, undescribed))}, which "
                                "registry.METRICS / EVIDENCE do not describe")
        for kind, names in (("metrics", entry.produces), ("evidence", entry.evidence), ("values", entry.provides)):
            for out in names:
                other = PRODUCERS[kind].setdefault(out, name)
                if other != name:
                    raise ContractError(f"{kind} {out!r} is produced by both {other} and {name}")
        ANALYSES[name] = entry
        return fn

    return register
