"""One side of a diff: a report's dict form (``tracedoc analyze --format json``), checked.

A trace is analysed first by the caller (``tracedoc.api.diff``); a saved report is read as it is
(``is_report`` tells the two apart from the file's first bytes), so a CI job can keep a small report
as its baseline instead of the trace.
"""

from __future__ import annotations

import gzip
import os
import re
from dataclasses import dataclass
from typing import Any

from ..errors import TraceError

REPORT_SCHEMA = "tracedoc.analysis"
REPORT_SCHEMA_VERSION = 1
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


def read_report(path: str) -> dict[str, Any]:
    """A saved report's dict, checked for its schema name, version and the fields the diff reads."""
    import orjson

    try:
        opener = gzip.open if _is_gzip(path) else open
        with opener(path, "rb") as f:
            data = orjson.loads(f.read())
    except OSError as exc:
        raise TraceError(path, "cannot be read", getattr(exc, "strerror", None) or str(exc), "check the path") from None
    except orjson.JSONDecodeError as exc:
        raise TraceError(path, "is not valid JSON", str(exc), "pass a report written with `tracedoc analyze -f json`") from None
    return check_report(data, path)


def check_report(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict) or data.get("schema") != REPORT_SCHEMA:
        seen = f"schema {data.get('schema')!r}" if isinstance(data, dict) else f"a JSON {type(data).__name__}"
        raise TraceError(where, f"is not a tracedoc report (schema {REPORT_SCHEMA!r})", seen,
                         "pass a trace or the JSON written by `tracedoc analyze --format json`")
    version = data.get("schema_version")
    if version != REPORT_SCHEMA_VERSION:
        wrote = data.get("tracedoc_version")
        raise TraceError(where, f"is a report of schema version {version!r}; this tracedoc reads version "
                         f"{REPORT_SCHEMA_VERSION}", f"written by tracedoc {wrote}" if wrote else None,
                         "analyse the trace again with this tracedoc, or diff with the version that wrote it")
    ranks = data.get("ranks")
    if not isinstance(ranks, list) or not ranks:
        raise TraceError(where, "is a tracedoc report with no ranks", f"ranks = {str(ranks)[:40]}",
                         "write it again with `tracedoc analyze --format json`")
    for i, r in enumerate(ranks):
        missing = [k for k in ("metrics", "per_step", "evidence", "environment") if not isinstance(r, dict) or k not in r]
        if missing:
            raise TraceError(where, f"rank entry {i} lacks {', '.join(missing)}", None,
                             "write the report again with `tracedoc analyze --format json`")
    return data


def _is_gzip(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(2) == b"\x1f\x8b"
