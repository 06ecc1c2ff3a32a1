"""What the host did while the GPU waited for it (the evidence of ``host_bound``, docs/guide.md: labels).

The long host-late gaps (``idle.IdleCauses.host_late_long``: the GPU idle, the next op launched only
after the gap began, the gap many launch periods long) are time the launching thread spent on other
work than launching. This module names that work: the CPU operators running in those gaps and, when
the trace was recorded ``with_stack``, the Python frames, each by its **self time** inside the gaps
(its own time, its callees' left out), so that the code that holds the host shows rather than the
frames around it (``<module>``, ``_call_impl``).

Python frames nest among themselves, and operators among themselves, but the two do not nest with
each other everywhere (a ``record_function`` range begins inside the ``__enter__`` frame that opens it
and outlives it). So each kind's nesting is taken on its own: a frame's self time is its time less its
callee frames' and less the outermost operators it called; an operator's, less the operators nested in it.

Input: a ``Trace`` and an interval set. Output: rows ``{name, calls, self_ns, total_ns}`` by self time.
"""

from __future__ import annotations

import numpy as np

from ...ingest.depth import nest_depths
from ...model import intervals as iv
from ...model import trace as M
from ...model.evidence import HostWork
from ...model.groups import dense_codes, largest_first, row_codes
from ...model.trace import Trace
from .syncs import launching_threads
from ..core.registry import Produced, analysis
from ..gputime.window import step_name_mask


def _axis(trace: Trace, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Thread code, and start and end on one axis for every thread (``code * span + t``)."""
    c = trace.cpu_ops
    thread = row_codes(c["pid"][rows], c["tid"][rows])[0].astype(np.int64)
    t0 = int(c["start_ns"][rows].min())
    span = int(c["end_ns"][rows].max()) - t0 + 1
    return thread, thread * span + (c["start_ns"][rows] - t0), thread * span + (c["end_ns"][rows] - t0)


def parents(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """For CPU op ``rows`` that nest among themselves (their own nesting depth is taken), the row of the
    op directly around each (one level less deep, on its thread, started at or before it), -1 for the
    outermost. One sorted search per nesting level, not per op."""
    c = trace.cpu_ops
    out = np.full(rows.size, -1, dtype=np.int64)
    if not rows.size:
        return out
    thread, key, _ = _axis(trace, rows)
    depth = nest_depths(c["pid"][rows], c["tid"][rows], c["start_ns"][rows], c["end_ns"][rows])
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


def innermost_enclosing(trace: Trace, outer: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """For each of ``inner`` (CPU op rows), the deepest of ``outer`` (rows that nest among themselves) on
    its thread holding it entirely; -1 where none does."""
    c = trace.cpu_ops
    out = np.full(inner.size, -1, dtype=np.int64)
    if not outer.size or not inner.size:
        return out
    both = np.r_[outer, inner]
    _, key_s, key_e = _axis(trace, both)
    o_s, o_e, i_s, i_e = key_s[: outer.size], key_e[: outer.size], key_s[outer.size :], key_e[outer.size :]
    depth = nest_depths(c["pid"][outer], c["tid"][outer], c["start_ns"][outer], c["end_ns"][outer])
    for d in range(int(depth.max()), -1, -1):  # deepest first: the first level holding an op is its innermost
        level = np.flatnonzero(depth == d)
        level = level[np.argsort(o_s[level], kind="stable")]
        todo = np.flatnonzero(out < 0)
        if not todo.size:
            break
        i = np.searchsorted(o_s[level], i_s[todo], side="right") - 1
        ok = i >= 0
        cand = level[np.maximum(i, 0)]
        ok &= o_e[cand] >= i_e[todo]
        out[todo[ok]] = outer[cand[ok]]
    return out


def _self_within(
    overlap: np.ndarray,
    rows: np.ndarray,
    parent: np.ndarray,
    sub: np.ndarray | None = None,
    sub_owner: np.ndarray | None = None,
) -> np.ndarray:
    """Per row: its overlap less its children's (``parent``) and less ``sub`` overlaps charged to
    ``sub_owner`` rows. ``overlap`` is indexed by cpu_ops row."""
    self_ns = overlap[rows].astype(np.int64).copy()
    idx = np.searchsorted(rows, parent)
    has = parent >= 0
    np.subtract.at(self_ns, idx[has], overlap[rows[has]])
    if sub is not None and sub.size:
        owned = sub_owner >= 0
        np.subtract.at(self_ns, np.searchsorted(rows, sub_owner[owned]), overlap[sub[owned]])
    return np.maximum(self_ns, 0)


def work_in(
    trace: Trace,
    iset: iv.IntervalSet,
    kinds: tuple[int, ...],
    top: int = 15,
    threads: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[HostWork]:
    """CPU ops of ``kinds`` on ``threads`` (pids, tids; default: the launching threads, every thread when
    none is known) overlapping ``iset``, by name: calls, total time inside it (the union of the calls') and self
    time inside it.
    Python frames' self time leaves out the frames they called and the outermost operators they called;
    operators' and annotations', the operators and annotations nested in them. Step spans are left out."""
    c = trace.cpu_ops
    if not len(c) or not iset[0].size:
        return []
    overlap = iv.overlap_per_interval(c["start_ns"], c["end_ns"], iset)
    pids, tids = launching_threads(trace) if threads is None else threads
    if pids.size:
        code = row_codes(np.r_[c["pid"], pids], np.r_[c["tid"], tids])[0]
        overlap = np.where(np.isin(code[: len(c)], code[len(c) :]), overlap, 0)
    hit = overlap > 0
    py = np.flatnonzero(hit & (c["kind"] == M.PYTHON_FUNCTION))
    ops = np.flatnonzero(hit & np.isin(c["kind"], (M.CPU_OP, M.USER_ANNOTATION)))
    out_rows, out_self = [], []
    if M.PYTHON_FUNCTION in kinds and py.size:
        aten = ops[c["kind"][ops] == M.CPU_OP]
        top_aten = aten[parents(trace, aten) < 0]  # the operators Python called (not those they called)
        out_rows.append(py)
        out_self.append(
            _self_within(overlap, py, parents(trace, py), top_aten, innermost_enclosing(trace, py, top_aten))
        )
    if {M.CPU_OP, M.USER_ANNOTATION} & set(kinds) and ops.size:
        out_rows.append(ops)
        out_self.append(_self_within(overlap, ops, parents(trace, ops)))
    if not out_rows:
        return []
    rows, self_ns = np.concatenate(out_rows), np.concatenate(out_self)
    keep = np.isin(c["kind"][rows], kinds) & ~step_name_mask(trace)[c["name"][rows]]
    rows, self_ns = rows[keep], self_ns[keep]
    if not rows.size:
        return []
    uniq, code = dense_codes(c["name"][rows])
    self_by = np.bincount(code, weights=self_ns).astype(np.int64)
    calls = np.bincount(code)
    out = []
    for i in largest_first(self_by)[:top].tolist():
        # instances of one op may overlap (async work recorded on one thread): their time inside the
        # gaps is the union, and no self time exceeds it
        mine = rows[code == i]
        total = iv.total(iv.intersect(iv.union(c["start_ns"][mine], c["end_ns"][mine]), iset))
        if total > 0:
            out.append(
                HostWork(
                    name=trace.string(int(uniq[i])),
                    calls=int(calls[i]),
                    self_ns=int(min(self_by[i], total)),
                    total_ns=int(total),
                )
            )
    return out


@analysis(needs=("window", "idle_split"), evidence=("host_late_cpu_ops", "host_late_python"))
def host_late_work(trace: Trace, inputs) -> Produced:
    """The CPU ops and Python frames in the window's long host-late gaps, by self time."""
    win = inputs["window"]
    gaps = inputs["idle_split"].host_late_long(win.start_ns, win.end_ns)
    return Produced(
        evidence={
            "host_late_cpu_ops": work_in(trace, gaps, (M.CPU_OP, M.USER_ANNOTATION)),
            "host_late_python": work_in(trace, gaps, (M.PYTHON_FUNCTION,)),
        }
    )
