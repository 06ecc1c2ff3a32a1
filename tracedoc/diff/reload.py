"""A diff or trend saved by ``tracedoc diff --format json``, read back into its record (the version
history and migrations are in ``saved``)."""

from __future__ import annotations

import os

from ..errors import TraceError
from .model import DiffResult
from .saved import TREND_SCHEMA
from .trend import TrendResult


def load(path: str | os.PathLike):
    """A diff or trend saved by ``tracedoc diff --format json`` (gzip too), as its ``DiffResult`` or
    ``TrendResult``; one of version 1 is migrated."""
    import orjson

    from ..infile import read_input

    path = os.fspath(path)
    raw = read_input(path, TraceError, "saved diff")  # regular files only; gzip inflation bounded
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise TraceError(path, "is not valid JSON", str(exc), "pass a diff written with --format json") from None
    kind = TrendResult if isinstance(data, dict) and data.get("schema") == TREND_SCHEMA else DiffResult
    return kind.from_dict(data, where=path)
