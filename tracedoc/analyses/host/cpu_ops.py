"""The host side beyond syncs and the input pipeline: CPU operators by self time (traces without GPU
ops), and whether single-process data parallelism is used."""

from __future__ import annotations

import numpy as np

from ...model import trace as M
from ...model import vocab as V
from ...model.evidence import HostOperator
from ...model.groups import Groups, dense_codes, largest_first, row_codes
from ...model.trace import Trace
from ..kernels import classify as C
from ..core.registry import Produced, analysis


def uses_data_parallel(trace: Trace) -> bool:
    c = trace.cpu_ops
    if not len(c):
        return False
    return bool(C.name_mask(trace, V.DATA_PARALLEL_RE, ids=c["name"]).any())


def host_operators(trace: Trace, lo: int, hi: int, top: int = 15) -> list[HostOperator]:
    """CPU operators (``cpu_op``) started in ``[lo, hi)`` by their self time (time not spent in a nested
    span), with their total (inclusive) time; shares are of the window, and self-time shares add up to
    at most 100% per thread."""
    c = trace.cpu_ops
    if not len(c) or hi <= lo:
        return []
    sel = (c["kind"] == M.CPU_OP) & (c["start_ns"] >= lo) & (c["start_ns"] < hi)
    if not sel.any():
        return []
    total = c["end_ns"] - c["start_ns"]
    own = total - _children_ns(c)
    groups = Groups(c["name"][sel])
    calls, self_ns, cpu_ns = groups.count(), groups.sum(own[sel]), groups.sum(total[sel])
    return [
        HostOperator(
            name=trace.string(int(groups.keys[0][i])),
            calls=int(calls[i]),
            self_ns=int(self_ns[i]),
            cpu_ns=int(cpu_ns[i]),
            share=float(self_ns[i]) / (hi - lo),
        )
        for i in largest_first(self_ns)[:top].tolist()
    ]


def _children_ns(c) -> np.ndarray:
    """Per CPU span, the summed duration of its direct children: for each depth level, every span of
    depth d+1 is matched to the latest span of depth d on its thread that started before it (of
    spans starting together, the last in file order). Threads share one axis, ``thread * n + start
    rank``, so each level is one sorted search over all threads."""
    n = len(c)
    out = np.zeros(n, dtype=np.int64)
    depth = c["depth"].astype(np.int64)
    if not n or depth.max() <= 0:
        return out
    key = row_codes(c["pid"], c["tid"])[0] * n + dense_codes(c["start_ns"])[1]
    dur = (c["end_ns"] - c["start_ns"]).astype(np.int64)
    for d in range(int(depth.max())):
        parents, kids = np.flatnonzero(depth == d), np.flatnonzero(depth == d + 1)
        if not parents.size or not kids.size:
            continue
        parents = parents[np.argsort(key[parents], kind="stable")]
        j = np.searchsorted(key[parents], key[kids], side="right") - 1
        ok = j >= 0
        ok[ok] = key[parents[j[ok]]] // n == key[kids[ok]] // n  # on the kid's own thread
        np.add.at(out, parents[j[ok]], dur[kids[ok]])
    return out


@analysis(needs=("window",), evidence=("host_operators",))
def host_operator_table(trace: Trace, inputs) -> Produced:
    """For traces without GPU ops: where the host time goes, by operator."""
    win = inputs["window"]
    rows = host_operators(trace, win.start_ns, win.end_ns) if not len(trace.gpu_ops) else []
    return Produced(evidence={"host_operators": rows})
