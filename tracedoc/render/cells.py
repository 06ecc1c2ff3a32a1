"""Table cells: a value as text, its unit taken from the column name (``*_ns``, ``*_bytes``, ``share``...),
and evidence rows as a ``TableView`` of formatted strings."""

from __future__ import annotations

from typing import Any

from ..model.evidence import ROW_TYPES, cell, check_fields, row_keys
from .format import fmt_bytes, fmt_ns, fmt_pct
from .names import distinct_short_names, short_name  # noqa: F401  (short_name: the one shortener)
from .views import Column, TableView

# Main tables: evidence table -> (title, columns shown). Finding evidence shows every column.
MAIN_TABLES = {
    "top_gaps": (
        "Top gaps",
        (
            "gap_ns",
            "device_idle_ns",
            "start_ns",
            "device",
            "stream",
            "cause",
            "before",
            "after",
            "launched_by",
            "launch_call",
            "stack",
        ),
    ),
    "stream_gaps": (
        "Gaps per stream",
        ("device", "stream", "comm_stream", "count", "total_ns", "p50_ns", "p95_ns", "max_ns", "causes_ns"),
    ),
    "top_kernels": (
        "Top kernels",
        ("name", "category", "tensor_core", "count", "total_ns", "mean_ns", "max_ns", "share"),
    ),
    "top_operators": ("Top operators", ("name", "calls", "cpu_ns", "gpu_ops", "gpu_ns", "share")),
    "operators_by_shape": (
        "Operators by name and input shape",
        ("name", "input_shapes", "calls", "cpu_ns", "gpu_ops", "gpu_ns", "share"),
    ),
    "operators_by_module": ("Operators by nn.Module", ("module", "calls", "cpu_ns", "gpu_ops", "gpu_ns", "share")),
    "kernel_classes": ("Kernel time by class", ("kernel_class", "count", "total_ns", "share")),
    "host_operators": ("Host time by operator", ("name", "calls", "self_ns", "cpu_ns", "share")),
    "collectives": (
        "Collectives",
        (
            "collective",
            "count",
            "total_ns",
            "mean_ns",
            "message_bytes_p50",
            "message_bytes_max",
            "algbw_gbps",
            "busbw_gbps",
        ),
    ),
    "sync_calls": ("Synchronizing calls", ("op", "call", "count", "total_ns")),
    "memory_top_allocs": ("Largest allocations by operator", ("op", "count", "total_bytes", "max_bytes")),
    "memory_per_device": (
        "Memory per device",
        ("device", "peak_allocated_bytes", "peak_reserved_bytes", "device_memory_bytes", "peak_fraction"),
    ),
}


for _table, (_, _columns) in MAIN_TABLES.items():  # a typed table's columns are its row's fields (fails at import)
    if _table in ROW_TYPES:
        check_fields(ROW_TYPES[_table], _columns, f"MAIN_TABLES[{_table!r}]")
_COLUMN_LABELS = {
    "gap_ns": "gap",
    "device_idle_ns": "device idle",
    "start_ns": "at",
    "end_ns": "until",
    "ts_ns": "at",
    "total_ns": "time",
    "mean_ns": "mean",
    "max_ns": "max",
    "p50_ns": "p50",
    "p95_ns": "p95",
    "cpu_ns": "CPU time",
    "self_ns": "self time",
    "gpu_ns": "GPU time",
    "gpu_ops": "GPU ops",
    "before": "previous op",
    "after": "next op",
    "launched_by": "launched by",
    "launch_call": "launch call",
    "comm_stream": "comm stream",
    "causes_ns": "by cause",
    "tensor_core": "Tensor Cores",
    "message_bytes_p50": "msg p50",
    "message_bytes_max": "msg max",
    "algbw_gbps": "algbw",
    "busbw_gbps": "busbw",
    "total_bytes": "total",
    "max_bytes": "largest",
    "peak_allocated_bytes": "peak allocated",
    "peak_reserved_bytes": "peak reserved",
    "device_memory_bytes": "device memory",
    "peak_fraction": "peak / device",
    "ns": "time",
}
_WIDE_COLUMNS = frozenset(
    {"input_shapes", "module", "name", "before", "after", "launched_by", "stack", "op", "call", "step", "causes_ns"}
)
_TEXT_COLUMNS = frozenset(
    {
        "input_shapes",
        "module",
        "kernel_class",
        "name",
        "before",
        "after",
        "launched_by",
        "launch_call",
        "stack",
        "op",
        "call",
        "cause",
        "category",
        "collective",
        "step",
        "tensor_core",
        "kind",
        "causes_ns",
    }
)


def column_label(key: str) -> str:
    if key in _COLUMN_LABELS:
        return _COLUMN_LABELS[key]
    for suffix in ("_ns", "_bytes", "_fraction"):
        if key.endswith(suffix):
            key = key[: -len(suffix)]
    return key.replace("_", " ")


def shorten(text: Any, limit: int) -> str:
    s = str(text).replace("\r", " ").replace("\n", " ")
    return s if len(s) <= limit else s[: max(1, limit - 1)] + "…"


def fmt_cell(key: str, value: Any, origin_ns: int = 0, name_chars: int = 300) -> str:
    """One table cell as text: the unit comes from the column name (``*_ns``, ``*_bytes``, ``share``...)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ", ".join(
            f"{str(k).replace('_', ' ')} {fmt_cell(key, v, origin_ns, name_chars)}" for k, v in value.items()
        )
    if isinstance(value, (list, tuple)):
        return shorten("; ".join(str(v) for v in value), name_chars)
    if isinstance(value, str):
        return shorten(value, name_chars)
    if hasattr(value, "item"):
        value = value.item()
    if key in ("start_ns", "end_ns", "ts_ns"):
        return "+" + fmt_ns(value - origin_ns)
    if key.endswith("_ns") or key == "ns":
        return fmt_ns(value)
    if "bytes" in key or key in ("allocated", "reserved"):
        return fmt_bytes(value)
    if key.endswith("fraction") or key == "share":
        return fmt_pct(value)
    if key.endswith("_gbps"):
        return f"{value:.1f} GB/s"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) and key not in ("device", "stream", "rank") else str(value)


# Columns that hold GPU kernel names, by table: shown in their short form (the full name on hover).
KERNEL_NAME_COLUMNS = {"top_kernels": ("name",), "top_gaps": ("before", "after"), "kernel_totals": ("name",)}


def build_table(
    title: str,
    rows: list[Any],
    columns: tuple[str, ...] | None,
    cap: int,
    origin_ns: int = 0,
    name_chars: int = 300,
    key: str = "",
    short_names: bool = True,
) -> TableView:
    """A table view: formatted string cells, at most ``cap`` rows, and how many were left out."""
    rows = list(rows or [])
    if columns is None:
        seen: dict[str, None] = {}
        for r in rows[:cap]:
            seen.update(dict.fromkeys(row_keys(r)))
        columns = tuple(seen)
    else:
        columns = tuple(c for c in columns if any(cell(r, c) is not None for r in rows[:cap])) or columns[:1]
    shown = rows[:cap]
    return TableView(
        key=key,
        title=title,
        columns=[
            Column(
                key=c,
                label=column_label(c),
                wide=c in _WIDE_COLUMNS,
                num=c not in _TEXT_COLUMNS
                and all(isinstance(cell(r, c), (int, float)) or cell(r, c) is None for r in shown),
            )
            for c in columns
        ],
        rows=[[fmt_cell(c, cell(r, c), origin_ns, name_chars) for c in columns] for r in shown],
        total=len(rows),
        left_out=max(0, len(rows) - len(shown)),
        short=_short_cells(shown, columns, KERNEL_NAME_COLUMNS.get(key, ()) if short_names else ()),
    )


def _short_cells(rows: list[Any], columns: tuple[str, ...], name_columns: tuple[str, ...]) -> list[list[str]]:
    """Per cell, a kernel name's short form ("" elsewhere): distinct within its column, so two different
    kernels of one table never show the same text."""
    out = [["" for _ in columns] for _ in rows]
    for j, c in enumerate(columns):
        if c not in name_columns:
            continue
        at = [i for i, r in enumerate(rows) if isinstance(cell(r, c), str)]
        for i, form in zip(at, distinct_short_names([cell(rows[i], c) for i in at])):
            out[i][j] = form
    return out


def version_text(v: Any) -> str | None:
    """CUDA versions as Kineto records them (12080) -> "12.8"; strings pass through."""
    if v is None or v == "":
        return None
    if isinstance(v, int) and v >= 1000:
        return f"{v // 1000}.{(v % 1000) // 10}"
    return str(v)
