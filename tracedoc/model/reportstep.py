"""The report's step: the one step time every "ms per step" of a report is framed on (docs/definitions.md).

Every stage that needs the step time asks ``report_step``: the rules' impact in ms, the what-ifs'
step before the fix, the rank result's step, achieved TFLOP/s and the model formula's tokens/s. A
report shows one step time.
"""

from __future__ import annotations

from typing import NamedTuple

# Where the report's step came from
STEPS, ITERATIONS, WINDOW = "steps", "iterations", "window"


class ReportStep(NamedTuple):
    """The report's step time (ns; None when there is none) and where it came from: ``steps`` (the median
    step time over the step spans), ``iterations`` (the median over the iterations the loop shows, without
    step spans), ``window`` (no step time: the analysis window stands for one step), or None."""

    ns: float | None
    source: str | None


def report_step(step_time_p50_ns: float | None, window_ns: float | None, steps: int | None = None) -> ReportStep:
    """The median step time (``step_time_p50_ns``, over steps or else iterations: ``steps`` says whether
    the trace has step spans, 0 when it has none); without one, the analysis window (``window_ns``); else
    none."""
    if step_time_p50_ns:
        return ReportStep(float(step_time_p50_ns), ITERATIONS if steps == 0 else STEPS)
    if window_ns:
        return ReportStep(float(window_ns), WINDOW)
    return ReportStep(None, None)
