"""Kernel gaps per stream: the time between the end of one GPU op and the start of the next."""

from __future__ import annotations

import numpy as np

from ...model import intervals as iv
from ...model.evidence import StreamGaps, TopGap
from ...model.groups import Groups, lex_order
from ...model.trace import Trace
from ...model.stats import percentile
from ..host.links import OpsByExternalId
from .idle import CAUSES
from ..core.registry import Produced, analysis

# A gap's cause is the idle cause the canonical split (``idle.py``) gave the device-idle part of it, by the
# most time; a gap during which other streams kept the device busy is not idle at all: ``device_busy``.
DEVICE_BUSY = "device_busy"
GAP_CAUSES = (*CAUSES, DEVICE_BUSY)


def stream_gaps(
    trace: Trace,
    lo: int,
    hi: int,
    gpu_ext: np.ndarray,
    ops: OpsByExternalId,
    idle_sets: dict[str, iv.IntervalSet],
    comm_mask: np.ndarray | None = None,
    top: int = 10,
) -> dict:
    """Per-stream gap statistics and the top gaps inside ``[lo, hi)``.

    Each gap is split by the idle causes of the time it covers (``idle_sets``: cause -> interval set);
    the part during which the device ran other streams' ops is ``device_busy``. The top gaps are the
    ones holding the most device-idle time (then the longest), each named by its main cause.
    """
    g = trace.gpu_ops
    empty = {"streams": [], "top": [], "all_ns": np.zeros(0, dtype=np.int64)}
    if len(g) < 2:
        return empty
    dev, stream, s, e = g["device"], g["stream"], g["start_ns"], g["end_ns"]
    order = lex_order((s, stream, dev))
    d_o, st_o, s_o, e_o = dev[order], stream[order], s[order], e[order]
    same = np.zeros(order.size, dtype=bool)
    same[1:] = (d_o[1:] == d_o[:-1]) & (st_o[1:] == st_o[:-1])
    # Running max of ends within each stream (ops on one stream should not overlap, but be safe).
    prev_end = e_o.copy()
    bounds = np.append(np.flatnonzero(~same), order.size)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):  # a loop over streams, not ops
        prev_end[a:b] = np.maximum.accumulate(e_o[a:b])
    gap_ns = np.zeros(order.size, dtype=np.int64)
    gap_ns[1:] = s_o[1:] - prev_end[:-1]
    is_gap = same & (gap_ns > 0)
    gap_start = np.zeros(order.size, dtype=np.int64)
    gap_start[1:] = prev_end[:-1]
    in_window = (gap_start >= lo) & (s_o <= hi)
    is_gap &= in_window
    rows = np.flatnonzero(is_gap)
    if rows.size == 0:
        return empty
    g_s, g_e = gap_start[rows], s_o[rows]
    # time of each gap under each idle cause; the rest of it the device was busy elsewhere
    by_cause = np.stack([iv.overlap_per_interval(g_s, g_e, idle_sets.get(c, iv.empty())) for c in CAUSES], axis=1)
    idle_ns = by_cause.sum(axis=1)
    per_cause = np.concatenate([by_cause, (g_e - g_s - idle_ns)[:, None]], axis=1)
    cause = np.where(idle_ns > 0, np.argmax(by_cause, axis=1), len(CAUSES))
    comm = comm_mask[order] if comm_mask is not None and comm_mask.size else np.zeros(order.size, dtype=bool)
    by_stream = Groups(d_o, st_o)
    dur = e_o - s_o
    mostly_comm = by_stream.sum(np.where(comm, dur, 0)) > 0.5 * by_stream.sum(dur)
    gap_v = gap_ns[rows]
    gaps = Groups(d_o[rows], st_o[rows])
    comm_stream = gaps.first(mostly_comm[by_stream.index[rows]])
    streams = []
    for i, (d, st) in enumerate(zip(gaps.keys[0].tolist(), gaps.keys[1].tolist())):
        mine = gaps.index == i
        v = gap_v[mine]
        totals = per_cause[mine].sum(axis=0)
        streams.append(
            StreamGaps(
                device=int(d),
                stream=int(st),
                count=int(v.size),
                total_ns=int(v.sum()),
                p50_ns=percentile(v, 50),
                p95_ns=percentile(v, 95),
                max_ns=int(v.max()),
                comm_stream=bool(comm_stream[i]),
                causes_ns={GAP_CAUSES[k]: int(x) for k, x in enumerate(totals.tolist()) if x > 0},
            )
        )
    # the gaps holding the most device-idle time first, then the longest
    top_gaps = lex_order((-gap_v, -idle_ns))[:top]
    top_list = []
    for j in top_gaps.tolist():
        r = int(rows[j])
        nxt = int(order[r])
        prv = int(order[r - 1])
        top_list.append(
            TopGap(
                device=int(d_o[r]),
                stream=int(st_o[r]),
                start_ns=int(gap_start[r]),
                gap_ns=int(gap_ns[r]),
                device_idle_ns=int(idle_ns[j]),
                cause=GAP_CAUSES[int(cause[j])],
                before=trace.string(int(g["name"][prv])),
                after=trace.string(int(g["name"][nxt])),
                **_launching_op(trace, nxt, gpu_ext, ops),
            )
        )
    return {"streams": streams, "top": top_list, "all_ns": gap_ns[rows]}


def _launching_op(trace: Trace, gpu_row: int, gpu_ext: np.ndarray, ops: OpsByExternalId) -> dict:
    """The launch call and the CPU op (innermost with its External id) of a GPU op, and its stack."""
    g, c = trace.gpu_ops, trace.cpu_ops
    out = {"launched_by": None, "launch_call": None, "stack": None}
    launch = int(g["launch"][gpu_row])
    if launch >= 0:
        out["launch_call"] = trace.string(int(trace.runtime["name"][launch]))
    row = int(ops.rows_of(gpu_ext[gpu_row : gpu_row + 1])[0])
    if row >= 0:
        out["launched_by"] = trace.string(int(c["name"][row]))
        if c["stack"][row] >= 0:
            out["stack"] = trace.string(int(c["stack"][row]))
    return out


@analysis(
    needs=("comm_mask", "window", "gpu_ext", "launching_ops", "idle_sets"),
    produces=("gap_max_ns", "gap_p95_ns"),
    evidence=("top_gaps", "stream_gaps"),
)
def kernel_gaps(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    gap = stream_gaps(
        trace,
        win.start_ns,
        win.end_ns,
        inputs["gpu_ext"],
        inputs["launching_ops"],
        inputs["idle_sets"],
        inputs["comm_mask"],
    )
    gaps_ns = gap["all_ns"]
    m = {
        "gap_max_ns": int(gaps_ns.max()) if gaps_ns.size else None,
        "gap_p95_ns": percentile(gaps_ns, 95) if gaps_ns.size else None,
    }
    return Produced(metrics=m, evidence={"top_gaps": gap["top"], "stream_gaps": gap["streams"]})
