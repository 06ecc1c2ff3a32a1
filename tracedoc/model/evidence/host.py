"""Evidence rows of the host's tables: the trace's contents, operators by CPU time, shape and module,
synchronizing calls and idle time by cause."""

from __future__ import annotations

from .row import Row


class TableRows(Row):
    """``contents``: the rows of one table of the trace, or the events of one category tracedoc does not analyse."""

    table: str  # the table's name ("other: CATEGORY" for a category left unanalysed)
    rows: int | None  # its rows (events)


class HostOperator(Row):
    """``host_operators``: CPU operators of one name started in the window, by self time (traces without GPU ops)."""

    name: str  # the operator
    calls: int | None  # its calls
    self_ns: int | None  # their time not spent in a nested span
    cpu_ns: int | None  # their inclusive time
    share: float | None  # self_ns / the window


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


class SyncBlockedCall(Row):
    """``sync_blocked_calls``: a synchronizing call on a launching thread holding GPU idle time."""

    call: str  # the call
    op: str | None  # the innermost CPU op around it
    annotation: str | None  # the innermost user annotation around it
    start_ns: int | None  # when it began
    dur_ns: int | None  # how long it blocked the thread
    idle_ns: int | None  # the GPU idle time inside it


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


class DataLoaderSpan(Row):
    """``dataloader``: a DataLoader iterator span name seen in the trace."""

    name: str  # the span's name


class HostWork(Row):
    """``host_late_cpu_ops`` and ``host_late_python``: CPU ops (or Python frames) of one name running in the long
    host-late idle gaps."""

    name: str  # the op's (frame's) name
    calls: int | None  # its calls overlapping the gaps
    self_ns: int | None  # their time inside the gaps less what they called (at most total_ns)
    total_ns: int | None  # their time inside the gaps (the union of the calls')


class StepStat(Row):
    """``step_stats``: one per-step quantity across the steps."""

    quantity: str  # the per-step column (step_time_ns, busy_ns, idle_sync_ns, ...)
    total_ns: int | None  # its sum over the steps that have it
    p50_ns: float | None  # its median
    p95_ns: float | None  # its 95th percentile
    max_ns: int | None  # its largest
