"""Training logs and configs: read a log into columns, find its anomalies, check the distributed
config, and evaluate the ``scope = "log"`` rules.

Public API::

    from tracedoc.logs import analyze_log, read_log
    result = analyze_log("steps.jsonl", config=["ds_config.json"])
    result.anomalies, result.findings, result.labels, result.to_dict()

Layer: like ``tracedoc.analyses`` (may import ``tracedoc.model``); the engine sits above it. Imports
here are lazy so that the rule loader can read ``registry.LOG_METRICS`` cheaply.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LogOptions", "LogResult", "analyze_log", "read_log"]


def __getattr__(name: str) -> Any:
    if name in ("analyze_log", "LogResult"):
        from . import report

        return getattr(report, name)
    if name == "LogOptions":
        from .analysis import LogOptions

        return LogOptions
    if name == "read_log":
        from .reader import read_log

        return read_log
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
