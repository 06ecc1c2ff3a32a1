"""One rank's metrics: what the analyses measure on one trace (docs/definitions.md), in table order."""

from __future__ import annotations

from .metric import Metric
from .rank_kernels import KERNEL_METRICS
from .rank_system import SYSTEM_METRICS
from .rank_time import TIME_METRICS

RANK_METRICS: tuple[Metric, ...] = TIME_METRICS + KERNEL_METRICS + SYSTEM_METRICS
