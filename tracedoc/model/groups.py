"""Group-by and ordering on numpy columns: distinct keys, per-group sums/maxima, largest-first order."""

from __future__ import annotations

import numpy as np


class Groups:
    """Rows grouped by one or more key columns (integers or strings). ``keys`` holds the distinct
    key tuples in ascending order (first column major), one array per key column; ``index`` maps
    each row to its group."""

    def __init__(self, *columns: np.ndarray) -> None:
        if len(columns) == 1:
            uniq, inv = np.unique(np.asarray(columns[0]), return_inverse=True)
            self.keys = [uniq]
        else:
            levels = [np.unique(np.asarray(c), return_inverse=True) for c in columns]
            stacked = np.stack([code.reshape(-1).astype(np.int64) for _, code in levels], axis=1)
            uniq, inv = np.unique(stacked, axis=0, return_inverse=True)
            self.keys = [levels[i][0][uniq[:, i]] for i in range(len(columns))]
        self.index = inv.reshape(-1)
        self.size = self.keys[0].size
        self._order = np.argsort(self.index, kind="stable")
        self._starts = np.searchsorted(self.index[self._order], np.arange(self.size))

    def by_appearance(self) -> np.ndarray:
        """Group indices in the order of each group's first row."""
        return np.argsort(self._order[self._starts], kind="stable") if self.size else np.zeros(0, dtype=np.int64)

    def count(self) -> np.ndarray:
        return np.bincount(self.index, minlength=self.size).astype(np.int64)

    def sum(self, values: np.ndarray) -> np.ndarray:
        """Per-group sums in the values' own type (exact for integers)."""
        values = np.asarray(values)
        if not self.size:
            return np.zeros(0, dtype=values.dtype)
        return np.add.reduceat(values[self._order], self._starts)

    def max(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values)
        if not self.size:
            return np.zeros(0, dtype=values.dtype)
        return np.maximum.reduceat(values[self._order], self._starts)

    def any(self, values: np.ndarray) -> np.ndarray:
        return self.max(np.asarray(values, dtype=bool)) if self.size else np.zeros(0, dtype=bool)

    def first(self, values: np.ndarray) -> np.ndarray:
        """The value of each group's first row (in row order)."""
        return np.asarray(values)[self._order[self._starts]] if self.size else np.asarray(values)[:0]


def largest_first(values: np.ndarray) -> np.ndarray:
    """Indices ordering ``values`` from largest to smallest. Ties keep the order of pandas'
    default descending sort (a quicksort of the reversed rows, read backwards), so tables list
    equal rows as they did when built with pandas."""
    values = np.asarray(values)
    idx = np.arange(values.size)[::-1]
    return idx[values[::-1].argsort(kind="quicksort")][::-1]
