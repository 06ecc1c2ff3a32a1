"""Decoding Kineto events with msgspec into small typed structs (only the fields tracedoc reads).

Fields a reader never uses are skipped by the decoder and never materialised as Python dicts.
"""

from __future__ import annotations

import re
from typing import Any, Optional

import msgspec

_NULL = msgspec.Raw(b"0")
_MISSING = msgspec.Raw(b"null")  # an event without "ts": no time, not time zero
# Infinity / NaN where a JSON value belongs (Python's json module writes them; JSON has no such token).
_NONFINITE_RE = re.compile(rb"(?<=[:\[,])(\s*)(-?Infinity|NaN)(?=\s*[,}\]])")
_MALFORMED_AT_RE = re.compile(r"\(byte (\d+)\)")
_LONE_SURROGATE_RE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)
_NO_RAW = msgspec.Raw(b"")


class Args(msgspec.Struct, frozen=True, gc=False):
    """The ``args`` fields tracedoc reads. Types vary across generations, so values are untyped."""

    # Integer fields read only as int64 columns default to -1, the columns' "absent": a column of them
    # converts to an array in one try when some events lack the field (None would fail it, see to_int64).
    external_id: Any = msgspec.field(default=-1, name="External id")
    external_id_legacy: Any = msgspec.field(default=None, name="external id")
    correlation: Any = -1
    device: Any = -1
    stream: Any = -1
    # kept as undecoded JSON text, read as int64 triples in one pass over all of a chunk's kernels
    grid: msgspec.Raw = _NO_RAW
    block: msgspec.Raw = _NO_RAW
    registers: Any = msgspec.field(default=-1, name="registers per thread")
    shared_memory: Any = msgspec.field(default=-1, name="shared memory")
    blocks_per_sm: Any = msgspec.field(default=None, name="blocks per SM")
    warps_per_sm: Any = msgspec.field(default=None, name="warps per SM")
    occupancy: Any = msgspec.field(default=None, name="est. achieved occupancy %")
    bytes: Any = -1
    cbid: Any = -1
    call_stack: Any = msgspec.field(default=None, name="Call stack")
    graph_id: Any = msgspec.field(default=-1, name="graph id")
    # [memory] instants
    device_type: Any = msgspec.field(default=None, name="Device Type")
    device_id: Any = msgspec.field(default=None, name="Device Id")
    mem_bytes: Any = msgspec.field(default=None, name="Bytes")
    total_allocated: Any = msgspec.field(default=None, name="Total Allocated")
    total_reserved: Any = msgspec.field(default=None, name="Total Reserved")
    addr: Any = msgspec.field(default=None, name="Addr")
    # collectives
    collective: Any = msgspec.field(default=None, name="Collective name")
    in_nelems: Any = msgspec.field(default=None, name="In msg nelems")
    out_nelems: Any = msgspec.field(default=None, name="Out msg nelems")
    group_size: Any = msgspec.field(default=None, name="Group size")
    dtype: Any = None
    pg_name: Any = msgspec.field(default=None, name="Process Group Name")
    pg_ranks: Any = msgspec.field(default=None, name="Process Group Ranks")
    seq: Any = msgspec.field(default=None, name="Seq")
    seq_lower: Any = msgspec.field(default=None, name="seq")
    # cuda_sync
    wait_on_stream: Any = None
    # M events
    name: Any = None
    labels: Any = None
    # recorded shapes (record_shapes=True) and FLOPs (with_flops=True): kept as undecoded JSON text,
    # decoded later only for the ops that need them (matmul/conv/attention for FLOPs; collective ops of
    # torch versions without collective args, for their message size)
    input_dims: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input Dims")
    input_type: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Input type")
    concrete_inputs: msgspec.Raw = msgspec.field(default=_NO_RAW, name="Concrete Inputs")
    flops: Any = None


_EMPTY_ARGS = Args()
_RAW_FIELDS = ("Input Dims", "Input type", "Concrete Inputs", "grid", "block")


class Event(msgspec.Struct, gc=False):
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = _MISSING
    dur: msgspec.Raw = _NULL
    id: Any = None
    args: Optional[Args] = None


class _LooseEvent(Event):
    """The same event with ``args`` of any JSON type (the tolerant second try)."""

    args: Any = None


class _Events(list):
    """Decoded events, with how many had an ``args`` value that had to be dropped, and how many
    invalid UTF-8 sequences and Infinity/NaN literals were repaired before decoding."""

    bad_args = 0
    bad_utf8 = 0
    nonfinite = 0


class _Repairs:
    bad_utf8 = 0
    nonfinite = 0


def _lenient(decode, data: bytes, repairs) -> tuple[Any, bytes]:
    """``decode(data)``; on invalid UTF-8, an Infinity/NaN literal or a lone surrogate escape, repair
    the bytes (counted on ``repairs``) and try again. Returns the value and the bytes decoded."""
    for _ in range(4):
        try:
            return decode(data), data
        except UnicodeDecodeError:
            data = bytes(data)  # a msgspec.Raw
            fixed, n = _fix_utf8(data)
            repairs.bad_utf8 += n
        except msgspec.ValidationError:
            raise
        except msgspec.DecodeError as exc:
            data = bytes(data)
            fixed = _fix_literals(data, str(exc), repairs)
            if fixed is None:
                raise
        if fixed == data:
            break
        data = fixed
    return decode(data), data


def _fix_utf8(data: bytes) -> tuple[bytes, int]:
    """The bytes with each invalid UTF-8 sequence replaced by U+FFFD, and how many were replaced."""
    text = data.decode("utf-8", "replace")
    return text.encode("utf-8"), text.count("\ufffd") - data.count("\ufffd".encode())


def _fix_literals(data: bytes, message: str, repairs) -> bytes | None:
    """Replace lone surrogate escapes, or quote Infinity/NaN literals; None when neither is the problem."""
    if b"\\u" in data and any(word in message for word in ("truncated", "surrogate", "escape")):
        fixed, n = _LONE_SURROGATE_RE.subn(rb"\\ufffd", data)
        if n:
            repairs.bad_utf8 += n
            return fixed
    m = _MALFORMED_AT_RE.search(message)
    if m is not None:
        at = int(m.group(1))
        if data[at : at + 9].lstrip(b"-").startswith((b"Infinity", b"NaN")) or data[at - 1 : at + 8] == b"-Infinity":
            fixed, n = _NONFINITE_RE.subn(rb'\1"\2"', data)
            if n:
                repairs.nonfinite += n
                return fixed
    return None


_decode_strict = msgspec.json.Decoder(list[Event]).decode
_decode_loose = msgspec.json.Decoder(list[_LooseEvent]).decode


def _decode_events(data: bytes) -> list[Event]:
    """Decode a JSON array of events; raise ``msgspec.DecodeError`` if it is not one.

    Events whose ``args`` is not an object (or holds a field of an impossible shape) keep their
    other fields and lose their args; the count is reported as a warning.
    """
    repairs = _Repairs()
    try:
        strict, data = _lenient(_decode_strict, data, repairs)
    except msgspec.ValidationError:
        strict = None
    if strict is not None:
        if not (repairs.bad_utf8 or repairs.nonfinite):
            return strict
        out = _Events(strict)
        out.bad_utf8, out.nonfinite = repairs.bad_utf8, repairs.nonfinite
        return out
    loose, data = _lenient(_decode_loose, data, repairs)  # still raises for entries that are not event objects
    out = _Events()
    out.bad_utf8, out.nonfinite = repairs.bad_utf8, repairs.nonfinite
    for e in loose:
        args = e.args
        if args is not None:
            try:
                if isinstance(args, dict) and any(k in args for k in _RAW_FIELDS):
                    args = {k: msgspec.Raw(msgspec.json.encode(v)) if k in _RAW_FIELDS else v for k, v in args.items()}
                args = msgspec.convert(args, Args) if isinstance(args, dict) else None
            except msgspec.ValidationError:
                args = None
            if args is None:
                out.bad_args += 1
        out.append(Event(ph=e.ph, cat=e.cat, name=e.name, pid=e.pid, tid=e.tid, ts=e.ts, dur=e.dur, id=e.id, args=args))
    return out


_decode_top_strict = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_decode_any_strict = msgspec.json.Decoder().decode


def _decode_top(data: bytes, repairs=None) -> dict[str, msgspec.Raw]:
    """A JSON object's keys with their raw values; raises ``msgspec.DecodeError`` if not one."""
    return _lenient(_decode_top_strict, data, repairs or _Repairs())[0]


def _decode_any(data: bytes, repairs=None) -> Any:
    return _lenient(_decode_any_strict, data, repairs or _Repairs())[0]


def decode_metadata(top: dict[str, msgspec.Raw], sink) -> dict[str, Any]:
    """Decode the top-level keys beside ``traceEvents``; a value that cannot be decoded (a number
    beyond float range, say) is left out and counted on ``sink.wrong_types``."""
    out: dict[str, Any] = {}
    for k, v in top.items():
        if k == "_":
            continue
        try:
            out[k] = _decode_any(v, sink)
        except (msgspec.DecodeError, RecursionError):
            sink.wrong_types += 1
    return out
