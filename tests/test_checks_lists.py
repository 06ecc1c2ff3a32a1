"""Long lists are certified clean column by column; whatever that pass lets through, the walk node by node
would have left as it was, and whatever it stops goes through that walk (same repairs, same messages)."""

import copy
import math
import random

import numpy as np
import pytest

from tracedoc import checks
from tracedoc.model.evidence.row import Row


class _Span(Row, frozen=True, kw_only=True):
    start_ns: object = None
    end_ns: object = None
    fraction: object = None
    count: object = None
    shapes: object = None
    note: object = None


_GOOD = [0, 1, 7, 12_000, 0.25, 0.5, 1.0, None, "x", True, False]
_BAD = [-1, -0.5, 1.5, math.nan, math.inf, -math.inf, np.float64(0.5), np.int64(-3), (1, 2), np.float64(math.nan)]
_KEYS = ["start_ns", "end_ns", "fraction", "count", "note", "wait_ns", "share", 3]


def _scalar(rng: random.Random, bad: float):
    return rng.choice(_BAD) if rng.random() < bad else rng.choice(_GOOD)


def _node(rng: random.Random, depth: int, bad: float):
    shape = rng.randrange(5) if depth < 3 else 0
    if shape == 0:
        return _scalar(rng, bad)
    n = rng.choice([0, 1, 4, 6, 12])
    if shape == 1:  # a list of scalars
        return [_scalar(rng, bad) for _ in range(n)]
    if shape == 2:  # a list of small lists (intervals)
        return [[_scalar(rng, bad), _scalar(rng, bad), "cause"] for _ in range(n)]
    if shape == 3:  # a list of dicts, usually with one set of keys
        keys = rng.sample(_KEYS, 3)
        nested = {k: rng.random() < 0.3 for k in keys}  # a column of lists or dicts in every row
        rows = [{k: (_node(rng, depth + 1, bad) if nested[k] else _scalar(rng, bad)) for k in keys} for _ in range(n)]
        if rows and rng.random() < 0.1:
            rows[-1] = {**rows[-1], "extra": 1}
        return rows
    return [  # typed rows
        _Span(
            start_ns=_scalar(rng, bad),
            end_ns=_scalar(rng, bad),
            fraction=_scalar(rng, bad),
            count=_scalar(rng, bad),
            shapes=_node(rng, depth + 1, bad) if rng.random() < 0.5 else None,
            note=_scalar(rng, bad),
        )
        for _ in range(n)
    ]


def _tree(rng: random.Random, bad: float) -> dict:
    return {k: _node(rng, 0, bad) for k in ("critical", "idle_ns", "fraction", "rows", "lanes", "per_step")}


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, Row):
        return all(_same(getattr(a, f), getattr(b, f)) for f in a.__struct_fields__)
    return bool(a == b) or (isinstance(a, np.floating) and math.isnan(a) and math.isnan(b))


def _walk(tree, monkeypatch, certify: bool):
    monkeypatch.setattr(checks, "_CLEAN_MIN", checks._CLEAN_MIN if certify else 1 << 60)
    c = checks._Checker()
    c.tree("rank 0: evidence", tree)
    return c.violations


@pytest.mark.parametrize("bad", [0.0, 0.01, 0.1])
def test_certified_lists_get_the_walks_repairs_and_messages(monkeypatch, bad):
    rng = random.Random(int(bad * 1000) + 7)
    for _ in range(300):
        tree = _tree(rng, bad)
        fast, slow = copy.deepcopy(tree), copy.deepcopy(tree)
        assert _walk(fast, monkeypatch, True) == _walk(slow, monkeypatch, False)
        assert _same(fast, slow)


def test_a_clean_long_list_is_left_alone_and_a_bad_one_is_reported():
    spans = [[i * 10, i * 10 + 5, "compute"] for i in range(100)]
    assert checks._clean(spans, None)
    rows = [{"start_ns": 0, "end_ns": 5, "fraction": 0.5}] * 10
    assert checks._clean(rows, None)
    assert not checks._clean([*rows, {"start_ns": 9, "end_ns": 5, "fraction": 0.5}], None)
    assert not checks._clean([*rows, {"start_ns": 0, "end_ns": 5, "fraction": 1.5}], None)
    assert not checks._clean([[0, 1]] * 5 + [[0, math.nan]], None)
    assert not checks._clean([1, 2, 3, -4], (0.0, math.inf))
    assert not checks._clean([{"note": [1, -1]}] * 4, (0.0, math.inf))  # a column's lists inherit the bounds
    c = checks._Checker()
    c.tree("t", {"sync": [[0, 5], [6, 9], [10, 12], [13, -1e9]], "wait_ns": [1, 2, 3, -4]})
    assert len(c.violations) == 1 and "t.wait_ns[3] = -4 is negative" in c.violations[0]
