"""What the host did while the GPU waited for it (the evidence of ``host_bound``, DESIGN.md round 3).

The long host-late gaps (``idle.IdleCauses.host_late_long``: the GPU idle, the next op launched only
after the gap began, the gap many launch periods long) are time the launching thread spent on other
work than launching. This module names that work: the CPU operators running in those gaps and, when
the trace was recorded ``with_stack``, the Python frames, each by its **self time** inside the gaps
(its own time, its callees' left out), so that the code that holds the host shows rather than the
frames around it (``<module>``, ``_call_impl``).

Input: a ``Trace`` and an interval set. Output: rows ``{name, calls, self_ns, total_ns}`` by self time.
"""

from __future__ import annotations

import numpy as np

from ..model import intervals as iv
from ..model import trace as M
from ..model.groups import dense_codes, largest_first, row_codes
from ..model.trace import Trace
from .host import launching_threads
from .registry import Produced, analysis
from .window import step_name_mask


def parents(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """For CPU op ``rows`` (all of one trace's nesting: ``cpu_ops.depth``): the row of the op directly
    around each (one level less deep, on its thread, started at or before it), -1 for the outermost.
    One sorted search per nesting level, not per op."""
    c = trace.cpu_ops
    out = np.full(rows.size, -1, dtype=np.int64)
    if not rows.size:
        return out
    thread = row_codes(c["pid"][rows], c["tid"][rows])[0].astype(np.int64)
    start = c["start_ns"][rows]
    t0 = int(start.min())
    span = int(start.max()) - t0 + 1
    key = thread * span + (start - t0)  # one axis for every thread
    depth = c["depth"][rows].astype(np.int64)
    order = np.argsort(key, kind="stable")
    for d in range(1, int(depth.max()) + 1):
        outer = order[depth[order] == d - 1]
        inner = np.flatnonzero(depth == d)
        if not outer.size or not inner.size:
            continue
        i = np.searchsorted(key[outer], key[inner], side="right") - 1
        ok = i >= 0
        cand = outer[np.maximum(i, 0)]
        ok &= thread[cand] == thread[inner]
        out[inner[ok]] = rows[cand[ok]]
    return out


def work_in(trace: Trace, iset: iv.IntervalSet, kinds: tuple[int, ...], top: int = 15) -> list[dict]:
    """CPU ops of ``kinds`` on the launching threads (every thread when none is known) overlapping
    ``iset``, by name: calls, total time inside it and self time inside it (less the time of the ops
    nested directly inside, of any kind). Step spans are left out."""
    c = trace.cpu_ops
    if not len(c) or not iset[0].size:
        return []
    overlap_all = iv.overlap_per_interval(c["start_ns"], c["end_ns"], iset)
    pids, tids = launching_threads(trace)
    if pids.size:
        code = row_codes(np.r_[c["pid"], pids], np.r_[c["tid"], tids])[0]
        overlap_all = np.where(np.isin(code[:len(c)], code[len(c):]), overlap_all, 0)
    hit = np.flatnonzero(overlap_all > 0)
    if not hit.size:
        return []
    # the ops nested directly inside those that overlap overlap too: their parents are among ``hit``
    parent = parents(trace, hit)
    pos = np.searchsorted(hit, parent)
    has = parent >= 0
    children_ns = np.zeros(hit.size, dtype=np.int64)
    np.add.at(children_ns, pos[has], overlap_all[hit[has]])
    self_ns = np.maximum(overlap_all[hit] - children_ns, 0)
    keep = np.isin(c["kind"][hit], kinds) & ~step_name_mask(trace)[c["name"][hit]]
    if not keep.any():
        return []
    rows = hit[keep]
    uniq, code = dense_codes(c["name"][rows])
    self_by = np.bincount(code, weights=self_ns[keep]).astype(np.int64)
    calls = np.bincount(code)
    out = []
    for i in largest_first(self_by)[:top].tolist():
        # instances of one op may overlap (async work recorded on one thread): their time inside the
        # gaps is the union, and no self time exceeds it
        mine = rows[code == i]
        total = iv.total(iv.intersect(iv.union(c["start_ns"][mine], c["end_ns"][mine]), iset))
        if total > 0:
            out.append({"name": trace.string(int(uniq[i])), "calls": int(calls[i]),
                        "self_ns": int(min(self_by[i], total)), "total_ns": int(total)})
    return out


@analysis(needs=("window", "idle_split"), evidence=("host_late_cpu_ops", "host_late_python"))
def host_late_work(trace: Trace, inputs) -> Produced:
    """The CPU ops and Python frames in the window's long host-late gaps, by self time."""
    win = inputs["window"]
    gaps = inputs["idle_split"].host_late_long(win.start_ns, win.end_ns)
    return Produced(evidence={"host_late_cpu_ops": work_in(trace, gaps, (M.CPU_OP, M.USER_ANNOTATION)),
                              "host_late_python": work_in(trace, gaps, (M.PYTHON_FUNCTION,))})
