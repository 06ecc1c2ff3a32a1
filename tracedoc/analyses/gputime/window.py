"""Steps and the analysis window (docs/definitions.md: steps and the analysis window)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...model import trace as M
from ...model.trace import Trace
from ...model import vocab as V
from ...model.vocab import PROFILER_STEP_RE
from ...model.groups import isin, lex_order
from ...model.reportstep import report_step
from ...model.stats import percentile
from ..kernels import classify as C
from .backlog import Backlog, find_backlog
from .periodic import find_period
from ..core.registry import Produced, analysis
from ...model.record import Record


@dataclass
class Steps:
    """Step spans sorted by start: CPU span and the span extended to their GPU work."""

    names: list[str]
    cpu_start_ns: np.ndarray
    cpu_end_ns: np.ndarray
    end_ns: np.ndarray  # max(CPU end, end of the last GPU op launched inside the step)
    # The steps before this one have no step time: a pre-window backlog (``backlog.py``) ran ahead of
    # their work, so the first completion after it is where step times begin (k steps, k - 1 intervals).
    timed_from: int = 0

    def __len__(self) -> int:
        return len(self.names)

    @property
    def start_ns(self) -> np.ndarray:
        return self.cpu_start_ns

    @property
    def dur_ns(self) -> np.ndarray:
        """Each step's own span (CPU start to completion); overlaps the next one when the CPU runs ahead."""
        return self.end_ns - self.cpu_start_ns

    @property
    def completion_ns(self) -> np.ndarray:
        """When each step's work is done: the latest completion so far (work completes in order)."""
        return np.maximum.accumulate(self.end_ns) if len(self) else self.end_ns

    @property
    def step_time_ns(self) -> np.ndarray:
        """Step time as throughput: the interval between consecutive completions; the first step's
        is its completion minus its start. Unlike ``dur_ns`` it does not grow with the launch queue."""
        done = self.completion_ns
        if not done.size:
            return done
        return np.diff(done, prepend=self.cpu_start_ns[:1])

    @property
    def intervals_ns(self) -> np.ndarray:
        """The step times a report's step statistics are taken over: ``step_time_ns`` of the timed steps
        (all of them without a backlog; after a backlog, the intervals from its first completion on)."""
        return self.step_time_ns[self.timed_from :]

    def timed(self) -> np.ndarray:
        """Per step: whether it has a step time (False for the steps a backlog ran ahead of)."""
        out = np.ones(len(self), dtype=bool)
        out[: self.timed_from] = False
        return out

    def after_backlog(self, backlog: Backlog) -> "Steps":
        """These steps with ``timed_from`` set for ``backlog``: the steps up to the first one that
        completed after the backlog ended have no step time."""
        if not backlog.found or not len(self) or backlog.end_ns <= int(self.cpu_start_ns[0]):
            return self
        first = int(np.searchsorted(self.completion_ns, backlog.end_ns, side="left"))
        return Steps(self.names, self.cpu_start_ns, self.cpu_end_ns, self.end_ns, min(first + 1, len(self)))


WINDOW_KINDS = {
    "steps": "first step start to the end of the last step's GPU work",
    "steady": "first step completion to the last: until the first completion the GPU ran work launched "
    "before the profiler opened, so the first step has no step time",
    "steps_after_backlog": "end of the GPU work launched before the profiler opened to the end of the last "
    "step's GPU work",
    "gpu": "first to last GPU op; the trace has no step spans",
    "gpu_after_backlog": "first GPU op launched inside the capture to the last GPU op; the trace has no step "
    "spans, and the GPU ran work launched before the profiler opened until then",
    "cpu": "the CPU span; the trace has no GPU ops",
}


class Window(Record, kw_only=False):
    """The analysis window of a rank: its span, kind and what that means."""

    start_ns: int  # in the trace's clock
    end_ns: int  # in the trace's clock
    kind: str  # a key of WINDOW_KINDS
    # Where the capture's analysed span begins (first step start, first GPU op): before ``start_ns``
    # when a pre-window backlog moved the window's start. Per-step rows cover their own spans from here.
    # Given as None: the window's start.
    span_start_ns: int | None = None
    length_ns: int = 0  # end_ns - start_ns
    description: str = ""  # the kind in words

    def __post_init__(self) -> None:
        self.length_ns = max(0, self.end_ns - self.start_ns)
        if self.kind not in WINDOW_KINDS:  # read back from a file: a ValidationError that names the field
            raise ValueError(f"window kind {self.kind[:40]!r} is not one of {', '.join(WINDOW_KINDS)}")
        self.description = WINDOW_KINDS[self.kind]
        self.span_start_ns = self.start_ns if self.span_start_ns is None else min(self.span_start_ns, self.start_ns)

    @property
    def span_lo(self) -> int:
        """Where the analysed span begins (``span_start_ns``, never after the window's start)."""
        return self.span_start_ns

    def describe(self) -> str:
        return self.description


def launch_times(trace: Trace) -> np.ndarray:
    """When each GPU op was launched: its launch call's start, or the op's own start when unlinked."""
    g = trace.gpu_ops
    launch = g["launch"]
    out = g["start_ns"].copy()
    linked = launch >= 0
    if linked.any():
        out[linked] = trace.runtime["start_ns"][launch[linked]]
    return out


def step_name_mask(trace: Trace) -> np.ndarray:
    """Boolean lookup over the string table: which names are step spans."""
    explicit = trace.meta.step_names
    if explicit:
        wanted = {s for s in explicit if isinstance(s, str)}
        ids = {s for s in explicit if isinstance(s, int)}
        mask = trace.string_ids(wanted.__contains__)
        for i in ids:
            if 0 <= i < mask.size - 1:
                mask[i] = True
        return mask
    return trace.string_ids(PROFILER_STEP_RE.match)


def find_steps(trace: Trace, backlog: Backlog | None = None) -> Steps:
    """The trace's step spans, extended to the GPU work launched inside them; ``timed_from`` set for
    the pre-window backlog (found when not given)."""
    backlog = find_backlog(trace) if backlog is None else backlog
    c = trace.cpu_ops
    if not len(c):
        return Steps([], *(np.zeros(0, dtype=np.int64),) * 3)
    mask = step_name_mask(trace)
    is_step = mask[c["name"]] & isin(c["kind"], (M.CPU_OP, M.USER_ANNOTATION))
    rows = np.flatnonzero(is_step)
    if rows.size == 0:
        return Steps([], *(np.zeros(0, dtype=np.int64),) * 3)
    # One span per distinct name and start (the same step can be recorded on two threads).
    s, e, n = c["start_ns"][rows], c["end_ns"][rows], c["name"][rows]
    order = lex_order((-e, s))
    s, e, n = s[order], e[order], n[order]
    keep = np.ones(s.size, dtype=bool)
    keep[1:] = (s[1:] != s[:-1]) | (n[1:] != n[:-1])
    s, e, n = s[keep], e[keep], n[keep]
    # Each op belongs to the last step starting at or before its launch, if still open.
    return _as_steps(trace, s, e, n, backlog).after_backlog(backlog)


# Top-level ops that run once per training iteration; an iteration ends when one of them does.
ITERATION_END_RE = re.compile(r"^Optimizer\.step#")
MIN_ITERATIONS = 2


def find_iterations(trace: Trace, backlog: Backlog | None = None) -> tuple[Steps, str | None]:
    """Iterations of a trace without step spans, where the trace shows them: the outermost user
    annotation name that repeats without overlapping itself (vLLM's ``execute_model``, a
    ``record_function("train_step")``), the one covering the most time; else the stretches between
    consecutive ``Optimizer.step`` ends; else the repeats of the GPU op sequence (``periodic.py``). Returns
    the spans (as steps) and the name they came from."""
    c = trace.cpu_ops
    backlog = find_backlog(trace) if backlog is None else backlog
    if not len(c):
        return _sequence_iterations(trace)
    ann = np.flatnonzero(
        (c["kind"] == M.USER_ANNOTATION)
        & (c["depth"] == 0)
        & ~C.name_mask(trace, V.DATALOADER_RE, ids=c["name"])[c["name"]]
    )
    best = _longest_repeating(c, ann)
    if best is not None:
        name = trace.string(int(c["name"][best[0]]))
        return _as_steps(trace, c["start_ns"][best], c["end_ns"][best], c["name"][best], backlog).after_backlog(
            backlog
        ), name
    opt = np.flatnonzero(C.name_mask(trace, ITERATION_END_RE, ids=c["name"])[c["name"]] & (c["kind"] == M.CPU_OP))
    if opt.size > MIN_ITERATIONS:
        ends = np.sort(c["end_ns"][opt])
        name = trace.string(int(c["name"][opt[0]]))
        steps = _as_steps(trace, ends[:-1], ends[1:], np.full(ends.size - 1, c["name"][opt[0]]), backlog)
        return steps.after_backlog(backlog), name
    return _sequence_iterations(trace)


def _sequence_iterations(trace: Trace) -> tuple[Steps, str | None]:
    """Iterations from the repeating sequence of GPU ops (``periodic.find_period``), as GPU-side spans:
    each from its first op's start to its last op's end. Only the intervals between completions are
    step times (the first iteration's own span starts after a gap the others include)."""
    empty = Steps([], *(np.zeros(0, dtype=np.int64),) * 3)
    per = find_period(trace)
    if per is None or per.completion_ns.size < 2:
        return empty, None
    done = per.completion_ns.astype(np.int64)
    start = trace.gpu_ops["start_ns"][per.first[: done.size]].astype(np.int64)
    names = [f"iteration {i + 1}" for i in range(done.size)]
    return Steps(names, start, done, done, timed_from=1), per.name


def _longest_repeating(c, rows: np.ndarray) -> np.ndarray | None:
    """Of the names of ``rows`` that occur at least ``MIN_ITERATIONS`` times without an instance
    overlapping the next, the one covering the most time (the lowest name id on a tie): its rows in
    start order (stable). None when no name qualifies or all cover no time."""
    if not rows.size:
        return None
    names = c["name"][rows]
    order = lex_order((c["start_ns"][rows], names))  # by name, then start; ties keep row order
    r, nm = rows[order], names[order]
    start, end = c["start_ns"][r], c["end_ns"][r]
    first = np.ones(r.size, dtype=bool)
    first[1:] = nm[1:] != nm[:-1]
    heads = np.flatnonzero(first)
    counts = np.diff(np.append(heads, r.size))
    group = np.cumsum(first) - 1
    overlapping = np.zeros(heads.size, dtype=bool)
    overlapping[group[1:][(start[1:] < end[:-1]) & ~first[1:]]] = True
    cover = np.add.reduceat(end - start, heads)
    ok = np.flatnonzero((counts >= MIN_ITERATIONS) & ~overlapping & (cover > 0))
    if not ok.size:
        return None
    k = ok[np.argmax(cover[ok])]
    return r[heads[k] : heads[k] + counts[k]]


def _as_steps(trace: Trace, s: np.ndarray, e: np.ndarray, n: np.ndarray, backlog: Backlog | None = None) -> Steps:
    """Spans sorted by start, extended to the end of the GPU ops launched inside them (never a
    backlog's ops: they were launched before the capture)."""
    end = e.copy()
    g = trace.gpu_ops
    if len(g):
        launched = launch_times(trace)
        idx = np.searchsorted(s, launched, side="right") - 1
        inside = (idx >= 0) & (launched < e[np.maximum(idx, 0)])
        if backlog is not None and backlog.ops.size:
            inside[backlog.ops] = False
        if inside.any():
            np.maximum.at(end, idx[inside], g["end_ns"][inside])
    return Steps([trace.string(int(i)) for i in n], s, e, end)


def find_window(trace: Trace, steps: Steps, backlog: Backlog | None = None) -> Window:
    """The analysis window (docs/definitions.md). With a pre-window backlog it starts after it: at the first
    step completion after the backlog (the first step has no step time), else where the backlog ends."""
    g = trace.gpu_ops
    backlog = backlog if backlog is not None and backlog.found else None
    if len(steps):
        start = int(steps.cpu_start_ns.min())
        last = int(np.argmax(steps.cpu_end_ns))
        last_cpu_end = int(steps.cpu_end_ns[last])
        end = max(last_cpu_end, int(steps.end_ns.max()))
        if len(g):
            launched = launch_times(trace)
            before = launched < last_cpu_end
            if backlog is not None:
                before[backlog.ops] = False
            if before.any():
                end = max(end, int(g["end_ns"][before].max()))
        if backlog is None or backlog.end_ns <= start:
            return Window(start, end, "steps")
        if 0 < steps.timed_from < len(steps):
            return Window(int(steps.completion_ns[steps.timed_from - 1]), end, "steady", start)
        return Window(min(int(backlog.end_ns), end), end, "steps_after_backlog", start)
    if len(g):
        start, end = int(g["start_ns"].min()), int(g["end_ns"].max())
        if backlog is not None and start < backlog.end_ns < end:
            return Window(int(backlog.end_ns), end, "gpu_after_backlog", start)
        return Window(start, end, "gpu")
    spans = [t for t in (trace.cpu_ops, trace.runtime) if len(t)]
    if spans:
        return Window(min(int(t["start_ns"].min()) for t in spans), max(int(t["end_ns"].max()) for t in spans), "cpu")
    return Window(0, 0, "cpu")


@analysis(
    needs=("backlog",),
    provides=("step_spans", "window", "report_step"),
    produces=(
        "window_ns",
        "steps",
        "iterations",
        "iteration_name",
        "step_time_mean_ns",
        "step_time_p50_ns",
        "step_time_p95_ns",
    ),
)
def steps_and_window(trace: Trace, inputs) -> Produced:
    backlog = inputs["backlog"]
    steps = find_steps(trace, backlog)
    win = find_window(trace, steps, backlog)
    # Without step spans the window stays the GPU span (docs/definitions.md); iterations the trace shows
    # still give the step time, so impact can be said per iteration.
    timed, name = (steps, None) if len(steps) else find_iterations(trace, backlog)
    d = timed.intervals_ns
    m = {
        "window_ns": win.end_ns - win.start_ns,
        "steps": len(steps),
        "iterations": int(d.size),
        "iteration_name": name,
        "step_time_mean_ns": None,
        "step_time_p50_ns": None,
        "step_time_p95_ns": None,
    }
    if d.size:
        m.update(
            step_time_mean_ns=float(d.mean()), step_time_p50_ns=percentile(d, 50), step_time_p95_ns=percentile(d, 95)
        )
    # the report's one step time (docs/definitions.md): rates per step divide by it
    step = report_step(m["step_time_p50_ns"], m["window_ns"], m["steps"])
    return Produced(metrics=m, values={"step_spans": steps, "window": win, "report_step": step})
