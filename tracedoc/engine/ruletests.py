"""A rule's own test cases (``[[tests.fires]]`` and ``[[tests.ok]]``): metric overrides on a baseline
under which the rule must fire, or must not. Checked here when a rule file is read, applied by the tests."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .expr import suggest, value_type

UNSET_KEY = "unset"  # in a [[tests.*]] case: metric names whose value is None (TOML has no null)


def rule_tests(checker: Any, table: Any) -> dict[str, tuple[Mapping[str, Any], ...]]:
    """A rule file's ``[tests]`` table, its problems told to ``checker`` (the rule file's ``_FileChecker``)."""
    if not checker.typed("tests", table, dict, "a [tests] table"):
        return {}
    checker.unknown_keys("tests.", table, ("fires", "ok"))
    out = {}
    for kind in ("fires", "ok"):
        cases = table.get(kind, [])
        if not checker.typed(f"tests.{kind}", cases, list, f"an array of [[tests.{kind}]] tables"):
            continue
        for i, case in enumerate(cases):
            fld = f"tests.{kind}[{i}]"
            if not checker.typed(fld, case, dict, "a table of metric overrides"):
                continue
            for key, value in case.items():
                if key == UNSET_KEY:
                    _unset(checker, f"{fld}.{key}", value)
                elif key not in checker.registry:
                    checker.problem(
                        f"{fld}.{key}", f"unknown {checker.scope} metric {key!r}{suggest(key, checker.registry)}"
                    )
                elif value_type(value) != checker.metric_types[key]:
                    checker.problem(f"{fld}.{key}", f"expected a {checker.metric_types[key]} value, got {value!r}")
        out[kind] = tuple(cases)
    return out


def _unset(checker: Any, fld: str, names: Any) -> None:
    if not (isinstance(names, list) and all(isinstance(n, str) for n in names)):
        checker.problem(fld, "expected an array of metric names to set to None")
        return
    for name in names:
        if name not in checker.registry:
            checker.problem(fld, f"unknown {checker.scope} metric {name!r}{suggest(name, checker.registry)}")


def apply_test_case(baseline: Mapping[str, Any], case: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``baseline`` with a [[tests.*]] case applied (its ``unset`` names become None)."""
    metrics = dict(baseline)
    for key, value in case.items():
        if key == UNSET_KEY:
            metrics.update(dict.fromkeys(value))
        else:
            metrics[key] = value
    return metrics
