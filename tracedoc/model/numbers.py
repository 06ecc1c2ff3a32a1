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

    Digits past ``scale_digits`` decimals are dropped, rounding half up (away from zero) on the
    first dropped digit. Tokens with an exponent or a non-number (``null``) fall back to Python's
    float parser.
    """
    n = len(tokens)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    joined = b" ".join(tokens)
    plain = _plain_decimals(joined, n, scale_digits)
    if plain is not None:
        return plain
    return _digitwise(tokens, joined + b" ", n, scale_digits)


def _plain_decimals(joined: bytes, n: int, scale_digits: int) -> np.ndarray | None:
    """The common case, every token an optionally signed decimal of at most 18 digits: the digits
    with the dot removed are read as one integer each, then scaled by the token's decimal count.
    None when any token is not of that form."""
    a = np.frombuffer(joined, dtype=np.uint8)
    if not (((a - np.uint8(48)) < 10) | (a == 46) | (a == 45) | (a == _SEP)).all():
        return None
    seps = np.flatnonzero(a == _SEP)
    if seps.size != n - 1:
        return None
    ends = np.empty(n, dtype=np.int64)
    ends[:-1] = seps
    ends[-1] = a.size
    dots = np.flatnonzero(a == 46)
    decimals = np.zeros(n, dtype=np.int64)
    if dots.size:
        tok = np.searchsorted(seps, dots)
        if dots.size > 1 and (np.diff(tok) == 0).any():  # two dots in one token
            return None
        decimals[tok] = ends[tok] - dots - 1
    try:
        digits = np.fromiter(map(int, joined.replace(b".", b"").split(b" ")), dtype=np.int64, count=n)
    except (ValueError, OverflowError):
        return None
    kept = decimals <= scale_digits
    if kept.all():
        return digits * _POW10[scale_digits - decimals]
    dropped = decimals - scale_digits
    if (dropped > 18).any():
        return None
    out = digits * _POW10[np.where(kept, scale_digits - decimals, 0)]
    cut = ~kept
    mag = np.abs(digits[cut])
    unit = _POW10[dropped[cut]]
    q = mag // unit + ((mag % unit) * 10 // unit >= 5)
    out[cut] = np.where(digits[cut] < 0, -q, q)
    return out


def _digitwise(tokens: list, joined: bytes, n: int, scale_digits: int) -> np.ndarray:
    """Any tokens: each byte weighted by its power of ten, summed per token with ``reduceat``."""
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
    try:  # the usual reason: absent values among numbers
        return np.array([missing if v is None else v for v in values], dtype=np.int64)
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
    try:  # the usual reason: absent values among numbers
        return np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    except (TypeError, ValueError):
        pass
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            out[i] = np.nan
    return out
