"""Plain values read from trace files, checked for type and range before anything uses them.

Both readers take device properties, ranks and other metadata from fields a damaged or foreign file
may fill with anything (a list, a string, a number beyond int64). These helpers return the value
when it has the type and range its meaning allows, and ``None`` (absent) otherwise.
"""

from __future__ import annotations

import math
from typing import Any

MAX_ABS_INT = 1 << 62  # beyond any id, size or time in nanoseconds a trace holds

# Device property fields analyses read -> smallest valid value (all integers).
DEVICE_INTS = {
    "id": 0,
    "totalGlobalMem": 1,
    "computeMajor": 0,
    "computeMinor": 0,
    "numSms": 1,
    "multiProcessorCount": 1,
    "maxThreadsPerBlock": 1,
    "maxThreadsPerMultiProcessor": 1,
    "maxThreadsPerMultiprocessor": 1,
    "regsPerBlock": 1,
    "regsPerMultiprocessor": 1,
    "warpSize": 1,
    "sharedMemPerBlock": 0,
    "sharedMemPerMultiprocessor": 0,
    "sharedMemPerBlockOptin": 0,
    "maxSharedMemoryPerMultiProcessor": 0,
}
DEVICE_TEXTS = ("name", "uuid", "busLocation")


def int_value(v: Any, lowest: int = -MAX_ABS_INT) -> int | None:
    """An integer (or integral float) in [lowest, 2**62), else None; bools and strings are not integers."""
    if isinstance(v, bool):
        return None
    if isinstance(v, float):
        if not math.isfinite(v) or v != int(v):
            return None
        v = int(v)
    if isinstance(v, int) and lowest <= v < MAX_ABS_INT:
        return v
    return None


def text_value(v: Any) -> str | None:
    """A string; bytes are decoded (invalid UTF-8 as U+FFFD); numbers become their text; lists/objects None."""
    if v is None or isinstance(v, (list, dict, tuple)):
        return None
    if isinstance(v, (bytes, bytearray, memoryview)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def plain_scalar(v: Any) -> bool:
    """A value safe to carry into reports and JSON: text, bool, an int within int64, a finite float."""
    if isinstance(v, (bool, str)):
        return True
    if isinstance(v, int):
        return -(2**63) < v < 2**63
    return isinstance(v, float) and math.isfinite(v)


def clean_device(d: dict) -> dict:
    """A device-properties entry whose known fields have their type and range (else they are left
    out) and whose other fields are plain scalars."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if k in DEVICE_INTS:
            n = int_value(v, DEVICE_INTS[k])
            if n is not None:
                out[k] = n
        elif k in DEVICE_TEXTS:
            t = text_value(v)
            if t is not None:
                out[k] = t
        elif v is None or plain_scalar(v):
            out[k] = v
    return out
