"""Threshold overrides: parse ``--param`` assignments, read ``[tool.tracedoc.params]``, and resolve
them against the loaded rules.

An override key names a rule by id or name and one of its parameters: ``TD301.stall_threshold`` or
``dataloader-stall.stall_threshold``. Unknown rules or parameters, and values of the wrong type,
are errors that name the key and suggest the closest valid one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .expr import BOOL, NUM, STR, suggest
from .expr import value_type
from .rulemodel import Rule
from ..errors import UsageError
from ..infile import excerpt as infile_excerpt

try:  # tomli's compiled wheels parse the rule files about 3x faster than the standard library's tomllib
    import tomli as tomllib
except ImportError:  # pragma: no cover - an install without its dependencies
    import tomllib


class ParamError(UsageError):
    """A threshold override names an unknown rule or parameter, or has the wrong type."""


MAX_DIGITS = 300  # no threshold has more digits; a longer number is a mistake, not a value


def parse_value(text: str, where: str = "--param") -> Any:
    """Turn the right-hand side of ``--param`` into a value: bool, int, float, ``10%`` or string.
    A number that is not finite (``nan``, ``inf``, ``1e400``) or has more than ``MAX_DIGITS`` digits is a
    usage error: NaN compares false with everything, so it would silently mute the rule."""
    text = text.strip()
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    digits = sum(c.isdigit() for c in text)
    try:
        if text.endswith("%"):
            value: Any = float(text[:-1]) / 100.0
        elif digits > MAX_DIGITS:
            value = float(text)  # checked below; int() of thousands of digits is slow or refused
        else:
            return int(text)
    except ValueError:
        try:
            value = float(text)
        except ValueError:
            return text
    return check_number(value, where, text)


def check_number(value: Any, where: str, shown: Any = None) -> Any:
    """``value`` unchanged when it is a finite number of sane size (or not a number at all); else a usage error."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    text = shown if isinstance(shown, str) else None
    if isinstance(value, float) and not math.isfinite(value) or (isinstance(value, int) and value.bit_length() > 1000):
        seen = infile_excerpt(text if text is not None else repr(value))
        raise ParamError(
            where,
            "needs a finite number",
            seen,
            "give a plain number such as 0.1 or 10% (nan and inf would switch the rule off)",
        )
    if text is not None and sum(c.isdigit() for c in text) > MAX_DIGITS:
        raise ParamError(
            where,
            f"has a number of more than {MAX_DIGITS} digits",
            infile_excerpt(text),
            "give a plain number such as 0.1 or 10%",
        )
    return value


def parse_assignments(items: Iterable[str], where: str = "--param") -> dict[str, Any]:
    """Parse ``["TD301.stall_threshold=0.1", ...]`` into ``{"TD301.stall_threshold": 0.1}``."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or "." not in key or not value.strip():
            raise ParamError(where, f"{item!r} is not RULE.param=value", todo="e.g. --param TD301.stall_threshold=0.1")
        out[key] = parse_value(value, f"{where} {key}")
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
    ``[tool.tracedoc]`` table, or None. As git's ``safe.directory``: a file, or the directory holding it,
    that another user owns (not you, not root) or that group or others may write is skipped, with a
    warning naming it, since whoever can write it would set this run's thresholds."""
    here = Path(start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        if not candidate.is_file():
            continue
        why = unsafe_config(candidate)
        if why is not None:
            if _tool_table_mentioned(candidate):
                _skipped(candidate, why)
            continue
        if _tool_table(candidate) is not None:
            return candidate
    return None


_said: set[str] = set()  # configuration files already said to be skipped (each is said once)


def unsafe_config(path: Path) -> str | None:
    """Why a configuration file may hold what another user wrote (it or its directory is owned by someone
    other than you or root, or group or others may write it), or None when it is safe to read."""
    import os
    import stat

    uid = os.getuid()
    for what, target in (("the file", path), ("its directory", path.parent)):
        try:
            st = os.stat(target)
        except OSError:
            return f"{what} cannot be checked"
        if st.st_uid not in (uid, 0):
            return f"{what} belongs to user id {st.st_uid}, not to you (user id {uid}) or root"
        if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            return f"group or others may write {what} (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def _tool_table_mentioned(path: Path) -> bool:
    """Whether a regular file mentions ``tracedoc`` (read bounded and non-blocking, never parsed)."""
    import os
    import stat

    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            st = os.fstat(f.fileno())  # read what the file holds, not a buffer of the most allowed
            return stat.S_ISREG(st.st_mode) and b"tracedoc" in f.read(min(st.st_size, MAX_PYPROJECT_BYTES))
    except (OSError, ValueError):
        return False


def _skipped(path: Path, why: str) -> None:
    if str(path) in _said:
        return
    _said.add(str(path))
    from ..errors import warn

    warn(
        str(path),
        f"not read: {why}, so another user could set tracedoc's thresholds there",
        "tracedoc reads [tool.tracedoc] only from files and directories that you or root own and that only "
        "the owner may write (pass --param to set a threshold)",
    )


PYPROJECT_KEYS = ("params", "rules")  # what [tool.tracedoc] may hold
MAX_PYPROJECT_BYTES = 4 << 20


def _tool_table(path: Path) -> dict[str, Any] | None:
    """``[tool.tracedoc]`` of a pyproject.toml, None when it has none. A file that mentions the table but
    cannot be read as TOML, or a table of the wrong shape, is an error naming it (never silently ignored)."""
    from ..infile import read_input

    try:
        raw = read_input(str(path), ParamError, "pyproject.toml", max_bytes=MAX_PYPROJECT_BYTES)
    except ParamError:
        return None  # not a file tracedoc can read (a pipe, too large): it holds no tracedoc settings
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, RecursionError, MemoryError, ValueError) as exc:  # TOMLDecodeError is a ValueError
        if b"tool.tracedoc" not in raw:
            return None  # not a readable pyproject, and not one that tries to configure tracedoc
        raise ParamError(
            f"{path}: [tool.tracedoc]",
            "is in a pyproject.toml that is not valid TOML",
            infile_excerpt(str(exc), chars=120),
            "fix the file (tracedoc would otherwise run without its settings)",
        ) from None
    tool = data.get("tool", {})
    if not isinstance(tool, dict) or "tracedoc" not in tool:
        return None
    table = tool["tracedoc"]
    if not isinstance(table, dict):
        raise ParamError(
            f"{path}: tool.tracedoc",
            "must be a table",
            infile_excerpt(repr(table)),
            "write [tool.tracedoc.params] with RULE.param = value lines",
        )
    unknown = [k for k in table if k not in PYPROJECT_KEYS]
    if unknown:
        raise ParamError(
            f"{path}: [tool.tracedoc]",
            f"has an unknown key {infile_excerpt(unknown[0])}{suggest(str(unknown[0]), PYPROJECT_KEYS)}",
            None,
            f"its keys: {', '.join(PYPROJECT_KEYS)}",
        )
    return table


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
    for key, value in flatten(params).items():
        check_number(value, f"{path}: [tool.tracedoc.params] {key}")
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
            raise ParamError(
                f"{where} {key!r}",
                f"rule {rule.id} has no parameter {pname!r}{suggest(pname, rule.params)}",
                todo=f"its parameters: {choices}",
            )
        param = rule.params[pname]
        got = value_type(value)
        if got != param.type:
            want = {NUM: "a number", BOOL: "true or false", STR: "a string"}[param.type]
            raise ParamError(f"{where} {key!r}", f"expected {want} ({param.unit}), got {value!r}")
        values[rule.id][pname] = value
    return values
