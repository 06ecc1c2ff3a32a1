"""How steady the steps are: the slow tail of the step times against the typical step.

The headline step time is the median (docs/definitions.md: the report's step), which a few slow steps (a data
loader hiccup, a checkpoint, a garbage-collection pause, a periodic evaluation) leave unchanged.
``step_time_tail_ratio`` says how far the 95th percentile lies above it, in units of the median, from
the report's own step-time metrics, so the three always agree.
"""

from __future__ import annotations

from ...model.trace import Trace
from ..core.registry import Produced, analysis


@analysis(reads=("step_time_p50_ns", "step_time_p95_ns"), produces=("step_time_tail_ratio",))
def step_time_tail(trace: Trace, inputs) -> Produced:
    p50, p95 = inputs["step_time_p50_ns"], inputs["step_time_p95_ns"]
    ratio = max(p95 - p50, 0.0) / p50 if p50 and p95 is not None else None
    return Produced(metrics={"step_time_tail_ratio": ratio})
