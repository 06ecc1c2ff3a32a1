"""Load and validate rule files.

Input: directories of ``*.toml`` rule files (the shipped ``rules/`` first, then user directories).
Output: a list of :class:`Rule` values, or a :class:`RuleError` that lists every problem found, each
naming the file and field, what is wrong, and (for misspelt names) the closest valid name.

A rule file holds one rule; see ``docs/rules.md`` for the format.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ..labels import ADVICE_LABEL, LABELS, SEVERITIES, VERDICT_LABELS
from .expr import NUM, Expr, ExprError, compile_expr, suggest, value_type
from .template import Template, compile_template
from ..errors import TracedocError
from ..logs.registry import LOG_EVIDENCE_TABLES
from ..resources import data_dir
from . import rulecache
from .rulemodel import (
    EVIDENCE_TABLES,
    LOG_METRIC_TYPES,
    MAX_EVIDENCE_ROWS,
    METRIC_TYPES,
    SCOPE_TRACE,
    SCOPE_TYPES,
    SCOPES,
    EvidenceSpec,
    Fix,
    Param,
    Rule,
)
from .ruletests import UNSET_KEY, apply_test_case, rule_tests  # noqa: F401
from .whatifs import WHAT_IF_KINDS, LABEL_WHAT_IF, rule_what_if

MAX_RULE_FILE_BYTES = 1 << 20

_ID_RE = re.compile(r"^[A-Z]+[0-9]{3,4}$")
_NAME_RE = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
_PARAM_RE = re.compile(r"^[a-z_][a-z0-9_]*$")

_REQUIRED = ("id", "name", "title", "label", "severity", "when", "message", "expect", "fixes", "docs")
_OPTIONAL = (
    "impact",
    "params",
    "evidence",
    "requires_no_other_verdict",
    "requires_gpu",
    "what_if",
    "replays_label_fix",
    "tests",
    "scope",
)

_DOCS_KEYS = ("what_it_detects", "why_it_matters", "references")

# Everything outside a rule file that a rule is checked against (part of the rule cache's key).
_VOCABULARY = (
    sorted(METRIC_TYPES.items()),
    sorted(LOG_METRIC_TYPES.items()),
    EVIDENCE_TABLES,
    LOG_EVIDENCE_TABLES,
    LABELS,
    SEVERITIES,
    VERDICT_LABELS,
    ADVICE_LABEL,
    WHAT_IF_KINDS,
    sorted(LABEL_WHAT_IF.items()),
    MAX_EVIDENCE_ROWS,
)


class RuleError(TracedocError):
    """One or more rule files are invalid. ``problems`` holds ``(where, what)`` pairs."""

    def __init__(self, problems: Iterable[tuple[str, str]]):
        self.problems = list(problems)
        if len(self.problems) == 1:
            where, what = self.problems[0]
        else:
            where = "rule files"
            what = f"{len(self.problems)} problems:\n" + "\n".join(f"  {w}: {m}" for w, m in self.problems)
        super().__init__(where, what, todo=None)


class _FileChecker:
    """Validate one parsed rule file, collecting problems instead of stopping at the first."""

    def __init__(self, path: Path, data: Mapping[str, Any]):
        self.path = path
        self.data = data
        self.problems: list[tuple[str, str]] = []
        scope = data.get("scope", SCOPE_TRACE)
        if scope not in SCOPES:
            self.problem("scope", f"unknown scope {scope!r}{suggest(str(scope), SCOPES)}; one of: {', '.join(SCOPES)}")
            scope = SCOPE_TRACE
        self.scope = scope
        self.registry, self.tables = SCOPES[scope]
        self.metric_types = SCOPE_TYPES[scope]
        self.names: dict[str, str] = dict(self.metric_types)

    def problem(self, fld: str, what: str) -> None:
        self.problems.append((f"{self.path}: {fld}", what))

    def typed(self, fld: str, value: Any, typ: type | tuple[type, ...], what: str) -> bool:
        if isinstance(value, typ) and not (typ is int and isinstance(value, bool)):
            return True
        self.problem(fld, f"expected {what}, got {type(value).__name__} {value!r}")
        return False

    def unknown_keys(self, fld: str, table: Mapping[str, Any], allowed: Iterable[str]) -> None:
        allowed = list(allowed)
        for key in table:
            if key not in allowed:
                self.problem(f"{fld}{key}" if fld else key, f"unknown field {key!r}{suggest(key, allowed)}")

    def expr(self, fld: str, source: Any, typ: str | None = None) -> Expr | None:
        if not self.typed(fld, source, str, "an expression string"):
            return None
        try:
            expr = compile_expr(source, self.names)
        except ExprError as exc:
            self.problem(fld, str(exc))
            return None
        if typ == NUM and expr.type != NUM:
            self.problem(fld, f"expected a numeric expression, got a {expr.type} one: {source!r}")
            return None
        return expr

    def template(self, fld: str, source: Any) -> Template | None:
        if not self.typed(fld, source, str, "a message string"):
            return None
        try:
            return compile_template(source, self.names)
        except ExprError as exc:
            self.problem(fld, str(exc))
            return None

    def check(self) -> Rule | None:
        data = self.data
        self.unknown_keys("", data, _REQUIRED + _OPTIONAL)
        for key in _REQUIRED:
            if key not in data:
                self.problem(key, "missing required field")
        if any(key not in data for key in ("id", "name")):
            return None
        rid, name = data["id"], data["name"]
        if self.typed("id", rid, str, "a string") and not _ID_RE.match(rid):
            self.problem("id", f"{rid!r} is not a rule id: use capital letters then 3-4 digits, like 'TD301'")
        if self.typed("name", name, str, "a string") and not _NAME_RE.match(name):
            self.problem("name", f"{name!r} is not kebab-case, like 'dataloader-stall'")
        self.typed("title", data.get("title", ""), str, "a string")
        label, severity = data.get("label"), data.get("severity")
        if label is not None and label not in LABELS:
            self.problem("label", f"unknown label {label!r}{suggest(str(label), LABELS)}; one of: {', '.join(LABELS)}")
        if severity is not None and severity not in SEVERITIES:
            self.problem("severity", f"unknown severity {severity!r}; one of: {', '.join(SEVERITIES)}")
        params = self.params(data.get("params", {}))
        when = self.expr("when", data.get("when", "")) if "when" in data else None
        impact = self.expr("impact", data["impact"], NUM) if "impact" in data else None
        message = self.template("message", data["message"]) if "message" in data else None
        expect = self.template("expect", data["expect"]) if "expect" in data else None
        fixes = self.fixes(data.get("fixes", []))
        evidence = self.evidence(data.get("evidence", []))
        docs = self.docs(data.get("docs", {}))
        flags = {}
        for key, default in (("requires_no_other_verdict", False), ("requires_gpu", True)):
            value = data.get(key, default)
            flags[key] = value if self.typed(key, value, bool, "true or false") else default
        if flags["requires_no_other_verdict"] and label == ADVICE_LABEL:
            self.problem("requires_no_other_verdict", "only a verdict label can require that no other verdict fires")
        flags["what_if"] = rule_what_if(data, self)
        tests = rule_tests(self, data.get("tests", {}))
        if self.problems:
            return None
        return Rule(
            id=rid, name=name, title=data["title"], label=label, severity=severity, when=when,
            message=message, expect=expect, fixes=fixes, docs=docs, path=self.path, impact=impact,
            params=params, evidence=evidence, tests=tests, scope=self.scope, **flags,
        )  # fmt: skip

    def params(self, table: Any) -> dict[str, Param]:
        out: dict[str, Param] = {}
        if not self.typed("params", table, dict, "a table of parameters"):
            return out
        for pname, spec in table.items():
            fld = f"params.{pname}"
            if not _PARAM_RE.match(pname):
                self.problem(fld, "parameter names are lower_snake_case")
                continue
            if pname in self.registry:
                self.problem(fld, "a parameter may not shadow the metric of the same name")
                continue
            if not self.typed(fld, spec, dict, "a table with default, unit and justification"):
                continue
            self.unknown_keys(f"{fld}.", spec, ("default", "unit", "justification"))
            missing = [k for k in ("default", "unit", "justification") if k not in spec]
            if missing:
                self.problem(fld, f"missing {', '.join(missing)}")
                continue
            if value_type(spec["default"]) is None:
                self.problem(f"{fld}.default", f"expected a number, bool or string, got {spec['default']!r}")
                continue
            ok = self.typed(f"{fld}.unit", spec["unit"], str, "a string")
            ok &= self.typed(f"{fld}.justification", spec["justification"], str, "a string")
            if ok and not spec["justification"].strip():
                self.problem(f"{fld}.justification", "say why this default was chosen")
            param = Param(pname, spec["default"], spec["unit"], spec["justification"].strip())
            out[pname] = param
            self.names[pname] = param.type
        return out

    def fixes(self, items: Any) -> tuple[Fix, ...]:
        if not self.typed("fixes", items, list, "an array of [[fixes]] tables"):
            return ()
        if not items:
            self.problem("fixes", "a rule needs at least one fix")
        out = []
        for i, item in enumerate(items):
            fld = f"fixes[{i}]"
            if not self.typed(fld, item, dict, "a table with text and optional when"):
                continue
            self.unknown_keys(f"{fld}.", item, ("text", "when"))
            if "text" not in item:
                self.problem(f"{fld}.text", "missing required field")
                continue
            text = self.template(f"{fld}.text", item["text"])
            when = self.expr(f"{fld}.when", item["when"]) if "when" in item else None
            if text is not None:
                out.append(Fix(text=text, when=when))
        return tuple(out)

    def evidence(self, items: Any) -> tuple[EvidenceSpec, ...]:
        if not self.typed("evidence", items, list, "an array of [[evidence]] tables"):
            return ()
        out = []
        for i, item in enumerate(items):
            fld = f"evidence[{i}]"
            if not self.typed(fld, item, dict, "a table with table and rows"):
                continue
            self.unknown_keys(f"{fld}.", item, ("table", "rows"))
            table, rows = item.get("table"), item.get("rows", 10)
            if table not in self.tables:
                why = "no analysis produces it" if self.scope == SCOPE_TRACE else "the log analyses do not produce it"
                self.problem(
                    f"{fld}.table", f"unknown evidence table {table!r}{suggest(str(table), self.tables)}; {why}"
                )
                continue
            if self.typed(f"{fld}.rows", rows, int, "a row count"):
                if not 1 <= rows <= MAX_EVIDENCE_ROWS:
                    self.problem(f"{fld}.rows", f"row count {rows} outside 1..{MAX_EVIDENCE_ROWS}")
                else:
                    out.append(EvidenceSpec(table, rows))
        return tuple(out)

    def docs(self, table: Any) -> dict[str, Any]:
        if not self.typed("docs", table, dict, "a [docs] table"):
            return {}
        self.unknown_keys("docs.", table, _DOCS_KEYS)
        for key in _DOCS_KEYS:
            value = table.get(key)
            if value is None:
                self.problem(f"docs.{key}", "missing required field")
            elif key == "references":
                if not (isinstance(value, list) and value and all(isinstance(v, str) for v in value)):
                    self.problem("docs.references", "expected a non-empty array of strings")
            elif not (isinstance(value, str) and value.strip()):
                self.problem(f"docs.{key}", "expected non-empty text")
        return {k: (v.strip() if isinstance(v, str) else v) for k, v in table.items()}


_cache: dict[tuple[str, int, int], tuple[Rule, dict[str, Any]]] = {}


def load_rule_file(path: Path) -> Rule:
    """Load and validate one rule file; raise :class:`RuleError` listing its problems."""
    return _load_rule_file(Path(path))[0]


def _load_rule_file(path: Path) -> tuple[Rule, dict[str, Any]]:
    """The rule of one file and the file's parsed table (what the rule cache keeps)."""
    try:
        stat = path.stat()
        key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
        if key in _cache:
            return _cache[key]
        if stat.st_size > MAX_RULE_FILE_BYTES:
            raise RuleError(
                [
                    (
                        str(path),
                        f"rule file of {stat.st_size:,} bytes is larger than the "
                        f"{MAX_RULE_FILE_BYTES:,} allowed; a rule file holds one rule",
                    )
                ]
            )
        raw = path.read_bytes()
    except OSError as exc:
        raise RuleError([(str(path), f"cannot read rule file ({exc.strerror})")]) from None
    data = parse_rule_text(path, raw)
    checker = _FileChecker(path, data)
    rule = checker.check()
    if rule is None:
        raise RuleError(checker.problems)
    _cache[key] = (rule, data)
    return rule, data


def parse_rule_text(path: Path, raw: bytes) -> dict[str, Any]:
    """Decode and parse a rule file's bytes; raise :class:`RuleError` saying what is wrong and where."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise RuleError(
            [
                (
                    str(path),
                    f"not UTF-8 text: byte {raw[exc.start]:#04x} at offset {exc.start} (line {line}) "
                    "cannot be decoded; save the rule file as UTF-8",
                )
            ]
        ) from None
    try:  # tomli's compiled wheels parse the rule files about 3x faster than the standard library's tomllib
        import tomli as tomllib
    except ImportError:  # pragma: no cover - an install without its dependencies
        import tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise RuleError([(str(path), f"not valid TOML: {exc}")]) from None
    except (RecursionError, MemoryError):
        raise RuleError(
            [
                (
                    str(path),
                    "TOML nested too deeply to read (arrays or tables inside one another "
                    "hundreds of levels deep); a rule needs at most a few levels",
                )
            ]
        ) from None


def rule_files(directory: Path) -> list[Path]:
    """Return the ``*.toml`` files of a rule directory, sorted by name."""
    return sorted(p for p in Path(directory).glob("*.toml") if p.is_file())


def load_rules(extra_rule_dirs: Iterable[str | Path] = (), *, builtin: bool = True) -> list[Rule]:
    """Load the shipped rules (unless ``builtin=False``) and every rule in ``extra_rule_dirs``.

    Every file is validated; ids and names must be unique across all of them. All problems are
    reported together in one :class:`RuleError`.
    """
    return load_rules_and_version(extra_rule_dirs, builtin=builtin)[0]


def load_rules_and_version(
    extra_rule_dirs: Iterable[str | Path] = (), *, builtin: bool = True
) -> tuple[list[Rule], str | None]:
    """``load_rules`` and ``rules_version()`` of the shipped rules, from the same reads of their files
    when the rule cache reads them (else None for the version: read it with ``rules_version``)."""
    dirs: list[Path] = [data_dir("rules")] if builtin else []
    problems: list[tuple[str, str]] = []
    for extra in extra_rule_dirs:
        extra = Path(extra)
        if not extra.is_dir():
            problems.append(
                (str(extra), "rule directory does not exist; pass a directory of *.toml rule files to --rules")
            )
        else:
            dirs.append(extra)
    listed = [rule_files(directory) for directory in dirs]
    paths = [path for files in listed for path in files]
    off = problems or rulecache.cache_dir() is None
    contents = None if off else rulecache.read_files(paths, MAX_RULE_FILE_BYTES)
    key = None if contents is None else rulecache.rules_key(paths, contents, _VOCABULARY)
    shipped = len(listed[0]) if builtin else 0  # the shipped files come first
    version = _version_of(zip(listed[0], contents[:shipped])) if shipped and contents is not None else None
    cached = rulecache.recall(key)
    if cached is None and key is not None:
        cached = _from_cache(paths, rulecache.load(key, paths))
    if cached is not None:
        rulecache.remember(key, cached)
        return cached, version
    rules: list[Rule] = []
    tables: list[dict[str, Any]] = []
    seen: dict[tuple[str, str], Path] = {}
    for path in paths:
        try:
            rule, table = _load_rule_file(path)
        except RuleError as exc:
            problems.extend(exc.problems)
            continue
        duplicate = _duplicate(rule, path, seen)
        if duplicate is not None:
            problems.append(duplicate)
            continue
        rules.append(rule)
        tables.append(table)
    if problems:
        raise RuleError(problems)
    rulecache.remember(key, rules)
    rulecache.store(key, paths, tables)
    return rules, version


def _duplicate(rule: Rule, path: Path, seen: dict[tuple[str, str], Path]) -> tuple[str, str] | None:
    """The problem of a rule whose id or name an earlier file (in ``seen``, updated here) has."""
    for fld, value in (("id", rule.id), ("name", rule.name)):
        if (fld, value) in seen:
            what = "rule id" if fld == "id" else "rule name"
            verb = "also defined in" if fld == "id" else "also used in"
            return f"{path}: {fld}", f"duplicate {what} {value!r}, {verb} {seen[fld, value]}"
    seen["id", rule.id] = seen["name", rule.name] = path
    return None


def _from_cache(paths: list[Path], tables: list[dict[str, Any]] | None) -> list[Rule] | None:
    """The rules of the rule cache's tables, each checked as its rule file would be; None (read the files)
    when an entry holds anything a rule file could not."""
    if tables is None:
        return None
    rules: list[Rule] = []
    seen: dict[tuple[str, str], Path] = {}
    try:
        for path, table in zip(paths, tables):
            rule = _FileChecker(path, table).check()
            if rule is None or _duplicate(rule, path, seen) is not None:
                return None
            rules.append(rule)
    except Exception:  # noqa: BLE001 - data no rule file could give (the files are then read and checked)
        return None
    return rules


def rules_version(extra_rule_dirs: Iterable[str | Path] = ()) -> str:
    """Return a short content hash of the rule files, so a report says which rules produced it."""
    return _version_of(
        (path, path.read_bytes())
        for directory in [data_dir("rules"), *map(Path, extra_rule_dirs)]
        for path in rule_files(directory)
    )


def _version_of(files: Iterable[tuple[Path, bytes]]) -> str:
    digest = hashlib.sha256()
    for path, raw in files:
        digest.update(path.name.encode() + b"\0" + raw + b"\0")
    return f"sha256:{digest.hexdigest()[:12]}"


def find_rule(rules: Iterable[Rule], key: str) -> Rule | None:
    """Return the rule whose id (case-insensitive) or name is ``key``."""
    for rule in rules:
        if rule.id == key.upper() or rule.name == key:
            return rule
    return None
