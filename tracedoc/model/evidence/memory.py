"""Evidence rows of the device memory tables: the largest allocations, the peaks per device, the curve."""

from __future__ import annotations

from .row import Row


class TopAlloc(Row):
    """``memory_top_allocs``: the allocations made while one operator ran (the innermost open on the
    allocating thread), largest total first."""

    op: str | None  # the operator; None for allocations made outside any
    count: int | None  # the allocations
    total_bytes: int | None  # their bytes together
    max_bytes: int | None  # the largest one


class DeviceMemory(Row):
    """``memory_per_device``: one device's peaks of allocated and reserved memory against its size."""

    device: int | None  # the device id
    peak_allocated_bytes: int | None  # highest allocated total
    peak_reserved_bytes: int | None  # highest reserved total (the caching allocator's)
    device_memory_bytes: int | None  # the device's memory, where the trace records it
    peak_fraction: float | None  # the reserved peak (allocated where none) / device_memory_bytes


class MemoryPoint(Row):
    """``memory_curve``: one sample of the allocated and reserved totals (downsampled, in time order)."""

    ts_ns: int | None  # when, in the trace's clock
    allocated: int | None  # allocated bytes then
    reserved: int | None  # reserved bytes then
    device: int | None  # the device id


class MemoryEstimatePart(Row):
    """``memory_estimate``: with ``--model``, one part of the estimated memory per GPU (weights, gradients,
    optimizer states, activations, their total), or the measured peak or the device's memory beside it."""

    part: str  # what the bytes are
    bytes: int | float | None  # its bytes (None: the trace does not record it)
    note: str | None  # what the estimate assumes, or where the number comes from
