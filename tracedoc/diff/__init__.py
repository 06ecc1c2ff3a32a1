"""Diff: what changed between two runs, with the step-time change attributed to its causes.

Works on reports, never on traces: the caller analyses a trace (file or rank directory) first or
reads a saved ``tracedoc analyze --format json`` report, and either side may be either
(``tracedoc.api.diff`` does both).

    >>> from tracedoc.api import diff
    >>> d = diff("before.pt.trace.json.gz", "baseline.json")
    >>> d.to_dict()["attribution"]      # [{"category": "compute", "delta_ns": 600000}, ...]
    >>> load("diff.json")               # a saved diff (or trend) back, one of schema version 1 migrated
"""

from __future__ import annotations

from .compare import diff_sides
from .gate import gate_failures, gate_names
from .inputs import Side, check_report, is_report
from .model import NOISE_FLOOR_PCT, DiffResult, RankDiff
from .reload import load
from .steps import CATEGORIES

__all__ = [
    "CATEGORIES",
    "NOISE_FLOOR_PCT",
    "DiffResult",
    "RankDiff",
    "Side",
    "check_report",
    "diff_sides",
    "gate_failures",
    "gate_names",
    "is_report",
    "load",
]
