"""Trace-health checks that run before any verdict.

Input: the per-rank metrics dict. Output: a list of :class:`HealthMessage`, each with a level, the
confidence it caps findings at, the metrics it makes unreliable, and whether it withholds the GPU
verdict entirely. An unhealthy trace gets a warning and lowered confidence, never a confident
wrong answer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..analyses.gputime.periodic import SEQUENCE_NAME
from ..model.verdict import HealthMessage

CONFIDENCES: tuple[str, ...] = ("low", "medium", "high")
CPU_ONLY_CODE = "cpu-only-trace"

# A trace whose GPU ops are mostly unlinked to their launch calls cannot say why the GPU idled.
LINK_FRACTION_MEDIUM = 0.9  # below this: some idle causes fall to "other"; medium confidence
LINK_FRACTION_LOW = 0.5  # below this: most of them do; low confidence
FEW_STEPS = 3  # fewer complete steps than this and warm-up may dominate the averages
# Fewer GPU ops than this is a unit test or a toy, not a workload: one op moves every share (kernels
# under 10 us, idle by cause) by 5 points or more, so no pattern can be told from chance.
TINY_GPU_OPS = 20
GRAPH_BUSY_MEDIUM = 0.8  # graph kernels missing but GPU this busy: little can be hidden; medium confidence

# Metrics derived from launch<->kernel links (correlation ids / ac2g flows).
_LINK_METRICS = frozenset({
    "idle_host_launch_fraction", "idle_sync_fraction", "idle_launch_latency_fraction",
    "idle_other_fraction", "launch_delay_p50_ns", "launch_delay_p95_ns", "comm_fraction",
    "exposed_comm_fraction", "comm_overlap_fraction", "compute_fraction",
})  # fmt: skip
# Metrics only the host side of a trace can give.
_HOST_METRICS = frozenset({
    "idle_dataloader_fraction", "idle_host_launch_fraction", "idle_sync_fraction", "idle_launch_latency_fraction",
    "idle_short_launch_fraction", "dataloader_stall_fraction", "sync_fraction", "implicit_sync_fraction",
    "cpu_launch_overhead_fraction", "launch_delay_p50_ns", "launch_delay_p95_ns",
})  # fmt: skip
# Metrics that depend on CPU and GPU clocks agreeing.
_CLOCK_METRICS = frozenset({
    "idle_dataloader_fraction", "idle_host_launch_fraction", "idle_sync_fraction",
    "idle_launch_latency_fraction", "idle_other_fraction", "dataloader_stall_fraction",
    "launch_delay_p50_ns", "launch_delay_p95_ns", "step_time_mean_ns", "step_time_p50_ns",
    "step_time_p95_ns", "window_ns",
})  # fmt: skip


def lowest(confidences: Iterable[str]) -> str:
    """Return the lowest of some confidence levels ("high" when given none)."""
    return min(confidences, key=CONFIDENCES.index, default="high")


def _no_gpu_message(metrics: Mapping[str, Any]) -> str:
    """Why a trace without GPU ops has no GPU verdict, from what it does hold, and what to record instead."""
    ranges = int(metrics.get("profiler_range_events") or 0)
    calls = int(metrics.get("runtime_calls") or 0)
    if ranges:
        return (
            f"the trace was recorded with the CUPTI range profiler: it holds {ranges:,} per-kernel hardware-counter "
            f"records (cuda_profiler_range events) and {calls:,} CUDA runtime calls, but no kernel timings, "
            "because that mode replays each kernel to count instructions instead of timing it; so there is no "
            "GPU timeline to diagnose. Profile again without the counter metrics (drop experimental_config's "
            "profiler_metrics) to get kernel activity; keep this trace for instruction counts"
        )
    if calls:
        return (
            f"the trace holds {calls:,} CUDA runtime calls but no kernel, memcpy or memset activity: the CPU "
            "side of CUDA was recorded and the GPU side was not, so there is no GPU verdict; profile with "
            "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA] (and check that CUPTI is available)"
        )
    return (
        "the trace holds CPU activity only (no CUDA launches, kernels, memcpy or memset): GPU-side metrics were "
        "not recorded, so the GPU rules are silent and any verdict rests on host-side evidence (the training "
        "loop's waits on the DataLoader); if the model should run on a GPU, move it there and profile with "
        "activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]"
    )


def _cpu_only(metrics: Mapping[str, Any]) -> bool:
    """A run recorded on the CPU alone: no GPU ops and no CUDA calls either (not a GPU run whose GPU side
    was not recorded, where host waits need not have held the GPU up)."""
    return not metrics.get("runtime_calls") and not metrics.get("profiler_range_events")


def host_verdict_allowed(health: Iterable[HealthMessage]) -> bool:
    """Whether the messages that withhold the GPU verdict still let host-side evidence give one."""
    withholding = [m for m in health if m.withhold]
    return bool(withholding) and all(m.code == CPU_ONLY_CODE for m in withholding)


def check_health(metrics: Mapping[str, Any]) -> list[HealthMessage]:
    """Return the health messages for one rank's metrics, most severe first."""
    out: list[HealthMessage] = []
    has_gpu = metrics.get("has_gpu_ops")
    if has_gpu is False and _cpu_only(metrics):
        # Nothing GPU-side to judge; the host side was measured as in any trace, so findings on it keep
        # their confidence. The GPU verdict is withheld unless a host-side rule gives one.
        out.append(
            HealthMessage(
                CPU_ONLY_CODE,
                "warning",
                _no_gpu_message(metrics),
                confidence="high",
                affects=frozenset(),
                withhold=True,
            )
        )
        out.extend(_check_steps(metrics.get("steps"), metrics.get("iterations"), metrics.get("iteration_name")))
        return out
    if has_gpu is False:
        out.append(HealthMessage("no-gpu-activity", "error", _no_gpu_message(metrics), confidence="low", withhold=True))
        return out
    n_ops = metrics.get("gpu_op_count")
    if has_gpu and n_ops is not None and n_ops < TINY_GPU_OPS:
        out.append(HealthMessage(
            "tiny-trace", "error",
            f"the trace holds only {n_ops} GPU op(s) (kernels, copies, memsets), fewer than "
            f"{TINY_GPU_OPS}: too little to tell a bottleneck from chance, so the verdict is withheld; "
            "the metrics are still reported. Profile a few steps of the real workload after warm-up",
            confidence="low", withhold=True,
        ))  # fmt: skip
        return out
    if has_gpu and metrics.get("has_host_events") is False:
        out.append(HealthMessage(
            "gpu-only-trace", "warning",
            "the trace has GPU ops but no CPU ops or runtime calls, so host-side causes (late launches, "
            "syncs, the input pipeline) cannot be seen and GPU idle time has no known cause; GPU busy "
            "time, kernel durations, Tensor Core use and communication can still be judged. Findings "
            "that rest on host-side causes have low confidence. Profile with ProfilerActivity.CPU as "
            "well to see why the GPU idles",
            confidence="low", affects=_HOST_METRICS,
        ))  # fmt: skip
    if has_gpu is None:
        out.append(HealthMessage(
            "gpu-activity-unknown", "warning",
            "whether the trace has GPU ops could not be determined; findings have low confidence",
            confidence="low",
        ))  # fmt: skip
    out.extend(_check_steps(metrics.get("steps"), metrics.get("iterations"), metrics.get("iteration_name")))
    out.extend(_check_backlog(metrics.get("backlog_ns"), metrics.get("backlog_ops"), metrics.get("steps")))
    out.extend(_check_links(metrics.get("launch_link_fraction"), metrics.get("unlinked_gpu_ops")))
    out.extend(
        _check_graphs(metrics.get("graph_launches"), metrics.get("graph_kernels"), metrics.get("gpu_busy_fraction"))
    )
    if metrics.get("truncated") is True:
        out.append(HealthMessage(
            "truncated-trace", "warning",
            "the trace file ended before the trace was complete, so the last step may be partial; "
            "findings have at most medium confidence. Let the profiler finish writing (exit the "
            "profile context) before copying the file",
            confidence="medium",
        ))  # fmt: skip
    if metrics.get("clock_anomaly") is True:
        out.append(HealthMessage(
            "clock-anomaly", "warning",
            "GPU ops start more than 1 ms before the CPU call that launched them: CPU and GPU clocks "
            "disagree, so idle causes, launch delays and step times are unreliable (low confidence)",
            confidence="low", affects=_CLOCK_METRICS,
        ))  # fmt: skip
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(out, key=lambda m: order[m.level])


def _check_steps(steps: Any, iterations: Any = None, iteration_name: Any = None) -> list[HealthMessage]:
    if (steps is None or steps == 0) and iterations and str(iteration_name or "").startswith(SEQUENCE_NAME):
        return [HealthMessage(
            "no-steps", "warning",
            f"no step spans (ProfilerStep or NVTX step ranges) were found; iterations were detected from the "
            f"trace's repeating {iteration_name}, so the step time ({iterations} intervals between their "
            "completions) is that sequence's period, while the window is the GPU activity span. If the sequence "
            "is a repeated layer rather than a whole iteration, the step time is too short: mark each iteration "
            "(prof.step(), or an NVTX range named per step and --step-range). Findings have at most medium "
            "confidence",
            confidence="medium",
        )]  # fmt: skip
    if (steps is None or steps == 0) and iterations and iteration_name:
        return [HealthMessage(
            "no-steps", "warning",
            f"no ProfilerStep spans were found; {iterations} iterations were detected from the repeating "
            f"'{iteration_name}', so the step time is the interval between their completions, while the "
            "window is the GPU activity span (first to last GPU op). Call prof.step() once per iteration "
            "to be sure. Findings have at most medium confidence",
            confidence="medium",
        )]  # fmt: skip
    if steps is None or steps == 0:
        return [HealthMessage(
            "no-steps", "warning",
            "no ProfilerStep spans (or NVTX step ranges) and no repeating iteration (a repeating annotation, "
            "Optimizer.step, or a repeating sequence of GPU ops) were found, so the trace is analysed as "
            "one span, the GPU activity window (first to last GPU op), and impact is a share of that "
            "window; call prof.step() once per iteration (or use NVTX step ranges). Findings have at "
            "most medium confidence",
            confidence="medium",
        )]  # fmt: skip
    if steps < FEW_STEPS:
        return [HealthMessage(
            "few-steps", "info",
            f"only {steps} step(s) in the trace, so one-off costs (warm-up, autotuning, first "
            f"allocations) may dominate; profile at least {FEW_STEPS} steps after warm-up "
            "(schedule(wait=1, warmup=1, active=3)). Findings have at most medium confidence",
            confidence="medium",
        )]  # fmt: skip
    return []


def _check_backlog(backlog_ns: Any, ops: Any, steps: Any) -> list[HealthMessage]:
    """A pre-window backlog is normal when the CPU runs ahead of the GPU: said, and left out of the
    window, without lowering confidence (its ops lack launch links because they were launched before
    the profiler opened, not because the trace is old or edited)."""
    if not backlog_ns:
        return []
    where = (
        "the window starts at the first step completion after it, so the first step has no step time"
        if steps
        else "the window starts where the GPU began the work launched inside the capture"
    )
    what = (
        f"{ops:,} GPU ops ran without a launch call in the trace"
        if ops
        else "no GPU op was recorded while the first launches waited"
    )
    return [HealthMessage(
        "pre-window-backlog", "info",
        f"for the first {backlog_ns / 1e6:.1f} ms of the capture the GPU was still running work launched before "
        f"the profiler opened ({what}): the CPU ran ahead of the GPU. That time belongs to earlier steps: "
        f"{where}; it is neither idle time nor a sign of missing launch links",
        confidence="high",
    )]  # fmt: skip


def _check_links(link_fraction: Any, unlinked: Any = None) -> list[HealthMessage]:
    """Too few GPU ops linked to their launch call: which ones and why come from the trace itself
    (``unlinked_gpu_ops``); a version is blamed only where the trace records it."""
    if link_fraction is None or link_fraction >= LINK_FRACTION_MEDIUM:
        return []
    low = link_fraction < LINK_FRACTION_LOW
    which = f" ({unlinked})" if unlinked else ""
    return [HealthMessage(
        "missing-launch-links", "warning",
        f"only {link_fraction:.0%} of GPU ops are linked to the CPU call that launched them "
        f"(expected >= {LINK_FRACTION_MEDIUM:.0%}){which}, so idle time cannot be fully attributed to its "
        "cause and communication kernels launched by collectives may be missed; findings that use "
        f"idle causes or launch delays have {'low' if low else 'medium'} confidence",
        confidence="low" if low else "medium", affects=_LINK_METRICS,
    )]  # fmt: skip


def _check_graphs(launches: Any, kernels: Any, busy: Any) -> list[HealthMessage]:
    if not launches or kernels is None or kernels >= launches:
        return []
    # With the GPU busy most of the window, missing graph kernels cannot hide much idle time.
    mostly_busy = busy is not None and busy >= GRAPH_BUSY_MEDIUM
    consequence = (
        f"the GPU is still busy {busy:.0%} of the window, so GPU-time numbers are at worst slightly low "
        "(medium confidence)"
        if mostly_busy
        else "so the GPU may look idler than it was and every GPU-time number is a lower bound (low confidence)"
    )
    return [HealthMessage(
        "cuda-graph-under-recording", "warning",
        f"{launches} CUDA graph launches but only {kernels} kernels recorded as running inside graphs: the "
        f"profiler may not have recorded the work the graphs ran; {consequence}. Profile with a "
        "PyTorch/CUPTI that records graph kernels, or profile a few steps with graphs disabled",
        confidence="medium" if mostly_busy else "low",
    )]  # fmt: skip
