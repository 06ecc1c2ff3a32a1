"""The launch queue (docs/definitions.md: full launch queue, queue depth).

Each GPU op waits in its stream's queue from its launch call until it has finished. When the CPU
runs ahead of the GPU the queue fills; once it holds as many ops as the driver accepts, the next
launch call blocks until an op finishes and frees a slot. That host time is **back-pressure**: the
GPU is the bottleneck, and the time is neither launch overhead nor host work (a CUDA graph or a
faster host would not shorten the step).

A launch call blocked on a full queue when the profiler recorded a ``Command Buffer Full`` span
inside it (Kineto's CUPTI overhead record), or when it began with the stream's queue at capacity and
lasted longer than its kind of call usually does, returning just after an op of its stream finished
(the freed slot); its blocked time is the ``Command Buffer Full`` span, else its time beyond the usual
duration of its kind of call.

Input: a ``Trace``, its window and pre-window backlog. Output: per stream the queue depth over time
(launched, not finished), its maximum, the launch calls that blocked and the host time they
blocked; and the host's time per launch (the median interval between a thread's launch calls),
against which idle gaps are judged short or long.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...model import intervals as iv
from ...model import vocab as V
from ...model.evidence import LaunchQueueRow
from ...model.groups import Groups, isin, lex_order
from ...model.stats import median
from ...model.trace import Trace
from ..kernels import classify as C
from ..gputime.backlog import Backlog
from ..core.registry import Produced, analysis

# Launched, unfinished ops a stream's queue holds before the next launch call blocks: HTA's
# CUDA_MAX_LAUNCH_QUEUE_PER_STREAM. On an H100 with CUDA 13 the calls Kineto marks "Command Buffer
# Full" began with 1,022-1,023 ops queued (the call's own op makes 1,024); two fewer allows for
# timestamps rounded to microseconds.
QUEUE_CAPACITY = 1024
FULL_SLACK = 2
# A call that began on a full queue blocked when it lasted more than this many times the median
# duration of calls of its name (a launch costs a few microseconds; one that waits for a slot lasts
# until an op finishes).
BLOCKED_FACTOR = 2.0
# ... and it returned when a slot freed: within its own usual duration plus a thread's wake-up after an op
# of its stream finished (a Linux thread resumes tens of microseconds after it is signalled at most; on
# H100 and V100 traces the calls Kineto marks blocked returned 1-23 us after an op ended).
WAKE_NS = 20_000
FULL_QUEUE_SPAN = "Command Buffer Full"
SERIES_POINTS = 120  # points of each stream's depth series (the maximum over each stretch of the window)
# An idle gap whose next op the host launched late is "long" (host work, not dispatch) when it lasts at
# least this many of the host's launch periods: the time to dispatch this many ops one after another.
LONG_GAP_LAUNCHES = 10
LONG_GAP_DEFAULT_NS = 1_000_000  # without enough launch calls to measure a launch period


@dataclass
class LaunchQueue:
    """Blocked launch calls (runtime rows), their blocked host time, and per-stream queue rows."""

    blocked_rows: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    blocked_ns: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    streams: list[LaunchQueueRow] = field(default_factory=list)

    def blocked_spans(self, trace: Trace) -> iv.IntervalSet:
        """The host time blocked on a full queue: the end of each blocked call, as long as it blocked."""
        r = trace.runtime
        if not self.blocked_rows.size:
            return iv.empty()
        e = r["end_ns"][self.blocked_rows]
        return iv.union(e - self.blocked_ns, e)


def launch_calls(trace: Trace) -> np.ndarray:
    """Per runtime row: a launch call (kernel, copy, memset, graph launch)."""
    r = trace.runtime
    if not len(r):
        return np.zeros(0, dtype=bool)
    return C.name_mask(trace, V.LAUNCH_CALL_RE, ids=r["name"])[r["name"]]


def launch_period_ns(trace: Trace, lo: int | None = None, hi: int | None = None) -> float | None:
    """The host's time per launch: the median interval between consecutive launch calls on each
    thread that launches (inside ``[lo, hi)`` when given). None with fewer than 3 launch calls."""
    r = trace.runtime
    rows = np.flatnonzero(launch_calls(trace))
    if lo is not None:
        rows = rows[(r["start_ns"][rows] >= lo) & (r["start_ns"][rows] < hi)]
    if rows.size < 3:
        return None
    order = rows[lex_order((r["start_ns"][rows], r["tid"][rows], r["pid"][rows]))]
    same = (r["pid"][order][1:] == r["pid"][order][:-1]) & (r["tid"][order][1:] == r["tid"][order][:-1])
    d = np.diff(r["start_ns"][order])[same]
    return float(median(d)) if d.size else None


def long_gap_ns(trace: Trace, lo: int | None = None, hi: int | None = None) -> int:
    """The length from which a host-late idle gap is long: ``LONG_GAP_LAUNCHES`` launch periods (the
    trace's own cost of dispatching that many ops), or ``LONG_GAP_DEFAULT_NS`` when unmeasurable."""
    p = launch_period_ns(trace, lo, hi)
    return int(LONG_GAP_LAUNCHES * p) if p else LONG_GAP_DEFAULT_NS


def _launched_at(trace: Trace, backlog: Backlog | None) -> np.ndarray:
    """When each GPU op entered its queue: when its launch call returned (a call blocked on a full queue
    returns once its op has a slot); a backlog's ops were queued before the capture (its start); other
    ops without a launch call, when they started."""
    g, r = trace.gpu_ops, trace.runtime
    out = g["start_ns"].copy()
    linked = g["launch"] >= 0
    if linked.any():
        out[linked] = np.minimum(r["end_ns"][g["launch"][linked]], g["start_ns"][linked])
    if backlog is not None and backlog.found:
        out[backlog.ops] = np.minimum(out[backlog.ops], backlog.start_ns)
    return out


def _depth_steps(launched: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The queue depth as a step function: change times and the depth from each one on."""
    t = np.concatenate([launched, ends])
    delta = np.concatenate([np.ones(launched.size, dtype=np.int64), -np.ones(ends.size, dtype=np.int64)])
    order = lex_order((delta, t))  # at equal times, finishing before launching
    t, depth = t[order], np.cumsum(delta[order])
    last = np.r_[t[1:] != t[:-1], True]  # the depth after all changes at one time
    return t[last], depth[last]


def _depth_at(times: np.ndarray, depths: np.ndarray, at: np.ndarray) -> np.ndarray:
    """The depth just before each time in ``at`` (a launch call sees the queue as it was)."""
    i = np.searchsorted(times, at, side="left") - 1
    return np.where(i >= 0, depths[np.maximum(i, 0)], 0)


def launch_queue(trace: Trace, lo: int, hi: int, backlog: Backlog | None = None) -> LaunchQueue:
    """The launch queue of every stream inside ``[lo, hi)`` and the launch calls that blocked on it."""
    g, r = trace.gpu_ops, trace.runtime
    if not len(g):
        return LaunchQueue()
    launched = _launched_at(trace, backlog)
    streams = Groups(g["device"], g["stream"])
    # per stream: its ops and its queue depth as a step function (read by both passes below)
    stream_ops = streams.rows()
    steps = [_depth_steps(launched[ops], g["end_ns"][ops]) for ops in stream_ops]
    # per runtime row: the stream of the op it launched (-1: none)
    linked = np.flatnonzero(g["launch"] >= 0)
    call_stream = np.full(len(r), -1, dtype=np.int64)
    call_stream[g["launch"][linked]] = streams.index[linked]
    # -- blocked calls ------------------------------------------------------------------------
    is_launch = launch_calls(trace)
    blocked = np.zeros(len(r), dtype=bool)
    blocked_ns = np.zeros(len(r), dtype=np.int64)
    if len(r) and is_launch.any():
        dur = r["end_ns"] - r["start_ns"]
        _mark_buffer_full(trace, is_launch, blocked, blocked_ns)
        # calls that began with their stream's queue at capacity and outlasted their kind's usual time
        usual = _usual_duration(trace, is_launch)
        for k, ops in enumerate(stream_ops):  # a loop over streams, not ops
            times, depths = steps[k]
            calls = np.flatnonzero(call_stream == k)
            full = _depth_at(times, depths, r["start_ns"][calls]) >= QUEUE_CAPACITY - FULL_SLACK
            longer = dur[calls] > BLOCKED_FACTOR * usual[calls]
            ends = np.sort(g["end_ns"][ops])
            i = np.searchsorted(ends, r["end_ns"][calls], side="right") - 1
            freed = (i >= 0) & (r["end_ns"][calls] - ends[np.maximum(i, 0)] <= usual[calls] + WAKE_NS)
            freed &= ends[np.maximum(i, 0)] >= r["start_ns"][calls]  # the slot freed while it waited
            hit = calls[full & longer & freed & ~blocked[calls]]
            blocked[hit] = True
            blocked_ns[hit] = np.maximum(dur[hit] - usual[hit].astype(np.int64), 0)
    rows = np.flatnonzero(blocked & (r["end_ns"] > lo) & (r["start_ns"] < hi)) if len(r) else np.zeros(0, np.int64)
    out = LaunchQueue(rows, blocked_ns[rows])
    # -- per-stream depth ---------------------------------------------------------------------
    for k, ops in enumerate(stream_ops):
        times, depths = steps[k]
        mine = rows[call_stream[rows] == k]
        out.streams.append(
            _stream_row(
                int(streams.keys[0][k]),
                int(streams.keys[1][k]),
                times,
                depths,
                lo,
                hi,
                int(np.count_nonzero((launched[ops] >= lo) & (launched[ops] < hi))),
                mine.size,
                int(blocked_ns[mine].sum()),
            )
        )
    out.streams.sort(key=lambda row: (-row.depth_max, row.device, row.stream))
    return out


def _mark_buffer_full(trace: Trace, is_launch: np.ndarray, blocked: np.ndarray, blocked_ns: np.ndarray) -> None:
    """Launch calls holding a recorded ``Command Buffer Full`` span (Kineto: category ``overhead``, no
    thread): blocked for the time those spans cover inside them."""
    o, r = trace.other_spans, trace.runtime
    if not len(o):
        return
    full = isin(o["name"], np.flatnonzero(trace.string_ids(lambda s: s == FULL_QUEUE_SPAN)))
    if not full.any():
        return
    spans = iv.union(o["start_ns"][full], o["end_ns"][full])
    calls = np.flatnonzero(is_launch)
    inside = iv.overlap_per_interval(r["start_ns"][calls], r["end_ns"][calls], spans)
    hit = inside > 0
    blocked[calls[hit]] = True
    blocked_ns[calls[hit]] = inside[hit]


def _usual_duration(trace: Trace, is_launch: np.ndarray) -> np.ndarray:
    """Per runtime row: the median duration of the launch calls of its name (0 for other calls)."""
    r = trace.runtime
    out = np.zeros(len(r), dtype=np.float64)
    rows = np.flatnonzero(is_launch)
    if not rows.size:
        return out
    by_name = Groups(r["name"][rows])
    dur = (r["end_ns"] - r["start_ns"])[rows]
    order = lex_order((dur, by_name.index))
    counts = by_name.count()
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    sorted_dur = dur[order]
    med = np.array([float(median(sorted_dur[a : a + n])) for a, n in zip(starts.tolist(), counts.tolist())])
    out[rows] = med[by_name.index]
    return out


def _stream_row(
    device: int,
    stream: int,
    times: np.ndarray,
    depths: np.ndarray,
    lo: int,
    hi: int,
    launches: int,
    blocked_calls: int,
    blocked_ns: int,
) -> LaunchQueueRow:
    """One stream's queue: its maximum and time-weighted mean depth in the window, the host time blocked
    on it, and the depth over the window as ``SERIES_POINTS`` points (offset from the window's start,
    the maximum depth over the stretch that begins there)."""
    start_depth = _depth_at(times, depths, np.array([lo]))[0] if times.size else 0
    inside = (times >= lo) & (times < hi)
    t = np.r_[lo, times[inside]]
    d = np.r_[start_depth, depths[inside]]
    length = max(hi - lo, 1)
    held = np.diff(np.r_[t, hi])
    mean = float((d * held).sum() / length)
    edges = lo + (np.arange(SERIES_POINTS + 1) * (length / SERIES_POINTS)).astype(np.int64)
    # the maximum depth over each stretch: the depth entering it and every change inside it
    which = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, SERIES_POINTS - 1)
    peak = np.zeros(SERIES_POINTS, dtype=np.int64)
    np.maximum.at(peak, which, d)
    entering = _depth_at(np.r_[lo, times], np.r_[start_depth, depths], edges[:-1] + 1)
    peak = np.maximum(peak, entering)
    return LaunchQueueRow(
        device=device,
        stream=stream,
        launches=launches,
        depth_max=int(d.max()),
        depth_mean=mean,
        blocked_calls=int(blocked_calls),
        blocked_ns=int(blocked_ns),
        series_step_ns=int(length // SERIES_POINTS),
        series=peak.tolist(),
    )


@analysis(
    needs=("window", "backlog"),
    provides=("launch_queue",),
    produces=(
        "launch_queue_depth_max",
        "launch_blocked_calls",
        "launch_blocked_fraction",
        "launch_period_ns",
        "host_gap_long_ns",
    ),
    evidence=("launch_queue",),
)
def launch_queue_depth(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    # the whole analysed span: a queue that fills while a pre-window backlog runs does so before the window
    lo, hi = win.span_lo, win.end_ns
    q = launch_queue(trace, lo, hi, inputs["backlog"])
    blocked = iv.total(iv.clip(q.blocked_spans(trace), lo, hi))
    length = hi - lo
    m = {
        "launch_queue_depth_max": max((s.depth_max for s in q.streams), default=None),
        "launch_blocked_calls": int(q.blocked_rows.size),
        "launch_blocked_fraction": blocked / length if length > 0 else None,
        "launch_period_ns": launch_period_ns(trace, lo, hi),
        "host_gap_long_ns": long_gap_ns(trace, lo, hi),
    }
    return Produced(metrics=m, evidence={"launch_queue": q.streams}, values={"launch_queue": q})
