"""One side of a diff: a report's dict form (``tracedoc analyze --format json``), checked.

The caller (``tracedoc.api.diff``) analyses a trace first, or reads a saved report with
``tracedoc.result.load`` (which checks its schema name and version; ``is_report`` tells a report
from a trace by the file's first bytes), so a CI job can keep a small report as its baseline
instead of the trace.
"""

from __future__ import annotations

import gzip
import os
import re
from dataclasses import dataclass
from typing import Any

from ..errors import TraceError

_HEAD_BYTES = 1 << 16
# A tracedoc report names its schema at the top ("schema": "tracedoc.analysis", "schema_version": 1);
# a Kineto trace says "schemaVersion" and holds "traceEvents".
_REPORT_HEAD_RE = re.compile(rb'"schema_version"\s*:|"schema"\s*:\s*"')


@dataclass
class Side:
    """One run being compared: where it came from and its report."""

    path: str
    kind: str  # "report" or "trace"
    report: dict[str, Any]

    @property
    def ranks(self) -> list[dict[str, Any]]:
        return self.report["ranks"]


def is_report(path: str) -> bool:
    """Whether ``path`` is a JSON report rather than a trace (decided from its first bytes)."""
    if os.path.isdir(path) or not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(_HEAD_BYTES)
    except OSError:
        return False
    if head[:2] == b"\x1f\x8b":  # a gzip report is unusual but harmless to accept
        try:
            with gzip.open(path, "rb") as f:
                head = f.read(_HEAD_BYTES)
        except (OSError, EOFError):
            return False
    return head.lstrip()[:1] == b"{" and bool(_REPORT_HEAD_RE.search(head)) and b'"traceEvents"' not in head


def check_report(data: dict[str, Any], where: str) -> dict[str, Any]:
    """A report's dict (already read as a tracedoc report), checked for the ranks the diff compares."""
    ranks = data.get("ranks")
    if not isinstance(ranks, list) or not ranks:
        raise TraceError(where, "is a tracedoc report with no ranks", f"ranks = {str(ranks)[:40]}",
                         "write it again with `tracedoc analyze --format json`")
    return data

