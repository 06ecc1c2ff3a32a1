"""Typed evidence rows: the rows of the evidence tables that several layers read.

An evidence table (``analyses.registry.EVIDENCE``) is a list of rows. The tables rules, renderers and
the diff read have a row type here: a frozen ``Row`` (a ``Record``), so a reader spells its fields as
attributes and a misspelt one fails in a type check or at its first use, not as a missing cell in a
report. A row's JSON object is its fields, in their order (``omit_defaults`` tables leave out the
fields a row does not have), exactly the object the table held as a dict. ``ROW_TYPES`` names each
typed table's row; ``typed_evidence`` turns the rows of a saved report back into them. Numbers may be
null: the checks (``tracedoc.checks``) show an impossible value as null. A number a producer may write as an
int or a float (a peak from the peak table) is typed ``int | float`` so that a report read back writes it
as it was.

Tables without a row type here are still lists of dicts; ``cell`` and ``row_keys`` read either kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from .record import Record


class Row(Record, frozen=True, kw_only=True):
    """One row of an evidence table."""


class TableRows(Row):
    """``contents``: the rows of one table of the trace, or the events of one category tracedoc does not analyse."""

    table: str  # the table's name ("other: CATEGORY" for a category left unanalysed)
    rows: int | None  # its rows (events)


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


class SyncBlockedCall(Row):
    """``sync_blocked_calls``: a synchronizing call on a launching thread holding GPU idle time."""

    call: str  # the call
    op: str | None  # the innermost CPU op around it
    annotation: str | None  # the innermost user annotation around it
    start_ns: int | None  # when it began
    dur_ns: int | None  # how long it blocked the thread
    idle_ns: int | None  # the GPU idle time inside it


class OperatorShape(Row):
    """``operators_by_shape``: CPU operator calls of one name and recorded input shapes whose work is in the window."""

    name: str  # the operator
    input_shapes: str | None  # its recorded input shapes (kept for the ops the roofline models); None unrecorded
    calls: int | None  # calls
    cpu_ns: int | None  # their inclusive CPU time
    gpu_ops: int | None  # GPU ops they launched in the window
    gpu_ns: int | None  # those ops' time
    share: float | None  # of the GPU time launched by any operator


class ModuleOperators(Row):
    """``operators_by_module``: the nn.Module spans of one module, and the GPU time launched inside them."""

    module: str  # the module, as the span names it (Linear_0)
    calls: int | None  # its spans starting in the window
    cpu_ns: int | None  # their CPU time
    gpu_ops: int | None  # GPU ops launched inside them (innermost module) in the window
    gpu_ns: int | None  # those ops' time
    share: float | None  # of the GPU time launched inside any module


class HostOperator(Row):
    """``host_operators``: CPU operators of one name started in the window, by self time (traces without GPU ops)."""

    name: str  # the operator
    calls: int | None  # its calls
    self_ns: int | None  # their time not spent in a nested span
    cpu_ns: int | None  # their inclusive time
    share: float | None  # self_ns / the window


class SyncCall(Row):
    """``sync_calls``: synchronizing calls of one kind, grouped by the operator that made them."""

    op: str | None  # the outermost operator with the call's External id (the call itself when it is an op)
    call: str  # the call
    count: int | None  # calls in the window
    total_ns: int | None  # their time


class ImplicitSync(Row):
    """``implicit_syncs``: implicitly synchronizing calls of one kind, grouped by the operator that made them."""

    op: str | None  # the outermost operator with the call's External id (the call itself when it is an op)
    call: str  # the call (cudaFree, cudaHostAlloc, a pageable copy's launch, empty_cache, ...)
    count: int | None  # calls in the window
    total_ns: int | None  # their time
    per_step: float | None  # count / steps; None without steps


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


class IdleCause(Row):
    """``idle_causes``: the window's device-idle time of one cause."""

    cause: str  # dataloader, host_launch, sync, launch_latency, other
    ns: int | None  # its idle time in the window
    fraction: float | None  # of the window


class IdleCpuOp(Row):
    """``idle_other_cpu_ops``: an outermost CPU op running while the GPU idled for no identified cause."""

    op: str  # the op's name
    count: int | None  # its calls overlapping that idle time
    idle_overlap_ns: int | None  # their time overlapping it


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


ROW_TYPES: dict[str, type[Row]] = {
    "contents": TableRows,
    "kernel_totals": KernelTotal,
    "top_kernels": TopKernel,
    "kernel_classes": KernelClass,
    "operator_totals": OperatorTotal,
    "top_operators": TopOperator,
    "operators_by_shape": OperatorShape,
    "operators_by_module": ModuleOperators,
    "host_operators": HostOperator,
    "sync_calls": SyncCall,
    "sync_blocked_calls": SyncBlockedCall,
    "implicit_syncs": ImplicitSync,
    "memcpy": CopyDirection,
    "collectives": Collective,
    "idle_causes": IdleCause,
    "idle_other_cpu_ops": IdleCpuOp,
    "top_gaps": TopGap,
    "stream_gaps": StreamGaps,
    "launch_queue": LaunchQueueRow,
    "roofline": RooflineRow,
    "roofline_below_roof": BelowRoof,
    "flops_summary": FlopsSummary,
}


def check_fields(row_type: type[Row], names: tuple[str, ...] | list[str], where: str) -> None:
    """Raise ``AttributeError`` unless every name is a field of ``row_type``: a reader that names columns
    (a renderer's column list) calls it at import, so a misspelt column fails there."""
    unknown = [n for n in names if n not in row_type.__struct_fields__]
    if unknown:
        raise AttributeError(f"{where} names {', '.join(unknown)}: not a field of {row_type.__name__} "
                             f"({', '.join(row_type.__struct_fields__)})")


def typed_rows(table: str, rows: list[Any]) -> list[Any]:
    """``rows`` of ``table`` as its row type (dict rows converted; a table without one as given).
    ``msgspec.ValidationError`` names the field of a row that does not fit."""
    t = ROW_TYPES.get(table)
    if t is None or not any(isinstance(r, dict) for r in rows):
        return rows
    out = []
    for i, r in enumerate(rows):
        try:
            out.append(msgspec.convert(r, t) if isinstance(r, dict) else r)
        except msgspec.ValidationError as exc:
            raise msgspec.ValidationError(f"evidence.{table}[{i}]: {exc}") from None
    return out


def typed_evidence(evidence: Mapping[str, list[Any]]) -> dict[str, list[Any]]:
    """Evidence tables with each typed table's rows as its row type (order kept)."""
    return {name: typed_rows(name, rows) for name, rows in evidence.items()}


def cell(row: Any, key: str) -> Any:
    """A row's value of column ``key`` (None where it has none), for readers of any table."""
    if isinstance(row, Row):
        return getattr(row, key, None)
    return row.get(key)


def row_keys(row: Any) -> list[str]:
    """A row's columns as its JSON object holds them (a row type's defaults left out where it omits them)."""
    if not isinstance(row, Row):
        return list(row)
    if not row.__struct_config__.omit_defaults:
        return list(row.__struct_fields__)
    return [f.name for f in msgspec.structs.fields(row)
            if f.required or getattr(row, f.name) != (f.default_factory() if f.default is msgspec.NODEFAULT else f.default)]


def copy_row(row: Any) -> Any:
    """A row a finding can hold: a row type's (frozen) as it is, a dict's copy."""
    return row if isinstance(row, Row) else dict(row)


def plain_rows(rows: list[Any]) -> list[Any]:
    """Rows as dicts (a DataFrame's input): a row type's as its JSON object."""
    return [r.to_dict() if isinstance(r, Row) else r for r in rows]
