"""The launch queue as the reports show it: per stream, the ops launched and not finished over the
window (a sparkline in text and Markdown, a small chart in HTML), its maximum, and the host time
blocked on a full queue. Evidence rows (``launchqueue.launch_queue``) in, a ``LaunchQueueView`` out."""

from __future__ import annotations

from ..analyses.host.launchqueue import QUEUE_CAPACITY
from ..model.evidence import LaunchQueueRow
from .format import fmt_ns, fmt_pct
from .views import LaunchQueueView, QueueStreamView

SPARK = "▁▂▃▄▅▆▇█"
STREAMS_SHOWN = 4  # the deepest queues; every stream is in --format json
SPARK_POINTS = 40
CHART_W, CHART_H = 240.0, 40.0


def sparkline(series: list[int], top: float, points: int = SPARK_POINTS) -> str:
    """The series as block characters, ``points`` of them (the maximum of each stretch), 0..top."""
    if not series or top <= 0:
        return ""
    n = len(series)
    step = max(1, -(-n // points))
    peaks = [max(series[i : i + step]) for i in range(0, n, step)]
    return "".join(SPARK[min(len(SPARK) - 1, int(round((len(SPARK) - 1) * v / top)))] if v > 0 else " " for v in peaks)


def chart_points(series: list[int], top: float) -> str:
    """SVG polyline points of a step line through the series, in a CHART_W x CHART_H box."""
    if not series or top <= 0:
        return ""
    n = len(series)
    pts = []
    for i, v in enumerate(series):
        y = CHART_H - 2.0 - (CHART_H - 4.0) * min(v, top) / top
        pts.append(f"{CHART_W * i / n:.1f},{y:.1f}")
        pts.append(f"{CHART_W * (i + 1) / n:.1f},{y:.1f}")
    return " ".join(pts)


def launch_queue_view(m: dict, rows: list[LaunchQueueRow]) -> LaunchQueueView | None:
    """The queue view of a rank (None when no stream had a launch in the span it covers)."""
    rows = [r for r in rows if r.launches or r.depth_max]
    if not rows:
        return None
    shown = rows[:STREAMS_SHOWN]
    deepest = max(int(r.depth_max or 0) for r in rows)
    full = deepest >= QUEUE_CAPACITY - 2 or bool(m.get("launch_blocked_calls"))
    top = float(QUEUE_CAPACITY if full else max(deepest, 1))
    blocked_ns = sum(int(r.blocked_ns or 0) for r in rows)
    streams = [
        QueueStreamView(
            device=int(r.device),
            stream=int(r.stream),
            launches=f"{int(r.launches or 0):,}",
            depth_max=f"{int(r.depth_max or 0):,}",
            depth_mean=f"{float(r.depth_mean or 0):,.0f}",
            blocked=fmt_ns(r.blocked_ns or 0),
            blocked_calls=f"{int(r.blocked_calls or 0):,}",
            spark=sparkline(list(r.series), top),
            points=chart_points(list(r.series), top),
            full=int(r.depth_max or 0) >= QUEUE_CAPACITY - 2,
            capacity_y=round(2.0 if full else -10.0, 1),
            stretch=fmt_ns(r.series_step_ns or 0),
        )
        for r in shown
    ]
    if m.get("launch_blocked_calls"):
        note = (
            f"the host waited {fmt_ns(blocked_ns)} in {int(m['launch_blocked_calls']):,} launch calls for a slot "
            f"in a full queue ({fmt_pct(m.get('launch_blocked_fraction'))} of the span): back-pressure from a busy "
            "GPU, which sets the pace; it is not launch overhead"
        )
    elif full:
        note = "a queue reached its capacity: the GPU sets the pace"
    else:
        note = f"no queue reached its capacity of {QUEUE_CAPACITY:,} ops: no launch call waited for a slot"
    return LaunchQueueView(
        streams=streams,
        streams_left_out=max(0, len(rows) - len(shown)),
        deepest=f"{deepest:,}",
        capacity=f"{QUEUE_CAPACITY:,}",
        full=full,
        blocked=fmt_ns(blocked_ns),
        note=note,
        chart_w=CHART_W,
        chart_h=CHART_H,
    )
