"""One rank's time metrics: steps, the GPU time breakdown, idle causes, the input pipeline."""

from __future__ import annotations

from .metric import HIGHER, LOWER, Metric, topic

TIME_METRICS: tuple[Metric, ...] = (
    *topic(
        "rank",
        "steps",
        (
            Metric("window_ns", "ns", None, "length of the analysis window"),
            Metric("steps", "count", None, "ProfilerStep spans (or NVTX step ranges) in the window"),
            Metric(
                "iterations",
                "count",
                None,
                "step times the step statistics are taken over: one per step (one fewer "
                "after a pre-window backlog, whose first step has no step time), or without step spans per repeating "
                "annotation or Optimizer.step stretch the trace shows",
            ),
            Metric(
                "iteration_name",
                "name",
                None,
                "without step spans, the repeating op the iterations were detected from; None otherwise",
            ),
            Metric("step_time_mean_ns", "ns", LOWER, "mean step time: interval between consecutive step completions"),
            Metric("step_time_p50_ns", "ns", LOWER, "median step time (interval between consecutive step completions)"),
            Metric(
                "step_time_p95_ns",
                "ns",
                LOWER,
                "95th percentile step time (interval between consecutive step completions)",
            ),
            Metric(
                "backlog_ns",
                "ns",
                None,
                "pre-window backlog: from the capture's start until the GPU began the first "
                "work launched inside it (before that it ran work launched before the profiler opened); None without "
                "one",
            ),
            Metric(
                "backlog_ops",
                "count",
                None,
                "GPU ops of the pre-window backlog (recorded without a launch call: launched before the capture)",
            ),
            Metric(
                "step_time_tail_ratio",
                "x",
                LOWER,
                "(step_time_p95_ns - step_time_p50_ns) / step_time_p50_ns: how much "
                "longer the slow steps are than the typical one (0: steady steps); None without a step time",
            ),
        ),
    ),
    *topic(
        "rank",
        "breakdown",
        (
            Metric("gpu_busy_fraction", "fraction", HIGHER, "union of GPU ops (kernels, memcpy, memset) / window"),
            Metric("compute_fraction", "fraction", HIGHER, "union of compute kernels / window"),
            Metric("comm_fraction", "fraction", None, "union of communication kernels / window"),
            Metric("exposed_comm_fraction", "fraction", LOWER, "communication not overlapped by compute / window"),
            Metric(
                "comm_overlap_fraction",
                "fraction",
                HIGHER,
                "share of communication time overlapped by compute; None without communication",
            ),
            Metric("memcpy_fraction", "fraction", LOWER, "union of memcpy ops / window"),
            Metric("h2d_fraction", "fraction", LOWER, "union of host-to-device copies / window"),
            Metric(
                "exposed_h2d_fraction", "fraction", LOWER, "host-to-device copy time not overlapped by compute / window"
            ),
            Metric(
                "pageable_memcpy_fraction",
                "fraction",
                LOWER,
                "union of copies from or to pageable host memory / window",
            ),
            Metric("pageable_memcpy_count", "count", LOWER, "copies from or to pageable host memory"),
            Metric("memset_fraction", "fraction", LOWER, "union of memset ops / window"),
        ),
    ),
    *topic(
        "rank",
        "idle",
        (
            Metric("idle_fraction", "fraction", LOWER, "window minus GPU busy, / window"),
            Metric(
                "idle_dataloader_fraction",
                "fraction",
                LOWER,
                "idle while the main thread is in DataLoader __next__ / window",
            ),
            Metric(
                "idle_host_launch_fraction",
                "fraction",
                LOWER,
                "idle because the next op was launched late by the CPU / window",
            ),
            Metric(
                "idle_sync_fraction", "fraction", LOWER, "idle while the CPU blocks in a synchronizing call / window"
            ),
            Metric(
                "idle_launch_latency_fraction",
                "fraction",
                LOWER,
                "idle in gaps < 30 us between back-to-back launched ops / window",
            ),
            Metric("idle_other_fraction", "fraction", LOWER, "idle with no other cause / window"),
            Metric(
                "idle_short_launch_fraction",
                "fraction",
                LOWER,
                "host_launch and launch_latency idle inside idle "
                "gaps shorter than host_gap_long_ns / window: the many-small-gaps signature of a launch-bound loop",
            ),
            Metric(
                "idle_host_long_fraction",
                "fraction",
                LOWER,
                "host_launch idle inside idle gaps of host_gap_long_ns "
                "or more / window: the host launched late because it was busy with other work than launching",
            ),
        ),
    ),
    *topic(
        "rank",
        "dataloader",
        (
            Metric("dataloader_fraction", "fraction", LOWER, "union of DataLoader __next__ spans / window"),
            Metric("dataloader_stall_fraction", "fraction", LOWER, "DataLoader spans while the GPU is idle / window"),
            Metric(
                "dataloader_multiprocess",
                "bool",
                None,
                "True when the iterator is multi-process, False single-process, None unknown",
            ),
        ),
    ),
)
