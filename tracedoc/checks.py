"""Invariants every analysis result must satisfy before it is rendered.

Input: a per-rank result (metrics, evidence tables, per-step and per-device rows, window) and,
after the rules ran, its verdict. Output: the list of violations found; each offending value is
replaced by ``None`` (shown as "n/a" / ``null``) and a message is added to the rank's warnings, so
an impossible number is never shown as if it were measured.

The invariants follow from what the numbers mean: a fraction lies in [0, 1], a duration, count or
size is >= 0, every number is finite (JSON has no NaN or Infinity; undefined is ``null``), and an
interval's end is not before its start. A violation is a bug in tracedoc, not in the trace: ingest
drops what cannot be a time before any analysis runs.
"""

from __future__ import annotations

import math
from functools import lru_cache
from itertools import chain
from operator import attrgetter
from typing import Any

import msgspec
import numpy as np

from .model.evidence import Row, cell
from .model.metrics import valid_range

BUG_PREFIX = "internal check failed"
_COUNT_KEYS = frozenset(
    {
        "count",
        "calls",
        "kernels",
        "rows",
        "gpu_ops",
        "launch_calls",
        "streams",
        "merged",
        "ops_left_out",
        "device_count",
        "events",
    }
)
_TIMESTAMP_KEYS = frozenset({"start_ns", "end_ns"})
_UNIT_BOUNDS = (0.0, 1.0)
_NONNEGATIVE = (0.0, math.inf)


def metric_bounds(name: str) -> tuple[float, float] | None:
    """The range a metric must lie in (the metric table's, from its unit unless given)."""
    return valid_range(name)


@lru_cache(maxsize=4096)
def bounds_of(key: str) -> tuple[float, float] | None:
    """The range a value named ``key`` must lie in, from its name; None when the name says nothing."""
    if key in _TIMESTAMP_KEYS or key.endswith(("_start_ns", "_end_ns")):
        return None  # a point in time, any sign; checked as an interval where both ends are known
    if key == "fraction" or key.endswith("_fraction") or key in ("share", "sm_efficiency"):
        return _UNIT_BOUNDS
    if key == "est_occupancy":
        return (0.0, 100.0)
    if (
        key.endswith(("_ns", "_bytes", "_gbps", "_count"))
        or key in _COUNT_KEYS
        or "_bytes_" in key
        or key.startswith("launch_delay_")
    ):
        return _NONNEGATIVE
    return None


def _plain_number_ok(value: Any, bounds: tuple[float, float] | None) -> bool:
    """True for a Python int or float that is finite and inside ``bounds``: the common case, decided
    without building a message; anything else goes through ``_Checker.value``."""
    kind = type(value)
    if kind is int:
        return bounds is None or bounds[0] <= value <= bounds[1]
    if kind is float:
        return math.isfinite(value) and (bounds is None or bounds[0] <= value <= bounds[1])
    return value is None or kind is str


def _path_text(where: Any) -> str:
    """A location as text. Nested locations are kept as (parent, key, is_index) until a message needs
    them, so walking a large table builds no strings."""
    parts = []
    while isinstance(where, tuple):
        where, key, is_index = where
        parts.append(f"[{key}]" if is_index else f".{key}")
    return where + "".join(reversed(parts))


class _Checker:
    def __init__(self) -> None:
        self.violations: list[str] = []

    def value(self, where: Any, value: Any, bounds: tuple[float, float] | None) -> Any:
        """Return ``value``, or None after recording why it cannot be right."""
        if value is None or isinstance(value, (bool, np.bool_, str)):
            return value
        if not isinstance(value, (int, float, np.integer, np.floating)):
            return value
        number = float(value)
        if not math.isfinite(number):
            return self.fail(where, value, "not a finite number")
        if bounds is not None and not bounds[0] <= number <= bounds[1]:
            hi = "" if math.isinf(bounds[1]) else f", {bounds[1]:g}"
            what = f"outside [{bounds[0]:g}{hi}]" if hi else "negative"
            return self.fail(where, value, what)
        return value

    def fail(self, where: Any, value: Any, what: str) -> None:
        self.violations.append(
            f"{BUG_PREFIX}: {_path_text(where)} = {value!r} is {what}; shown as null. This is "
            "a bug in tracedoc, not a property of the trace: please report it with the trace"
        )
        return None

    def tree(self, where: Any, node: Any, bounds: tuple[float, float] | None = None) -> Any:
        """Check and repair a nested structure of dicts and lists (results are a few levels deep).

        A value's bounds come from its key (``bounds_of``); a container without bounds of its own
        passes its parent's down to the values in it. A typed evidence row (frozen) is repaired field
        by field, as a dict is."""
        if isinstance(node, Row):
            for key in node.__struct_fields__:
                item = getattr(node, key)
                if isinstance(item, (dict, list)):
                    self.tree((where, key, False), item, bounds_of(key) or bounds)
                elif not _plain_number_ok(item, bounds_of(key)):
                    msgspec.structs.force_setattr(node, key, self.value((where, key, False), item, bounds_of(key)))
            self.interval(where, node)
            return node
        if isinstance(node, dict):
            for key, item in node.items():  # values are replaced in place; no key is added or removed
                if isinstance(item, (dict, list)):
                    self.tree((where, key, False), item, bounds_of(str(key)) or bounds)
                    continue
                inner = bounds_of(key if type(key) is str else str(key))
                if not _plain_number_ok(item, inner):
                    node[key] = self.value((where, key, False), item, inner)
            self.interval(where, node)
            return node
        if isinstance(node, list):
            if len(node) >= _CLEAN_MIN and _clean(node, bounds):
                return node  # nothing in it this walk would repair or report
            for i, item in enumerate(node):
                if isinstance(item, (dict, list, Row)):
                    self.tree((where, i, True), item, bounds)
                elif not _plain_number_ok(item, bounds):
                    node[i] = self.value((where, i, True), item, bounds)
            return node
        return self.value(where, node, bounds)

    def interval(self, where: Any, row: dict | Row) -> None:
        start, end = cell(row, "start_ns"), cell(row, "end_ns")
        if _is_number(start) and _is_number(end) and end < start:
            self.fail((where, "end_ns", False), end, f"before its start_ns {start!r}")
            if isinstance(row, Row):
                msgspec.structs.force_setattr(row, "end_ns", None)
            else:
                row["end_ns"] = None


# -- whole lists certified at once ------------------------------------------------------------------
# A long list (timeline intervals, evidence rows, lanes of ops) is first checked column by column with
# C-level passes (the kinds of its values, min and max against the bounds, finiteness of its floats).
# Where that finds nothing ``tree`` would repair or report, the list is left as it is; anything else
# (a value out of bounds, an odd type, rows of differing shapes) is walked node by node as before, so
# the repairs and messages are the walk's own.
_CLEAN_MIN = 4
_SCALARS = frozenset({int, float, str, bool, type(None)})


def _clean(node: list, bounds: tuple[float, float] | None) -> bool:
    """True when ``tree`` would change nothing in the list ``node`` and record no violation."""
    kinds = set(map(type, node))
    if kinds <= _SCALARS:
        return _clean_values(node, kinds, bounds)
    if len(kinds) != 1:
        return False
    kind = kinds.pop()
    if kind is list:  # each inner list passes the same bounds to its items
        return _clean(list(chain.from_iterable(node)), bounds)
    if kind is dict:
        keys = node[0].keys()
        if not all(d.keys() == keys for d in node):
            return False
        columns = {k: [d[k] for d in node] for k in keys}
    elif issubclass(kind, Row):
        columns = {k: list(map(attrgetter(k), node)) for k in kind.__struct_fields__}
    else:
        return False
    for key, column in columns.items():
        inner = bounds_of(key if type(key) is str else str(key))
        col_kinds = set(map(type, column))
        if col_kinds <= _SCALARS:
            if not _clean_values(column, col_kinds, inner):
                return False
        elif col_kinds <= {list, dict} and len(col_kinds) == 1:  # rows' tables: each walked with these bounds
            if not _clean(column, inner or bounds):
                return False
        else:
            return False
    starts, ends = columns.get("start_ns"), columns.get("end_ns")
    if starts is not None and ends is not None:
        return not any(_is_number(s) and _is_number(e) and e < s for s, e in zip(starts, ends))
    return True


def _clean_values(values: list, kinds: set, bounds: tuple[float, float] | None) -> bool:
    """True when every value is None, a bool, a str, or a finite int or float inside ``bounds``."""
    if float in kinds and not all(map(math.isfinite, [v for v in values if type(v) is float])):
        return False
    if bounds is None or not kinds & {int, float}:
        return True
    numbers = values if kinds <= {int, float} else [v for v in values if type(v) is int or type(v) is float]
    return bounds[0] <= min(numbers) and max(numbers) <= bounds[1]


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))


def check_rank(rank: Any) -> list[str]:
    """Check one rank's result in place; add each violation to its warnings and return them."""
    c = _Checker()
    label = f"rank {rank.rank}" if rank.rank is not None else str(rank.source)
    for name, value in list(rank.metrics.items()):
        rank.metrics[name] = c.value(f"{label}: metrics.{name}", value, metric_bounds(name))
    win = rank.window
    if win.end_ns < win.start_ns:
        c.fail(f"{label}: window.end_ns", win.end_ns, f"before the window's start {win.start_ns}")
    c.tree(f"{label}: evidence", rank.evidence)
    c.tree(f"{label}: per_step", rank.per_step)
    c.tree(f"{label}: per_device", rank.per_device)
    c.tree(f"{label}: timeline", rank.timeline)
    rank.warnings.extend(c.violations)
    return c.violations


# Job view: every per-step number of the rank table against the step it is a part of (2% for rounding).
_JOB_STEP_SLACK = 1.02
_JOB_PER_STEP_KEYS = ("wait_ns_per_step", "lateness_ns_per_step")


def check_job(job: Any) -> list[str]:
    """Check a job stage's output (``tracedoc.job.JobJoin``, or a ``JobView`` alone) in place, as
    ``check_rank`` checks a rank's:
    the view's metrics by the metric table's ranges, its fractions, collectives, stragglers and
    disagreements; every fraction of the rank table's job columns in [0, 1], and no wait, lateness or
    cost per step above the step it is part of. Offending values become None; the violations are
    returned (and added to the view's issues)."""
    view, c = getattr(job, "view", job), _Checker()
    columns, own_steps = getattr(job, "rank_columns", {}), getattr(job, "step_ns_by_rank", {})
    for name, value in list(view.metrics.items()):
        view.metrics[name] = c.value(f"job: metrics.{name}", value, metric_bounds(name))
    view.wait_fraction_of_comm = c.value("job: wait_fraction_of_comm", view.wait_fraction_of_comm, _UNIT_BOUNDS)
    c.tree("job: collectives", view.collective_rows)
    c.tree("job: stragglers", [{k: v for k, v in s.items() if k != "breakdown"} for s in view.stragglers])
    c.tree("job: disagreements", view.disagreements)
    for rank, row in columns.items():
        c.tree(f"job: ranks[rank {rank}]", row)
        step = row.get("matched_step_p50_ns") or own_steps.get(rank)
        for key in _JOB_PER_STEP_KEYS:
            x = row.get(key)
            if _is_number(x) and _is_number(step) and step > 0 and x > _JOB_STEP_SLACK * step:
                row[key] = c.fail(f"job: ranks[rank {rank}].{key}", x, f"above its step ({step / 1e6:.3f} ms)")
    step_ns = view.metrics.get("job_step_time_p50_ns")
    cost = view.metrics.get("straggler_wait_ms_per_step")
    if _is_number(cost) and _is_number(step_ns) and step_ns > 0 and cost * 1e6 > _JOB_STEP_SLACK * step_ns:
        view.metrics["straggler_wait_ms_per_step"] = c.fail(
            "job: metrics.straggler_wait_ms_per_step", cost, f"above the job's step ({step_ns / 1e6:.3f} ms)"
        )
    view.issues.extend(c.violations)
    return c.violations


def check_verdict(rank: Any, verdict: Any) -> list[str]:
    """Check a verdict's numbers (impact shares and times, evidence rows); repair and report like ``check_rank``."""
    if verdict is None:
        return []
    c = _Checker()
    label = f"rank {rank.rank}" if rank.rank is not None else str(rank.source)
    if _is_number(getattr(verdict, "step_time_ns", None)):
        verdict.step_time_ns = c.value(f"{label}: verdict.step_time_ns", verdict.step_time_ns, _NONNEGATIVE)
    for f in getattr(verdict, "findings", []):
        where = f"{label}: finding {getattr(f, 'rule_id', '?')}"
        for attr in ("impact_fraction", "impact_ms_per_step"):
            if hasattr(f, attr):
                value = getattr(f, attr)
                checked = c.value(f"{where}.{attr}", value, bounds_of(attr) or _NONNEGATIVE)
                if checked is not value:
                    object.__setattr__(f, attr, checked)  # findings are frozen values; repair this one field
    rank.warnings.extend(c.violations)
    return c.violations


def violations_in(rank_dict: dict) -> list[str]:
    """Violations in a rank's serialised form (``RankResult.to_dict()``), without repairing anything."""
    c = _Checker()
    label = f"rank {rank_dict.get('rank')}"
    metrics = rank_dict.get("metrics") or {}
    for name, value in metrics.items():
        c.value(f"{label}: metrics.{name}", value, metric_bounds(name))
    window = rank_dict.get("window") or {}
    if (
        _is_number(window.get("start_ns"))
        and _is_number(window.get("end_ns"))
        and window["end_ns"] < window["start_ns"]
    ):
        c.fail(f"{label}: window.end_ns", window["end_ns"], "before the window's start")
    for key in ("evidence", "per_step", "per_device", "timeline", "verdict"):
        if key in rank_dict:
            c.tree(f"{label}: {key}", _copy(rank_dict[key]))
    return c.violations


def _copy(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _copy(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_copy(v) for v in node]
    return node


# -- saved reports, read back ------------------------------------------------------------------------

_INT64 = 2**63
MAX_REPORT_DEPTH = 48  # a report's tables are a few levels deep; deeper nesting is not a report
_MAYBE_NEGATIVE = ("lateness_",)
_FLAT_TABLES = frozenset({"kernel_totals", "top_kernels", "operator_totals", "top_operators"})  # what the diff reads
_NUMBER_SUFFIXES = (
    "_ns",
    "_fraction",
    "_bytes",
    "_gbps",
    "_count",
    "_ms",
    "_us",
)  # a single number by its name  # the job's rank table: arriving early is a negative lateness
_JSON_TYPES = {"number": (int, float), "integer": (int, float), "boolean": (bool,), "string": (str,)}
_WHAT_IF_BOUNDS = {
    "step_ms_before": _NONNEGATIVE,
    "step_ms_after": _NONNEGATIVE,
    "gain_ms": _NONNEGATIVE,
    "share_fraction": _UNIT_BOUNDS,
}


def _excerpt(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


class _Refuser(_Checker):
    """``_Checker``'s invariants, raised at the first value that fails them (with its field path), and
    each value a number where its name says it is one."""

    def __init__(self, source: str) -> None:
        super().__init__()
        self.source = source

    def fail(self, where: Any, value: Any, what: str) -> None:
        from .errors import TraceError

        raise TraceError(
            self.source,
            f"is a tracedoc report with an impossible value: {_path_text(where)} = {_excerpt(value)} is {what}",
            None,
            "correct or remove that value, or write the report again with `tracedoc analyze --format json`",
        )

    def number(
        self, where: Any, value: Any, bounds: tuple[float, float] | None, integer: bool = False, time: bool = False
    ) -> None:
        """``time``: a time or duration in ns, which tracedoc holds as int64 everywhere."""
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(where, value, f"not a number (a {type(value).__name__})")
        if time and math.isfinite(value) and not -_INT64 <= value < _INT64:
            self.fail(where, value, "beyond the int64 nanoseconds every time and duration is held in")
        if integer and isinstance(value, float) and math.isfinite(value) and not value.is_integer():
            self.fail(where, value, "not a whole number")
        self.value(where, value, bounds)

    def tree(
        self, where: Any, node: Any, bounds: tuple[float, float] | None = None, depth: int = 0, flat: bool = False
    ) -> Any:
        """``flat``: rows of plain values (per-step and per-device rows, the totals the diff reads), where a
        list or an object in place of a number is refused too."""
        if depth > MAX_REPORT_DEPTH:
            self.fail(where, "...", f"nested deeper than {MAX_REPORT_DEPTH} levels")
        if isinstance(node, dict):
            for key, item in node.items():
                name = str(key)
                if flat and isinstance(item, (dict, list)) and (name.endswith(_NUMBER_SUFFIXES) or bounds_of(name)):
                    self.fail((where, name, False), item, f"not a number (a {type(item).__name__})")
                if isinstance(item, (dict, list)):
                    self.tree((where, name, False), item, bounds_of(name) or bounds, depth + 1, flat)
                elif name.startswith(_MAYBE_NEGATIVE):
                    self.number((where, name, False), item, None, time=name.endswith("_ns"))
                elif bounds_of(name) is not None or name in _TIMESTAMP_KEYS or name.endswith(("_start_ns", "_end_ns")):
                    self.number((where, name, False), item, bounds_of(name), time=name.endswith("_ns"))
                else:
                    self.value((where, name, False), item, None)
            self.interval(where, node)
        elif isinstance(node, list):
            for i, item in enumerate(node):
                if isinstance(item, (dict, list)):
                    self.tree((where, i, True), item, bounds, depth + 1, flat)
                else:
                    self.value((where, i, True), item, bounds)
        else:
            self.value(where, node, bounds)
        return node

    def metrics(self, where: str, metrics: dict[str, Any]) -> None:
        from .model.metrics import BY_NAME

        for name, value in metrics.items():
            m = BY_NAME.get(name)
            path = (where, name, False)
            if m is None or value is None:
                self.tree(path, value) if isinstance(value, (dict, list)) else self.value(path, value, None)
                continue
            kinds = _JSON_TYPES[m.json_type]
            if isinstance(value, bool) != (bool in kinds) or not isinstance(value, kinds):
                self.fail(path, value, f"not a {m.json_type} (metric {name} is in {m.unit})")
            if m.numeric and not isinstance(value, bool):
                self.number(path, value, m.valid_range, integer=m.json_type == "integer", time=m.unit == "ns")

    def verdict(self, where: str, verdict: Any) -> None:
        if verdict is None:
            return
        self.number((where, "step_time_ns", False), verdict.step_time_ns, _NONNEGATIVE)
        for i, f in enumerate(verdict.findings):
            at = (where, "findings", False), i, True
            self.number((at, "impact_fraction", False), f.impact_fraction, _UNIT_BOUNDS)
            self.number((at, "impact_ms_per_step", False), f.impact_ms_per_step, _NONNEGATIVE)
            for key, value in (f.what_if or {}).items():
                if key in _WHAT_IF_BOUNDS:
                    self.number(((at, "what_if", False), key, False), value, _WHAT_IF_BOUNDS[key])
            self.tree((at, "evidence", False), f.evidence)


def refuse_impossible(result: Any, source: str) -> None:
    """A report read back from a file (``tracedoc.result.load``): every value of its type and inside its
    domain, as ``check_rank`` keeps a fresh result's (the metric table's ranges, fractions in [0, 1],
    durations, counts and sizes >= 0, intervals that end after they start), and each field a name calls
    a number a number. The first that is not raises a ``TraceError`` naming its field path, so a
    hand-edited report is refused in one line instead of giving numbers that cannot be true."""
    c = _Refuser(source)
    for i, rank in enumerate(result.ranks):
        where = f"ranks[{i}]"
        c.metrics(f"{where}.metrics", rank.metrics)
        win = rank.window
        if win.end_ns < win.start_ns:
            c.fail(f"{where}.window.end_ns", win.end_ns, f"before the window's start_ns {win.start_ns}")
        c.tree(f"{where}.per_step", rank.per_step, flat=True)
        c.tree(f"{where}.per_device", rank.per_device, flat=True)
        c.tree(f"{where}.timeline", rank.timeline)
        for name, table in rank.evidence.items():
            c.tree(((f"{where}.evidence"), name, False), table, flat=name in _FLAT_TABLES)
            if name in _FLAT_TABLES:  # the diff matches these rows by name
                for j, row in enumerate(table):
                    if not isinstance(row, dict) or not isinstance(row.get("name"), str):
                        at = (((f"{where}.evidence"), name, False), j, True)
                        c.fail(
                            (at, "name", False) if isinstance(row, dict) else at,
                            row.get("name") if isinstance(row, dict) else row,
                            "not a name: each row is named",
                        )
        for j, row in enumerate(rank.per_step):  # a step is its span: both ends are times
            for end in ("start_ns", "end_ns"):
                if not isinstance(row, dict) or row.get(end) is None:
                    c.fail(
                        ((f"{where}.per_step", j, True), end, False),
                        None if not isinstance(row, dict) else row.get(end),
                        "missing: a step row holds its start and end",
                    )
        c.verdict(f"{where}.verdict", rank.verdict)
    job = result.job
    if job is not None:
        c.metrics("job.metrics", job.metrics)
        for i, row in enumerate(job.ranks):
            c.tree(f"job.ranks[{i}]", row.to_dict())
        c.verdict("job.verdict", job.verdict)
