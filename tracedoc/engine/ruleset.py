"""The rules of one run, loaded and validated once, with their parameters resolved once.

``load_ruleset(params, rule_dirs)`` reads the shipped rules and the user's directories and applies
the threshold overrides (``--param``, ``[tool.tracedoc.params]``); a bad rule file or override fails
here, before any trace is read. Every evaluation of the run (each rank, the job, a training log)
uses the same ``Ruleset``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .params import resolve_params
from .rulefile import load_rules_and_version, rules_version
from .rulemodel import Rule


@dataclass(frozen=True)
class Ruleset:
    """The run's rules and their parameter values."""

    rules: tuple[Rule, ...]
    values: Mapping[str, Mapping[str, Any]]  # rule id -> parameter -> value (defaults with the overrides)
    version: str | None = field(default=None, compare=False)  # digest of the shipped rule files

    def of_scope(self, scope: str) -> list[Rule]:
        return [rule for rule in self.rules if rule.scope == scope]


def load_ruleset(params: Mapping[str, Any] | None = None, rule_dirs: Iterable[str | Path] = ()) -> Ruleset:
    """Load and validate the rules and the parameter overrides, once for the run."""
    loaded, version = load_rules_and_version(tuple(rule_dirs))
    rules = tuple(loaded)
    return Ruleset(rules, resolve_params(rules, params), version or _version())


def _version() -> str | None:
    try:
        return rules_version()
    except Exception:  # noqa: BLE001 - the version is informational only
        return None
