"""Message templates: ``str.format``-style text whose fields are rule-language expressions.

``"GPU idle {dataloader_stall_fraction:.0%} (threshold {stall_threshold:.0%})"`` or
``"{sync_calls / max(steps, 1):.1f} syncs per step"``. Fields are checked like any rule expression at
load time, and the format spec is tried on a sample value of the field's type, so a template that
would fail at report time fails when the rule file is loaded instead. Unknown values render as
``n/a``.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .expr import BOOL, NUM, STR, Expr, ExprError, compile_expr

UNKNOWN_TEXT = "n/a"
_SAMPLES = {NUM: 0.5, BOOL: True, STR: "text"}
MAX_FORMAT_WIDTH = 200  # characters a field may be padded to
MAX_FORMAT_PRECISION = 50  # digits after the point (or characters of a string) a field may ask for
# [[fill]align][sign][z][#][0][width][grouping][.precision][type]
_SPEC_RE = re.compile(r"^(?:.?[<>=^])?[+\- ]?z?#?0?(?P<width>\d*)[,_]?(?:\.(?P<precision>\d+))?[a-zA-Z%]?$", re.S)


@dataclass(frozen=True)
class Template:
    """A checked template: literal text interleaved with (expression, format spec) fields."""

    source: str
    parts: tuple[tuple[str, Expr | None, str], ...]

    @property
    def names(self) -> frozenset[str]:
        out: set[str] = set()
        for _, expr, _ in self.parts:
            if expr is not None:
                out |= expr.names
        return frozenset(out)

    def render(self, env: Mapping[str, Any]) -> str:
        """Return the text with every field formatted; unknown values become ``n/a``."""
        chunks: list[str] = []
        for literal, expr, spec in self.parts:
            chunks.append(literal)
            if expr is None:
                continue
            value = expr.evaluate(env)
            if value is None:
                chunks.append(UNKNOWN_TEXT)
                continue
            try:
                chunks.append(format(value, spec))
            except (ValueError, TypeError):
                chunks.append(str(value))
        return "".join(chunks)

    def explain(self, known: Mapping[str, Any]) -> str:
        """The text for documentation: fields whose names are all in ``known`` (a rule's parameter
        values) formatted as they would be in a report; the others shown as ``<expression>``, the
        value a report puts there."""
        chunks: list[str] = []
        for literal, expr, spec in self.parts:
            chunks.append(literal)
            if expr is None:
                continue
            if expr.names <= set(known):
                value = expr.evaluate(known)
                try:
                    chunks.append(UNKNOWN_TEXT if value is None else format(value, spec))
                except (ValueError, TypeError):
                    chunks.append(str(value))
            else:
                chunks.append(f"<{expr.source}>")
        return "".join(chunks)


def compile_template(source: str, names: Mapping[str, str]) -> Template:
    """Parse and check a template; raise :class:`ExprError` naming the bad field."""
    if not isinstance(source, str):
        raise ExprError(f"expected a string, got {type(source).__name__}")
    try:
        pieces = list(string.Formatter().parse(source))
    except ValueError as exc:
        raise ExprError(f"bad template {source!r}: {exc}; write literal braces as '{{{{' and '}}}}'") from None
    parts: list[tuple[str, Expr | None, str]] = []
    for literal, field, spec, conversion in pieces:
        if field is None:
            parts.append((literal, None, ""))
            continue
        if conversion:
            raise ExprError(f"field {{{field}!{conversion}}}: conversions like !r are not allowed")
        if not field.strip():
            raise ExprError(f"empty field '{{}}' in {source!r}; name a metric or parameter")
        spec = spec or ""
        if "{" in spec:
            raise ExprError(f"field {{{field}:{spec}}}: nested fields in format specs are not allowed")
        _check_spec_bounds(field, spec)
        expr = compile_expr(field, names)
        sample = _SAMPLES.get(expr.type)
        if sample is not None:
            try:
                format(sample, spec)
            except (ValueError, TypeError) as exc:
                raise ExprError(
                    f"field {{{field}:{spec}}}: format spec does not fit a {expr.type} value ({exc})"
                ) from None
        parts.append((literal, expr, spec))
    return Template(source=source, parts=tuple(parts))


def _check_spec_bounds(field: str, spec: str) -> None:
    """Refuse widths and precisions that would make one field megabytes long (checked before any format)."""
    m = _SPEC_RE.match(spec)
    if m is None:
        if sum(c.isdigit() for c in spec) > 3:
            raise ExprError(
                f"field {{{field}:{spec[:40]}}}: not a format spec ([[fill]align][sign][width][.precision][type])"
            )
        return  # the sample format below names what is wrong
    width, precision = m.group("width"), m.group("precision")
    if width and int(width) > MAX_FORMAT_WIDTH:
        raise ExprError(f"field {{{field}:{spec}}}: width {int(width):,} is more than the {MAX_FORMAT_WIDTH} allowed")
    if precision and int(precision) > MAX_FORMAT_PRECISION:
        raise ExprError(
            f"field {{{field}:{spec}}}: precision {int(precision):,} is more than the {MAX_FORMAT_PRECISION} allowed"
        )
