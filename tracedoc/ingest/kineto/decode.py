"""Decoding Kineto events with msgspec into small typed structs (only the fields tracedoc reads).

Fields a reader never uses are skipped by the decoder and never materialised as Python dicts.
"""

from __future__ import annotations

from typing import Any, Optional

import msgspec

_NULL = msgspec.Raw(b"0")
_NO_RAW = msgspec.Raw(b"")


class Args(msgspec.Struct, frozen=True):
    """The ``args`` fields tracedoc reads. Types vary across generations, so values are untyped."""

    external_id: Any = msgspec.field(default=None, name="External id")
    external_id_legacy: Any = msgspec.field(default=None, name="external id")
    correlation: Any = None
    device: Any = None
    stream: Any = None
    grid: Any = None
    block: Any = None
    registers: Any = msgspec.field(default=None, name="registers per thread")
    shared_memory: Any = msgspec.field(default=None, name="shared memory")
    blocks_per_sm: Any = msgspec.field(default=None, name="blocks per SM")
    warps_per_sm: Any = msgspec.field(default=None, name="warps per SM")
    occupancy: Any = msgspec.field(default=None, name="est. achieved occupancy %")
    bytes: Any = None
    cbid: Any = None
    call_stack: Any = msgspec.field(default=None, name="Call stack")
    graph_id: Any = msgspec.field(default=None, name="graph id")
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
_RAW_FIELDS = ("Input Dims", "Input type", "Concrete Inputs")


class Event(msgspec.Struct):
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = _NULL
    dur: msgspec.Raw = _NULL
    id: Any = None
    args: Optional[Args] = None


class _LooseEvent(Event):
    """The same event with ``args`` of any JSON type (the tolerant second try)."""

    args: Any = None


class _Events(list):
    """Decoded events, with how many had an ``args`` value that had to be dropped."""

    bad_args = 0


_decode_strict = msgspec.json.Decoder(list[Event]).decode
_decode_loose = msgspec.json.Decoder(list[_LooseEvent]).decode


def _decode_events(data: bytes) -> list[Event]:
    """Decode a JSON array of events; raise ``msgspec.DecodeError`` if it is not one.

    Events whose ``args`` is not an object (or holds a field of an impossible shape) keep their
    other fields and lose their args; the count is reported as a warning.
    """
    try:
        return _decode_strict(data)
    except msgspec.ValidationError:
        loose = _decode_loose(data)  # still raises for entries that are not event objects
    out = _Events()
    for e in loose:
        args = e.args
        if args is not None:
            try:
                if isinstance(args, dict) and any(k in args for k in _RAW_FIELDS):
                    args = {k: msgspec.Raw(msgspec.json.encode(v)) if k in _RAW_FIELDS else v
                            for k, v in args.items()}
                args = msgspec.convert(args, Args) if isinstance(args, dict) else None
            except msgspec.ValidationError:
                args = None
            if args is None:
                out.bad_args += 1
        out.append(Event(ph=e.ph, cat=e.cat, name=e.name, pid=e.pid, tid=e.tid, ts=e.ts, dur=e.dur, id=e.id,
                         args=args))
    return out
_decode_top = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_decode_any = msgspec.json.Decoder().decode
