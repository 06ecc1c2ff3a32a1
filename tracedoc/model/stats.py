"""Order statistics of one column: ``percentile`` and ``median``.

They give ``np.percentile`` (its default "linear" method) and ``np.median`` of a 1-D column, bit for
bit: the same partition, the same interpolation, in the same floating-point operations. numpy's own
functions are not used because their first call imports ``numpy.ma`` (about 7 ms of every process
that analyses a trace), and their generality (axes, methods, masked arrays) costs a few hundred µs
per call on the small columns the analyses summarise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def percentile(values, q: float | Sequence[float]) -> float | list[float]:
    """The ``q``-th percentile (0-100) of ``values`` by linear interpolation between the two closest
    ranks, as ``np.percentile(values, q)`` computes it; a list for a sequence of ``q``. NaN when a
    value is NaN. ``values`` must not be empty."""
    a = _column(values)
    qs = [q] if np.ndim(q) == 0 else list(q)
    n = a.size
    ranks = []
    for p in qs:
        p = float(p)
        if not 0.0 <= p <= 100.0:
            raise ValueError(f"percentile {p!r} is outside [0, 100]")
        ranks.append((n - 1) * (p / 100.0))  # numpy: (n - 1) * true_divide(q, 100)
    bounds = [_neighbours(r, n) for r in ranks]
    part = np.partition(a, sorted({0, n - 1, *(i for _, lo, hi in bounds for i in (lo, hi))}))
    if _has_nan(part):
        out = [math.nan] * len(qs)
    else:
        # numpy weighs by a Python float for one q (float32 data stays float32) and by a float64 array
        # for several; for integer and float64 data the two are the same
        weight = float if np.ndim(q) == 0 else np.float64
        out = [_lerp(part[lo], part[hi], weight(r - below)) for r, (below, lo, hi) in zip(ranks, bounds)]
    return out[0] if np.ndim(q) == 0 else out


def median(values) -> float:
    """``np.median(values)``: the middle value, or the mean of the two middle values; NaN when a value
    is NaN or there is none."""
    a = np.asarray(values).reshape(-1)
    n = a.size
    if not n:
        return math.nan
    half = n // 2
    kth = [half - 1, half] if n % 2 == 0 else [half]
    part = np.partition(a, kth + [n - 1])
    if _has_nan(part):
        return math.nan
    if a.dtype.kind in "iu":  # numpy averages integers in float64, floats in their own type
        lower, upper = np.float64(part[half - 1]), np.float64(part[half])
    else:
        lower, upper = part[half - 1], part[half]
    return float(upper) if n % 2 else float((lower + upper) / 2)


def _column(values) -> np.ndarray:
    a = np.asarray(values).reshape(-1)
    if not a.size:
        raise ValueError("an order statistic of no values")
    return a


def _neighbours(rank: float, n: int) -> tuple[int, int, int]:
    """For a fractional rank (never negative), the rank its weight is measured from and the ranks
    either side; past the last rank numpy takes the last value, weighed from -1."""
    if rank >= n - 1:
        return -1, n - 1, n - 1
    lo = math.floor(rank)
    return lo, lo, lo + 1


def _has_nan(part: np.ndarray) -> bool:
    """After a partition that includes the last rank, a NaN (sorted last) is at the end."""
    return part.dtype.kind in "fc" and bool(np.isnan(part[-1]))


def _lerp(a, b, t: float) -> float:
    """numpy's ``_lerp``: ``a + (b - a) * t``, or ``b - (b - a) * (1 - t)`` from the upper side."""
    diff = b - a
    if t >= 0.5:
        return float(b - diff * (1 - t))
    return float(a + diff * t)
