"""Memory copies in the window, by direction: how many, how long, how many bytes at what rate, from
which kind of host memory, and which ops and runtime calls issued them.

The ``memcpy`` evidence table has one row per copy direction (``copy_kind``: HtoD, DtoH, DtoD, ...),
most time first:

- ``count``, ``total_ns`` (sum of the copies' durations), ``bytes`` (sum over copies whose size is
  recorded; None when none is);
- ``achieved_gbps``: bytes / time over the copies whose size is recorded (bytes per ns = GB/s);
- ``pageable_count`` / ``pinned_count``: copies with a pageable / pinned host side; None when no copy
  of that direction records its memory kinds;
- ``ops``: the CPU ops that issued them (innermost op with the copy's External id), ``calls``: the
  runtime calls that launched them (``cudaMemcpy`` is synchronous, ``cudaMemcpyAsync`` is not), each
  as ``"name (count)"``, most frequent first.
"""

from __future__ import annotations

import numpy as np

from ...model import trace as M
from ...model.evidence import CopyDirection
from ...model.groups import distinct
from ...model.trace import Trace
from ..core.registry import Produced, analysis

TOP_NAMES = 3  # ops and calls listed per row


@analysis(needs=("window", "kernel_ops"), produces=("pageable_memcpy_count",), evidence=("memcpy",))
def copies(trace: Trace, inputs) -> Produced:
    g = trace.gpu_ops
    if not len(g):
        return Produced(metrics={"pageable_memcpy_count": 0}, evidence={"memcpy": []})
    lo, hi = inputs["window"].start_ns, inputs["window"].end_ns
    rows = np.flatnonzero((g["kind"] == M.MEMCPY) & (g["start_ns"] < hi) & (g["end_ns"] > lo))
    pageable = (g["src_kind"][rows] == M.MEM_PAGEABLE) | (g["dst_kind"][rows] == M.MEM_PAGEABLE)
    return Produced(
        metrics={"pageable_memcpy_count": int(pageable.sum())},
        evidence={"memcpy": copy_table(trace, rows, inputs["kernel_ops"])},
    )


def copy_table(trace: Trace, rows: np.ndarray, kernel_ops: np.ndarray) -> list[CopyDirection]:
    """One row per copy direction over the ``gpu_ops`` rows given (memcpy rows)."""
    g = trace.gpu_ops
    kind = g["copy_kind"][rows].astype(np.int64)
    dur = (g["end_ns"] - g["start_ns"])[rows]
    nbytes = g["bytes"][rows]
    src, dst = g["src_kind"][rows], g["dst_kind"][rows]
    recorded = (src >= 0) | (dst >= 0)
    pageable = (src == M.MEM_PAGEABLE) | (dst == M.MEM_PAGEABLE)
    pinned = (src == M.MEM_PINNED) | (dst == M.MEM_PINNED)
    ops = kernel_ops[rows]
    launch = g["launch"][rows]
    calls = (
        np.where(launch >= 0, trace.runtime["name"][np.maximum(launch, 0)], -1)
        if len(trace.runtime)
        else np.full(rows.size, -1)
    )
    out = []
    for k in distinct(kind).tolist():
        sel = kind == k
        known = sel & (nbytes >= 0)
        known_ns = int(dur[known].sum())
        total_bytes = int(nbytes[known].sum()) if known.any() else None
        out.append(
            CopyDirection(
                copy_kind=M.COPY_KIND_NAMES.get(k, "unknown"),
                count=int(sel.sum()),
                total_ns=int(dur[sel].sum()),
                bytes=total_bytes,
                achieved_gbps=total_bytes / known_ns if total_bytes is not None and known_ns > 0 else None,
                pageable_count=int((sel & pageable).sum()) if (sel & recorded).any() else None,
                pinned_count=int((sel & pinned).sum()) if (sel & recorded).any() else None,
                ops=_top_names(trace, ops[sel]),
                calls=_top_names(trace, calls[sel]),
            )
        )
    out.sort(key=lambda r: -r.total_ns)
    return out


def _top_names(trace: Trace, ids: np.ndarray) -> list[str]:
    """``"name (count)"`` for the most frequent name ids (ties by name), unknown (-1) left out."""
    ids, counts = np.unique(ids[ids >= 0], return_counts=True)
    named = sorted(((-int(c), trace.string(int(i))) for i, c in zip(ids, counts)))
    return [f"{name} ({-neg})" for neg, name in named[:TOP_NAMES]]
