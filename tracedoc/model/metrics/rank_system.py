"""One rank's host and system metrics: synchronizations, memory, kernel gaps, the environment and the
trace's health."""

from __future__ import annotations

from .metric import LOWER, Metric, topic

SYSTEM_METRICS: tuple[Metric, ...] = (
    *topic(
        "rank",
        "sync",
        (
            Metric("sync_fraction", "fraction", LOWER, "CPU time in synchronizing calls / window"),
            Metric(
                "sync_calls", "count", LOWER, "synchronizing calls (stream/device/event sync, sync memcpy, .item())"
            ),
            Metric("sync_memcpy_count", "count", LOWER, "synchronous cudaMemcpy calls"),
            Metric(
                "implicit_sync_calls",
                "count",
                LOWER,
                "calls that synchronize as a side effect (cudaFree/hipFree, "
                "cudaHostAlloc, empty_cache, pageable-copy launches, cudaMalloc while the allocator frees)",
            ),
            Metric("implicit_sync_fraction", "fraction", LOWER, "CPU time in implicitly synchronizing calls / window"),
            Metric(
                "idle_blocked_in_sync_fraction",
                "fraction",
                LOWER,
                "GPU idle while a launching thread is blocked in a "
                "synchronizing call, explicit or implicit (frees, allocations under pressure, pinned allocations, "
                "pageable copies, empty_cache), whatever idle cause the canonical split gave it / window",
            ),
            Metric(
                "idle_host_late_blocked_fraction",
                "fraction",
                LOWER,
                "host_launch idle in gaps of host_gap_long_ns "
                "or more while a launching thread is blocked in a synchronizing call / window: the part of the long "
                "host-late idle that is a sync stall",
            ),
            Metric(
                "sync_blocked_longest_call_ns",
                "ns",
                LOWER,
                "GPU idle time inside the one synchronizing call (on a launching thread) that holds the most of it",
            ),
            Metric(
                "sync_blocked_longest_call_fraction",
                "fraction",
                None,
                "sync_blocked_longest_call_ns / the idle time "
                "while blocked in synchronizing calls (of that idle, not of the window); None when there is none",
            ),
            Metric(
                "sync_blocked_longest_call",
                "name",
                None,
                "that call and the innermost CPU op around it, e.g. "
                "'cudaFree in aten::cudnn_convolution'; None when there is none",
            ),
        ),
    ),
    *topic(
        "rank",
        "memory",
        (
            Metric("memory_peak_allocated_bytes", "bytes", LOWER, "peak allocated device memory from [memory] events"),
            Metric("memory_peak_reserved_bytes", "bytes", LOWER, "peak reserved device memory from [memory] events"),
            Metric("device_memory_bytes", "bytes", None, "total memory of the device"),
            Metric(
                "memory_peak_fraction",
                "fraction",
                LOWER,
                "peak reserved (else allocated) / device memory; None when unknown",
            ),
        ),
    ),
    *topic(
        "rank",
        "gaps",
        (
            Metric("gap_max_ns", "ns", LOWER, "longest gap between GPU ops on one stream"),
            Metric(
                "idle_gap_max_ns",
                "ns",
                LOWER,
                "longest stretch with no GPU op on any stream of the device, inside the window",
            ),
            Metric("gap_p95_ns", "ns", LOWER, "95th percentile gap between GPU ops on a stream"),
        ),
    ),
    *topic(
        "rank",
        "environment",
        (
            Metric("gpu_count", "count", None, "devices with GPU ops"),
            Metric("compute_capability", "version", None, "major.minor of the first GPU, e.g. 8.0; None unknown"),
            Metric("world_size", "count", None, "ranks in the job; None unknown"),
            Metric(
                "backend", "name", None, "distributed backend used for CUDA tensors (nccl, gloo, ...); None unknown"
            ),
            Metric(
                "uses_data_parallel", "bool", None, "torch.nn.DataParallel (single-process multi-GPU) ops are present"
            ),
        ),
    ),
    *topic(
        "rank",
        "health",
        (
            Metric("has_gpu_ops", "bool", None, "the trace has CUDA/HIP kernels, memcpy or memset"),
            Metric("gpu_op_count", "count", None, "kernels, memcpy and memset in the trace"),
            Metric("has_host_events", "bool", None, "the trace has CPU ops or runtime (launch/sync) calls"),
            Metric(
                "launch_link_fraction", "fraction", None, "GPU ops linked to their launch call; None without GPU ops"
            ),
            Metric(
                "unlinked_gpu_ops",
                "name",
                None,
                "the GPU ops without a launch call (most frequent names) and why, "
                "as far as the trace tells (no correlation id, or one no recorded call has; a torch version only "
                "where the trace records one); None when all are linked",
            ),
            Metric("truncated", "bool", None, "the file ended before the trace was complete"),
            Metric("runtime_calls", "count", None, "CUDA/HIP runtime and driver API calls recorded on the host"),
            Metric(
                "profiler_range_events",
                "count",
                None,
                "CUPTI range-profiler records (per-kernel hardware counters, no kernel timings)",
            ),
            Metric(
                "clock_anomaly", "bool", None, "GPU ops start before their launch call by more than 1 ms (clock skew)"
            ),
        ),
    ),
)
