"""The JSON schemas of the saved reports, generated from their types: never edited by hand.

``analysis_schema()`` describes ``tracedoc analyze --format json`` (``AnalysisResult``),
``diff_schema()`` ``tracedoc diff --format json`` (``DiffResult``), ``trend_schema()`` the same for three
runs or more (``TrendResult``), ``log_schema()`` ``tracedoc logs --format json`` (``LogResult``). Each is msgspec's
schema of the record type, with:

- every field described by the comment beside it in the type's definition (a type by its docstring);
- ``metrics`` objects spelled out from the metric table (``tracedoc.model.metrics``): each metric with
  its JSON type or null and ``[unit] meaning``;
- ``evidence`` objects with a description per known table (``analyses.core.registry.EVIDENCE``), and the rows of
  each typed table (``model.evidence.ROW_TYPES``) described like a record; a finding's evidence is the same;
- every field required, except those a document may leave out (a record's defaults where it omits them).

``python -m tracedoc.schemagen`` writes them to ``tracedoc/schema/``; a test regenerates them and
fails when the files drift from the types.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any

import msgspec

from .analyses.core.registry import EVIDENCE
from .logs.registry import LOG_EVIDENCE
from .logs.report import LogResult
from .model.evidence import ROW_TYPES
from .model.metrics import LOG_METRIC_TABLE, TRACE_METRICS, Metric, metric_names
from .outfiles import write_generated
from .result import SCHEMA_VERSION, AnalysisResult

SCHEMA_DIR = Path(__file__).resolve().parent / "schema"
DRAFT = "https://json-schema.org/draft/2020-12/schema"
_FIELD_RE = re.compile(r"^    (\w+)\s*:[^#\n]*(?:#\s*(.+?))?\s*$")
_COMMENT_RE = re.compile(r"^    #\s?(.*?)\s*$")


def analysis_schema() -> dict[str, Any]:
    root = _schema(
        AnalysisResult,
        "urn:tracedoc:schema:analysis:" + str(SCHEMA_VERSION),
        "tracedoc analysis",
        "What `tracedoc analyze --format json` prints (AnalysisResult). All times are integer "
        "nanoseconds unless a name says otherwise; fractions are 0-1 shares of the rank's analysis window "
        "unless a description says otherwise; null means 'not measurable on this trace', never zero. "
        "ranks[].timeline is present only with --timeline (or in a report saved with "
        "AnalysisResult.save); job is null for a single trace; a rank's verdict is null when no rules ran.",
    )
    defs = root["$defs"]
    defs["metrics"] = _metrics(
        TRACE_METRICS, "Every metric of the metric table's rank and job scopes (the job's are null for a single trace)."
    )
    defs["job_metrics"] = _metrics(
        {n: TRACE_METRICS[n] for n in metric_names(scope="job", topic="job")},
        "The job view's metrics (the metric table's job scope).",
    )
    defs["evidence"] = _evidence(
        EVIDENCE,
        "Evidence tables: rows reports show and rules cite (log_anomalies: a "
        "training log's, joined to the first rank).",
    )
    defs.update(_row_types())
    defs["RankResult"]["properties"]["metrics"] = {"$ref": "#/$defs/metrics"}
    defs["RankResult"]["properties"]["evidence"] = {"$ref": "#/$defs/evidence"}
    _cite(defs, "evidence")
    defs["JobResult"]["properties"]["metrics"] = {"$ref": "#/$defs/job_metrics"}
    return root


def log_schema() -> dict[str, Any]:
    from .logs.report import SCHEMA_VERSION as LOG_VERSION

    root = _schema(
        LogResult,
        f"urn:tracedoc:schema:log:{LOG_VERSION}",
        "tracedoc log",
        "What `tracedoc logs --format json` prints (LogResult). Steps are the log's own step numbers; "
        "null means 'not measurable on this log', never zero.",
    )
    root["$defs"]["log_metrics"] = _metrics(LOG_METRIC_TABLE, "Every metric of the metric table's log scope.")
    root["properties"]["metrics"] = {"$ref": "#/$defs/log_metrics"}
    root["$defs"]["log_evidence"] = _evidence(LOG_EVIDENCE, "The log's evidence tables.")
    _cite(root["$defs"], "log_evidence")
    return root


def _schema(record: type, schema_id: str, title: str, description: str) -> dict[str, Any]:
    generated = msgspec.json.schema(record)
    defs = generated["$defs"]
    for name, cls in _record_types(record).items():
        _document(defs[name], cls)
    root = defs.pop(record.__name__)
    return {
        "$schema": DRAFT,
        "$id": schema_id,
        "title": title,
        "description": description,
        **{k: v for k, v in root.items() if k not in ("title", "description")},
        "$defs": defs,
    }


def _record_types(record: type) -> dict[str, type]:
    """Every struct type reachable from ``record``'s fields, by name."""
    out: dict[str, type] = {}

    def visit(tp: Any) -> None:
        info = msgspec.inspect.type_info(tp)
        walk(info)

    def walk(info: Any) -> None:
        if isinstance(info, msgspec.inspect.StructType):
            if info.cls.__name__ in out:
                return
            out[info.cls.__name__] = info.cls
            for f in info.fields:
                walk(f.type)
        for attr in ("types", "item_types", "item_type", "key_type", "value_type"):
            inner = getattr(info, attr, None)
            if isinstance(inner, tuple):
                for t in inner:
                    walk(t)
            elif inner is not None:
                walk(inner)

    visit(record)
    return out


def _document(schema: dict[str, Any], cls: type) -> None:
    """Descriptions from the comments beside the fields, and which fields a document always holds."""
    comments: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass.__module__.startswith("tracedoc.") and issubclass(klass, msgspec.Struct):
            comments.update(_field_comments(inspect.getsource(klass)))
    props = schema.get("properties", {})
    omits = cls.__struct_config__.omit_defaults
    required = []
    for f in msgspec.structs.fields(cls):
        prop = props.get(f.encode_name)
        if prop is None:
            continue
        prop.pop("default", None)
        if f.name in comments:
            prop["description"] = comments[f.name]
        if not (omits and f.required is False):
            required.append(f.encode_name)
    schema["required"] = required


def _field_comments(source: str) -> dict[str, str]:
    """Field -> its comment: the one at the end of its line, else the comment lines just above it."""
    out: dict[str, str] = {}
    above: list[str] = []
    for line in source.splitlines():
        c = _COMMENT_RE.match(line)
        if c:
            above.append(c.group(1))
            continue
        m = _FIELD_RE.match(line)
        if m and (m.group(2) or above):
            out[m.group(1)] = m.group(2) or " ".join(above)
        above = []
    return out


def _metrics(table: dict[str, Metric], description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "additionalProperties": False,
        "required": list(table),
        "properties": {
            name: {"type": [m.json_type, "null"], "description": f"[{m.unit}] {m.meaning}"} for name, m in table.items()
        },
    }


def _evidence(tables: dict[str, str], description: str) -> dict[str, Any]:
    """Each table's rows: its row type's (``model.evidence.ROW_TYPES``), else objects."""
    rows = {"type": "array", "items": {"type": "object"}}

    def table(name: str) -> dict[str, Any]:
        typed = ROW_TYPES.get(name)
        return {**rows, "items": {"$ref": f"#/$defs/{typed.__name__}"}} if typed is not None else rows

    return {
        "type": "object",
        "description": description,
        "additionalProperties": rows,
        "properties": {name: {**table(name), "description": text} for name, text in tables.items()},
    }


def _cite(defs: dict[str, Any], evidence: str) -> None:
    """A finding's evidence: tables of the document's evidence (``evidence``, a name in ``defs``)."""
    prop = defs["Finding"]["properties"]["evidence"]
    defs["Finding"]["properties"]["evidence"] = {"$ref": f"#/$defs/{evidence}", "description": prop["description"]}


def _row_types() -> dict[str, Any]:
    """The schemas of the evidence row types, described like the records'."""
    types = list(dict.fromkeys(ROW_TYPES.values()))  # a row type may serve several tables
    _, defs = msgspec.json.schema_components(types, ref_template="#/$defs/{name}")
    for cls in types:
        _document(defs[cls.__name__], cls)
    return defs


def diff_schema() -> dict[str, Any]:
    from .diff.model import DIFF_SCHEMA_VERSION, DiffResult

    return _schema(
        DiffResult,
        f"urn:tracedoc:schema:diff:{DIFF_SCHEMA_VERSION}",
        "tracedoc diff",
        "What `tracedoc diff --format json` prints (DiffResult): two runs compared, the median step time's "
        "change attributed to its causes (the parts sum to step_delta_ns), and every aligned rank pair "
        "with the tables behind it. All times are nanoseconds (integers, or floats for per-step "
        "averages and intervals) unless a name says otherwise.",
    )


def trend_schema() -> dict[str, Any]:
    from .diff.trend import TREND_SCHEMA_VERSION, TrendResult

    return _schema(
        TrendResult,
        f"urn:tracedoc:schema:trend:{TREND_SCHEMA_VERSION}",
        "tracedoc trend",
        "What `tracedoc diff BASE RUN2 RUN3 ... --format json` prints (TrendResult): each run compared "
        "with the first, its step change attributed to its causes (the parts sum to delta_ns), and the "
        "base's what-if predictions checked against it. All times are nanoseconds.",
    )


SCHEMAS = {
    "analysis.schema.json": analysis_schema,
    "diff.schema.json": diff_schema,
    "log.schema.json": log_schema,
    "trend.schema.json": trend_schema,
}


def render(name: str) -> str:
    return json.dumps(SCHEMAS[name](), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the generated schemas to ``tracedoc/schema`` (``--check``: only say which ones differ)."""
    check = "--check" in (argv if argv is not None else sys.argv[1:])
    return write_generated(SCHEMA_DIR, SCHEMAS, render, check)


if __name__ == "__main__":
    sys.exit(main())
