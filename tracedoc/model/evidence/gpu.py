"""Evidence rows of the GPU op tables: kernels and copies, the operators that launched them, gaps between
them, the launch queue and collectives."""

from __future__ import annotations

from .row import Row


class KernelTotal(Row):
    """``kernel_totals``: one GPU op name in the window (what a diff aligns)."""

    name: str  # the op's name as recorded
    kind: str  # kernel, memcpy, memset
    category: str  # compute, communication, memcpy, memset
    count: int | None  # ops of that name overlapping the window
    total_ns: int | None  # their total time


class TopKernel(Row):
    """``top_kernels``: one of the GPU op names with the most time in the window."""

    name: str  # the op's name as recorded
    kind: str  # kernel, memcpy, memset
    count: int | None  # ops of that name overlapping the window
    total_ns: int | None  # their total time
    mean_ns: float | None  # their mean duration
    max_ns: int | None  # the longest
    share: float | None  # of the time of every GPU op overlapping the window
    category: str  # compute, communication, memcpy, memset
    tensor_core: str  # yes, no, unknown; n/a for copies, memsets and communication


class KernelClass(Row):
    """``kernel_classes``: GPU op time in the window of one class of what the ops compute."""

    kernel_class: str  # GEMM, convolution, attention, elementwise, reduction, communication, memory, other
    count: int | None  # GPU ops of the class
    total_ns: int | None  # their time
    share: float | None  # of the time of every GPU op overlapping the window


class OperatorTotal(Row, omit_defaults=True):
    """``operator_totals``: one CPU operator name with a call whose work is in the window (what a diff aligns)."""

    name: str  # the operator's name as recorded
    calls: int | None  # its calls whose work is in the window
    cpu_ns: int | None  # their inclusive CPU time
    gpu_ops: int | None  # GPU ops they launched directly (innermost operator of each launch) in the window
    gpu_ns: int | None  # those ops' time
    content: str | None = None  # a torch.compile region: the signature of the kernel sequence its first call launched
    content_kernels: int | None = None  # that sequence's length


class TopOperator(Row):
    """``top_operators``: one of the CPU operators whose launched GPU ops took the most time in the window."""

    name: str  # the operator's name as recorded
    calls: int | None  # its calls whose work is in the window
    cpu_ns: int | None  # their inclusive CPU time
    gpu_ops: int | None  # GPU ops they launched directly in the window
    gpu_ns: int | None  # those ops' time
    share: float | None  # of the GPU time launched by any operator


class TopGap(Row):
    """``top_gaps``: a gap between GPU ops on one stream, among those holding the most device-idle time."""

    device: int | None  # the GPU
    stream: int | None  # the stream the gap is on
    start_ns: int | None  # when the op before it ended
    gap_ns: int | None  # its length
    device_idle_ns: int | None  # the part of it no stream of the device ran an op
    cause: str  # the idle cause given most of that part, or device_busy
    before: str  # the op before it
    after: str  # the op after it
    launched_by: str | None  # the CPU op that launched the op after it
    launch_call: str | None  # the launch call of the op after it
    stack: str | None  # the launching op's Python stack, when recorded


class StreamGaps(Row):
    """``stream_gaps``: the gap statistics of one stream."""

    device: int | None  # the GPU
    stream: int | None  # the stream
    count: int | None  # gaps between its ops in the window
    total_ns: int | None  # their total length
    p50_ns: float | None  # median gap
    p95_ns: float | None  # 95th percentile gap
    max_ns: int | None  # the longest
    comm_stream: bool  # most of its op time is communication
    causes_ns: dict[str, int | None]  # its gap time by idle cause, the rest device_busy (other streams running)


class LaunchQueueRow(Row):
    """``launch_queue``: one stream's GPU ops launched and not finished, from the first step's start to the
    window's end, and the launch calls that blocked on a full queue."""

    device: int | None  # the GPU
    stream: int | None  # the stream
    launches: int | None  # launches onto it in that span
    depth_max: int | None  # most ops queued at once
    depth_mean: float | None  # time-weighted mean of the ops queued
    blocked_calls: int | None  # launch calls that waited for a slot in a full queue
    blocked_ns: int | None  # the host time they waited
    series_step_ns: int | None  # the length of each stretch of the series
    series: list[int]  # the most ops queued in each of its equal stretches


class Collective(Row):
    """``collectives``: the communication kernels of one collective type in the window."""

    collective: str  # all_reduce, all_gather, reduce_scatter, ... (unknown where neither kernel nor record names it)
    count: int | None  # its kernels
    total_ns: int | None  # their time
    mean_ns: float | None  # their mean duration
    message_bytes_p50: float | None  # median message size, where recorded
    message_bytes_max: int | None  # the largest message
    algbw_gbps: float | None  # bytes / kernel time of the kernels with a known size
    busbw_gbps: float | None  # algbw_gbps x the collective's bus factor for the group size


class CopyDirection(Row):
    """``memcpy``: the copies of one direction in the window, and the ops and calls that issued them."""

    copy_kind: str  # HtoD, DtoH, DtoD, ...
    count: int | None  # copies
    total_ns: int | None  # their time
    bytes: int | None  # bytes they moved, where recorded
    achieved_gbps: float | None  # bytes / the time of the copies with a known size
    pageable_count: int | None  # copies from or to pageable host memory, where recorded
    pinned_count: int | None  # copies from or to pinned host memory, where recorded
    ops: list[str]  # the operators that issued the most of them, "name (count)"
    calls: list[str]  # the launch calls, "name (count)"


class LaunchTotals(Row, omit_defaults=True):
    """``launch``: the one row of launch totals in the window, and the launch delays' percentiles (left out
    without a launch delay)."""

    launch_calls: int | None  # kernel launch calls
    cpu_launch_overhead_ns: int | None  # host time inside them
    gpu_kernel_ns: int | None  # kernel time in the window
    clock_anomaly_count: int | None  # GPU ops that start before their launch call (clocks out of step)
    launch_delay_p5_ns: float | None = None  # launch call to kernel start, 5th percentile
    launch_delay_p25_ns: float | None = None  # 25th percentile
    launch_delay_p50_ns: float | None = None  # median
    launch_delay_p75_ns: float | None = None  # 75th percentile
    launch_delay_p95_ns: float | None = None  # 95th percentile
    launch_delay_p99_ns: float | None = None  # 99th percentile
