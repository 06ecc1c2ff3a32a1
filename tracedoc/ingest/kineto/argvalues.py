"""Values inside an event's ``args`` (external ids, grid/block triples, process-group ranks, the
first input's shape) to column values; a value of the wrong shape or type reads as unknown."""

from __future__ import annotations

import itertools
import math
import re
from typing import Any

import msgspec
import numpy as np
import orjson


# The most elements a tensor of a real trace holds (far beyond any GPU's memory); a larger product of
# recorded dims is damage, read as unknown.
_MAX_NELEMS = 1 << 48


def _ranks_text(ranks: Any) -> str | None:
    """``Process Group Ranks`` (a list, or its text) as ``"0,1,2,3"``."""
    if ranks is None:
        return None
    if isinstance(ranks, str):
        ranks = re.findall(r"-?\d+", ranks)
    try:
        return ",".join(str(int(r)) for r in ranks)
    except (TypeError, ValueError):
        return None


def _first_input(input_dims, input_type) -> tuple[int, str | None]:
    """Elements and dtype of a collective op's first input, from the raw text of ``Input Dims`` and
    ``Input type``; -1 unknown."""
    try:
        dims = orjson.loads(bytes(input_dims))
        types = orjson.loads(bytes(input_type))
    except orjson.JSONDecodeError:
        return -1, None
    if not isinstance(dims, list) or not dims or not isinstance(dims[0], list) or not dims[0]:
        return -1, None
    try:
        nelems = math.prod(int(d) for d in dims[0])
    except (TypeError, ValueError, OverflowError):  # OverflowError: a dim of 1e400 (float infinity)
        return -1, None
    if not 0 <= nelems <= _MAX_NELEMS or any(int(d) < 0 for d in dims[0]):
        return -1, None
    dtype = types[0] if isinstance(types, list) and types and isinstance(types[0], str) and types[0] else None
    return nelems, dtype


def _triples(values: list) -> np.ndarray:
    """Grid or block ``[x, y, z]`` values to an (n, 3) int64 array; -1 where absent or unreadable."""
    n = len(values)
    present = [i for i, v in enumerate(values) if v is not None]
    if len(present) < n:  # memcpy and memset rows have no grid: read the others together
        out = np.full((n, 3), -1, dtype=np.int64)
        if present:
            out[present] = _triples([values[i] for i in present])
        return out
    try:
        if set(map(type, values)) == {list} and min(map(len, values)) == 3 == max(map(len, values)):
            return np.fromiter(itertools.chain.from_iterable(values), dtype=np.int64, count=3 * n).reshape(n, 3)
    except (TypeError, ValueError, OverflowError):
        pass
    try:
        arr = np.array(values, dtype=np.int64)
        if arr.shape == (n, 3):
            return arr
    except (TypeError, ValueError, OverflowError):
        pass
    out = np.full((n, 3), -1, dtype=np.int64)
    for i, v in enumerate(values):
        if isinstance(v, (list, tuple)):
            for j, x in enumerate(v[:3]):
                try:
                    out[i, j] = int(x)
                except (TypeError, ValueError, OverflowError):
                    pass
    return out


_ABSENT_TRIPLE = b"[-1,-1,-1]"
_JSON_SPACE = b" \t\n\r"
_INT_CHARS = b"0123456789-"
_INT64_LIMITS = (np.iinfo(np.int64).min, np.iinfo(np.int64).max)  # where numpy's text parser saturates


def raw_triples(raws: list) -> np.ndarray:
    """Grid or block values kept as JSON text (``msgspec.Raw``; empty when absent) to an (n, 3) int64
    array, as ``_triples`` reads their decoded values. The usual case, every value a list of three
    integers, is read from the joined text in one pass (about a third of the time of decoding the
    lists and reading those); anything else is decoded and read by ``_triples``."""
    n = len(raws)
    if not n:
        return np.full((0, 3), -1, dtype=np.int64)
    text = b",".join([r if r else _ABSENT_TRIPLE for r in raws]).translate(None, _JSON_SPACE)
    out = None
    # without the numbers, n arrays of three are "[,,]," n times (and any other character shows)
    if text.translate(None, _INT_CHARS) == (b"[,,]," * n)[:-1]:
        vals = np.fromstring(text.translate(None, b"[]"), dtype=np.int64, sep=",")
        if vals.size == 3 * n and not np.isin(vals, _INT64_LIMITS).any():  # a limit: a number beyond int64
            out = vals.reshape(n, 3)
    if out is None:
        out = _triples([msgspec.json.decode(r) if r else None for r in raws])
    return out
