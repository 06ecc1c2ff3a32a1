"""GPU time breakdown: busy, compute, communication, exposed communication, overlap, copies.

Each quantity is the length of a union of intervals clipped to a window (DESIGN.md), computed by
the interval algebra in ``tracedoc.model.intervals``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..model import intervals as iv
from ..model import trace as M
from ..model.trace import Trace


@dataclass
class OpSets:
    """The interval unions the breakdown and idle analyses share (whole trace, not clipped)."""

    busy: iv.IntervalSet
    compute: iv.IntervalSet
    comm: iv.IntervalSet
    memcpy: iv.IntervalSet
    h2d: iv.IntervalSet
    pageable: iv.IntervalSet
    memset: iv.IntervalSet


def op_sets(trace: Trace, comm_mask: np.ndarray, rows: np.ndarray | None = None) -> OpSets:
    g = trace.gpu_ops
    s, e, kind = g["start_ns"], g["end_ns"], g["kind"]
    sel = np.ones(len(g), dtype=bool) if rows is None else rows

    def u(mask: np.ndarray) -> iv.IntervalSet:
        m = mask & sel
        return iv.union(s[m], e[m])

    is_kernel = kind == M.KERNEL
    is_copy = kind == M.MEMCPY
    pageable = is_copy & ((g["src_kind"] == M.MEM_PAGEABLE) | (g["dst_kind"] == M.MEM_PAGEABLE))
    return OpSets(
        busy=u(np.ones(len(g), dtype=bool)),
        compute=u(is_kernel & ~comm_mask),
        comm=u(comm_mask),
        memcpy=u(is_copy),
        h2d=u(is_copy & (g["copy_kind"] == M.COPY_HTOD)),
        pageable=u(pageable),
        memset=u(kind == M.MEMSET),
    )


def breakdown(sets: OpSets, lo: int, hi: int) -> dict[str, float | None]:
    """Fractions of ``[lo, hi)``; ``comm_overlap_fraction`` is None without communication."""
    length = hi - lo

    def frac(x: int) -> float:
        return x / length if length > 0 else 0.0

    compute = iv.clip(sets.compute, lo, hi)
    comm = iv.clip(sets.comm, lo, hi)
    comm_ns = iv.total(comm)
    exposed_ns = iv.total(iv.subtract(comm, compute))
    busy_ns = iv.total(iv.clip(sets.busy, lo, hi))
    out = {
        "gpu_busy_fraction": frac(busy_ns),
        "compute_fraction": frac(iv.total(compute)),
        "comm_fraction": frac(comm_ns),
        "exposed_comm_fraction": frac(exposed_ns),
        "comm_overlap_fraction": (comm_ns - exposed_ns) / comm_ns if comm_ns > 0 else None,
        "memcpy_fraction": frac(iv.total(iv.clip(sets.memcpy, lo, hi))),
        "h2d_fraction": frac(iv.total(iv.clip(sets.h2d, lo, hi))),
        "exposed_h2d_fraction": frac(iv.total(iv.subtract(iv.clip(sets.h2d, lo, hi), compute))),
        "pageable_memcpy_fraction": frac(iv.total(iv.clip(sets.pageable, lo, hi))),
        "memset_fraction": frac(iv.total(iv.clip(sets.memset, lo, hi))),
        "idle_fraction": frac(length - busy_ns) if length > 0 else 0.0,
    }
    return out
