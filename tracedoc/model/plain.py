"""Values as plain Python for results and JSON: numpy scalars as ``int``/``float``/``bool``, NaN as ``None``."""

from __future__ import annotations

import math
from typing import Any


def plain(v: Any) -> Any:
    """numpy scalars as Python values; NaN as None (JSON has no NaN; undefined is null). An infinity
    stays: it is a bug for the result checks to find, not a value that could not be measured."""
    if v is not None and not isinstance(v, (bool, int, float, str)) and hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def plain_finite(v: Any) -> Any:
    """``plain``, with every non-finite float as None (a log's inf loss is a value the log holds, not a bug)."""
    v = plain(v)
    return None if isinstance(v, float) and not math.isfinite(v) else v
