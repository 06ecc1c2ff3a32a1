"""Which CPU op encloses which call or op, per thread, without per-event loops.

Times of all threads go onto one axis (``ThreadClock``) so that containment within a thread is one
sorted search over every thread at once: the counted op a kernel's launch call ran inside, the
backward frame an op ran in, the innermost op around a runtime call.
"""

from __future__ import annotations

import weakref

import numpy as np

from ...model import trace as M
from ...model.groups import distinct, lex_order, row_codes
from ...model.trace import Table, Trace


class ThreadClock:
    """Places times of different threads on disjoint ranges of one axis, ``code * span + t``, so that
    per-thread interval containment is one sorted search over all threads at once.

    When the trace's time range times its thread count would overflow int64 (a stray event at time 0
    beside epoch timestamps), times are replaced by their rank among all times, which keeps every
    comparison and needs a span of only the number of distinct times.
    """

    LIMIT = 2**62

    def __init__(self, trace: Trace):
        c, r = trace.cpu_ops, trace.runtime
        pid = np.concatenate([c["pid"], r["pid"]])
        tid = np.concatenate([c["tid"], r["tid"]])
        code = row_codes(pid, tid)[0]  # threads numbered in (pid, tid) order
        self.cpu_code, self.rt_code = code[: len(c)], code[len(c) :]
        cols = (c["start_ns"], c["end_ns"], r["start_ns"], r["end_ns"])
        lo = min((int(a.min()) for a in cols if a.size), default=0)
        hi = max((int(a.max()) for a in cols if a.size), default=0)
        threads = int(code.max()) + 1 if code.size else 1
        if (hi - lo + 2) * threads < self.LIMIT:
            self.span = hi - lo + 2
            self.times = tuple(a - lo for a in cols)
        else:
            values, ranks = np.unique(np.concatenate(cols), return_inverse=True)
            self.span = values.size + 1
            self.times = tuple(np.split(ranks.reshape(-1).astype(np.int64), np.cumsum([a.size for a in cols])[:-1]))

    def cpu(self, rows: np.ndarray, col: str) -> np.ndarray:
        return self.cpu_code[rows] * self.span + self.times[0 if col == "start_ns" else 1][rows]

    def runtime(self, rows: np.ndarray, col: str) -> np.ndarray:
        return self.rt_code[rows] * self.span + self.times[2 if col == "start_ns" else 3][rows]


_nest_memo: list = []  # (weak references to the four columns it was sorted by, the order of all rows)


def _forget(full: np.ndarray) -> None:
    if _nest_memo and _nest_memo[1] is full:
        _nest_memo.clear()


def nest_order(c: Table, rows: np.ndarray) -> np.ndarray:
    """``rows`` of the CPU ops table ``c`` by thread (pid, then tid), start, and end descending (an op
    before the ops nested in it), ties in row order: ``rows[lex_order((-end, start, tid, pid))]``.

    Several analyses ask for this order of a subset of the same ops; the order of all rows is sorted
    once (per set of columns, held weakly) and each ascending subset is read off it in one pass."""
    cols = (c["pid"], c["tid"], c["start_ns"], c["end_ns"])
    if rows.size < 2 or not (rows[1:] > rows[:-1]).all():  # a row or none, or rows not ascending
        return rows[lex_order((-cols[3][rows], cols[2][rows], cols[1][rows], cols[0][rows]))]
    full = None
    if _nest_memo and all(ref() is col for ref, col in zip(_nest_memo[0], cols)):
        full = _nest_memo[1]
    if full is None:
        full = lex_order((-cols[3], cols[2], cols[1], cols[0]))
        _nest_memo[:] = [tuple(weakref.ref(col) for col in cols), full]
        weakref.finalize(cols[2], _forget, full)  # the order goes with the table's columns
    if rows.size == full.size:
        return full.copy()
    keep = np.zeros(full.size, dtype=bool)
    keep[rows] = True
    return full[keep[full]]


def enclosing(outer_s: np.ndarray, outer_e: np.ndarray, q_s: np.ndarray, q_e: np.ndarray) -> np.ndarray:
    """For non-overlapping ``outer`` intervals sorted by start: index of the one containing each query
    interval, -1 where none."""
    if not outer_s.size or not q_s.size:
        return np.full(q_s.size, -1, dtype=np.int64)
    idx = np.searchsorted(outer_s, q_s, side="right") - 1
    ok = (idx >= 0) & (outer_e[np.maximum(idx, 0)] >= q_e)
    return np.where(ok, idx, -1)


def union_on_clock(trace: Trace, rows: np.ndarray, clock: ThreadClock) -> tuple[np.ndarray, np.ndarray]:
    """The union of cpu op spans (nested ones merge), on the thread clock, sorted."""
    fs, fe = clock.cpu(rows, "start_ns"), clock.cpu(rows, "end_ns")
    order = np.argsort(fs, kind="stable")
    fs, fe = fs[order], fe[order]
    run_end = np.maximum.accumulate(fe)
    new = np.ones(fs.size, dtype=bool)
    new[1:] = fs[1:] > run_end[:-1]
    return fs[new], np.maximum.reduceat(fe, np.flatnonzero(new))


def kernel_owners(trace: Trace, rows, ks, clock: ThreadClock, kernel, gpu_ext, launching_ops) -> np.ndarray:
    """Index into the counted ops of the op each kernel was launched inside (-1 none).

    The launch call's span lies inside the op on the launching thread; kernels with no linked launch
    call fall back to the op their External id names.
    """
    g = trace.gpu_ops
    owner = np.full(len(g), -1, dtype=np.int64)
    if not len(g) or not rows.size:
        return owner
    ke = clock.cpu(rows, "end_ns")
    launch = g["launch"]
    by_call = kernel & (launch >= 0)
    if by_call.any():
        call = launch[by_call]
        owner[by_call] = enclosing(ks, ke, clock.runtime(call, "start_ns"), clock.runtime(call, "end_ns"))
    op_rows = launching_ops.rows_of(gpu_ext)
    by_ext = kernel & (owner < 0) & (op_rows >= 0)
    if by_ext.any():
        q = op_rows[by_ext]
        owner[by_ext] = enclosing(ks, ke, clock.cpu(q, "start_ns"), clock.cpu(q, "end_ns"))
    return owner


def innermost_op_names(trace: Trace, clock: ThreadClock, calls: np.ndarray) -> np.ndarray:
    """Name id of the deepest cpu_op around each runtime call on its thread (-1 none): for traces whose
    External ids do not link kernels to ops. Ops of one depth do not overlap on a thread, so each depth
    is one sorted search; the deepest hit wins."""
    c = trace.cpu_ops
    out = np.full(calls.size, -1, dtype=np.int64)
    qs, qe = clock.runtime(calls, "start_ns"), clock.runtime(calls, "end_ns")
    ops = np.flatnonzero(c["kind"] == M.CPU_OP)
    depth = c["depth"][ops]
    for d in distinct(depth).tolist():
        rows = ops[depth == d]
        ks = clock.cpu(rows, "start_ns")
        order = np.argsort(ks, kind="stable")
        rows, ks = rows[order], ks[order]
        hit = enclosing(ks, clock.cpu(rows, "end_ns"), qs, qe)
        out[hit >= 0] = c["name"][rows[hit[hit >= 0]]]
    return out
