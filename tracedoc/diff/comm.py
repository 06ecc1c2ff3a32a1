"""Exposed communication split into waiting and transfer, where the job view measured waits.

A directory of ranks gets a job view that matches collectives across ranks and measures each rank's
wait (last arrival minus its own) per step. When both runs of a diff carry it, the exposed
communication of a rank's typical step is split: the wait part is the rank's wait per step, at most
the exposed communication; the rest is transfer. Results without a job view get no split.
"""

from __future__ import annotations

from ..result import AnalysisResult


def rank_waits_ns(result: AnalysisResult) -> dict[int, float]:
    """rank -> wait per step (ns) from the job's rank table; empty without a job view."""
    if result.job is None:
        return {}
    return {
        row.rank: float(row.wait_ns_per_step)
        for row in result.job.ranks
        if row.rank is not None and row.wait_ns_per_step is not None
    }


def split_exposed_ns(exposed_ns: int, wait_ns: float | None) -> tuple[int, int] | None:
    """(wait, transfer) parts of ``exposed_ns``; None without a measured wait."""
    if wait_ns is None:
        return None
    wait = min(exposed_ns, max(0, round(wait_ns)))
    return wait, exposed_ns - wait
