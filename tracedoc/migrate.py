"""Saved reports of earlier schema versions, as the current version's document.

Users keep saved reports as CI baselines, so a report written by the previous schema version still
loads: ``current`` checks a document's schema name and version and migrates it, one version at a time,
before it is read into an ``AnalysisResult``. A document of a version this tracedoc does not know
(older than the first it migrates, or newer than its own) fails with one line naming the version.

Version history:

- 1: the first saved reports. The job had two rank tables: ``job.ranks`` (rank numbers, ns) and the
  job view's ``job.rank_table`` (wait, lateness and step times per step in ms), with
  ``job.step_ms_by_rank`` a third copy of the step times; the rank shown in detail was
  ``job.focus_index``, chosen by another rule than the reports'.
- 2: one rank table, ``job.ranks``, in ns (the job view's columns ``matched_steps``,
  ``matched_step_p50_ns``, ``wait_fraction``, ``wait_ns_per_step``, ``arrived_last_fraction``,
  ``lateness_fraction``, ``lateness_ns_per_step``, ``comm_wait_fraction``, ``dataloader_ns_per_step``
  and ``straggler`` joined to each rank's row); ``job.focus_rank`` and ``job.focus_asked`` by the one
  focus rule.
"""

from __future__ import annotations

from typing import Any

from .errors import TraceError
from .model.metrics import TRACE_METRICS

SCHEMA_NAME = "tracedoc.analysis"
CURRENT = 2
OLDEST = 1


def current(data: Any, where: str = "report") -> dict[str, Any]:
    """``data`` (a report's JSON document as Python values) as a document of the current schema version."""
    if not isinstance(data, dict) or data.get("schema") != SCHEMA_NAME:
        seen = repr(data.get("schema")) if isinstance(data, dict) else type(data).__name__
        raise TraceError(
            where,
            f"is not a tracedoc report (schema {SCHEMA_NAME!r})",
            f"schema {seen}",
            "pass the JSON written by `tracedoc analyze --format json`",
        )
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or not OLDEST <= version <= CURRENT:
        wrote = data.get("tracedoc_version")
        raise TraceError(
            where,
            f"is a report of schema version {version!r}; this tracedoc reads versions {OLDEST} to {CURRENT}",
            f"written by tracedoc {wrote}" if wrote else None,
            "analyse the trace again with this tracedoc, or read the report with the version that wrote it",
        )
    doc = dict(data)
    try:
        while doc["schema_version"] < CURRENT:
            doc = MIGRATIONS[doc["schema_version"]](doc)
        _all_metrics(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise TraceError(
            where,
            "is a tracedoc report with a missing or malformed field",
            f"{type(exc).__name__}: {exc}",
            "write it again with `tracedoc analyze --format json`",
        ) from None
    return doc


def _all_metrics(doc: dict) -> None:
    """Every metric of the table in every rank: a metric added since the report was written was not
    measured then (None)."""
    for rank in doc.get("ranks") or []:
        if isinstance(rank, dict) and isinstance(rank.get("metrics"), dict):
            missing = [name for name in TRACE_METRICS if name not in rank["metrics"]]
            rank["metrics"] = {**rank["metrics"], **dict.fromkeys(missing)}


_V1_JOB_COLUMNS = (
    ("matched_step_p50_ms", "matched_step_p50_ns", 1e6),
    ("wait_fraction", "wait_fraction", 1),
    ("wait_ms_per_step", "wait_ns_per_step", 1e6),
    ("arrived_last_fraction", "arrived_last_fraction", 1),
    ("lateness_fraction", "lateness_fraction", 1),
    ("lateness_ms_per_step", "lateness_ns_per_step", 1e6),
    ("comm_wait_fraction", "comm_wait_fraction", 1),
    ("dataloader_ms_per_step", "dataloader_ns_per_step", 1e6),
)


def _from_v1(doc: dict) -> dict:
    """Version 1 -> 2: the job's two rank tables become one, in ns; the focus follows the focus rule."""
    job = doc.get("job")
    if isinstance(job, dict):
        job = dict(job)
        view_rows = {row["rank"]: row for row in job.pop("rank_table", None) or []}
        rows = []
        for row in job["ranks"]:
            view = view_rows.get(row["rank"], {})
            extra = {
                new: (view[old] * scale if view.get(old) is not None else None) for old, new, scale in _V1_JOB_COLUMNS
            }
            rows.append(
                {
                    **row,
                    **extra,
                    "matched_steps": int(view.get("matched_steps") or 0),
                    "straggler": bool(view.get("straggler")),
                }
            )
        job["ranks"] = rows
        for gone in ("focus_index", "step_ms_by_rank"):
            job.pop(gone, None)
        job.setdefault("ranks_used", [])
        job["focus_rank"], job["focus_asked"] = None, False
        doc["job"] = job
    return {**doc, "schema_version": 2}


MIGRATIONS = {1: _from_v1}
