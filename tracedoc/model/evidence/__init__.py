"""Typed evidence rows: the rows of the evidence tables that several layers read.

An evidence table (``analyses.core.registry.EVIDENCE``) is a list of rows. The tables rules, renderers and
the diff read have a row type here: a frozen ``Row`` (a ``Record``), so a reader spells its fields as
attributes and a misspelt one fails in a type check or at its first use, not as a missing cell in a
report. A row's JSON object is its fields, in their order (``omit_defaults`` tables leave out the
fields a row does not have), exactly the object the table held as a dict. ``ROW_TYPES`` names each
typed table's row; ``typed_evidence`` turns the rows of a saved report back into them. Numbers may be
null: the checks (``tracedoc.checks``) show an impossible value as null. A number a producer may write as an
int or a float (a peak from the peak table) is typed ``int | float`` so that a report read back writes it
as it was.

A saved report's row that lacks a field added since it was written reads that field as None (not
measured then). Tables without a row type here are still lists of dicts; ``cell`` and ``row_keys`` read
either kind.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import msgspec

from .flops import (
    BelowRoof,
    FlopsByKernelClass,
    FlopsByOpClass,
    FlopsNotCounted,
    FlopsPerStep,
    FlopsSummary,
    ModelEstimate,
    RooflineRow,
)
from .gpu import (
    Collective,
    CopyDirection,
    KernelClass,
    KernelTotal,
    LaunchQueueRow,
    LaunchTotals,
    OperatorTotal,
    StreamGaps,
    TopGap,
    TopKernel,
    TopOperator,
)
from .host import (
    DataLoaderSpan,
    HostOperator,
    HostWork,
    IdleCause,
    IdleCpuOp,
    ImplicitSync,
    ModuleOperators,
    OperatorShape,
    StepStat,
    SyncBlockedCall,
    SyncCall,
    TableRows,
)
from .memory import DeviceMemory, MemoryEstimatePart, MemoryPoint, TopAlloc
from .row import Row

__all__ = [
    "BelowRoof",
    "Collective",
    "CopyDirection",
    "DataLoaderSpan",
    "DeviceMemory",
    "FlopsByKernelClass",
    "FlopsByOpClass",
    "FlopsNotCounted",
    "FlopsPerStep",
    "FlopsSummary",
    "HostOperator",
    "HostWork",
    "IdleCause",
    "IdleCpuOp",
    "ImplicitSync",
    "KernelClass",
    "KernelTotal",
    "LaunchQueueRow",
    "LaunchTotals",
    "MemoryEstimatePart",
    "MemoryPoint",
    "ModelEstimate",
    "ModuleOperators",
    "OperatorShape",
    "OperatorTotal",
    "ROW_TYPES",
    "RooflineRow",
    "Row",
    "StepStat",
    "StreamGaps",
    "SyncBlockedCall",
    "SyncCall",
    "TableRows",
    "TopAlloc",
    "TopGap",
    "TopKernel",
    "TopOperator",
    "cell",
    "check_fields",
    "copy_row",
    "plain_rows",
    "row_keys",
    "typed_evidence",
    "typed_rows",
]


ROW_TYPES: dict[str, type[Row]] = {
    "contents": TableRows,
    "step_stats": StepStat,
    "kernel_totals": KernelTotal,
    "top_kernels": TopKernel,
    "kernel_classes": KernelClass,
    "operator_totals": OperatorTotal,
    "top_operators": TopOperator,
    "operators_by_shape": OperatorShape,
    "operators_by_module": ModuleOperators,
    "host_operators": HostOperator,
    "host_late_cpu_ops": HostWork,
    "host_late_python": HostWork,
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
    "launch": LaunchTotals,
    "dataloader": DataLoaderSpan,
    "roofline": RooflineRow,
    "roofline_below_roof": BelowRoof,
    "flops_summary": FlopsSummary,
    "flops_by_op_class": FlopsByOpClass,
    "flops_by_kernel_class": FlopsByKernelClass,
    "flops_not_counted": FlopsNotCounted,
    "flops_per_step": FlopsPerStep,
    "memory_top_allocs": TopAlloc,
    "memory_per_device": DeviceMemory,
    "memory_curve": MemoryPoint,
    "model_estimate": ModelEstimate,
    "memory_estimate": MemoryEstimatePart,
}


def check_fields(row_type: type[Row], names: tuple[str, ...] | list[str], where: str) -> None:
    """Raise ``AttributeError`` unless every name is a field of ``row_type``: a reader that names columns
    (a renderer's column list) calls it at import, so a misspelt column fails there."""
    unknown = [n for n in names if n not in row_type.__struct_fields__]
    if unknown:
        raise AttributeError(
            f"{where} names {', '.join(unknown)}: not a field of {row_type.__name__} "
            f"({', '.join(row_type.__struct_fields__)})"
        )


@functools.cache
def _nullable(row_type: type[Row]) -> tuple[str, ...]:
    """The required fields of ``row_type`` that may be null."""

    def admits_none(t: Any) -> bool:
        return isinstance(t, msgspec.inspect.NoneType) or (
            isinstance(t, msgspec.inspect.UnionType) and any(isinstance(x, msgspec.inspect.NoneType) for x in t.types)
        )

    return tuple(
        f.encode_name for f in msgspec.inspect.type_info(row_type).fields if f.required and admits_none(f.type)
    )


def typed_rows(table: str, rows: list[Any]) -> list[Any]:
    """``rows`` of ``table`` as its row type (dict rows converted; a table without one as given). A row
    written before one of its fields existed (an earlier release's report) holds None there: not measured
    then, as a metric added since (``tracedoc.migrate``). ``msgspec.ValidationError`` names the field of a
    row that does not fit, and refuses a field the row type does not have."""
    t = ROW_TYPES.get(table)
    if t is None or all(type(r) is t for r in rows):
        return rows
    out = []
    for i, r in enumerate(rows):
        try:
            missing = [f for f in _nullable(t) if f not in r] if isinstance(r, dict) else []
            out.append(r if type(r) is t else msgspec.convert({**dict.fromkeys(missing), **r} if missing else r, t))
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
    return [
        f.name
        for f in msgspec.structs.fields(row)
        if f.required or getattr(row, f.name) != (f.default_factory() if f.default is msgspec.NODEFAULT else f.default)
    ]


def copy_row(row: Any) -> Any:
    """A row a finding can hold: a row type's (frozen) as it is, a dict's copy."""
    return row if isinstance(row, Row) else dict(row)


def plain_rows(rows: list[Any]) -> list[Any]:
    """Rows as dicts (a DataFrame's input): a row type's as its JSON object."""
    return [r.to_dict() if isinstance(r, Row) else r for r in rows]
