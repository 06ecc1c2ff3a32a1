"""Pre-window backlog (docs/definitions.md): GPU work launched before the profiler opened.

When the CPU runs ahead of the GPU, the GPU is still executing work launched before the capture
began. That work has no launch record in the trace. It shows in one of two ways:

- **unlinked ops ahead of the capture's own**: on some stream, the first op the capture launched
  (one linked to a recorded launch call) was launched while ops without a launch record were still
  queued before it, and started only when they were done. Those ops were launched earlier, before
  the capture: nothing inside it launched them.
- **a device that shows no op while launched work waits**: the first op the capture launched waited
  far longer than a launch takes, and the device recorded no op meanwhile: it was busy with work
  the profiler did not record (launched, and begun, before it opened).

Either way the backlog lasts from the start of the capture until the GPU starts on the first work
launched inside it. That time belongs to earlier steps: it is neither idle nor part of a step, and
the missing launch links of its ops are no sign of an old or edited trace.

Input: a ``Trace``. Output: a :class:`Backlog` (``found`` False when there is none).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...model import intervals as iv
from ...model.groups import Groups, lex_order
from ...model.stats import median
from ...model.trace import Trace
from ..core.registry import Produced, analysis

# The first op the capture launched must wait at least this long, and this many times the launch
# latency the trace shows on idle streams, before an empty device is taken to be busy with unrecorded
# work: a launch reaches an idle GPU in microseconds (HTA treats gaps under 30 us as launch latency),
# so a millisecond is two orders of magnitude beyond it.
MIN_UNRECORDED_WAIT_NS = 1_000_000
UNRECORDED_WAIT_FACTOR = 100
# Kineto rounds times to microseconds: an op queued behind another starts "when" it ends, +- 1 us.
QUEUE_TOLERANCE_NS = 2_000


@dataclass
class Backlog:
    """The pre-window backlog of one rank (``found`` False when there is none)."""

    start_ns: int = 0  # where the capture begins (its first recorded event)
    end_ns: int | None = None  # when the GPU started on the first work launched inside the capture
    ops: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # gpu_ops rows it holds
    delayed_ops: int = 0  # ops launched inside the capture that waited behind it
    how: str = ""  # "unlinked" or "unrecorded"

    @property
    def found(self) -> bool:
        return self.end_ns is not None and self.end_ns > self.start_ns

    @property
    def length_ns(self) -> int:
        return int(self.end_ns - self.start_ns) if self.found else 0

    def interval(self) -> iv.IntervalSet:
        if not self.found:
            return iv.empty()
        return np.array([self.start_ns], dtype=np.int64), np.array([self.end_ns], dtype=np.int64)

    def mask(self, n: int) -> np.ndarray:
        """Boolean mask over ``gpu_ops`` rows: the backlog's ops."""
        out = np.zeros(n, dtype=bool)
        out[self.ops] = True
        return out

    def describe(self) -> str:
        if not self.found:
            return ""
        what = (
            f"{self.ops.size:,} GPU ops without a launch record ran first"
            if self.how == "unlinked"
            else "the device recorded no op while the first launched work waited"
        )
        return (
            f"the GPU was still running work launched before the profiler opened for the first "
            f"{self.length_ns / 1e6:.1f} ms of the capture ({what}; {self.delayed_ops:,} ops the capture "
            "launched waited behind it)"
        )


def capture_start(trace: Trace) -> int | None:
    """The capture's first recorded host event (CPU op or runtime call); None without host events."""
    starts = [int(t["start_ns"].min()) for t in (trace.cpu_ops, trace.runtime) if len(t)]
    return min(starts) if starts else None


def find_backlog(trace: Trace) -> Backlog:
    """The pre-window backlog of ``trace`` (see the module docstring); an empty one when there is none
    or when the trace cannot show one (no GPU op is linked to a recorded launch call)."""
    g, r = trace.gpu_ops, trace.runtime
    start = capture_start(trace)
    if not len(g) or not len(r) or start is None:
        return Backlog()
    linked = g["launch"] >= 0
    if not linked.any():
        return Backlog()
    launch_end = np.full(len(g), -1, dtype=np.int64)
    launch_end[linked] = r["end_ns"][g["launch"][linked]]
    s, e = g["start_ns"], g["end_ns"]
    streams = Groups(g["device"], g["stream"])
    order = lex_order((s, streams.index))  # by stream, then start
    code = streams.index[order]
    heads = np.flatnonzero(np.r_[True, code[1:] != code[:-1]])
    bounds = np.r_[heads, order.size]
    prefixes: list[np.ndarray] = []  # per stream: unlinked ops ahead of its first linked op
    waits: list[tuple[int, int]] = []  # (prefix end, ops that waited) where a launched op queued behind it
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):  # a loop over streams, not ops
        rows = order[a:b]
        first = int(np.argmax(linked[rows])) if linked[rows].any() else rows.size
        if not first:
            continue
        prefix = rows[:first]
        prefixes.append(prefix)
        if first == rows.size:
            continue
        x = rows[first]
        done = int(e[prefix].max())
        # the capture's first op on this stream was launched before the unlinked ones were done, and
        # started when they were: it queued behind work no recorded call launched
        if launch_end[x] < done - QUEUE_TOLERANCE_NS and s[x] >= done - QUEUE_TOLERANCE_NS:
            later = rows[first:]
            waited = int(np.count_nonzero(launch_end[later] < done))
            waits.append((done, waited))
    if waits:
        end = max(w[0] for w in waits)
        ops = np.concatenate(prefixes) if prefixes else np.zeros(0, dtype=np.int64)
        ops = np.sort(ops[s[ops] < end])
        return Backlog(start, end, ops, sum(w[1] for w in waits), "unlinked")
    return _unrecorded(trace, start, linked, launch_end)


def _unrecorded(trace: Trace, start: int, linked: np.ndarray, launch_end: np.ndarray) -> Backlog:
    """An empty device while the first op the capture launched waited far longer than a launch takes."""
    g = trace.gpu_ops
    s = g["start_ns"]
    first = int(np.argmin(s))
    if not linked[first]:
        return Backlog()
    wait = int(s[first] - launch_end[first])
    if wait < MIN_UNRECORDED_WAIT_NS or wait < UNRECORDED_WAIT_FACTOR * idle_launch_latency(trace, launch_end):
        return Backlog()
    return Backlog(
        start,
        int(s[first]),
        np.zeros(0, dtype=np.int64),
        int(np.count_nonzero(linked & (launch_end >= 0) & (launch_end < s[first]))),
        "unrecorded",
    )


def idle_launch_latency(trace: Trace, launch_end: np.ndarray) -> float:
    """Median delay from launch call end to op start of the linked ops launched onto an idle stream
    (the stream's previous op had ended): what a launch takes when nothing is queued. 0 when none is.
    A stream's first op is left out: nothing recorded says whether its stream was idle."""
    g = trace.gpu_ops
    streams = Groups(g["device"], g["stream"])
    order = lex_order((g["start_ns"], streams.index))
    code = streams.index[order]
    same = np.r_[False, code[1:] == code[:-1]]
    prev_end = np.r_[np.int64(-(1 << 62)), g["end_ns"][order][:-1]]
    prev_end = np.where(same, prev_end, -(1 << 62))
    le = launch_end[order]
    idle = same & (le >= 0) & (prev_end <= le)
    if not idle.any():
        return 0.0
    return float(median(np.maximum(g["start_ns"][order][idle] - le[idle], 0)))


@analysis(provides=("backlog",), produces=("backlog_ns", "backlog_ops"))
def pre_window_backlog(trace: Trace, inputs) -> Produced:
    b = find_backlog(trace)
    return Produced(
        metrics={"backlog_ns": b.length_ns if b.found else None, "backlog_ops": int(b.ops.size) if b.found else 0},
        values={"backlog": b},
    )
