"""Exact conversion of JSON number text to int64 nanoseconds, vectorized.

Kineto writes microseconds, since 2024 with three decimals (``1712195495519689.047``). A float64
cannot hold that exactly (its spacing near 1.7e15 is 0.25), so timestamps are converted from their
text: each token's digits are weighted by a power of ten and summed per token with ``reduceat``.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

import numpy as np

from .groups import distinct

BAD_NUMBER = np.iinfo(np.int64).min  # a token that is not a finite number within int64 once scaled
_INT64_MAX = int(np.iinfo(np.int64).max)
_POW10 = 10 ** np.arange(19, dtype=np.int64)
_SEP = 32  # b" "
_SATURATED = (np.iinfo(np.int64).min, np.iinfo(np.int64).max)


def decimal_text_to_scaled_int(tokens: list, scale_digits: int = 3) -> np.ndarray:
    """Parse number tokens (bytes-like, e.g. ``msgspec.Raw``) into round(value * 10**scale_digits).

    Digits past ``scale_digits`` decimals are dropped, rounding half up (away from zero) on the
    first dropped digit. Tokens with an exponent, a non-number (``null``, ``"12"``, ``Infinity``) or
    too many digits are parsed exactly one by one; a token that is not a finite number, or whose
    scaled value does not fit int64, becomes ``BAD_NUMBER`` (never a wrapped or clipped value).
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
    if dots.size in (0, n):  # the usual case: every token with ``scale_digits`` decimals, or none with any
        uniform = _uniform_decimals(a, joined, seps, ends, dots, n, scale_digits)
        if uniform is not None:
            return uniform
    decimals = np.zeros(n, dtype=np.int64)
    if dots.size:
        tok = np.searchsorted(seps, dots)
        if dots.size > 1 and (np.diff(tok) == 0).any():  # two dots in one token
            return None
        decimals[tok] = ends[tok] - dots - 1
    digits = _token_digits(a, joined, seps, ends, decimals, n)
    if digits is None:
        return None
    kept = decimals <= scale_digits
    dropped = decimals - scale_digits
    if (dropped > 18).any():
        return None
    mult = _POW10[np.where(kept, scale_digits - decimals, 0)]
    if ((np.abs(digits) > _INT64_MAX // mult) | (digits == BAD_NUMBER)).any():  # would not fit int64 once
        return None  # scaled, or is int64's min (whose absolute value wraps round to itself)
    out = digits * mult
    if kept.all():
        return out
    cut = ~kept
    mag = np.abs(digits[cut])
    unit = _POW10[dropped[cut]]
    q = mag // unit + (mag % unit >= unit // 2)  # the first dropped digit is 5 or more
    out[cut] = np.where(digits[cut] < 0, -q, q)
    return out


def _uniform_decimals(
    a: np.ndarray, joined: bytes, seps: np.ndarray, ends: np.ndarray, dots: np.ndarray, n: int, scale_digits: int
) -> np.ndarray | None:
    """Tokens that all have exactly ``scale_digits`` decimals (Kineto's 3-decimal microseconds) are their
    digits without the dot; tokens without a dot are scaled by ``10**scale_digits``. Either way one text
    parse, none of the per-token bookkeeping. None when the tokens are not all of one of these forms, or
    a value does not fit int64 (the general path then decides)."""
    if dots.size and not (dots == ends - scale_digits - 1).all():  # one dot per token, at its place
        return None
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = seps + 1
    neg = a[np.minimum(starts, a.size - 1)] == 45
    lead = starts + neg  # the first digit
    if neg.sum() != np.count_nonzero(a == 45) or (lead >= (dots if dots.size else ends)).any():
        return None  # a minus sign that does not start its token, or no digit before the dot / at all
    try:
        vals = np.fromstring(joined.replace(b".", b"") if dots.size else joined, dtype=np.int64, sep=" ")
    except ValueError:
        return None
    if vals.size != n or np.isin(vals, _SATURATED).any():  # where numpy's parser stops at a number too large
        return None
    if dots.size or not scale_digits:
        return vals
    mult = int(_POW10[scale_digits])
    if (np.abs(vals) > _INT64_MAX // mult).any():
        return None
    return vals * mult


def _token_digits(
    a: np.ndarray, joined: bytes, seps: np.ndarray, ends: np.ndarray, decimals: np.ndarray, n: int
) -> np.ndarray | None:
    """Each token's digits, dot removed, as one signed integer; None unless every token is an optionally
    signed run of digits with at most one dot between digits.

    Tokens of at most 18 digits (or 19 below 9e18) cannot overflow int64 and are read by numpy's text
    parser in one call; longer ones are read with Python ints (the caller checks their range).
    """
    starts = np.empty(n, dtype=np.int64)
    starts[0] = 0
    starts[1:] = seps + 1
    neg = a[np.minimum(starts, a.size - 1)] == 45
    if neg.sum() != np.count_nonzero(a == 45):  # a minus sign that does not start its token
        return None
    has_dot = decimals > 0
    n_digits = ends - starts - neg - has_dot
    if n_digits.size and n_digits.min() < 1:
        return None
    dotted = np.flatnonzero(has_dot)
    if dotted.size and (ends[dotted] - decimals[dotted] - 1 <= starts[dotted] + neg[dotted]).any():
        return None  # a dot with no digit before it
    text = joined.replace(b".", b"")
    wide = n_digits >= 19
    if wide.any():
        lead = a[starts[wide] + neg[wide]]
        if (n_digits[wide] > 19).any() or (lead >= 57).any():  # could pass int64: exact Python ints
            try:
                return np.fromiter(map(int, text.split(b" ")), dtype=np.int64, count=n)
            except (ValueError, OverflowError):
                return None
    try:
        digits = np.fromstring(text, dtype=np.int64, sep=" ")
    except ValueError:
        return None
    return digits if digits.size == n else None


def _digitwise(tokens: list, joined: bytes, n: int, scale_digits: int) -> np.ndarray:
    """Any tokens: each byte weighted by its power of ten, summed per token with ``reduceat``."""
    a = np.frombuffer(joined, dtype=np.uint8)
    seps = np.flatnonzero(a == _SEP)
    if seps.size != n:  # a token with a space inside (an object or string, never a number): not a number
        return decimal_text_to_scaled_int([b"null" if b" " in bytes(t) else t for t in tokens], scale_digits)
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
    # Too many integer digits for int64, or a 19-digit sum that wrapped: exact slow path below.
    int_digits = dot_pos - starts - neg
    wrapped = vals < 0
    vals[neg] = -vals[neg]
    # Anything that is not plain digits with an optional sign and dot: parse it the slow way.
    odd = ~(digit | (a == 46) | (a == 45) | (a == _SEP))
    odd[starts] |= np.add.reduceat(digit, starts) == 0  # no digit at all ("-", ".")
    minus = a == 45
    minus[starts] = False
    odd |= minus  # a minus sign inside a token
    slow = distinct(tok_of[odd]) if odd.any() else np.zeros(0, dtype=np.int64)
    big = np.flatnonzero((int_digits + scale_digits > 19) | wrapped)
    if big.size:
        slow = distinct(np.r_[slow, big])
    for t in slow.tolist():
        vals[t] = _exact_scaled(bytes(tokens[t]), scale_digits)
    return vals


def _exact_scaled(text: bytes, scale_digits: int) -> int:
    """round(value * 10**scale_digits), half away from zero, or BAD_NUMBER."""
    try:
        d = Decimal(text.decode("ascii").strip())
    except (InvalidOperation, UnicodeDecodeError, ValueError):
        return BAD_NUMBER
    if not d.is_finite() or (d and d.adjusted() + scale_digits > 19):  # far out of range: no huge ints
        return BAD_NUMBER
    v = int(d.scaleb(scale_digits).to_integral_value(rounding=ROUND_HALF_UP))
    return v if -_INT64_MAX <= v <= _INT64_MAX else BAD_NUMBER


MISSING_INT = -1


def to_int64(values: list, missing: int = MISSING_INT) -> np.ndarray:
    """Python ints/floats/None/numeric strings to int64, ``missing`` for absent or unparsable
    (a list or object is unparsable: the result is always one value per input)."""
    try:
        arr = np.array(values, dtype=np.int64)
        if arr.shape == (len(values),):
            return arr
    except (TypeError, ValueError, OverflowError):
        pass
    try:  # the usual reason: absent values among numbers
        arr = np.array([missing if v is None else v for v in values], dtype=np.int64)
        if arr.shape == (len(values),):
            return arr
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
    """Python numbers/None/numeric strings to float64, NaN for absent or unparsable (one per input)."""
    try:
        arr = np.array(values, dtype=np.float64)
        if arr.shape == (len(values),):
            return arr
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer beyond float range
        pass
    try:  # the usual reason: absent values among numbers
        arr = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
        if arr.shape == (len(values),):
            return arr
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        try:
            out[i] = float(v)
        except (TypeError, ValueError, OverflowError):
            out[i] = np.nan
    return out
