"""Mutations of Kineto JSON bytes: each ``m_*(rng, data) -> (detail, damaged bytes)``.

Byte-level damage (truncation, flips, control characters, invalid UTF-8, BOMs, gzip oddities, deep
nesting) and structural changes made on the parsed document (missing or mistyped keys, odd event
shapes: impossible times, names that are lists, optional fields on some events only).
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from typing import Callable

import orjson


# --- byte-level mutations of Kineto JSON ---------------------------------------------------------

WEIRD_NUMBERS = (
    b"1e400",
    b"-1e400",
    b"Infinity",
    b"-Infinity",
    b"NaN",
    b"9223372036854775808",
    b"18446744073709551621",
    b"-9223372036854775809",
    b"1" + b"0" * 40,
    b"-5",
    b"1e18",
    b'"123.5"',
    b"true",
    b"null",
    b"[]",
    b"{}",
    b'"abc"',
    b"1.7976931348623157e308",
)
WEIRD_VALUES = (b"[1, 2]", b'{"a": 1}', b"17", b"null", b"true", b'""', b'["x", {"y": []}]', b"-1", b"1e400")
BAD_UTF8 = (b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80\x80", b"\xe2\x82", b"\xc0\xaf")


def _string_starts(data: bytes, rng: random.Random, k: int) -> list[int]:
    """Positions just inside k random JSON string values (after a ``": "``)."""
    marks = [i + 4 for i in _find_all(data, b'": "', limit=5000)]
    return sorted(rng.sample(marks, min(k, len(marks)))) if marks else [len(data) // 2]


def _find_all(data: bytes, needle: bytes, limit: int) -> list[int]:
    out, i = [], data.find(needle)
    while i >= 0 and len(out) < limit:
        out.append(i)
        i = data.find(needle, i + 1)
    return out


def _insert(data: bytes, positions: list[int], pieces: list[bytes]) -> bytes:
    out, last = [], 0
    for pos, piece in zip(positions, pieces):
        out += [data[last:pos], piece]
        last = pos
    out.append(data[last:])
    return b"".join(out)


def m_truncate(rng, data):
    cut = rng.choice([rng.randrange(0, 40), rng.randrange(1, len(data)), len(data) - rng.randrange(1, 40)])
    return f"cut at {cut} of {len(data)}", data[: max(0, cut)]


def m_byte_flip(rng, data):
    b = bytearray(data)
    k = rng.randint(1, 8)
    for _ in range(k):
        b[rng.randrange(len(b))] = rng.choice([rng.randrange(256), *b'{}[]",:0-.eE\\'])
    return f"{k} bytes changed", bytes(b)


def m_control_chars(rng, data):
    k = rng.randint(1, 5)
    if rng.random() < 0.5:
        pos = _string_starts(data, rng, k)
        pieces = [bytes([rng.randrange(0, 32)]) for _ in pos]
        return f"raw control characters in {len(pos)} strings", _insert(data, pos, pieces)
    pos = _string_starts(data, rng, k)
    return "escaped control characters in strings", _insert(data, pos, [b"\\u0000\\u001b[31m\\r\\b"] * len(pos))


def m_invalid_utf8(rng, data):
    where = rng.choice(["events", "head", "tail", "everywhere"])
    starts = _string_starts(data, rng, 200)
    if where == "head":
        starts = starts[:3]
    elif where == "tail":
        starts = starts[-3:]
    elif where == "events":
        starts = rng.sample(starts, min(len(starts), rng.randint(1, 6)))
    pieces = [rng.choice(BAD_UTF8) if rng.random() < 0.85 else b"\\ud800" for _ in starts]
    return f"invalid UTF-8 in {len(starts)} strings ({where})", _insert(data, sorted(starts), pieces)


def m_bom(rng, data):
    kind = rng.choice(["utf8", "utf8+ws", "utf16le", "utf16be", "utf16-encoded", "double"])
    bom = {
        "utf8": b"\xef\xbb\xbf",
        "utf8+ws": b"\xef\xbb\xbf \n",
        "utf16le": b"\xff\xfe",
        "utf16be": b"\xfe\xff",
        "double": b"\xef\xbb\xbf\xef\xbb\xbf",
    }.get(kind)
    if kind == "utf16-encoded":
        return kind, data.decode("utf-8", "replace").encode("utf-16")
    return f"{kind} BOM", bom + data


def m_gzip(rng, data):
    kind = rng.choice(
        [
            "two-members",
            "split-members",
            "truncated",
            "trailing-garbage",
            "zero-padding",
            "double-gzip",
            "bad-crc",
            "empty",
            "bad-header",
            "raw-deflate",
        ]
    )
    gz = gzip.compress(data, compresslevel=rng.choice([1, 6, 9]))
    if kind == "two-members":
        out = gz + gzip.compress(data)
    elif kind == "split-members":
        cut = rng.randrange(1, len(data))
        out = gzip.compress(data[:cut]) + gzip.compress(data[cut:])
    elif kind == "truncated":
        out = gz[: rng.randrange(1, len(gz))]
    elif kind == "trailing-garbage":
        out = gz + bytes(rng.randrange(256) for _ in range(rng.randint(1, 64)))
    elif kind == "zero-padding":
        out = gz + b"\0" * rng.randint(1, 4096)
    elif kind == "double-gzip":
        out = gzip.compress(gz)
    elif kind == "bad-crc":
        b = bytearray(gz)
        b[-8] ^= 0xFF
        out = bytes(b)
    elif kind == "empty":
        out = gzip.compress(b"")
    elif kind == "bad-header":
        b = bytearray(gz)
        b[rng.randrange(2, 10)] ^= 0xFF
        out = bytes(b)
    else:
        out = zlib.compress(data)
    return kind, out


def m_deep_nesting(rng, data):
    depth = rng.choice([100, 1000, 10_000, 100_000])
    opener, closer = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
    nested = opener * depth + b"1" + closer * depth
    where = rng.choice(["args", "event", "top"])
    if where == "top":
        return f"document nested {depth} deep", nested
    pos = data.find(b'"traceEvents"')
    if where == "event" and pos >= 0:
        bracket = data.find(b"[", pos) + 1
        return f"an event nested {depth} deep", data[:bracket] + nested + b"," + data[bracket:]
    i = data.find(b'"args": {')
    if i < 0:
        i = data.find(b'"args":{')
    if i < 0:
        return f"document nested {depth} deep", nested
    j = data.find(b"{", i) + 1
    return f"an args value nested {depth} deep", data[:j] + b'"deep": ' + nested + b", " + data[j:]


# --- structural mutations (parsed, changed, written back) -----------------------------------------


def _events_of(doc) -> list:
    if isinstance(doc, list):
        return doc
    ev = doc.get("traceEvents") if isinstance(doc, dict) else None
    return ev if isinstance(ev, list) else []


def _dumps(doc, tokens: dict[str, bytes]) -> bytes:
    out = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()  # big ints too
    for placeholder, token in tokens.items():
        out = out.replace(b'"' + placeholder.encode() + b'"', token)
    return out


def m_json_structure(rng, data):
    doc = orjson.loads(data)
    kind = rng.choice(
        [
            "no-traceEvents",
            "traceEvents-object",
            "traceEvents-string",
            "event-not-object",
            "bare-array",
            "top-scalar",
            "device-properties",
            "distributed-info",
            "trailing-garbage",
            "two-documents",
            "empty-events",
            "duplicate-events",
            "shuffled",
            "schema-version",
            "duplicate-key",
        ]
    )
    events = _events_of(doc)
    if kind == "no-traceEvents" and isinstance(doc, dict):
        doc.pop("traceEvents", None)
    elif kind == "traceEvents-object" and isinstance(doc, dict):
        doc["traceEvents"] = {"0": events[:3]}
    elif kind == "traceEvents-string" and isinstance(doc, dict):
        doc["traceEvents"] = rng.choice(["x", 5, None, True])
    elif kind == "event-not-object" and events:
        for _ in range(rng.randint(1, 3)):
            events[rng.randrange(len(events))] = rng.choice([5, "x", None, [], [1, {"ph": "X"}], True])
    elif kind == "bare-array":
        doc = events
    elif kind == "top-scalar":
        doc = rng.choice([1, "trace", None, True, 1.5])
    elif kind == "device-properties" and isinstance(doc, dict):
        doc["deviceProperties"] = rng.choice(
            [
                ["x", 1],
                {"a": 1},
                [{"id": "zero", "computeMajor": [8], "totalGlobalMem": -1, "name": {"n": 1}}],
                "A100",
                None,
            ]
        )
    elif kind == "distributed-info" and isinstance(doc, dict):
        doc["distributedInfo"] = rng.choice(
            [
                {"rank": "one", "world_size": -3},
                {"rank": 2**70, "world_size": 0},
                [1, 2],
                "nccl",
                {"rank": -1, "world_size": {"x": 1}, "backend": [1]},
            ]
        )
    elif kind == "schema-version" and isinstance(doc, dict):
        doc["schemaVersion"] = rng.choice([None, "1", [1], 10**30])
        doc["baseTimeNanoseconds"] = rng.choice([None, "x", -1, 2**80, 1.5])
    elif kind == "empty-events" and isinstance(doc, dict):
        doc["traceEvents"] = []
    elif kind == "duplicate-events":
        events.extend(events[: rng.randint(1, len(events) or 1)])
    elif kind == "shuffled":
        rng.shuffle(events)
    out = _dumps(doc, {})
    if kind == "trailing-garbage":
        out += rng.choice([b" garbage", b"}", b"]]", b"\0\0", b",{}"])
    elif kind == "two-documents":
        out += b"\n" + out
    elif kind == "duplicate-key" and out.startswith(b"{"):
        out = b'{"traceEvents": [],' + out[1:]
    return kind, out


_EVENT_FIELDS = ("ts", "dur", "name", "cat", "ph", "pid", "tid", "id", "args")
_ARG_FIELDS = (
    "External id",
    "correlation",
    "device",
    "stream",
    "grid",
    "block",
    "Collective name",
    "In msg nelems",
    "Group size",
    "Bytes",
    "Total Allocated",
    "Device Id",
    "est. achieved occupancy %",
    "blocks per SM",
    "registers per thread",
    "graph id",
    "wait_on_stream",
    "labels",
    "name",
)


def m_event_shapes(rng, data):
    doc = orjson.loads(data)
    events = [e for e in _events_of(doc) if isinstance(e, dict)]
    if not events:
        return "no events", data
    kind = rng.choice(
        [
            "ts-weird",
            "dur-weird",
            "name-type",
            "cat-type",
            "field-type",
            "args-field-type",
            "optional-fields",
            "end-before-start",
            "ph-weird",
            "huge-name",
            "all-same-ts",
        ]
    )
    tokens: dict[str, bytes] = {}
    picked = rng.sample(events, min(len(events), rng.randint(1, 12)))
    for n, e in enumerate(picked):
        ph = f"__tok{n}__"
        if kind in ("ts-weird", "dur-weird"):
            tokens[ph] = rng.choice(WEIRD_NUMBERS)
            e["ts" if kind == "ts-weird" else "dur"] = ph
        elif kind in ("name-type", "cat-type"):
            e["name" if kind == "name-type" else "cat"] = rng.choice([["a", "b"], {"k": 1}, 5, None, True, 1.5])
        elif kind == "field-type":
            key = rng.choice(_EVENT_FIELDS)
            tokens[ph] = rng.choice(WEIRD_VALUES + WEIRD_NUMBERS)
            e[key] = ph
        elif kind == "args-field-type":
            args = (
                e.setdefault("args", {}) if isinstance(e.get("args"), dict) else e.__setitem__("args", {}) or e["args"]
            )
            tokens[ph] = rng.choice(WEIRD_VALUES + WEIRD_NUMBERS)
            args[rng.choice(_ARG_FIELDS)] = ph
        elif kind == "optional-fields":
            for key in rng.sample(_EVENT_FIELDS, rng.randint(1, 3)):
                e.pop(key, None)
        elif kind == "end-before-start":
            if "dur" in e:
                e["dur"] = -abs(e["dur"] if isinstance(e["dur"], (int, float)) else 1) - rng.randint(1, 10**6)
        elif kind == "ph-weird":
            e["ph"] = rng.choice(["", "XX", "x", "B", "E", "C", "b", "e", 1, None, "M"])
        elif kind == "huge-name":
            e["name"] = "ab(" * rng.randint(10_000, 100_000)
    if kind == "all-same-ts":
        for e in events:
            e["ts"] = 1
    return f"{kind} on {len(picked)} events", _dumps(doc, tokens)


KINETO_MUTATIONS: dict[str, Callable] = {
    "truncation": m_truncate,
    "byte_flip": m_byte_flip,
    "control_chars": m_control_chars,
    "invalid_utf8": m_invalid_utf8,
    "bom": m_bom,
    "gzip": m_gzip,
    "json_structure": m_json_structure,
    "deep_nesting": m_deep_nesting,
    "event_shapes": m_event_shapes,
}
