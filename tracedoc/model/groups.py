"""Group-by and ordering on numpy columns: distinct keys, per-group sums/maxima, largest-first order.

Keys are found without sorting rows as bytes (``np.unique(..., axis=0)`` sorts a structured view and
is tens of times slower than a sort of one integer column): each key column becomes dense integer
codes, the codes combine into one integer per row in the same lexicographic order, and that one
column is ranked.
"""

from __future__ import annotations

import numpy as np

# A column of integers spanning at most this many values per row is ranked through a lookup table
# instead of a sort.
_LOOKUP_SPAN_PER_ROW = 4
_LOOKUP_SPAN_MIN = 1 << 16
_CODE_LIMIT = 1 << 62
# isin: up to this many members are compared one by one
_ISIN_COMPARE_MAX = 8
# first_match: a table this many times longer than the keys is first cut to the rows that may match
_FEW_KEYS_FACTOR = 4


def distinct(values) -> np.ndarray:
    """``np.unique(values)``: the distinct values in ascending order (NaNs collapse to one, last).

    One sort and a neighbour comparison. numpy 2's ``np.unique`` without ``return_*`` takes a hash
    path that is 3-10x slower than this on integer columns, and its first call imports ``numpy.ma``
    (about 9 ms of every process's start)."""
    a = np.sort(np.asarray(values).reshape(-1))
    if a.size < 2:
        return a
    keep = np.empty(a.size, dtype=bool)
    keep[0] = True
    np.not_equal(a[1:], a[:-1], out=keep[1:])
    if a.dtype.kind in "fc" and np.isnan(a[-1]):  # NaN != NaN: keep the first of the NaNs sorted last
        nan = np.isnan(a)
        keep[nan] = False
        keep[np.argmax(nan)] = True
    return a[keep]


def isin(values, members) -> np.ndarray:
    """``np.isin(values, members)``: which values are among ``members``. A few members are compared one
    by one; more are looked up in their sorted distinct values. (``np.isin`` sorts through
    ``np.unique``, whose first call imports ``numpy.ma``.)"""
    a = np.asarray(values)
    m = np.asarray(members).reshape(-1)
    if not a.size or not m.size:
        return np.zeros(a.shape, dtype=bool)
    if m.size <= _ISIN_COMPARE_MAX:
        out = a == m[0]
        for x in m[1:]:
            out |= a == x
        return out
    s = distinct(m)
    pos = np.searchsorted(s, a)
    np.minimum(pos, s.size - 1, out=pos)
    return s[pos] == a


def dense_codes(column: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(column, return_inverse=True)`` for a 1-D column: the distinct values in ascending
    order and each row's index into them (int64). Integers over a short range take a lookup table."""
    column = np.asarray(column).reshape(-1)
    if column.size and (column.dtype.kind in "ib" or (column.dtype.kind == "u" and column.dtype.itemsize < 8)):
        lo, hi = int(column.min()), int(column.max())
        span = hi - lo + 1
        if span <= max(_LOOKUP_SPAN_PER_ROW * column.size, _LOOKUP_SPAN_MIN):
            offset = column.astype(np.int64) - lo if lo else column.astype(np.int64, copy=False)
            present = np.zeros(span, dtype=bool)
            present[offset] = True
            rank = np.cumsum(present, dtype=np.int64) - 1
            return (np.flatnonzero(present) + lo).astype(column.dtype, copy=False), rank[offset]
    uniq, inv = np.unique(column, return_inverse=True)
    return uniq, inv.reshape(-1).astype(np.int64, copy=False)


def row_codes(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Distinct rows of equal-length key columns, as ``np.unique(np.stack(columns, 1), axis=0,
    return_inverse=True)`` orders them (ascending, first column major). Returns each row's group code
    (int64, 0..size-1), one row of each group (a representative, for reading its keys) and the size."""
    levels = [dense_codes(c) for c in columns]
    code = levels[0][1]
    for uniq, codes in levels[1:]:
        width = max(uniq.size, 1)
        if (int(code.max()) + 1 if code.size else 1) * width >= _CODE_LIMIT:
            code = dense_codes(code)[1]  # re-rank before the product could overflow: order is kept
        code = code * width + codes
    uniq, inv = dense_codes(code)
    rep = np.empty(uniq.size, dtype=np.int64)
    rep[inv] = np.arange(inv.size)
    return inv, rep, int(uniq.size)


def stable_order(codes: np.ndarray, size: int) -> np.ndarray:
    """``np.argsort(codes, kind="stable")`` for codes in ``0..size-1``: a radix sort of 16-bit codes,
    else a sort of code and row together (distinct, so any sort is stable)."""
    if size <= 1 << 16:
        return np.argsort(codes.astype(np.uint16), kind="stable")
    n = codes.size
    return np.argsort(codes.astype(np.int64) * n + np.arange(n))


# below this many rows np.lexsort itself is as fast as building one key
_LEX_MIN_ROWS = 512


def lex_order(keys) -> np.ndarray:
    """``np.lexsort(keys)`` (the last key primary; ties keep row order), for 1-D keys of one length.

    Integer keys whose ranges multiply to less than 2**63 are combined into one int64 per row that
    orders rows exactly as the keys do, and that one column is sorted stably: one pass instead of one
    per key, and timsort takes the runs of rows already in order (events recorded in time order) as
    they come, 2-6x faster than ``np.lexsort`` on trace columns. Any other keys (floats, ranges too
    wide to combine) are left to ``np.lexsort``."""
    keys = [np.asarray(k) for k in keys]
    n = keys[0].size if keys else 0
    if n < _LEX_MIN_ROWS or any(not _small_ints(k) or k.ndim != 1 or k.size != n for k in keys):
        return np.lexsort(keys)
    bounds = [(int(k.min()), int(k.max())) for k in keys]
    width = 1
    for lo, hi in bounds:
        width *= hi - lo + 1
    if width >= 1 << 63:
        return np.lexsort(keys)
    combined = None
    scale = 1
    for k, (lo, hi) in zip(keys, bounds):  # the first key least significant, as np.lexsort reads them
        part = np.subtract(k, lo, dtype=np.int64)  # a new array: scaled and added to in place
        if scale != 1:
            part *= scale
        if combined is None:
            combined = part
        else:
            combined += part
        scale *= hi - lo + 1
    return np.argsort(combined, kind="stable")


def _small_ints(k: np.ndarray) -> bool:
    """Booleans or integers every value of which an int64 holds."""
    return k.dtype.kind in "bi" or (k.dtype.kind == "u" and k.dtype.itemsize < 8)


def first_seen(codes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(codes, return_index=True)`` for codes in ``0..size-1``: the codes present, ascending,
    and the row where each first appears (a radix sort of 16-bit codes rather than a merge sort)."""
    order = stable_order(codes, size)
    ranked = codes[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]]) if ranked.size else order
    return ranked[starts], order[starts]


def first_rows(codes: np.ndarray, size: int) -> np.ndarray:
    """For codes in ``0..size-1``, each present: the first row holding each code
    (``np.unique(codes, return_index=True)[1]``)."""
    return first_seen(codes, size)[1]


class Groups:
    """Rows grouped by one or more key columns (integers or strings). ``keys`` holds the distinct
    key tuples in ascending order (first column major), one array per key column; ``index`` maps
    each row to its group."""

    def __init__(self, *columns: np.ndarray) -> None:
        if len(columns) == 1:
            uniq, inv = dense_codes(columns[0])
            self.keys = [uniq]
        else:
            cols = [np.asarray(c).reshape(-1) for c in columns]
            inv, rep, _ = row_codes(*cols)
            self.keys = [c[rep] for c in cols]
        self.index = inv
        self.size = self.keys[0].size
        self._sorted: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def _order(self) -> np.ndarray:
        return self._sorting()[0]

    @property
    def _starts(self) -> np.ndarray:
        return self._sorting()[1]

    def _sorting(self) -> tuple[np.ndarray, np.ndarray]:
        """Rows in group order (row order within a group) and where each group begins."""
        if self._sorted is None:
            order = stable_order(self.index, self.size)
            starts = np.zeros(self.size, dtype=np.int64)
            np.cumsum(self.count()[:-1], out=starts[1:])
            self._sorted = (order, starts)
        return self._sorted

    def rows(self) -> list[np.ndarray]:
        """Each group's rows, ascending (``np.flatnonzero(index == k)`` for every k, in one sort)."""
        order, starts = self._sorting()
        return np.split(order, starts[1:]) if self.size else []

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


def top_stable(values: np.ndarray, k: int) -> np.ndarray:
    """``np.argsort(-values, kind="stable")[:k]``: the ``k`` largest integers, ties in row order,
    sorting only the rows at or above the k-th largest value."""
    values = np.asarray(values)
    if k >= values.size or values.dtype.kind not in "iu":
        return np.argsort(-values, kind="stable")[:k]
    if k <= 0:
        return np.zeros(0, dtype=np.intp)
    kth = np.partition(values, values.size - k)[values.size - k]
    rows = np.flatnonzero(values >= kth)
    return rows[np.argsort(-values[rows], kind="stable")][:k]


def largest_first(values: np.ndarray) -> np.ndarray:
    """Indices ordering ``values`` from largest to smallest, ties in row order (a stable sort: a
    quicksort's order of ties depends on the CPU's vector instructions, so tables cut to their top
    rows could list different rows on different machines)."""
    return top_stable(values, np.asarray(values).size)


def first_match(keys: tuple[np.ndarray, ...], table: tuple[np.ndarray, ...]) -> np.ndarray:
    """For each row of ``keys``, the first row of ``table`` with the same key columns, else -1.

    The key columns become one integer per row (equal rows, equal integers); the table's integers are
    sorted stably, so a binary search lands on the first table row holding each key."""
    n, m = keys[0].size, table[0].size
    if not n or not m:
        return np.full(n, -1, dtype=np.int64)
    rows = None  # the table rows kept, when not all
    if m > _FEW_KEYS_FACTOR * n:  # few keys: keep only the table rows whose widest column holds a key's value
        widest = max(range(len(keys)), key=lambda i: int(np.max(keys[i])) - int(np.min(keys[i])))
        rows = np.flatnonzero(isin(table[widest], keys[widest]))
        if not rows.size:
            return np.full(n, -1, dtype=np.int64)
        table = tuple(np.asarray(t)[rows] for t in table)
        m = rows.size
    code = joint_code(
        *(np.concatenate([np.asarray(k, dtype=np.int64), np.asarray(t, dtype=np.int64)]) for k, t in zip(keys, table))
    )
    wanted, held = code[:n], code[n:]
    order = np.argsort(held, kind="stable")
    ranked = held[order]
    at = np.searchsorted(ranked, wanted)
    np.minimum(at, m - 1, out=at)
    first = order[at] if rows is None else rows[order[at]]
    return np.where(ranked[at] == wanted, first, -1)


def joint_code(*columns: np.ndarray) -> np.ndarray:
    """One int64 per row of equal-length integer columns, equal exactly where the rows are equal (not
    ordered like the rows). Offsets from each column's minimum combine directly while their spans
    multiply to less than 2**62; a column or combination that would not fit is ranked first."""
    code, width = None, 1
    for c in columns:
        lo, hi = int(c.min()), int(c.max())
        span = hi - lo + 1
        if span < _CODE_LIMIT:
            v = c - c.dtype.type(lo)
        else:  # values spread over most of the int64 range
            uniq, v = dense_codes(c)
            span = uniq.size
        if code is None:
            code, width = v, span
            continue
        if width * span >= _CODE_LIMIT:
            uniq, code = dense_codes(code)
            width = uniq.size
            if width * span >= _CODE_LIMIT:
                uniq, v = dense_codes(v)
                span = uniq.size
        code = code * span + v
        width *= span
    return code
