"""Saved diffs and trends read back, those of earlier schema versions migrated.

``tracedoc diff --format json`` writes the ``DiffResult`` record itself (``TrendResult`` for three runs or
more); ``load(path)`` reads either back into an equal value, so a saved comparison can be rendered again
(``tracedoc.render``) or read in a notebook. A document of the previous version is migrated one version
at a time, as ``tracedoc.migrate`` does for analysis reports; a version this tracedoc does not know fails
with one line naming it.

Version history (both documents):

- 1: times in milliseconds (``step_ms`` = ``{before, after, delta}``, ``attribution[].delta_ms``,
  ``composition_ms``, kernels' ``ms_before``/``mean_us_before``, predictions' ``*_ms``), hand-projected
  from the live result: the focus pair's tables at the top level (``kernels``, ``new_kernels`` and
  ``vanished_kernels`` cut to 50 rows each), every pair compactly in ``ranks`` (5 rows, moved metrics),
  the job's and the focus pair's predictions in one ``predictions`` list. A trend's runs had no split of
  their step by category.
- 2: the saved record is the result, in integer nanoseconds (per-step averages and intervals as float
  ns): each side's typical step as ``before``/``after`` (``step_ns``, ``steps``, ``basis``,
  ``category_ns``, ``exposed_wait_ns``, ``exposed_transfer_ns``), ``step_delta_ns``,
  ``attribution[].delta_ns``, ``pairs[]`` (each with its tables, the focus pair ``pairs[focus]`` keeping
  its largest 50 rows of each kind and the others 5, and ``sizes`` counting the rows before the cut),
  ``job_predictions``; a trend's ``base`` and ``runs[]`` with ``step_ns``, ``delta_ns`` and
  ``category_ns``.
"""

from __future__ import annotations

from typing import Any

from ..errors import TraceError

DIFF_SCHEMA = "tracedoc.diff"
TREND_SCHEMA = "tracedoc.trend"
CURRENT = 2  # both documents' schema version
OLDEST = 1
_V1_FOCUS_ROWS, _V1_RANK_ROWS = 50, 5  # the rows version 1 kept of the focus pair's tables, of the others'


def current(data: Any, schema: str, where: str = "diff") -> dict[str, Any]:
    """``data`` (a saved diff's or trend's JSON document, as Python values) as a document of the current
    schema version; a ``TraceError`` says what is wrong with one that is not."""
    what = "diff" if schema == DIFF_SCHEMA else "trend"
    if not isinstance(data, dict) or data.get("schema") != schema:
        seen = repr(data.get("schema")) if isinstance(data, dict) else type(data).__name__
        raise TraceError(
            where,
            f"is not a saved tracedoc {what} (schema {schema!r})",
            f"schema {seen}",
            "pass the JSON written by `tracedoc diff --format json`",
        )
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or not OLDEST <= version <= CURRENT:
        wrote = data.get("tracedoc_version")
        raise TraceError(
            where,
            f"is a saved {what} of schema version {version!r}; this tracedoc reads versions {OLDEST} to {CURRENT}",
            f"written by tracedoc {wrote}" if wrote else None,
            "compare the runs again with this tracedoc, or read it with the version that wrote it",
        )
    doc = dict(data)
    try:
        while doc["schema_version"] < CURRENT:
            doc = MIGRATIONS[schema][doc["schema_version"]](doc)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise TraceError(
            where,
            f"is a saved tracedoc {what} with a missing or malformed field",
            f"{type(exc).__name__}: {exc}",
            "compare the runs again with `tracedoc diff`",
        ) from None
    return doc


def convert(data: Any, cls: type, schema: str, where: str):
    """The record ``cls`` a saved document describes (migrated first), or a ``TraceError`` naming the field."""
    import msgspec

    doc = current(data, schema, where)
    try:
        result = msgspec.convert(doc, cls)
    except msgspec.ValidationError as exc:
        raise TraceError(
            where,
            "is a saved tracedoc comparison with a missing or malformed field",
            str(exc),
            "compare the runs again with `tracedoc diff`",
        ) from None
    except RecursionError:
        raise TraceError(
            where,
            "is a saved tracedoc comparison nested too deeply to be one",
            None,
            "compare the runs again with `tracedoc diff`",
        ) from None
    problem = _inconsistent(doc)
    if problem:
        raise TraceError(
            where,
            "is a saved tracedoc comparison whose fields disagree",
            problem,
            "compare the runs again with `tracedoc diff`",
        )
    return result


def _inconsistent(doc: dict) -> str | None:
    """What a typed document still gets wrong for the renderers: a step split over other categories than
    the diff's, or a focus that is not one of the pairs."""
    from .steps import CATEGORIES

    splits = [("base", doc.get("base"))] + [(f"runs[{i}]", r) for i, r in enumerate(doc.get("runs") or [])]
    splits += [(side, doc.get(side)) for side in ("before", "after")]
    for i, p in enumerate(doc.get("pairs") or []):
        splits += [(f"pairs[{i}].{side}", p.get(side)) for side in ("before", "after")]
    for name, split in splits:
        cats = (split or {}).get("category_ns")
        if cats is not None and list(cats) != list(CATEGORIES):
            return (
                f"{name}.category_ns has {', '.join(map(str, cats)) or 'no categories'}; "
                f"expected {', '.join(CATEGORIES)}"
            )
    parts = [("", doc)] if "pairs" in doc else [(f"runs[{i}].", r) for i, r in enumerate(doc.get("runs") or [])]
    for name, part in parts:
        cats = [a["category"] for a in part.get("attribution") or []]
        if cats != list(CATEGORIES):
            return (
                f"{name}attribution has {', '.join(map(str, cats)) or 'no categories'}; "
                f"expected {', '.join(CATEGORIES)}"
            )
    if "pairs" in doc and not 0 <= doc["focus"] < len(doc["pairs"]):
        return f"focus = {doc['focus']} with {len(doc['pairs'])} pairs"
    return None


# -- version 1 -> 2 ----------------------------------------------------------------------------------


def _ns(ms: float | None) -> int | float | None:
    """ms as ns: an integer where the ms were one (every step time and split was), else a float."""
    if ms is None:
        return None
    v = ms * 1e6
    return round(v) if abs(v - round(v)) < 1e-3 else v


def _side(step: dict, composition: list[dict], split: dict | None, side: str) -> dict:
    return {
        "step_ns": _ns(step[side]),
        "category_ns": {c["category"]: _ns(c[f"{side}_ms"]) for c in composition},
        "exposed_wait_ns": _ns(split["wait_ms"][side]) if split else None,
        "exposed_transfer_ns": _ns(split["transfer_ms"][side]) if split else None,
    }


def _kernel(k: dict) -> dict:
    return {
        "name": k["name"],
        "example": k["example"],
        "category": k["category"],
        "count_before": k["count_before"],
        "count_after": k["count_after"],
        "time_before_ns": k["ms_before"] * 1e6,
        "time_after_ns": k["ms_after"] * 1e6,
        "mean_before_ns": None if k["mean_us_before"] is None else k["mean_us_before"] * 1e3,
        "mean_after_ns": None if k["mean_us_after"] is None else k["mean_us_after"] * 1e3,
        "status": k["status"],
    }


def _operator(o: dict) -> dict:
    return {
        "name": o["name"],
        "calls_before": o["calls_before"],
        "calls_after": o["calls_after"],
        **{
            f"{kind}_{side}_ns": o[f"{kind}_ms_{side}"] * 1e6 for kind in ("cpu", "gpu") for side in ("before", "after")
        },
        "status": o["status"],
    }


def _check(p: dict) -> dict:
    out = {k: v for k, v in p.items() if not k.endswith("_ms")}
    for name in (
        "predicted_before",
        "predicted_after",
        "measured_before",
        "measured_after",
        "impact_before",
        "impact_after",
        "error",
    ):
        out[f"{name}_ns"] = _ns(p[f"{name}_ms"])
    return out


def _tables(entry: dict, rows: int) -> dict:
    """A version-1 entry's tables (its kernels, new and vanished kernels merged), in ns, with their sizes."""
    import msgspec

    from ..model.record import to_builtins
    from .tables import KernelDelta, OperatorDelta, kernel_order, table_sizes

    seen: dict[str, dict] = {}
    for k in entry["kernels"] + entry["new_kernels"] + entry["vanished_kernels"]:
        seen.setdefault(k["name"], _kernel(k))
    kernels = sorted(msgspec.convert(list(seen.values()), list[KernelDelta]), key=kernel_order)
    operators = msgspec.convert([_operator(o) for o in entry["operators"]], list[OperatorDelta])
    return {
        "kernels": to_builtins(kernels),
        "operators": to_builtins(operators),
        "rows_kept": rows,
        "sizes": to_builtins(table_sizes(kernels, operators)),
    }


def _diff_from_v1(doc: dict) -> dict:
    """Version 1 -> 2: ms to ns; the pairs whole, the focus pair with the top level's tables."""
    focus = next(
        (
            i
            for i, r in enumerate(doc["ranks"])
            if r["rank_before"] == doc["focus"]["rank_before"] and r["rank_after"] == doc["focus"]["rank_after"]
        ),
        0,
    )
    pairs = []
    for i, r in enumerate(doc["ranks"]):
        split = r.get("exposed_comm_split")
        entry = doc if i == focus else r
        pair = {
            "rank_before": r["rank_before"],
            "rank_after": r["rank_after"],
            "labels": entry["labels"],
            "metrics": entry["metrics"],
            "kernels_complete": r["kernels_complete"],
            "predictions": [_check(p) for p in r.get("predictions") or []],
            **_tables(entry, _V1_FOCUS_ROWS if i == focus else _V1_RANK_ROWS),
        }
        for side in ("before", "after"):
            pair[side] = {
                **_side(r["step_ms"], r["composition_ms"], split, side),
                "steps": r["steps"][side],
                "basis": r["steps"]["basis"][side],
            }
        pairs.append(pair)
    split = doc.get("exposed_comm_split")
    sides = {}
    for side in ("before", "after"):
        run = doc[side]
        counts = [p[side]["steps"] for p in pairs]
        sides[side] = {
            "path": run["path"],
            "kind": run["kind"],
            "environment": run.get("environment"),
            **_side(doc["step_ms"], doc["composition_ms"], split, side),
            "steps": round(sum(counts) / len(counts)),
            "basis": "steps" if all(p[side]["basis"] == "steps" for p in pairs) else "window",
        }
    own = len(pairs[focus]["predictions"])
    checks = doc.get("predictions") or []
    interval = doc.get("step_delta_interval_ms")
    return {
        "schema": DIFF_SCHEMA,
        "schema_version": 2,
        "tracedoc_version": doc.get("tracedoc_version"),
        **sides,
        "step_delta_ns": sides["after"]["step_ns"] - sides["before"]["step_ns"],
        "step_pct": doc["step_pct"],
        "step_delta_interval_ns": [x * 1e6 for x in interval] if interval else None,
        "verdict": doc["verdict"],
        "noise_floor_pct": doc["noise_floor_pct"],
        "led_by": doc["led_by"],
        "attribution": [{"category": a["category"], "delta_ns": _ns(a["delta_ms"])} for a in doc["attribution"]],
        "pairs": pairs,
        "focus": focus,
        "job_predictions": [_check(p) for p in checks[: len(checks) - own]],
        "warnings": doc["warnings"],
    }


def _trend_from_v1(doc: dict) -> dict:
    """Version 1 -> 2: ms to ns; the steps' split by category, which version 1 did not keep, is null."""
    base = doc["base"]
    runs = [
        {
            "path": r["path"],
            "kind": r["kind"],
            "step_ns": _ns(r["step_ms"]),
            "category_ns": None,
            "delta_ns": _ns(r["delta_ms"]),
            "step_pct": r["step_pct"],
            "verdict": r["verdict"],
            "led_by": r["led_by"],
            "attribution": [{"category": a["category"], "delta_ns": _ns(a["delta_ms"])} for a in r["attribution"]],
            "labels": r["labels"],
            "predictions": [_check(p) for p in r["predictions"]],
            "warnings": r["warnings"],
        }
        for r in doc["runs"]
    ]
    return {
        "schema": TREND_SCHEMA,
        "schema_version": 2,
        "tracedoc_version": doc.get("tracedoc_version"),
        "base": {
            "path": base["path"],
            "kind": base["kind"],
            "environment": base.get("environment"),
            "step_ns": _ns(doc["base_step_ms"]),
            "category_ns": None,
        },
        "noise_floor_pct": doc["noise_floor_pct"],
        "categories": doc["categories"],
        "runs": runs,
    }


MIGRATIONS = {DIFF_SCHEMA: {1: _diff_from_v1}, TREND_SCHEMA: {1: _trend_from_v1}}
