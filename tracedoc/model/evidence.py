"""Typed evidence rows: the rows of the evidence tables that several layers read.

An evidence table (``analyses.registry.EVIDENCE``) is a list of rows. The tables rules, renderers and
the diff read have a row type here: a frozen ``Row`` (a ``Record``), so a reader spells its fields as
attributes and a misspelt one fails in a type check or at its first use, not as a missing cell in a
report. A row's JSON object is its fields, in their order (``omit_defaults`` tables leave out the
fields a row does not have), exactly the object the table held as a dict. ``ROW_TYPES`` names each
typed table's row; ``typed_evidence`` turns the rows of a saved report back into them. Numbers may be
null: the checks (``tracedoc.checks``) show an impossible value as null.

Tables without a row type here are still lists of dicts; ``cell`` and ``row_keys`` read either kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from .record import Record


class Row(Record, frozen=True, kw_only=True):
    """One row of an evidence table."""


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


ROW_TYPES: dict[str, type[Row]] = {
    "kernel_totals": KernelTotal,
    "top_kernels": TopKernel,
    "operator_totals": OperatorTotal,
    "top_operators": TopOperator,
}


def row_fields(table: str) -> tuple[str, ...]:
    """The field names of a typed table's rows (empty for a table of dicts)."""
    t = ROW_TYPES.get(table)
    return t.__struct_fields__ if t is not None else ()


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
