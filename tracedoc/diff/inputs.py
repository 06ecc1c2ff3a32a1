"""One side of a diff: a typed ``AnalysisResult``, checked, and where it came from.

The caller (``tracedoc.api.diff``) analyses a trace first, or reads a saved report with
``tracedoc.result.load`` (which checks its schema name and version and migrates an older one;
``is_report`` tells a report from a trace by the file's first bytes), so a CI job can keep a small
report as its baseline instead of the trace.
"""

from __future__ import annotations

import gzip
import os
import re
import zlib
from dataclasses import dataclass

from ..analyses.core.rank import RankResult
from ..errors import TraceError
from ..result import AnalysisResult

_HEAD_BYTES = 1 << 16
# A tracedoc report names its schema at the top ("schema": "tracedoc.analysis", "schema_version": 1);
# a Kineto trace says "schemaVersion" and holds "traceEvents".
_REPORT_HEAD_RE = re.compile(rb'"schema_version"\s*:|"schema"\s*:\s*"')


@dataclass
class Side:
    """One run being compared: where it came from and its result."""

    path: str
    kind: str  # "report" or "trace"
    result: AnalysisResult

    @property
    def ranks(self) -> list[RankResult]:
        return self.result.ranks


def is_report(path: str) -> bool:
    """Whether ``path`` is a JSON report rather than a trace (decided from its first bytes); a URL's first
    bytes are read with one ranged request, and a URL prefix (ending in /) is a directory of ranks."""
    from ..remote import is_prefix, is_url, read_head

    if is_url(path):
        return not is_prefix(path) and head_is_report(read_head(path, _HEAD_BYTES))
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
    return head_is_report(head)


def head_is_report(head: bytes) -> bool:
    """Whether a file's first bytes (gzip or not) are those of a tracedoc report."""
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, _HEAD_BYTES)
        except zlib.error:
            return False
    return head.lstrip()[:1] == b"{" and bool(_REPORT_HEAD_RE.search(head)) and b'"traceEvents"' not in head


def check_report(result: AnalysisResult, where: str) -> AnalysisResult:
    """A result, checked for the ranks the diff compares."""
    if not result.ranks:
        raise TraceError(
            where,
            "is a tracedoc report with no ranks",
            "ranks = []",
            "write it again with `tracedoc analyze --format json`",
        )
    return result
