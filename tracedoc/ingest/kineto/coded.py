"""A column of hashable values as dense codes into its distinct values: what is worked out from a value
(an event's class, a kind, a string id) is worked out once per distinct value, not once per event."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

import numpy as np

from ...model.groups import first_seen
from ...model.trace import StringTable


def _codes(values: list) -> tuple[np.ndarray, list] | None:
    """Dense codes of a list of hashable values and the distinct values (None if one is unhashable)."""
    try:
        distinct = list(set(values))
    except TypeError:
        return None
    lut = {v: i for i, v in enumerate(distinct)}
    return np.fromiter(map(lut.__getitem__, values), dtype=np.int32, count=len(values)), distinct


class _Coded(NamedTuple):
    """A column of hashable values as dense codes into its distinct values, so that anything worked out
    from a value (a kind, a string id) is worked out once per distinct value."""

    codes: np.ndarray
    distinct: list

    @classmethod
    def of(cls, values: list) -> "_Coded":
        coded = _codes(values)
        if coded is None:  # a list or object: its text stands for it
            coded = _codes([str(v) if isinstance(v, (list, dict)) else v for v in values])
        return cls(*coded)

    def take(self, idx: np.ndarray) -> "_Coded":
        return _Coded(self.codes[idx], self.distinct)

    def lookup(self, fn: Callable[[Any], int]) -> np.ndarray:
        """``fn`` of every value (a small code: a kind, a phase), evaluated once for each distinct value
        present."""
        used = np.flatnonzero(np.bincount(self.codes, minlength=len(self.distinct)))
        lut = np.zeros(len(self.distinct), dtype=np.uint8)
        lut[used] = [fn(self.distinct[i]) for i in used.tolist()]
        return lut[self.codes]

    def text_ids(self, strings: StringTable) -> np.ndarray:
        """String ids of the values as text (None: -1), interned in order of first appearance."""
        present, first = first_seen(self.codes, len(self.distinct))
        order = present[np.argsort(first, kind="stable")]
        texts = [None if (v := self.distinct[i]) is None else str(v) for i in order.tolist()]
        lut = np.full(len(self.distinct), -1, dtype=np.int32)
        lut[order] = strings.intern_many(texts)
        return lut[self.codes]
