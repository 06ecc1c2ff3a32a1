"""Training logs and configs: read a log into columns, find its anomalies, check the distributed
config, and evaluate the ``scope = "log"`` rules.

Public API::

    from tracedoc.logs import build_log_result, read_log
    result = build_log_result("steps.jsonl", config=["ds_config.json"])
    result.metrics, result.anomalies, result.config_checks

``tracedoc.api.analyze_log`` does the same and adds the findings of the log rules.

Layer: like ``tracedoc.analyses`` (may import ``tracedoc.model``); the engine sits above it. Imports
here are lazy so that the rule loader can read ``registry.LOG_METRICS`` cheaply.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LogOptions", "LogResult", "build_log_result", "read_log"]


def __getattr__(name: str) -> Any:
    if name in ("build_log_result", "LogResult"):
        from . import report

        return getattr(report, name)
    if name == "LogOptions":
        from .analysis import LogOptions

        return LogOptions
    if name == "read_log":
        from .reader import read_log

        return read_log
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
