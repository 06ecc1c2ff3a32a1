"""What the analyses produce and who produces it.

``METRICS``: every metric a rank's result holds, name -> ``Metric`` (unit, meaning, better side,
range), read from the metric table ``tracedoc.model.metrics``. Rules may reference exactly these
names; the engine validates rule files against them.

``EVIDENCE``: every evidence table (lists of row dicts that reports show and rules cite).

``ANALYSES``: the analyses, each registered with ``@analysis(produces=..., evidence=..., needs=...)``
on a function ``(trace, inputs) -> dict``. ``inputs`` holds exactly the named values it needs;
the dict it returns holds exactly the metrics, evidence tables and values (``provides``) it
declares. ``tracedoc.analyses.core.pipeline`` runs the analyses a request needs, in dependency order,
and raises :class:`ContractError` when an analysis returns more or less than it declared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...model.metrics import TRACE_METRICS, Metric

_PACKAGE = __name__.rsplit(".", 2)[0]  # tracedoc.analyses: analyses are named by their place under it

# Every metric a rank's result holds, from the metric table (``tracedoc.model.metrics``): the
# analyses' own (scope ``rank``) and the job view's (scope ``job``), which a single trace has as None.
METRICS: dict[str, Metric] = TRACE_METRICS


EVIDENCE: dict[str, str] = {
    "host_operators": "Traces without GPU ops: CPU operators by self time (and total time) in the window.",
    "idle_causes": "Idle time by cause (dataloader, host_launch, sync, launch_latency, other).",
    "idle_other_cpu_ops": "The outermost CPU ops running while the GPU idled for no identified cause, by "
    "overlapping time.",
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
    "launch_queue": "Per stream: GPU ops launched and not finished from the first step's start to the window's end "
    "(maximum, time-weighted mean, and the maximum over each of 120 equal stretches, series_step_ns "
    "apart), launches, and the launch calls that blocked on a full queue and the host time they "
    "blocked.",
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
    "launched and their time (what a diff aligns); a torch.compile region also its content, "
    "a signature of the kernel sequence its first call launched, and that sequence's length.",
    "collectives": "Collectives by type: count, time, message sizes, bandwidth.",
    "sync_calls": "Synchronizing calls grouped by operator and call.",
    "implicit_syncs": "Implicitly synchronizing calls grouped by the operator that triggered them and call, with "
    "calls per step.",
    "sync_blocked_calls": "The synchronizing calls on the launching threads that hold the most GPU idle time: call, "
    "the innermost CPU op and user annotation around it, start, duration and the idle time "
    "inside it.",
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
    "flops_by_op_class": "Counted ops whose kernels ran in the window, by class (matmul, conv, attention), pass "
    "(forward, backward, recompute) and dtype: FLOPs their kernels in the window ran, kernel "
    "time, TFLOP/s and the share of that dtype's peak; a note names ops left out of the rate.",
    "flops_by_kernel_class": "Kernels of counted ops by Tensor Core use and dtype: FLOPs (each op's split over the "
    "kernels that ran its work, by duration), time, TFLOP/s, share of peak; the kernels of "
    "ops whose FLOPs exceed what their kernels can run form one row without a rate.",
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
    "model_estimate": "With --model: the formula's parameters, training FLOPs per token and per step, tokens/s, "
    "samples/s, model MFU and how it compares with the trace's count.",
    "memory_estimate": "With --model: estimated weights, gradients, optimizer states and activations per GPU, "
    "beside the measured peak and the device's memory.",
}


def describe(name: str) -> str:
    return METRICS[name].describe()


class ContractError(RuntimeError):
    """An analysis broke its declaration (a bug in tracedoc, not bad input)."""


@dataclass
class Produced:
    """What one analysis (or a whole run) returns: metrics, evidence tables and values, by name, and
    warnings for the rank's result (what the analysis could not do or does not trust)."""

    metrics: dict[str, Any] = field(default_factory=dict)
    evidence: dict[str, list[dict]] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


# Stage inputs: values an analysis may need that no analysis produces; the caller gives them
# (``run_analyses(given=...)``). An analysis needing one that is not given does not run.
GIVEN: dict[str, str] = {
    "estimate_request": "the model config and tokens per step of --model (tracedoc.estimate.EstimateRequest)",
}


@dataclass(frozen=True)
class Analysis:
    """A registered analysis: the function and what it declares."""

    name: str
    run: Callable[[Any, Mapping[str, Any]], Produced]
    produces: tuple[str, ...]  # metric names (keys of METRICS)
    evidence: tuple[str, ...]  # evidence table names (keys of EVIDENCE)
    provides: tuple[str, ...]  # values other analyses or the result read
    needs: tuple[str, ...]  # values it reads, provided by other analyses (or given: ``GIVEN``)
    on_demand: bool  # run only when one of its outputs is asked for by name
    # may run in a forked child process while the others run (see offload.py): the type of each value it
    # provides, which the child's plain-data answer is rebuilt into; None: never offloaded
    offload: Mapping[str, type] | None = None
    reads: tuple[str, ...] = ()  # metrics of other analyses it reads
    reads_tables: tuple[str, ...] = ()  # evidence tables of other analyses it reads


ANALYSES: dict[str, Analysis] = {}
# Who produces what: metric, evidence table and value names -> the producing analysis's name.
PRODUCERS: dict[str, dict[str, str]] = {"metrics": {}, "evidence": {}, "values": {}}


def analysis(
    *,
    produces: tuple[str, ...] = (),
    evidence: tuple[str, ...] = (),
    provides: tuple[str, ...] = (),
    needs: tuple[str, ...] = (),
    on_demand: bool = False,
    offload: Mapping[str, type] | None = None,
    reads: tuple[str, ...] = (),
    reads_tables: tuple[str, ...] = (),
) -> Callable:
    """Register ``fn(trace, inputs) -> Produced`` as an analysis with its declared inputs and outputs.

    ``inputs`` maps each name in ``needs`` to the value another analysis provides (or the caller gives,
    ``GIVEN``), each name in ``reads`` to a metric and each in ``reads_tables`` to an evidence table
    another analysis produces. ``on_demand``
    analyses (costly ones) are left out of a full run unless an output of theirs is asked for. ``offload``
    ones (long, and waited for by few others) may run in a child process beside the others. Every
    output has one producer; a metric or evidence table must be described in ``METRICS`` / ``EVIDENCE``.
    """

    def register(fn: Callable) -> Callable:
        # the module's place under tracedoc.analyses (its room and file), then the function
        name = f"{fn.__module__.removeprefix(_PACKAGE + '.')}.{fn.__name__}"
        entry = Analysis(
            name,
            fn,
            tuple(produces),
            tuple(evidence),
            tuple(provides),
            tuple(needs),
            on_demand,
            offload,
            tuple(reads),
            tuple(reads_tables),
        )
        undescribed = [m for m in entry.produces if m not in METRICS] + [t for t in entry.evidence if t not in EVIDENCE]
        if undescribed:
            raise ContractError(
                f"analysis {name} declares {', '.join(map(repr, undescribed))}, which "
                "the metric table (tracedoc.model.metrics) / registry.EVIDENCE do not describe"
            )
        for kind, names in (("metrics", entry.produces), ("evidence", entry.evidence), ("values", entry.provides)):
            for out in names:
                other = PRODUCERS[kind].setdefault(out, name)
                if other != name:
                    raise ContractError(f"{kind} {out!r} is produced by both {other} and {name}")
        ANALYSES[name] = entry
        return fn

    return register
