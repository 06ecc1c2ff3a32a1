"""A restricted expression language for rule conditions, impacts and message fields.

Input: the source text of an expression and the names it may use, each with a type ("num", "bool",
"str"). Output: a compiled :class:`Expr` that evaluates against a mapping of values.

The language is a small subset of Python expressions, checked on the ``ast`` at load time and
interpreted by walking that tree: ``eval`` is never called. Allowed are comparisons (``is None`` /
``is not None`` for the null test), ``and``/``or``/``not``, arithmetic, numeric, bool, string and
``None`` literals, names, and calls to ``min``, ``max`` and ``abs``. Attribute access, subscripts,
lambdas, comprehensions and every other construct are rejected with the column where they occur.

Missing values (``None``, metrics that cannot be measured on a trace) propagate as "unknown" with
three-valued logic: a comparison or arithmetic involving ``None`` is unknown, ``not unknown`` is
unknown, ``False and unknown`` is ``False``, ``True or unknown`` is ``True``. A condition holds only
when it evaluates to a definite truth, so a rule never fires on a metric the trace does not have.
"""

from __future__ import annotations

import ast
import math
import difflib
import keyword
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

NUM, BOOL, STR, NONE = "num", "bool", "str", "none"

_BINOPS: dict[type, Any] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}
_CMPOPS: dict[type, Any] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_ORDERING = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)


def _call_min(*args: Any) -> Any:
    return None if any(a is None for a in args) else min(args)


def _call_max(*args: Any) -> Any:
    return None if any(a is None for a in args) else max(args)


def _call_abs(x: Any) -> Any:
    return None if x is None else abs(x)


# name -> (implementation, minimum arity, maximum arity or None)
CALLS: dict[str, tuple[Any, int, int | None]] = {
    "min": (_call_min, 2, None),
    "max": (_call_max, 2, None),
    "abs": (_call_abs, 1, 1),
}

_FORBIDDEN_HINTS: dict[type, str] = {
    ast.Attribute: "attribute access is not allowed",
    ast.Subscript: "subscripts are not allowed",
    ast.Lambda: "lambdas are not allowed",
    ast.ListComp: "comprehensions are not allowed",
    ast.SetComp: "comprehensions are not allowed",
    ast.DictComp: "comprehensions are not allowed",
    ast.GeneratorExp: "comprehensions are not allowed",
    ast.NamedExpr: "assignment expressions are not allowed",
    ast.IfExp: "conditional expressions are not allowed; split the rule or use min/max",
    ast.JoinedStr: "f-strings are not allowed",
    ast.Await: "await is not allowed",
    ast.Starred: "starred arguments are not allowed",
}


# Bounds far above any real rule (the shipped ones use at most 162 characters, 26 nodes, depth 7), so
# a pathological expression is refused with a message instead of exhausting the parser's stack.
MAX_LITERAL = 1e30  # the largest number a rule or gate may write
MAX_EXPR_CHARS = 4000
MAX_EXPR_NODES = 1000
MAX_EXPR_DEPTH = 64
# Every level of an expression's tree below the top costs at least one character of its text (an operator,
# a bracket, a dot, a name), and its leaves' contexts one level more; no character adds more than three
# nodes. A text of at most this many characters is therefore within both limits without walking its tree.
_SMALL_CHARS = min(MAX_EXPR_DEPTH - 2, MAX_EXPR_NODES // 4)


class ExprError(ValueError):
    """An expression that is not in the rule language; the message says what and where."""


@dataclass(frozen=True)
class Expr:
    """A checked expression: its source, tree, the names it reads and its static type."""

    source: str
    tree: ast.expr
    names: frozenset[str]
    type: str

    def evaluate(self, env: Mapping[str, Any]) -> Any:
        """Return the value of the expression, ``None`` when it is unknown."""
        return _eval(self.tree, env)

    def holds(self, env: Mapping[str, Any]) -> bool:
        """Return True only when the expression evaluates to a definite truth."""
        value = _eval(self.tree, env)
        return value is not None and bool(value)


def value_type(value: Any) -> str | None:
    """Return the rule-language type of a Python value, or None if it has none."""
    if isinstance(value, bool):
        return BOOL
    if isinstance(value, (int, float)):
        return NUM
    if isinstance(value, str):
        return STR
    return None


def suggest(name: str, candidates: Any) -> str:
    """Return ``" (did you mean 'x'?)"`` for the closest candidate, or an empty string."""
    close = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def compile_expr(source: str, names: Mapping[str, str]) -> Expr:
    """Parse and check ``source`` against ``names`` (name -> type); raise :class:`ExprError`."""
    if not isinstance(source, str) or not source.strip():
        raise ExprError("empty expression")
    if len(source) > MAX_EXPR_CHARS:
        raise ExprError(
            f"expression of {len(source):,} characters is longer than the {MAX_EXPR_CHARS:,} allowed "
            f"(starts {source[:40]!r}); split the rule"
        )
    text = source.strip()
    if text.isidentifier() and text.isascii() and not keyword.iskeyword(text):
        # a bare name (most message fields) is its own tree: Python's parser would give this very node
        name = ast.Name(id=text, ctx=ast.Load(), lineno=1, col_offset=0, end_lineno=1, end_col_offset=len(text))
        return Expr(source=source, tree=name, names=frozenset((text,)), type=_Checker(names, source).check(name))
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ExprError(f"syntax error at column {exc.offset}: {exc.msg} in {_clip(source)}") from None
    except (RecursionError, MemoryError):
        raise ExprError(
            f"expression nested too deeply to parse (more than {MAX_EXPR_DEPTH} levels) in "
            f"{_clip(source)}; split the rule"
        ) from None
    if len(source) > _SMALL_CHARS:  # a shorter text cannot nest or branch past the limits: no walk needed
        _check_size(tree.body, source)
    checker = _Checker(names, source)
    typ = checker.check(tree.body)
    return Expr(source=source, tree=tree.body, names=frozenset(checker.seen), type=typ)


def _clip(source: str, limit: int = 120) -> str:
    return repr(source) if len(source) <= limit else f"{source[:limit]!r}... ({len(source):,} characters)"


def _check_size(tree: ast.expr, source: str) -> None:
    """Refuse trees too large or deep for the recursive checker and evaluator (iteratively)."""
    nodes = 0
    stack = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        nodes += 1
        if depth > MAX_EXPR_DEPTH:
            raise ExprError(
                f"expression nested more than {MAX_EXPR_DEPTH} levels deep in {_clip(source)}; split the rule"
            )
        if nodes > MAX_EXPR_NODES:
            raise ExprError(f"expression has more than {MAX_EXPR_NODES} terms in {_clip(source)}; split the rule")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))


class _Checker:
    def __init__(self, names: Mapping[str, str], source: str):
        self.names = names
        self.source = source
        self.seen: set[str] = set()

    def fail(self, node: ast.AST, what: str) -> ExprError:
        col = getattr(node, "col_offset", None)
        where = f" at column {col + 1}" if col is not None else ""
        return ExprError(f"{what}{where} in {_clip(self.source)}")

    def check(self, node: ast.expr) -> str:
        method = getattr(self, f"_check_{type(node).__name__}", None)
        if method is None:
            hint = _FORBIDDEN_HINTS.get(type(node), f"{type(node).__name__} expressions are not allowed")
            raise self.fail(node, hint)
        return method(node)

    def _check_Constant(self, node: ast.Constant) -> str:
        value = node.value
        if value is None:
            return NONE
        kind = value_type(value)
        if kind is None:
            raise self.fail(
                node, f"literal {_clip(repr(value), 40)} is not allowed (numbers, True/False, None and strings are)"
            )
        if kind == NUM and not isinstance(value, bool):
            # 1e400 is inf and a 400-digit integer is no metric's value: either would make the comparison
            # always true or always false, silently. MAX_LITERAL is far above any metric (bytes, ns, counts).
            if isinstance(value, float) and not math.isfinite(value) or abs(value) > MAX_LITERAL:
                raise self.fail(
                    node,
                    f"number {_clip(ast.get_source_segment(self.source.strip(), node) or repr(value), 40)} "
                    f"is out of range (a finite number up to {MAX_LITERAL:.0e})",
                )
        return kind

    def _check_Name(self, node: ast.Name) -> str:
        if node.id not in self.names:
            raise self.fail(node, f"unknown name {node.id!r}{suggest(node.id, self.names)}")
        self.seen.add(node.id)
        return self.names[node.id]

    def _check_BoolOp(self, node: ast.BoolOp) -> str:
        for value in node.values:
            self.check(value)
        return BOOL

    def _check_UnaryOp(self, node: ast.UnaryOp) -> str:
        typ = self.check(node.operand)
        if isinstance(node.op, ast.Not):
            return BOOL
        if isinstance(node.op, (ast.USub, ast.UAdd)):
            self.numeric(node.operand, typ)
            return NUM
        raise self.fail(node, "bitwise operators are not allowed")

    def _check_BinOp(self, node: ast.BinOp) -> str:
        if type(node.op) not in _BINOPS:
            raise self.fail(node, f"operator {type(node.op).__name__} is not allowed (+ - * / // % are)")
        self.numeric(node.left, self.check(node.left))
        self.numeric(node.right, self.check(node.right))
        return NUM

    def _check_Compare(self, node: ast.Compare) -> str:
        left_t = self.check(node.left)
        for op, right in zip(node.ops, node.comparators):
            right_t = self.check(right)
            if isinstance(op, (ast.Is, ast.IsNot)):
                if right_t != NONE:
                    raise self.fail(right, "'is' / 'is not' may only compare with None")
            elif isinstance(op, (ast.Eq, ast.NotEq)):
                if NONE in (left_t, right_t):
                    raise self.fail(right, "compare with None using 'is None' or 'is not None'")
                self.comparable(right, left_t, right_t)
            elif isinstance(op, _ORDERING):
                if NONE in (left_t, right_t):
                    raise self.fail(right, "None cannot be ordered; test it with 'is None'")
                self.comparable(right, left_t, right_t)
            else:
                raise self.fail(right, f"operator {type(op).__name__} is not allowed")
            left_t = right_t
        return BOOL

    def _check_Call(self, node: ast.Call) -> str:
        if isinstance(node.func, ast.Attribute):
            raise self.fail(node, "attribute access is not allowed (no method calls)")
        if not isinstance(node.func, ast.Name):
            raise self.fail(node, "only calls to min, max and abs are allowed")
        name = node.func.id
        if name not in CALLS:
            allowed = ", ".join(sorted(CALLS))
            raise self.fail(node, f"call to {name!r} is not allowed (allowed: {allowed})")
        if node.keywords:
            raise self.fail(node, f"{name}() takes no keyword arguments")
        _, lo, hi = CALLS[name]
        if len(node.args) < lo or (hi is not None and len(node.args) > hi):
            raise self.fail(node, f"{name}() takes {lo if hi == lo else f'at least {lo}'} argument(s)")
        for arg in node.args:
            self.numeric(arg, self.check(arg))
        return NUM

    def numeric(self, node: ast.expr, typ: str) -> None:
        if typ not in (NUM, BOOL):
            raise self.fail(node, f"arithmetic needs numbers, got a {typ} value")

    def comparable(self, node: ast.expr, a: str, b: str) -> None:
        if (a == STR) != (b == STR):
            raise self.fail(node, f"cannot compare a {a} value with a {b} value")


def _unknown(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _eval(node: ast.expr, env: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        value = env.get(node.id)
        return None if _unknown(value) else value
    if isinstance(node, ast.BoolOp):
        return _eval_boolop(node, env)
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, env)
        if value is None:
            return None
        if isinstance(node.op, ast.Not):
            return not value
        return -value if isinstance(node.op, ast.USub) else +value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left, env), _eval(node.right, env)
        if left is None or right is None:
            return None
        try:
            result = _BINOPS[type(node.op)](left, right)
        except ZeroDivisionError:
            return None
        return None if _unknown(result) else result
    if isinstance(node, ast.Compare):
        return _eval_compare(node, env)
    if isinstance(node, ast.Call):
        func = CALLS[node.func.id][0]  # type: ignore[attr-defined]
        return func(*(_eval(arg, env) for arg in node.args))
    raise AssertionError(f"unchecked node {type(node).__name__}")  # the checker admits nothing else


def _eval_boolop(node: ast.BoolOp, env: Mapping[str, Any]) -> Any:
    decisive = isinstance(node.op, ast.Or)  # True decides an 'or', False decides an 'and'
    unknown = False
    for operand in node.values:
        value = _eval(operand, env)
        if value is None:
            unknown = True
        elif bool(value) is decisive:
            return decisive
    return None if unknown else not decisive


def _eval_compare(node: ast.Compare, env: Mapping[str, Any]) -> Any:
    left = _eval(node.left, env)
    unknown = False
    for op, right_node in zip(node.ops, node.comparators):
        right = _eval(right_node, env)
        if isinstance(op, ast.Is):
            result: Any = left is right
        elif isinstance(op, ast.IsNot):
            result = left is not right
        elif left is None or right is None:
            result = None
        else:
            try:
                result = bool(_CMPOPS[type(op)](left, right))
            except TypeError:  # a metric of an unexpected type; treat as not measurable
                result = None
        if result is None:
            unknown = True
        elif not result:
            return False
        left = right
    return None if unknown else True
