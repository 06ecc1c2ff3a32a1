"""The bytes a rank task sends back: its ranks' compact results as plain data, never code.

A worker (a process of the pool, or of a Dask cluster) sends each file's ``RankRead`` values, or why
the file failed, as MessagePack (msgspec), deflated. Only plain values travel: strings, numbers,
lists, maps, and numpy arrays as (dtype from ``ARRAY_DTYPES``, shape, raw bytes). Reading them back
builds the records by explicit code from those values (``RankResult`` by its declared field types,
``RankTables`` field by field), so nothing in the bytes can name a class, import a module or call a
function. Bytes that were cut, corrupted or forged give ``WireError``: one line saying what was wrong.

The free-form values (a result's metrics, rows and timeline, the job tables' ``info``) travel as
maps and lists, with two tagged kinds: a tuple, and a list of rows that share their keys (the keys
once, then each row's values: evidence tables and timeline ops repeat the same few keys thousands of
times). They arrive equal to what was sent, tuples and key order included.
"""

from __future__ import annotations

import math
import zlib
from typing import Any

import msgspec
import numpy as np

from ..analyses import RankRead, RankResult
from ..analyses.comm.instances import RankTables

try:  # ISA-L's deflate (a core dependency), zlib's where it has no wheels: the same format either way
    from isal.isal_zlib import compress as _compress
    from isal.isal_zlib import decompress as _decompress
except ImportError:
    _compress, _decompress = zlib.compress, zlib.decompress

PACK_LEVEL = 1  # the fastest level: a rank's results pack in a few ms, to about a third
VERSION = 1
EXT_ARRAY, EXT_SCALAR, EXT_TUPLE, EXT_ROWS = 1, 2, 3, 4
FREE_FIELDS = {
    "metrics": dict,
    "per_step": list,
    "per_device": list,
    "evidence": dict,
    "timeline": dict,
}  # RankResult's
# free-form values, and their kinds
ARRAY_DTYPES = frozenset(
    np.dtype(t).str
    for t in ("bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64")
)
MAX_DIMS = 8


class WireError(ValueError):
    """Packed bytes that do not hold a rank task's answer."""


class _Tables(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    rank: int | None
    source: str
    collectives: dict[str, Any]
    groups: list[str]
    types: list[str]
    dtypes: list[str]
    steps: dict[str, Any]
    info: dict[str, Any]


class _Read(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    result: RankResult  # its FREE_FIELDS empty: they travel in ``free``
    free: dict[str, Any]
    tables: _Tables | None
    sha256: str | None


class _Answer(msgspec.Struct, array_like=True, forbid_unknown_fields=True):
    version: int
    reads: list[_Read]
    failure: dict[str, str] | None


def _enc_hook(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return msgspec.msgpack.Ext(EXT_ARRAY, _array_bytes(value))
    if isinstance(value, np.generic) and value.dtype.str in ARRAY_DTYPES:
        return msgspec.msgpack.Ext(EXT_SCALAR, _array_bytes(np.asarray(value)))
    raise TypeError(f"{type(value).__name__} values are not sent between processes")


def _array_bytes(a: np.ndarray) -> bytes:
    dtype = a.dtype.newbyteorder("<") if a.dtype.byteorder == ">" else a.dtype
    if dtype.str not in ARRAY_DTYPES:
        raise TypeError(f"arrays of dtype {a.dtype} are not sent between processes")
    data = np.asarray(a, dtype=dtype, order="C")  # (ascontiguousarray would make a scalar 1-d)
    return _ENCODER.encode((dtype.str, list(data.shape), data.tobytes()))


def _tagged(value: Any) -> Any:
    """``value`` with its tuples, and its lists of rows that share their keys, as tagged values."""
    kind = type(value)
    if kind is list and value and isinstance(value[0], msgspec.Struct):  # typed evidence rows: as plain rows
        value = [msgspec.structs.asdict(r) if isinstance(r, msgspec.Struct) else r for r in value]
    if kind is list:
        first = value[0] if len(value) > 1 else None
        if type(first) is dict:
            keys = tuple(first)
            if all(type(r) is dict and tuple(r) == keys for r in value):
                return msgspec.msgpack.Ext(
                    EXT_ROWS, _ENCODER.encode([keys, [_column([r[k] for r in value]) for k in keys]])
                )
        return [_tagged(v) for v in value]
    if kind is dict:
        return {k: _tagged(v) for k, v in value.items()}
    if kind is tuple:
        return msgspec.msgpack.Ext(EXT_TUPLE, _ENCODER.encode([_tagged(v) for v in value]))
    return value


def _column(values: list) -> tuple:
    """A column of rows: its strings once each and an index per row where all are strings (names repeat)."""
    if all(type(v) is str for v in values):
        index: dict[str, int] = {}
        codes = [index.setdefault(v, len(index)) for v in values]
        return (list(index), codes)
    return (None, [_tagged(v) for v in values])


def _ext_hook(code: int, data: memoryview) -> Any:
    if code == EXT_TUPLE:
        return tuple(msgspec.msgpack.decode(data, type=list, ext_hook=_ext_hook))
    if code == EXT_ROWS:
        keys, columns = msgspec.msgpack.decode(
            data, type=tuple[list[str], list[tuple[list[str] | None, list]]], ext_hook=_ext_hook
        )
        if len(columns) != len(keys) or len({len(c[1]) for c in columns}) > 1:
            raise WireError(f"rows of {len(keys)} keys whose columns differ in number or length")
        return [dict(zip(keys, r)) for r in zip(*(_values(*c) for c in columns))]
    if code not in (EXT_ARRAY, EXT_SCALAR):
        raise WireError(f"an unknown value kind {code}")
    dtype, shape, raw = msgspec.msgpack.decode(data, type=tuple[str, list[int], bytes])
    if dtype not in ARRAY_DTYPES:
        raise WireError(f"an array of dtype {dtype!r}, not one of the plain numeric dtypes")
    if len(shape) > MAX_DIMS or any(n < 0 for n in shape):
        raise WireError(f"an array of shape {shape}")
    dt = np.dtype(dtype)
    if math.prod(shape) * dt.itemsize != len(raw):
        raise WireError(f"an array of shape {shape} and dtype {dtype} in {len(raw)} bytes")
    a = np.frombuffer(bytearray(raw), dtype=dt).reshape(shape)  # its own, writable memory
    if code == EXT_SCALAR:
        if shape:
            raise WireError(f"a scalar of shape {shape}")
        return a[()]
    return a


def _values(strings: list[str] | None, values: list) -> list:
    if strings is None:
        return values
    try:
        return [strings[i] for i in values]
    except (IndexError, TypeError):
        raise WireError(f"a column of {len(strings)} strings indexed out of range") from None


_ENCODER = msgspec.msgpack.Encoder(enc_hook=_enc_hook)
_DECODER = msgspec.msgpack.Decoder(_Answer, ext_hook=_ext_hook)


def pack(reads: list[RankRead], failure: dict | None) -> bytes:
    """A rank task's answer (its file's reads, or why the file failed) as deflated plain data."""
    wire = _Answer(
        VERSION,
        [
            _Read(
                msgspec.structs.replace(r.result, **{f: kind() for f, kind in FREE_FIELDS.items()}),
                {f: _tagged(getattr(r.result, f)) for f in FREE_FIELDS},
                None if r.tables is None else _wire_tables(r.tables),
                r.sha256,
            )
            for r in reads
        ],
        failure,
    )
    return _compress(_ENCODER.encode(wire), PACK_LEVEL)


def _wire_tables(t: RankTables) -> _Tables:
    return _Tables(t.rank, t.source, t.collectives, t.groups, t.types, t.dtypes, t.steps, _tagged(t.info))


def unpack(blob: bytes) -> tuple[list[RankRead], dict | None]:
    """``pack``'s reads and failure back; ``WireError`` (one line) for bytes that are not such an answer."""
    try:
        raw = _decompress(blob)
    except Exception as exc:  # noqa: BLE001 (zlib.error, or ISA-L's IsalError: any failure is bad bytes)
        raise WireError(f"not deflated data ({exc})") from None
    try:
        answer = _DECODER.decode(raw)
    except WireError:
        raise
    except (msgspec.DecodeError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise WireError(
            f"not a rank task's answer ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})"
        ) from None
    if answer.version != VERSION:
        raise WireError(f"an answer of version {answer.version}, this reader reads version {VERSION}")
    return [
        RankRead(_rank_result(r), None if r.tables is None else _rank_tables(r.tables), r.sha256, None)
        for r in answer.reads
    ], answer.failure


def _rank_result(w: _Read) -> RankResult:
    free = w.free
    if sorted(free) != sorted(FREE_FIELDS):
        raise WireError(f"a rank result with free-form values {sorted(free)}, not {sorted(FREE_FIELDS)}")
    for name, kind in FREE_FIELDS.items():
        if type(free[name]) is not kind:
            raise WireError(f"a rank result whose {name} is a {type(free[name]).__name__}, not a {kind.__name__}")
    bad = [k for k, rows in free["evidence"].items() if type(rows) is not list]
    if bad:
        raise WireError(f"a rank result whose evidence table {bad[0]!r} is not a list of rows")
    result = msgspec.structs.replace(w.result, **free)
    try:
        result.type_rows()  # evidence rows travel as plain rows; they are read back as their row types
    except (msgspec.ValidationError, TypeError) as exc:
        raise WireError(f"a rank result with an evidence row that does not fit its type ({exc})") from None
    return result


def _rank_tables(w: _Tables) -> RankTables:
    for name, cols in (("collectives", w.collectives), ("steps", w.steps)):
        bad = [k for k, v in cols.items() if not isinstance(v, np.ndarray) or v.ndim != 1]
        if bad:
            raise WireError(f"the job tables' {name} column {bad[0]!r} is not a one-dimensional array")
    return RankTables(
        rank=w.rank,
        source=w.source,
        collectives=w.collectives,
        groups=w.groups,
        types=w.types,
        dtypes=w.dtypes,
        steps=w.steps,
        info=w.info,
    )
