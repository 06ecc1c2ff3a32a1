"""Exact conversion of JSON number text to int64 nanoseconds, vectorized.

Kineto writes microseconds, since 2024 with three decimals (``1712195495519689.047``). A float64
cannot hold that exactly (its spacing near 1.7e15 is 0.25), so timestamps are converted from their
text: each token's digits are weighted by a power of ten and summed per token with ``reduceat``.
"""

from __future__ import annotations

import numpy as np

_POW10 = 10 ** np.arange(19, dtype=np.int64)
_SEP = 32  # b" "


def decimal_text_to_scaled_int(tokens: list, scale_digits: int = 3) -> np.ndarray:
    """Parse number tokens (bytes-like, e.g. ``msgspec.Raw``) into round(value * 10**scale_digits).

    Tokens with an exponent or a non-number (``null``) fall back to Python's float parser.
    """
    n = len(tokens)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    joined = b" ".join(tokens) + b" "
    a = np.frombuffer(joined, dtype=np.uint8)
    seps = np.flatnonzero(a == _SEP)
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = seps[:-1] + 1
    tok_of = np.repeat(np.arange(n), seps - starts + 1)
    dots = np.flatnonzero(a == 46)
    dot_pos = seps.copy()
    dot_pos[tok_of[dots]] = dots
    pos = np.arange(a.size)
    dp = dot_pos[tok_of]
    exp = np.where(pos < dp, dp - pos - 1, dp - pos) + scale_digits
    digit = (a >= 48) & (a <= 57)
    use = digit & (exp >= 0) & (exp < 19)
    contrib = np.zeros(a.size, dtype=np.int64)
    contrib[use] = (a[use].astype(np.int64) - 48) * _POW10[exp[use]]
    vals = np.add.reduceat(contrib, starts)
    # Round half up on the first dropped digit.
    first_dropped = dot_pos + scale_digits + 1
    fd_ok = first_dropped < seps
    fd_idx = np.where(fd_ok, first_dropped, 0)
    fd_digit = a[fd_idx]
    vals += (fd_ok & (fd_digit >= 53) & (fd_digit <= 57)).astype(np.int64)
    neg = a[starts] == 45
    vals[neg] = -vals[neg]
    # Anything that is not plain digits with an optional sign and dot: parse it the slow way.
    odd = ~(digit | (a == 46) | (a == 45) | (a == _SEP))
    if odd.any():
        scale = 10.0**scale_digits
        for t in np.unique(tok_of[odd]):
            text = bytes(tokens[t])
            try:
                vals[t] = int(round(float(text) * scale))
            except ValueError:
                vals[t] = np.iinfo(np.int64).min
    return vals


MISSING_INT = -1


def to_int64(values: list, missing: int = MISSING_INT) -> np.ndarray:
    """Python ints/floats/None/numeric strings to int64, ``missing`` for absent or unparsable."""
    try:
        return np.array(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):
        try:
            out[i] = int(v) if v is not None and v != "" else missing
        except (TypeError, ValueError, OverflowError):
            out[i] = missing
    return out


def to_float64(values: list) -> np.ndarray:
    """Python numbers/None/numeric strings to float64, NaN for absent or unparsable."""
    try:
        return np.array(values, dtype=np.float64)
    except (TypeError, ValueError):
        pass
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            out[i] = np.nan
    return out
