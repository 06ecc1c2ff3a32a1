"""The steps of a rank's report: the window as one stacked bar, one bar per step (the slowest always
among those shown) and the step time in words, from step spans or detected iterations alike.
"""

from __future__ import annotations

from ..analyses.gputime.idle import CAUSES as IDLE_CAUSES
from .cells import shorten
from .format import fmt_ns, fmt_pct
from .timeline import CAUSE_LABELS
from .views import Caps, Segment, StepBar, StepsView

SEGMENTS = (
    ("compute", "compute"),
    ("exposed_comm", "exposed communication"),
    ("memcpy", "memcpy/memset (not overlapped)"),
    *((f"idle_{c}", CAUSE_LABELS[c]) for c in IDLE_CAUSES),
)


def window_bar(m: dict) -> list[Segment]:
    """The whole window as one stacked bar: compute, exposed comm, copies, idle by cause (fractions)."""
    busy = m.get("gpu_busy_fraction") or 0.0
    values = {"compute": m.get("compute_fraction") or 0.0, "exposed_comm": m.get("exposed_comm_fraction") or 0.0}
    values["memcpy"] = max(0.0, busy - values["compute"] - values["exposed_comm"])
    for c in IDLE_CAUSES:
        values[f"idle_{c}"] = m.get(f"idle_{c}_fraction") or 0.0
    return [
        Segment(
            key=k,
            label=label,
            pct=fmt_pct(values[k], 0 if values[k] >= 0.1 else 1),
            width=round(100 * min(1.0, values[k]), 3),
        )
        for k, label in SEGMENTS
        if values[k] >= 0.005
    ]


NO_STEP_TIME = "no step time"


def step_p50(m: dict) -> str | None:
    """The report's step time, from step spans or from detected iterations alike."""
    return fmt_ns(m["step_time_p50_ns"]) if m.get("step_time_p50_ns") is not None else None


def steps_text(m: dict) -> str:
    """The steps behind the report's step time, in words, as the trace-health messages count them."""
    steps, p50 = int(m.get("steps") or 0), step_p50(m)
    if steps:
        return f"{steps} step{'' if steps == 1 else 's'}" + (f", step p50 {p50}" if p50 else "")
    n = int(m.get("iterations") or 0)
    if n and p50:
        return f"{n} interval{'' if n == 1 else 's'} between detected iterations, step p50 {p50}"
    return "0 steps"


def _step_time(row: dict) -> int:
    """A step row's step time (interval between completions); its span in reports saved before that."""
    v = row.get("step_time_ns")
    return int(v if v is not None else (row.get("window_ns") or 0))


def build_steps(per_step: list[dict], caps: Caps) -> StepsView:
    rows = list(per_step or [])
    shown_idx = list(range(min(len(rows), caps.steps)))
    if len(rows) > caps.steps and caps.steps > 0:
        slow = max(range(len(rows)), key=lambda i: _step_time(rows[i]))
        if slow not in shown_idx:
            shown_idx[-1] = slow

    def untimed(row: dict) -> bool:  # a pre-window backlog ran ahead of it: no step time, so no bar
        return "step_time_ns" in row and row["step_time_ns"] is None

    longest = max((rows[i].get("window_ns") or 0 for i in shown_idx if not untimed(rows[i])), default=0) or 1
    bars = []
    for i in shown_idx:
        row = rows[i]
        total = row.get("window_ns") or 0
        busy = row.get("busy_ns") or 0
        values = {"compute": row.get("compute_ns") or 0, "exposed_comm": row.get("exposed_comm_ns") or 0}
        values["memcpy"] = max(0, busy - values["compute"] - values["exposed_comm"])
        for c in IDLE_CAUSES:
            values[f"idle_{c}"] = row.get(f"idle_{c}_ns") or 0
        segments = [
            Segment(
                key=k,
                label=label,
                ns=values[k],
                time=fmt_ns(values[k]),
                pct=fmt_pct(values[k] / total if total else 0.0),
                width=round(100 * values[k] / longest, 3),
            )
            for k, label in SEGMENTS
            if values[k] > 0 and not untimed(row)
        ]
        time = NO_STEP_TIME if untimed(row) else fmt_ns(_step_time(row))
        bars.append(
            StepBar(
                step=shorten(row.get("step", f"step {i}"), 120),
                time=time,
                width=0.0 if untimed(row) else round(100 * total / longest, 3),
                segments=segments,
                cells=[time] + [fmt_pct(values[k] / total if total else 0.0) for k, _ in SEGMENTS],
            )
        )
    return StepsView(
        bars=bars,
        total=len(rows),
        left_out=len(rows) - len(bars),
        legend=[
            {"key": k, "label": label} for k, label in SEGMENTS if any(seg.key == k for b in bars for seg in b.segments)
        ],
        columns=["step", "time"] + [label for _, label in SEGMENTS],
    )
