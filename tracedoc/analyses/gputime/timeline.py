"""Timeline excerpts for reports: the representative (median) step and the slowest step, each over its
step time (the previous step's completion to its own), so an excerpt is as long as the step time beside it.

Each excerpt lists, per GPU stream, the ops inside the step (downsampled: ops shorter than a pixel
at report width are merged into runs), plus the CPU-side DataLoader spans, host syncs and the idle
gaps by cause, all relative to the excerpt's start in nanoseconds.
"""

from __future__ import annotations

import numpy as np

from ...model import intervals as iv
from ...model.trace import Trace
from ..core.registry import Produced, analysis

MAX_OPS_PER_EXCERPT = 4000
MERGE_RESOLUTION = 2000  # ops narrower than span / MERGE_RESOLUTION are merged with their neighbours


def excerpts(
    trace: Trace,
    steps,
    comm_mask: np.ndarray,
    lo: int,
    hi: int,
    idle_sets: dict,
    dataloader: iv.IntervalSet,
    sync: iv.IntervalSet,
) -> list[dict]:
    spans: list[tuple[str, int, int]] = []
    if len(steps) > steps.timed_from:
        # only steps with a step time: a pre-window backlog ran ahead of the ones before
        # each step as its step time: previous completion to its own (the first step: its start to its
        # completion), the GPU work the report's step p50 measures. Its own CPU-to-completion span is
        # longer when the CPU runs ahead, and overlaps the next steps.
        d = steps.intervals_ns
        med = steps.timed_from + int(np.argsort(d, kind="stable")[len(d) // 2])
        slow = steps.timed_from + int(np.argmax(d))
        done = steps.completion_ns
        begin = np.concatenate([steps.cpu_start_ns[:1], done[:-1]])
        spans.append(("representative step", int(begin[med]), int(done[med])))
        if slow != med:
            spans.append(("slowest step", int(begin[slow]), int(done[slow])))
        names = {int(begin[i]): steps.names[i] for i in (med, slow)}
    else:
        names = {}
        if hi > lo:
            spans.append(("window", lo, hi))
    return [_excerpt(trace, title, names.get(s), s, e, comm_mask, idle_sets, dataloader, sync) for title, s, e in spans]


def _excerpt(
    trace: Trace,
    title: str,
    step_name: str | None,
    lo: int,
    hi: int,
    comm_mask: np.ndarray,
    idle_sets: dict,
    dataloader: iv.IntervalSet,
    sync: iv.IntervalSet,
) -> dict:
    g = trace.gpu_ops
    lanes = []
    truncated = 0
    if len(g):
        sel = np.flatnonzero((g["start_ns"] < hi) & (g["end_ns"] > lo))
        min_width = max(1, (hi - lo) // MERGE_RESOLUTION)
        for dev, stream in sorted(set(zip(g["device"][sel].tolist(), g["stream"][sel].tolist()))):
            rows = sel[(g["device"][sel] == dev) & (g["stream"][sel] == stream)]
            rows = rows[np.argsort(g["start_ns"][rows], kind="stable")]
            ops = _downsample(trace, rows, comm_mask, lo, hi, min_width)
            lanes.append({"device": int(dev), "stream": int(stream), "ops": ops})
        total = sum(len(lane["ops"]) for lane in lanes)
        if total > MAX_OPS_PER_EXCERPT:
            # Keep the longest ops of each lane in proportion; the count of what was left out is reported.
            keep_frac = MAX_OPS_PER_EXCERPT / total
            for lane in lanes:
                ops = lane["ops"]
                k = max(1, int(len(ops) * keep_frac))
                if k < len(ops):
                    truncated += len(ops) - k
                    ops = sorted(
                        sorted(ops, key=lambda o: o["end"] - o["start"], reverse=True)[:k], key=lambda o: o["start"]
                    )
                    lane["ops"] = ops

    def rel(iset: iv.IntervalSet) -> list[list[int]]:
        s, e = iv.clip(iset, lo, hi)
        return [[a, b] for a, b in zip((s[:2000] - lo).tolist(), (e[:2000] - lo).tolist())]

    return {
        "title": title,
        "step": step_name,
        "start_ns": int(lo),
        "end_ns": int(hi),
        "length_ns": int(hi - lo),
        "lanes": lanes,
        "ops_left_out": truncated,
        "dataloader": rel(dataloader),
        "sync": rel(sync),
        "idle": {cause: rel(s) for cause, s in idle_sets.items()},
    }


def _downsample(trace: Trace, rows: np.ndarray, comm_mask: np.ndarray, lo: int, hi: int, min_width: int) -> list[dict]:
    g = trace.gpu_ops
    s = np.maximum(g["start_ns"][rows], lo) - lo
    e = np.minimum(g["end_ns"][rows], hi) - lo
    kind = g["kind"][rows]
    cat = np.where(comm_mask[rows], 3, kind).astype(np.int64)  # 0 kernel, 1 memcpy, 2 memset, 3 communication
    n = rows.size
    if not n:
        return []
    # Runs of consecutive narrow ops (each starting less than a pixel after the previous one ends)
    # become one "N ops" block; wide ops are kept as they are.
    narrow = (e - s) < min_width
    joins = narrow[:-1] & narrow[1:] & (s[1:] - e[:-1] < min_width)
    first = np.flatnonzero(np.r_[True, ~joins])
    last = np.r_[first[1:] - 1, n - 1]
    size = last - first + 1
    group = np.repeat(np.arange(first.size), size)
    votes = np.bincount(group * 4 + cat, minlength=first.size * 4).reshape(-1, 4)
    top_cat = votes.argmax(axis=1)  # the most frequent category, the lowest code among equals
    one_end = np.where(narrow[first], np.maximum(e[first], s[first] + 1), e[first])
    names = g["name"][rows[first]]
    out: list[dict] = []
    for start, end1, end, k, c, nid in zip(
        s[first].tolist(), one_end.tolist(), e[last].tolist(), size.tolist(), top_cat.tolist(), names.tolist()
    ):
        if k == 1:
            out.append({"start": start, "end": end1, "name": trace.string(nid), "cat": _CAT[c]})
        else:
            out.append({"start": start, "end": end, "name": f"{k} short ops", "cat": _CAT[c], "merged": k})
    return out


_CAT = {0: "compute", 1: "memcpy", 2: "memset", 3: "communication"}


@analysis(
    needs=("step_spans", "comm_mask", "window", "idle_sets", "dataloader_spans", "sync_spans", "critical_path_overlay"),
    provides=("timeline",),
)
def timeline_excerpts(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    rows = excerpts(
        trace,
        inputs["step_spans"],
        inputs["comm_mask"],
        win.start_ns,
        win.end_ns,
        inputs["idle_sets"],
        inputs["dataloader_spans"],
        inputs["sync_spans"],
    )
    for ex in rows:  # the report's timeline highlights the critical path
        ex["critical"] = inputs["critical_path_overlay"].intervals_in(ex["start_ns"], ex["end_ns"])
    return Produced(values={"timeline": {"excerpts": rows}})
