"""Threshold overrides: parse ``--param`` assignments, read ``[tool.tracedoc.params]``, and resolve
them against the loaded rules.

An override key names a rule by id or name and one of its parameters: ``TD301.stall_threshold`` or
``dataloader-stall.stall_threshold``. Unknown rules or parameters, and values of the wrong type,
are errors that name the key and suggest the closest valid one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .expr import BOOL, NUM, STR, suggest
from .rulefile import Rule, value_type
from ..errors import UsageError

try:  # tomli's compiled wheels parse the rule files about 3x faster than the standard library's tomllib
    import tomli as tomllib
except ImportError:  # pragma: no cover - an install without its dependencies
    import tomllib


class ParamError(UsageError):
    """A threshold override names an unknown rule or parameter, or has the wrong type."""


def parse_value(text: str) -> Any:
    """Turn the right-hand side of ``--param`` into a value: bool, int, float, ``10%`` or string."""
    text = text.strip()
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        if text.endswith("%"):
            return float(text[:-1]) / 100.0
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def parse_assignments(items: Iterable[str], where: str = "--param") -> dict[str, Any]:
    """Parse ``["TD301.stall_threshold=0.1", ...]`` into ``{"TD301.stall_threshold": 0.1}``."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or "." not in key or not value.strip():
            raise ParamError(where, f"{item!r} is not RULE.param=value", todo="e.g. --param TD301.stall_threshold=0.1")
        out[key] = parse_value(value)
    return out


def flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested tables (TOML dotted keys) into ``{"RULE.param": value}``."""
    out: dict[str, Any] = {}
    for key, value in table.items():
        full = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            out.update(flatten(value, full))
        else:
            out[full] = value
    return out


def find_pyproject(start: str | Path | None = None) -> Path | None:
    """Return the nearest ``pyproject.toml`` at or above ``start`` (default: cwd) with a
    ``[tool.tracedoc]`` table, or None."""
    here = Path(start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file() and _tool_table(candidate) is not None:
            return candidate
    return None


def _tool_table(path: Path) -> dict[str, Any] | None:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except (OSError, UnicodeDecodeError, RecursionError, MemoryError, tomllib.TOMLDecodeError):
        return None  # not a readable pyproject: it holds no tracedoc settings
    table = data.get("tool", {}).get("tracedoc")
    return table if isinstance(table, dict) else None


def read_pyproject(start: str | Path | None = None) -> tuple[dict[str, Any], list[Path], Path | None]:
    """Return (param overrides, extra rule dirs, the file) from ``[tool.tracedoc]``.

    ``[tool.tracedoc.params]`` holds overrides (``TD301.stall_threshold = 0.1``);
    ``[tool.tracedoc] rules = ["ci/rules"]`` adds rule directories relative to the file.
    """
    path = find_pyproject(start)
    if path is None:
        return {}, [], None
    table = _tool_table(path) or {}
    params = table.get("params", {})
    if not isinstance(params, dict):
        raise ParamError(f"{path}: [tool.tracedoc.params]", "expected a table of RULE.param = value")
    dirs = table.get("rules", [])
    if isinstance(dirs, str):
        dirs = [dirs]
    if not (isinstance(dirs, list) and all(isinstance(d, str) for d in dirs)):
        raise ParamError(f"{path}: [tool.tracedoc] rules", "expected a directory or an array of directories")
    return flatten(params), [path.parent / d for d in dirs], path


def collect_params(cli_items: Iterable[str] = (), start: str | Path | None = None) -> dict[str, Any]:
    """Merge ``[tool.tracedoc.params]`` from the nearest pyproject.toml with ``--param`` items
    (the command line wins). Keys are ``RULE.param``; they are checked against the rules later, in
    :func:`resolve_params`."""
    from_file, _, _ = read_pyproject(start)
    merged = dict(from_file)
    for key, value in parse_assignments(cli_items).items():
        merged.pop(key, None)  # re-insert so a command-line value is applied after any alias from the file
        merged[key] = value
    return merged


def resolve_params(
    rules: Iterable[Rule], overrides: Mapping[str, Any] | None, where: str = "params"
) -> dict[str, dict[str, Any]]:
    """Return ``{rule_id: {param: value}}``: defaults with ``overrides`` applied and checked."""
    rules = list(rules)
    values = {rule.id: {p.name: p.default for p in rule.params.values()} for rule in rules}
    by_key = {rule.id: rule for rule in rules} | {rule.name: rule for rule in rules}
    for key, value in flatten(overrides or {}).items():
        rule_key, _, pname = key.rpartition(".")
        rule = by_key.get(rule_key) or by_key.get(rule_key.upper())
        if rule is None:
            raise ParamError(f"{where} {key!r}", f"no rule {rule_key!r}{suggest(rule_key, by_key)}",
                             todo="name a rule by id or name, e.g. TD301.stall_threshold")  # fmt: skip
        if pname not in rule.params:
            choices = ", ".join(sorted(rule.params)) or "none"
            raise ParamError(f"{where} {key!r}", f"rule {rule.id} has no parameter {pname!r}{suggest(pname, rule.params)}",
                             todo=f"its parameters: {choices}")  # fmt: skip
        param = rule.params[pname]
        got = value_type(value)
        if got != param.type:
            want = {NUM: "a number", BOOL: "true or false", STR: "a string"}[param.type]
            raise ParamError(f"{where} {key!r}", f"expected {want} ({param.unit}), got {value!r}")
        values[rule.id][pname] = value
    return values
