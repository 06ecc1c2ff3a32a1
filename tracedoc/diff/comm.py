"""Exposed communication split into waiting and transfer, where the job view measured waits.

A directory of ranks gets a job view that matches collectives across ranks and measures each rank's
wait (last arrival minus its own) per step. When both runs of a diff carry it, the exposed
communication of a rank's typical step is split: the wait part is the rank's wait per step, at most
the exposed communication; the rest is transfer. Reports without a job view get no split.
"""

from __future__ import annotations

from typing import Any

_MAX_DEPTH = 3


def rank_waits_ms(report: dict[str, Any]) -> dict[int, float]:
    """rank -> wait per step (ms) from the report's job view; empty without one."""
    table = _find_rank_table(report.get("job"), _MAX_DEPTH)
    out = {}
    for row in table or []:
        if isinstance(row, dict) and isinstance(row.get("rank"), int) and isinstance(row.get("wait_ms_per_step"), (int, float)):
            out[row["rank"]] = float(row["wait_ms_per_step"])
    return out


def _find_rank_table(node: Any, depth: int) -> list | None:
    if not isinstance(node, dict) or depth < 0:
        return None
    table = node.get("rank_table")
    if isinstance(table, list) and any(isinstance(r, dict) and "wait_ms_per_step" in r for r in table):
        return table
    for value in node.values():
        found = _find_rank_table(value, depth - 1)
        if found is not None:
            return found
    return None


def split_exposed_ns(exposed_ns: int, wait_ms: float | None) -> tuple[int, int] | None:
    """(wait, transfer) parts of ``exposed_ns``; None without a measured wait."""
    if wait_ms is None:
        return None
    wait = min(exposed_ns, max(0, round(wait_ms * 1e6)))
    return wait, exposed_ns - wait
