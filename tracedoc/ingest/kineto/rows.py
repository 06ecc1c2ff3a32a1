"""One chunk's events as per-field columns, from either decoder: msgspec's structs (``StructRows``, the pure
path) or the compiled scan (``ScanRows``, ``_kscan``: no Python object per event). The reader's handlers
(``handlers``) read both through the same methods, so they build the same tables from either.

Fields are named as the structs name them (``decode.Event``, ``decode.Args``); the ``args`` field ``name``
(a metadata event's name) is ``args_name``. ``TRACEDOC_DECODER`` chooses the decoder (README: Environment).
"""

from __future__ import annotations

import importlib.util
import operator
import os
from typing import Any

import msgspec
import numpy as np

from ...errors import UsageError
from ...model.groups import dense_codes, first_seen, isin
from ...model.numbers import BAD_NUMBER, decimal_text_to_scaled_int, to_float64, to_int64
from .argvalues import raw_triples
from .coded import _Coded
from .decode import _EMPTY_ARGS, Args, Event, _decode_events

EVENT_FIELDS = tuple(f for f in Event.__struct_fields__ if f != "args")
ARG_FIELDS = tuple("args_name" if f == "name" else f for f in Args.__struct_fields__)
FIELD_KEYS = Event.__struct_encode_fields__ + Args.__struct_encode_fields__  # the compiled scan's order
_INDEX = {f: i for i, f in enumerate(EVENT_FIELDS)} | {f: 9 + i for i, f in enumerate(ARG_FIELDS)}
SCAN_FORMAT = 5  # what the compiled scan returns (its FORMAT; 5: it runs without the GIL)
_RAW_FIELDS = {"ts", "dur", "grid", "block", "input_dims", "input_type", "concrete_inputs"}
_RAW_DEFAULT = {"ts": b"null", "dur": b"0"}
# what the compiled scan found in a field (its T_* codes)
T_ABSENT, T_NULL, T_FALSE, T_TRUE, T_INT, T_FLOAT, T_STR, T_RAW, T_RAW_TRIPLE, T_RAW_NUM, T_RAW_TEXT = range(11)
_INTS = np.array([T_ABSENT, T_NULL, T_INT], dtype=np.uint8)
_FLOATS = np.array([T_ABSENT, T_NULL, T_INT, T_FLOAT], dtype=np.uint8)
_STRS = np.array([T_ABSENT, T_NULL, T_STR], dtype=np.uint8)


def _default(field: str) -> Any:
    if field in _RAW_FIELDS:
        return _RAW_DEFAULT.get(field, b"")
    if field in _INDEX and _INDEX[field] < 9:
        return None
    return getattr(_EMPTY_ARGS, "name" if field == "args_name" else field)


_DEFAULTS = {f: _default(f) for f in _INDEX}


class StructRows:
    """Rows of decoded structs (``decode.Event``)."""

    def __init__(self, evs: list[Event]):
        self.evs = evs
        self.n = len(evs)
        self.bad_args = getattr(evs, "bad_args", 0)
        self.bad_utf8 = getattr(evs, "bad_utf8", 0)
        self.nonfinite = getattr(evs, "nonfinite", 0)
        self._args: list[Args] | None = None

    def __len__(self) -> int:
        return self.n

    def take(self, idx) -> "StructRows":
        evs = self.evs
        idx = np.asarray(idx, dtype=np.int64)
        if idx.size == 0:
            return StructRows([])
        if idx.size == 1:
            return StructRows([evs[int(idx[0])]])
        if idx.size == len(evs):
            return self
        return StructRows(list(operator.itemgetter(*idx.tolist())(evs)))

    def values(self, field: str) -> list:
        if field in EVENT_FIELDS:
            return list(map(operator.attrgetter(field), self.evs))
        if self._args is None:
            self._args = [e.args or _EMPTY_ARGS for e in self.evs]
        return list(map(operator.attrgetter("name" if field == "args_name" else field), self._args))

    def coded_phases(self) -> None:
        return None

    def times(self) -> tuple[np.ndarray, np.ndarray]:
        return (decimal_text_to_scaled_int(self.values("ts")), decimal_text_to_scaled_int(self.values("dur")))

    def time_text(self, i: int) -> tuple[bytes, bytes]:
        e = self.evs[i]
        return bytes(e.ts), bytes(e.dur)

    # -- columns (the scan overrides these with array reads where the values allow) ------------
    def int64(self, field: str) -> np.ndarray:
        return to_int64(self.values(field))

    def float64(self, field: str) -> np.ndarray:
        return to_float64(self.values(field))

    def given(self, field: str) -> np.ndarray:
        """Where the field holds a value (not null, not absent), as a bool array."""
        return np.fromiter((v is not None for v in self.values(field)), dtype=bool, count=self.n)

    def raws(self, field: str) -> list:
        return self.values(field)

    def equals(self, field: str, text: str) -> np.ndarray:
        """Where the field's value is ``text``, as a bool array."""
        return np.fromiter((v == text for v in self.values(field)), dtype=bool, count=self.n)

    def triples(self, field: str) -> np.ndarray:
        return raw_triples(self.values(field))

    def ids(self, field: str, reader) -> np.ndarray:
        return reader.ids(self.values(field))

    def names(self, field: str, reader) -> np.ndarray:
        return reader.names(self.values(field))

    def text_ids(self, field: str, reader) -> np.ndarray:
        """String ids of a raw field's JSON text (-1 where absent)."""
        return reader.names([bytes(x).decode("utf-8", "replace") if x else None for x in self.raws(field)])


class ScanRows(StructRows):
    """Rows of the compiled scan's columns (``_kscan.scan``) over ``data``, the chunk's JSON text."""

    bad_args = bad_utf8 = nonfinite = 0

    def __init__(self, data: bytes, scan: tuple, rows: np.ndarray | None = None):
        self.data, self.scan, self.rows = data, scan, rows
        total = scan[0] if len(scan) == 8 else len(scan[3])
        self.n = total if rows is None else len(rows)

    @property
    def _arrays(self):
        cache = self.scan
        if len(cache) == 8:  # first use: wrap the buffers (a field no event has: absent throughout)
            n, nf, tags, a, b, times, tri, distinct = cache
            distinct = [msgspec.json.decode(d) if type(d) is bytes else d for d in distinct]
            zeros8, zeros64 = np.zeros(n, dtype=np.uint8), np.zeros(n, dtype=np.int64)
            self.scan = cache = (
                [zeros8 if t is None else np.frombuffer(t, dtype=np.uint8) for t in tags],
                [zeros64 if x is None else np.frombuffer(x, dtype=np.int64) for x in a],
                [zeros64 if x is None else np.frombuffer(x, dtype=np.int64) for x in b],
                np.frombuffer(times, dtype=np.int64).reshape(n, 2),
                np.zeros((n, 6), dtype=np.int64) if tri is None else np.frombuffer(tri, dtype=np.int64).reshape(n, 6),
                distinct,
            )
        return cache

    def take(self, idx) -> "ScanRows":
        idx = np.asarray(idx, dtype=np.int64)
        rows = idx if self.rows is None else self.rows[idx]
        return ScanRows(self.data, self._arrays, rows)

    def _col(self, k: int, f: int) -> np.ndarray:
        """Column ``f`` of tags (k 0), a (1), b (2); of the times (k 3: ts 0, dur 1)."""
        arr = self._arrays[k]
        if k == 3:
            return arr[:, f] if self.rows is None else arr[self.rows, f]
        return arr[f] if self.rows is None else arr[f][self.rows]

    def _tags(self, field: str) -> np.ndarray:
        return self._col(0, _INDEX[field])

    def values(self, field: str) -> list:
        f = _INDEX[field]
        tags, a, b = self._col(0, f).tolist(), self._col(1, f).tolist(), self._col(2, f).tolist()
        floats = self._col(1, f).view(np.float64).tolist()
        default, distinct, data = _DEFAULTS[field], self._arrays[5], self.data
        raw = field in _RAW_FIELDS
        consts = {T_NULL: None, T_FALSE: False, T_TRUE: True}
        out = []
        for t, x, y, d in zip(tags, a, b, floats):
            if t == T_ABSENT:
                out.append(default)
            elif t == T_INT:
                out.append(x)
            elif t == T_STR:
                out.append(distinct[x])
            elif t == T_FLOAT:
                out.append(d)
            elif t == T_RAW_TEXT:
                out.append(distinct[x].encode())
            elif t >= T_RAW:
                out.append(data[x:y] if raw else msgspec.json.decode(data[x:y]))
            else:
                out.append(consts[t])
        return out

    def coded_phases(self) -> tuple[_Coded, _Coded] | None:
        """Phases and categories coded, when both are strings (or absent) in every event."""
        out = []
        for field in ("ph", "cat"):
            tags = self._tags(field)
            if not isin(tags, _STRS).all():
                return None
            distinct = self._arrays[5]
            codes = np.where(tags == T_STR, self._col(1, _INDEX[field]), len(distinct))
            uniq, inverse = dense_codes(codes)
            values = [distinct[k] if k < len(distinct) else None for k in uniq.tolist()]
            out.append(_Coded(inverse.astype(np.int32), values))
        return out[0], out[1]

    def times(self) -> tuple[np.ndarray, np.ndarray]:
        out = []
        for k, field in enumerate(("ts", "dur")):
            tags = self._tags(field)
            if (tags == T_RAW_NUM).all():
                out.append(self._col(3, k).copy())
            elif isin(tags, (T_RAW_NUM, T_ABSENT)).all():
                out.append(np.where(tags == T_RAW_NUM, self._col(3, k), BAD_NUMBER if k == 0 else 0))
            else:
                out.append(decimal_text_to_scaled_int(self.values(field)))
        return out[0], out[1]

    def time_text(self, i: int) -> tuple[bytes, bytes]:
        return self.take([i]).values("ts")[0], self.take([i]).values("dur")[0]

    def int64(self, field: str) -> np.ndarray:
        tags = self._tags(field)
        if _DEFAULTS[field] in (None, -1) and isin(tags, _INTS).all():  # absent and null: -1, as to_int64 reads them
            return np.where(tags == T_INT, self._col(1, _INDEX[field]), -1)
        return to_int64(self.values(field))

    def float64(self, field: str) -> np.ndarray:
        tags = self._tags(field)
        if _DEFAULTS[field] is None and isin(tags, _FLOATS).all():
            a = self._col(1, _INDEX[field])
            return np.where(tags == T_FLOAT, a.view(np.float64), np.where(tags == T_INT, a.astype(np.float64), np.nan))
        return to_float64(self.values(field))

    def given(self, field: str) -> np.ndarray:
        if _DEFAULTS[field] is None:
            return ~isin(self._tags(field), (T_ABSENT, T_NULL))
        return super().given(field)

    def raws(self, field: str) -> list:
        return self.values(field)

    def equals(self, field: str, text: str) -> np.ndarray:
        tags = self._tags(field)
        distinct = self._arrays[5]
        codes = [k for k, v in enumerate(distinct) if v == text]
        return (tags == T_STR) & isin(self._col(1, _INDEX[field]), codes) if codes else np.zeros(self.n, dtype=bool)

    def raw_lengths(self, field: str) -> np.ndarray:
        f = _INDEX[field]
        tags, a, b = self._col(0, f), self._col(1, f), self._col(2, f)
        return np.where(tags == T_ABSENT, len(_DEFAULTS[field]), np.where(tags == T_RAW_TEXT, b, b - a))

    def triples(self, field: str) -> np.ndarray:
        tags = self._tags(field)
        if isin(tags, (T_RAW_TRIPLE, T_ABSENT)).all():
            k = 0 if field == "grid" else 3
            tri = self._arrays[4]
            tri = tri[:, k : k + 3] if self.rows is None else tri[self.rows, k : k + 3]
            return np.where((tags == T_RAW_TRIPLE)[:, None], tri, -1)
        return raw_triples(self.values(field))

    def ids(self, field: str, reader) -> np.ndarray:
        tags = self._tags(field)
        if (tags == T_INT).all():  # as reader.ids reads a list of ints: the ints
            return self._col(1, _INDEX[field]).copy()
        return reader.ids(self.values(field))

    def names(self, field: str, reader) -> np.ndarray:
        tags = self._tags(field)
        if _DEFAULTS[field] is not None or not isin(tags, _STRS).all():
            return reader.names(self.values(field))
        return self._interned(np.where(tags == T_STR, self._col(1, _INDEX[field]), -1), reader)

    def text_ids(self, field: str, reader) -> np.ndarray:
        tags = self._tags(field)
        if not isin(tags, (T_ABSENT, T_RAW_TEXT)).all():
            return super().text_ids(field, reader)
        return self._interned(np.where(tags == T_RAW_TEXT, self._col(1, _INDEX[field]), -1), reader)

    def _interned(self, codes: np.ndarray, reader) -> np.ndarray:
        """String ids of codes into the distinct strings (-1: none), interned in order of first appearance
        as ``StringTable.intern_many`` interns a list of the strings."""
        present = codes >= 0
        if not present.any():
            return np.full(self.n, -1, dtype=np.int32)
        distinct = self._arrays[5]
        uniq, first = first_seen(codes[present], len(distinct))
        order = uniq[np.argsort(first, kind="stable")]
        lut = np.full(len(distinct) + 1, -1, dtype=np.int32)
        lut[order] = reader.strings.intern_many([distinct[k] for k in order.tolist()])
        return lut[codes]


def raw_lengths(rows: StructRows, field: str) -> np.ndarray:
    """Bytes of each row's raw JSON text of ``field`` (0 where absent)."""
    if isinstance(rows, ScanRows):
        return rows.raw_lengths(field)
    return np.fromiter(map(len, rows.values(field)), dtype=np.int64, count=rows.n)


# -- choosing the decoder ----------------------------------------------------------------------------
_scan = None


def _load_scan():
    """``_kscan.scan`` per ``TRACEDOC_DECODER`` (auto: when built; compiled: required; python: never)."""
    global _scan
    choice = os.environ.get("TRACEDOC_DECODER", "auto").strip().lower() or "auto"
    if choice not in ("auto", "compiled", "python"):
        raise UsageError(
            "TRACEDOC_DECODER",
            f"{choice[:20]!r} is not a decoder",
            None,
            "set it to auto (the default), compiled or python",
        )
    if choice == "python":
        return None
    if _scan is None:
        # not built (no C compiler at install): absent. Once found it is imported unguarded, so that a
        # module that is there but broken fails loudly rather than passing for absent.
        if importlib.util.find_spec(f"{__package__}._kscan") is None:
            _scan = False
        else:
            _kscan = importlib.import_module(f"{__package__}._kscan")  # a C extension: a leaf, imports nothing

            if tuple(_kscan.FIELD_KEYS) != FIELD_KEYS or getattr(_kscan, "FORMAT", None) != SCAN_FORMAT:
                # built from another version of the source (an editable install not rebuilt since)
                _scan = False
            else:
                _scan = _kscan.scan
    if _scan is False and choice == "compiled":
        raise UsageError(
            "TRACEDOC_DECODER",
            "is 'compiled' but the compiled decoder is not built (or was built from older source)",
            None,
            "reinstall with a C compiler present (pip install -e .), or set it to auto or python",
        )
    return _scan or None


def decode_chunk(data: bytes) -> StructRows:
    """A JSON array of events as rows: scanned by the compiled decoder when it takes the chunk, else
    decoded by msgspec (which raises ``msgspec.DecodeError`` for text that is not an array of events)."""
    scan = _load_scan()
    if scan is not None:
        res = scan(data)
        if res is not None:
            return ScanRows(data, res)
    return StructRows(_decode_events(data))


def decode_piece(buf: bytes, end: int) -> StructRows:
    """``decode_chunk(b"[" + buf[:end] + b"]")``, without copying the bytes where the compiled decoder
    takes them."""
    scan = _load_scan()
    if scan is not None:
        res = scan(buf, end)
        if res is not None:
            return ScanRows(buf, res)
    return StructRows(_decode_events(b"[" + buf[:end] + b"]"))
