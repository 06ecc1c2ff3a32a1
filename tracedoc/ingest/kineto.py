"""Reader for torch.profiler / Kineto Chrome trace JSON, every generation.

The file is streamed in chunks. Each chunk is cut at an event boundary and decoded with msgspec
into small typed structs that hold only the fields tracedoc uses (everything else is skipped by the
decoder, never materialised as a Python dict); the structs of a chunk become numpy columns and are
dropped before the next chunk is read. Peak memory is therefore the columns plus one chunk.

A cut is accepted only if the piece before it decodes as a JSON array: a cut inside a string or a
nested value leaves the piece unbalanced, so a wrong cut can never go unnoticed.
"""

from __future__ import annotations

import hashlib
import operator
import os
import re
import zlib
from typing import Any, Callable, Optional

import msgspec
import numpy as np

from ..errors import TraceError
from ..model import trace as M
from ..model.numbers import decimal_text_to_scaled_int, to_float64, to_int64
from ..model.trace import StringTable, Table, Trace

CHUNK_BYTES = 16 * 1024 * 1024
_HEAD_LIMIT = 64 * 1024 * 1024

_NULL = msgspec.Raw(b"0")


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
    # cuda_sync
    wait_on_stream: Any = None
    # M events
    name: Any = None
    labels: Any = None


_EMPTY_ARGS = Args()


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

# Event classes
C_IGNORE, C_GPU, C_CPU, C_RUNTIME, C_GPU_ANNOT, C_SYNC, C_FLOW, C_INSTANT, C_META, C_OTHER = range(10)

_GPU_CATS = {"kernel": M.KERNEL, "Kernel": M.KERNEL, "gpu_memcpy": M.MEMCPY, "Memcpy": M.MEMCPY,
             "gpu_memset": M.MEMSET, "Memset": M.MEMSET}
_CPU_CATS = {"cpu_op": M.CPU_OP, "Operator": M.CPU_OP, "user_annotation": M.USER_ANNOTATION,
             "python_function": M.PYTHON_FUNCTION}
_RUNTIME_CATS = {"cuda_runtime": M.RUNTIME, "Runtime": M.RUNTIME, "cuda_driver": M.DRIVER}


def _classify(ph: Any, cat: Any) -> int:
    if ph == "X":
        if cat in _GPU_CATS:
            return C_GPU
        if cat in _CPU_CATS:
            return C_CPU
        if cat in _RUNTIME_CATS or (isinstance(cat, str) and cat.endswith("_runtime")):
            return C_RUNTIME
        if cat == "gpu_user_annotation":
            return C_GPU_ANNOT
        if cat == "cuda_sync":
            return C_SYNC
        return C_OTHER
    if ph in ("s", "f", "t"):
        return C_FLOW
    if ph in ("i", "I"):
        return C_INSTANT
    if ph == "M":
        return C_META
    return C_IGNORE


def _runtime_kind(cat: Any) -> int:
    return _RUNTIME_CATS.get(cat, M.RUNTIME_OTHER)


_STREAM_RE = re.compile(r"^\s*stream\s+(\d+)", re.I)
LABEL_ID_BASE = -(1 << 40)
_STRING_COLS = {"name", "stack", "cat", "collective", "dtype", "pg_name"}


class _Reader:
    """Accumulates one file's columns chunk by chunk."""

    def __init__(self, source: str):
        self.source = source
        self.strings = StringTable()
        self.parts: dict[str, list[Table]] = {name: [] for name in M.SCHEMAS}
        self.meta_events: list[tuple] = []
        self.n_events = 0
        self.bad_args = 0
        self.ignored_phases: dict[str, int] = {}
        self._id_cache: dict[Any, int] = {}

    # -- helpers -------------------------------------------------------------------------------
    def ids(self, values: list) -> np.ndarray:
        """pid/tid values (ints, digit strings, ``"stream 7"``, labels) to int64.

        Non-numeric labels get ids ``LABEL_ID_BASE - string id``, far below any real (possibly
        negative) process or thread id.
        """
        try:
            return np.array(values, dtype=np.int64)
        except (TypeError, ValueError, OverflowError):
            pass
        cache = self._id_cache
        out = np.empty(len(values), dtype=np.int64)
        for i, v in enumerate(values):
            r = cache.get(v)
            if r is None:
                r = self._id_of(v)
                cache[v] = r
            out[i] = r
        return out

    def _id_of(self, v: Any) -> int:
        if isinstance(v, bool) or v is None:
            return -1
        if isinstance(v, (int, float)):
            return int(v)
        s = str(v)
        if s.strip().lstrip("-").isdigit():
            return int(s)
        m = _STREAM_RE.match(s)
        if m:
            return int(m.group(1))
        return LABEL_ID_BASE - self.strings.intern(s)

    def names(self, values: list) -> np.ndarray:
        return self.strings.intern_many(values)

    # -- chunk results from worker processes ---------------------------------------------------
    def export(self) -> dict:
        return {"parts": self.parts, "strings": self.strings.strings, "meta_events": self.meta_events,
                "n_events": self.n_events, "bad_args": self.bad_args, "ignored": self.ignored_phases}

    def merge(self, chunk: dict) -> None:
        """Append another reader's columns, remapping its string ids into ours."""
        lut = np.array([self.strings.intern(x) for x in chunk["strings"]] + [-1], dtype=np.int64)
        offsets = {name: sum(len(t) for t in self.parts[name]) for name in ("gpu_ops", "cpu_ops")}
        for name, parts in chunk["parts"].items():
            for t in parts:
                for col in t.columns:
                    if col in _STRING_COLS:
                        t[col] = lut[t[col]]
                    elif col in ("pid", "tid") and (t[col] <= LABEL_ID_BASE).any():
                        v = t[col].copy()
                        label = v <= LABEL_ID_BASE
                        v[label] = LABEL_ID_BASE - lut[LABEL_ID_BASE - v[label]]
                        t[col] = v
                if name == "collectives":
                    src = t["source"]
                    t["row"] = t["row"] + np.where(src == M.COLLECTIVE_FROM_KERNEL, offsets["gpu_ops"],
                                                   offsets["cpu_ops"])
                self.parts[name].append(t)
        self.meta_events.extend(chunk["meta_events"])
        self.n_events += chunk["n_events"]
        self.bad_args += chunk["bad_args"]
        for k, v in chunk["ignored"].items():
            self.ignored_phases[k] = self.ignored_phases.get(k, 0) + v

    # -- per chunk -----------------------------------------------------------------------------
    def add(self, evs: list[Event]) -> None:
        n = len(evs)
        if n == 0:
            return
        self.n_events += n
        self.bad_args += getattr(evs, "bad_args", 0)
        ph = [e.ph for e in evs]
        cat = [e.cat for e in evs]
        cls = np.fromiter(map(_classify, ph, cat), dtype=np.int8, count=n)
        ts = decimal_text_to_scaled_int([e.ts for e in evs])
        ts_min = np.iinfo(np.int64).min
        ts[ts == ts_min] = 0
        by_class = {c: np.flatnonzero(cls == c) for c in np.unique(cls).tolist()}
        for c, idx in by_class.items():
            if c == C_IGNORE:
                for p in (ph[i] for i in idx.tolist()):
                    self.ignored_phases[str(p)] = self.ignored_phases.get(str(p), 0) + 1
                continue
            sub = _take(evs, idx)
            handler = self._handlers[c]
            handler(self, sub, ts[idx], [cat[i] for i in idx.tolist()] if c in (C_GPU, C_CPU, C_RUNTIME, C_OTHER, C_FLOW) else None)

    def _durations(self, sub: list[Event]) -> np.ndarray:
        dur = decimal_text_to_scaled_int([e.dur for e in sub])
        return np.maximum(dur, 0)

    def _gpu(self, sub, ts, cats):
        args = [e.args or _EMPTY_ARGS for e in sub]
        n = len(sub)
        end = ts + self._durations(sub)
        pid = self.ids([e.pid for e in sub])
        tid = self.ids([e.tid for e in sub])
        device = to_int64([a.device for a in args])
        stream = to_int64([a.stream for a in args])
        device = np.where(device == -1, pid, device)
        stream = np.where(stream == -1, tid, stream)
        ext = _external_ids(args)
        grid = _triples([a.grid for a in args])
        block = _triples([a.block for a in args])
        kind = np.fromiter((_GPU_CATS[c] for c in cats), dtype=np.uint8, count=n)
        self.parts["gpu_ops"].append(Table("gpu_ops", {
            "kind": kind, "device": device, "stream": stream, "start_ns": ts, "end_ns": end,
            "name": self.names([e.name for e in sub]),
            "correlation": to_int64([a.correlation for a in args]), "external_id": ext,
            "pid": np.full(n, -1), "grid_x": grid[:, 0], "grid_y": grid[:, 1], "grid_z": grid[:, 2],
            "block_x": block[:, 0], "block_y": block[:, 1], "block_z": block[:, 2],
            "registers": to_int64([a.registers for a in args]),
            "shared_mem": to_int64([a.shared_memory for a in args]),
            "blocks_per_sm": to_float64([a.blocks_per_sm for a in args]),
            "warps_per_sm": to_float64([a.warps_per_sm for a in args]),
            "est_occupancy": to_float64([a.occupancy for a in args]),
            "bytes": to_int64([a.bytes for a in args]),
            "copy_kind": np.zeros(n), "src_kind": np.full(n, -1), "dst_kind": np.full(n, -1),
            "graph_id": to_int64([a.graph_id for a in args]), "launch": np.full(n, -1),
        }))
        has_coll = [i for i, a in enumerate(args) if a.collective is not None]
        if has_coll:
            base = sum(len(t) for t in self.parts["gpu_ops"][:-1])
            self._collectives(M.COLLECTIVE_FROM_KERNEL, [args[i] for i in has_coll],
                              np.asarray(has_coll) + base, ext[has_coll])

    def _cpu(self, sub, ts, cats):
        args = [e.args or _EMPTY_ARGS for e in sub]
        n = len(sub)
        ext = _external_ids(args)
        stacks = [a.call_stack for a in args]
        self.parts["cpu_ops"].append(Table("cpu_ops", {
            "kind": np.fromiter((_CPU_CATS[c] for c in cats), dtype=np.uint8, count=n),
            "pid": self.ids([e.pid for e in sub]), "tid": self.ids([e.tid for e in sub]),
            "name": self.names([e.name for e in sub]), "start_ns": ts,
            "end_ns": ts + self._durations(sub), "external_id": ext, "depth": np.zeros(n),
            "stack": self.names(stacks) if any(s is not None for s in stacks) else np.full(n, -1),
        }))
        has_coll = [i for i, a in enumerate(args) if a.collective is not None]
        if has_coll:
            base = sum(len(t) for t in self.parts["cpu_ops"][:-1])
            self._collectives(M.COLLECTIVE_FROM_CPU_OP, [args[i] for i in has_coll],
                              np.asarray(has_coll) + base, ext[has_coll])

    def _collectives(self, source, args, rows, ext):
        self.parts["collectives"].append(Table("collectives", {
            "source": np.full(len(args), source), "row": rows, "external_id": ext,
            "collective": self.names([str(a.collective) for a in args]),
            "in_nelems": to_int64([a.in_nelems for a in args]),
            "out_nelems": to_int64([a.out_nelems for a in args]),
            "group_size": to_int64([a.group_size for a in args]),
            "dtype": self.names([None if a.dtype is None else str(a.dtype) for a in args]),
            "pg_name": self.names([None if a.pg_name is None else str(a.pg_name) for a in args]),
        }))

    def _runtime(self, sub, ts, cats):
        args = [e.args or _EMPTY_ARGS for e in sub]
        self.parts["runtime"].append(Table("runtime", {
            "kind": np.fromiter(map(_runtime_kind, cats), dtype=np.uint8, count=len(sub)),
            "pid": self.ids([e.pid for e in sub]), "tid": self.ids([e.tid for e in sub]),
            "name": self.names([e.name for e in sub]), "start_ns": ts,
            "end_ns": ts + self._durations(sub),
            "correlation": to_int64([a.correlation for a in args]),
            "external_id": _external_ids(args), "cbid": to_int64([a.cbid for a in args]),
        }))

    def _device_stream(self, sub, args):
        device = to_int64([a.device for a in args])
        stream = to_int64([a.stream for a in args])
        device = np.where(device == -1, self.ids([e.pid for e in sub]), device)
        stream = np.where(stream == -1, self.ids([e.tid for e in sub]), stream)
        return device, stream

    def _gpu_annot(self, sub, ts, cats):
        args = [e.args or _EMPTY_ARGS for e in sub]
        device, stream = self._device_stream(sub, args)
        self.parts["gpu_annotations"].append(Table("gpu_annotations", {
            "device": device, "stream": stream, "name": self.names([e.name for e in sub]),
            "start_ns": ts, "end_ns": ts + self._durations(sub), "external_id": _external_ids(args),
        }))

    def _sync(self, sub, ts, cats):
        args = [e.args or _EMPTY_ARGS for e in sub]
        device, stream = self._device_stream(sub, args)
        self.parts["syncs"].append(Table("syncs", {
            "device": device, "stream": stream, "name": self.names([e.name for e in sub]),
            "start_ns": ts, "end_ns": ts + self._durations(sub),
            "correlation": to_int64([a.correlation for a in args]),
            "wait_on_stream": to_int64([a.wait_on_stream for a in args]),
        }))

    def _flow(self, sub, ts, cats):
        phase = {"s": M.FLOW_START, "t": M.FLOW_STEP, "f": M.FLOW_END}
        self.parts["flows"].append(Table("flows", {
            "id": to_int64([e.id for e in sub]),
            "phase": np.fromiter((phase[e.ph] for e in sub), dtype=np.uint8, count=len(sub)),
            "cat": self.names([None if c is None else str(c) for c in cats]),
            "pid": self.ids([e.pid for e in sub]), "tid": self.ids([e.tid for e in sub]), "ts_ns": ts,
        }))

    def _instant(self, sub, ts, cats):
        keep = [i for i, e in enumerate(sub) if e.name == "[memory]"]
        if not keep:
            return
        sub = [sub[i] for i in keep]
        ts = ts[keep]
        args = [e.args or _EMPTY_ARGS for e in sub]
        self.parts["memory"].append(Table("memory", {
            "ts_ns": ts, "device_type": to_int64([a.device_type for a in args]),
            "device_id": to_int64([a.device_id for a in args]),
            "bytes": to_int64([a.mem_bytes for a in args]),
            "total_allocated": to_int64([a.total_allocated for a in args]),
            "total_reserved": to_int64([a.total_reserved for a in args]),
            "addr": to_int64([a.addr for a in args]),
            "pid": self.ids([e.pid for e in sub]), "tid": self.ids([e.tid for e in sub]),
        }))

    def _meta(self, sub, ts, cats):
        for e in sub:
            a = e.args or _EMPTY_ARGS
            self.meta_events.append((e.name, e.pid, e.tid, a.name, a.labels))

    def _other(self, sub, ts, cats):
        self.parts["other_spans"].append(Table("other_spans", {
            "cat": self.names([None if c is None else str(c) for c in cats]),
            "name": self.names([None if e.name is None else str(e.name) for e in sub]),
            "pid": self.ids([e.pid for e in sub]), "tid": self.ids([e.tid for e in sub]),
            "start_ns": ts, "end_ns": ts + self._durations(sub),
        }))

    _handlers: dict[int, Callable] = {
        C_GPU: _gpu, C_CPU: _cpu, C_RUNTIME: _runtime, C_GPU_ANNOT: _gpu_annot, C_SYNC: _sync,
        C_FLOW: _flow, C_INSTANT: _instant, C_META: _meta, C_OTHER: _other,
    }


def _take(evs: list, idx: np.ndarray) -> list:
    if idx.size == 0:
        return []
    if idx.size == 1:
        return [evs[int(idx[0])]]
    if idx.size == len(evs):
        return evs
    return list(operator.itemgetter(*idx.tolist())(evs))


def _external_ids(args: list[Args]) -> np.ndarray:
    ext = to_int64([a.external_id for a in args])
    missing = ext == -1
    if missing.any():
        legacy = to_int64([a.external_id_legacy for a in args])
        ext = np.where(missing, legacy, ext)
    return ext


def _triples(values: list) -> np.ndarray:
    n = len(values)
    if n and all(v is None for v in values[:1]) and all(v is None for v in values):
        return np.full((n, 3), -1, dtype=np.int64)
    try:
        arr = np.array(values, dtype=np.int64)
        if arr.shape == (n, 3):
            return arr
    except (TypeError, ValueError):
        pass
    out = np.full((n, 3), -1, dtype=np.int64)
    for i, v in enumerate(values):
        if isinstance(v, (list, tuple)):
            for j, x in enumerate(v[:3]):
                try:
                    out[i, j] = int(x)
                except (TypeError, ValueError):
                    pass
    return out


# ---------------------------------------------------------------------------------------------
# Streaming
# ---------------------------------------------------------------------------------------------

_CUT_RE = re.compile(rb",\s*\{")
_EVENTS_KEY_RE = re.compile(rb'"traceEvents"\s*:\s*\[')


class _Source:
    """A byte stream over a plain or gzip file that records truncation instead of raising.

    gzip is decompressed with zlib in blocks so that a stream cut off mid-write still yields every
    byte before the cut (``gzip.GzipFile.read`` would discard the last block and raise).
    """

    _BLOCK = 1 << 20

    def __init__(self, path: str):
        self.path = path
        self.truncated_reason: str | None = None
        self.offset = 0
        self.size = os.path.getsize(path)
        try:
            self._f = open(path, "rb", buffering=0)
        except OSError as exc:
            raise TraceError(path, "cannot be opened", exc.strerror, "check the path and its permissions") from None
        self.gzipped = self._f.read(2) == b"\x1f\x8b"
        self._f.seek(0)
        self._z = zlib.decompressobj(16 + zlib.MAX_WBITS) if self.gzipped else None
        self._pending = b""
        self._eof = False
        self.forced_workers: int | None = None
        self._sha = hashlib.sha256()  # of the file's bytes on disk, computed as they stream past

    def sha256(self) -> str | None:
        """SHA-256 of the file, once every byte of it has been read (None before)."""
        if not self._eof:
            return None
        rest = self._f.read()  # whatever follows a corrupt gzip member
        self._sha.update(rest)
        return self._sha.hexdigest()

    def read(self, n: int) -> bytes:
        if not self.gzipped:
            data = self._f.read(n)
            self.offset += len(data)
            self._sha.update(data)
            if not data:
                self._eof = True
            return data
        out = [self._pending]
        have = len(self._pending)
        while have < n and not self._eof:
            block = self._f.read(self._BLOCK)
            self._sha.update(block)
            if not block:
                self._eof = True
                if not self._z.eof:
                    self.truncated_reason = ("the gzip stream ends early (the file was cut off while being "
                                             "written)")
                break
            try:
                piece = self._z.decompress(block)
                while self._z.eof and self._z.unused_data:  # concatenated gzip members
                    rest = self._z.unused_data
                    self._z = zlib.decompressobj(16 + zlib.MAX_WBITS)
                    piece += self._z.decompress(rest)
            except zlib.error as exc:
                self._eof = True
                if self.offset == 0 and have == 0:
                    raise TraceError(self.path, "is not a readable gzip file", str(exc),
                                     "re-copy the file, or check it with `gzip -t`") from None
                self.truncated_reason = f"the gzip data is corrupt after {self.offset + have:,} bytes ({exc})"
                break
            out.append(piece)
            have += len(piece)
        data = b"".join(out)
        self._pending = data[n:]
        data = data[:n]
        self.offset += len(data)
        return data

    def fraction(self) -> float:
        """How far through the file on disk we are (compressed bytes for gzip)."""
        try:
            return min(1.0, self._f.tell() / max(1, self.size))
        except (OSError, ValueError):
            return 0.0

    @property
    def closed(self) -> bool:
        return self._f.closed

    def close(self) -> None:
        self._f.close()


def read_kineto(path: str, chunk_bytes: int = CHUNK_BYTES, progress: Callable[[float], None] | None = None,
                workers: int | None = None) -> Trace:
    """Read one Kineto Chrome-trace JSON file (plain or gzip) into a ``Trace``.

    Files larger than a few chunks are decoded by ``workers`` processes (default: CPU count, at
    most 4); ``workers=1`` decodes in this process.
    """
    src = _Source(path)
    src.forced_workers = workers
    try:
        trace = _read(src, chunk_bytes, progress)
        if trace.meta.get("sha256") is None and not src.closed:
            trace.meta["sha256"] = src.sha256()
        return trace
    finally:
        src.close()


def _read(src: _Source, chunk_bytes: int, progress) -> Trace:
    path = src.path
    reader = _Reader(path)
    buf = src.read(min(chunk_bytes, _HEAD_LIMIT))
    while buf.isspace() if buf else False:
        more = src.read(chunk_bytes)
        if not more:
            break
        buf += more
    stripped = buf.lstrip()
    if not stripped:
        if src.truncated_reason:
            raise TraceError(path, "holds no data before its gzip stream breaks off", None,
                             "the profiler was probably killed before writing; capture the trace again")
        raise TraceError(path, "is empty", "0 bytes of JSON", "capture the trace again")
    first = stripped[:1]
    if first not in (b"{", b"["):
        raise TraceError(path, "is not JSON", repr(stripped[:40].decode("utf-8", "replace")),
                         "pass a torch.profiler trace (.json / .json.gz) or an nsys SQLite export")
    head_meta: dict[str, Any] = {}
    bare_array = first == b"["
    if bare_array:
        start = buf.index(b"[") + 1
    else:
        m = _EVENTS_KEY_RE.search(buf)
        while m is None and len(buf) < _HEAD_LIMIT and not src.truncated_reason:
            more = src.read(chunk_bytes)
            if not more:
                break
            buf += more
            m = _EVENTS_KEY_RE.search(buf)
        if m is None:
            return _read_whole(path, buf + _drain(src, chunk_bytes), src, reader)
        try:
            head_meta = {k: _decode_any(v) for k, v in _decode_top(buf[: m.start()] + b'"_": null}').items()
                         if k != "_"}
        except msgspec.DecodeError:
            return _read_whole(path, buf + _drain(src, chunk_bytes), src, reader)
        start = m.end()
    rest = buf[start:]
    workers = _worker_count(src, chunk_bytes)
    if workers > 1:
        done = _read_parallel(src, rest, chunk_bytes, reader, workers, progress)
        if done is None:  # a cut the workers could not decode: start over, verifying every cut
            src.close()
            return read_kineto(path, chunk_bytes, progress, workers=1)
        rest = done
    else:
        rest = _read_sequential(src, rest, chunk_bytes, reader, progress)
    tail_meta, trunc = _decode_tail(rest, bare_array, reader, path)
    if src.truncated_reason and not trunc:
        trunc = src.truncated_reason
    meta = {**head_meta, **tail_meta}
    return _finish(reader, meta, path, trunc)


def _worker_count(src: _Source, chunk_bytes: int) -> int:
    if src.forced_workers is not None:
        return src.forced_workers
    if src.size < (4 if not src.gzipped else 1) * chunk_bytes:
        return 1
    return max(1, min(4, os.cpu_count() or 1))


def _fill(src: _Source, rest: bytes, chunk_bytes: int, progress) -> tuple[bytes, bool]:
    """Read until ``rest`` holds a chunk; report whether the file is exhausted."""
    parts = [rest]
    have = len(rest)
    while have < chunk_bytes:
        more = src.read(chunk_bytes)
        if not more:
            return b"".join(parts), True
        parts.append(more)
        have += len(more)
        if progress:
            progress(src.fraction())
    return b"".join(parts), False


def _read_sequential(src: _Source, rest: bytes, chunk_bytes: int, reader: "_Reader", progress) -> bytes:
    """Decode chunk by chunk in this process, verifying each cut; return what follows the last cut."""
    while True:
        rest, eof = _fill(src, rest, chunk_bytes, progress)
        if eof:
            return rest
        cut = _cut_and_decode(rest)
        if cut is None:  # no event boundary in what we hold yet: read on
            more = src.read(chunk_bytes)
            if not more:
                return rest
            rest += more
            continue
        evs, next_start = cut
        reader.add(evs)
        del evs
        rest = rest[next_start:]


def _find_cut(buf: bytes) -> tuple[int, int] | None:
    """The last event boundary in ``buf`` (unverified): end of the piece before it, start of the rest."""
    search_from = max(0, len(buf) - 4 * 1024 * 1024)
    while True:
        last = None
        for last in _CUT_RE.finditer(buf, search_from):
            pass
        if last is not None:
            return last.start(), last.end() - 1
        if search_from == 0:
            return None
        search_from = max(0, search_from - 16 * 1024 * 1024)


def _decode_piece(piece: bytes):
    """Worker: decode one piece of events into columns. None when the cut was not an event boundary."""
    try:
        evs = _decode_events(b"[" + piece + b"]")
    except msgspec.DecodeError:
        return None
    r = _Reader("")
    r.add(evs)
    return r.export()


def _read_parallel(src: _Source, rest: bytes, chunk_bytes: int, reader: "_Reader", workers: int,
                   progress) -> bytes | None:
    """Cut chunks here, decode them in worker processes, merge the columns in file order.

    Returns what follows the last cut, or None if a worker could not decode its piece (then the
    caller falls back to the verified sequential path).
    """
    import concurrent.futures as cf
    import multiprocessing as mp
    from collections import deque

    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
    pending: deque = deque()
    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        try:
            while True:
                rest, eof = _fill(src, rest, chunk_bytes, progress)
                if eof:
                    break
                cut = _find_cut(rest)
                if cut is None:
                    more = src.read(chunk_bytes)
                    if not more:
                        break
                    rest += more
                    continue
                piece_end, next_start = cut
                pending.append(pool.submit(_decode_piece, rest[:piece_end]))
                rest = rest[next_start:]
                while len(pending) > workers + 1:
                    chunk = pending.popleft().result()
                    if chunk is None:
                        return None
                    reader.merge(chunk)
            while pending:
                chunk = pending.popleft().result()
                if chunk is None:
                    return None
                reader.merge(chunk)
        finally:
            for f in pending:
                f.cancel()
    return rest


def _drain(src: _Source, chunk_bytes: int) -> bytes:
    parts = []
    while True:
        d = src.read(chunk_bytes)
        if not d:
            return b"".join(parts)
        parts.append(d)


def _cut_and_decode(buf: bytes) -> tuple[list[Event], int] | None:
    """Decode the events before the last event boundary in ``buf``; return them and where the rest starts."""
    search_from = max(0, len(buf) - 4 * 1024 * 1024)
    tried = 0
    while True:
        cuts = list(_CUT_RE.finditer(buf, search_from))
        for m in reversed(cuts):
            piece = buf[: m.start()]
            try:
                return _decode_events(b"[" + piece + b"]"), m.end() - 1
            except msgspec.DecodeError:
                tried += 1
                if tried > 8:
                    return None
        if search_from == 0:
            return None
        search_from = max(0, search_from - 16 * 1024 * 1024)


def _decode_tail(rest: bytes, bare_array: bool, reader: _Reader, path: str) -> tuple[dict, str | None]:
    """Decode what follows the last cut: the final events and, for object traces, trailing keys."""
    if bare_array:
        body = rest.rstrip()
        for candidate in (b"[" + body, b"[" + body.rstrip(b",") + b"]"):
            try:
                reader.add(_decode_events(candidate))
                return {}, None
            except msgspec.ValidationError as exc:
                raise TraceError(path, "is a JSON array whose entries are not trace events", str(exc),
                                 "pass a Chrome trace written by torch.profiler") from None
            except msgspec.DecodeError:
                pass
    else:
        try:
            top = _decode_top(b'{"traceEvents":[' + rest)
        except msgspec.DecodeError:
            top = None
        if top is not None:
            try:
                evs = _decode_events(top.pop("traceEvents"))
            except msgspec.ValidationError as exc:
                raise TraceError(path, "has a traceEvents entry that is not an event object", str(exc),
                                 "the file is not a Chrome trace written by torch.profiler") from None
            reader.add(evs)
            return {k: _decode_any(v) for k, v in top.items()}, None
    # The file stops mid-event: keep every complete event before the cut.
    good = _salvage(rest)
    if good is not None:
        evs, upto = good
        reader.add(evs)
    else:
        upto = 0
    return {}, (f"the JSON ends before the trace is complete; read {reader.n_events:,} events "
                f"and dropped {len(rest) - upto:,} trailing bytes")


def _salvage(buf: bytes) -> tuple[list[Event], int] | None:
    """The longest prefix of ``buf`` that is a sequence of whole events."""
    cuts = list(_CUT_RE.finditer(buf))
    ends = [m.start() for m in cuts]
    stripped = buf.rstrip()
    ends.append(len(stripped))
    for end in reversed(ends):
        piece = buf[:end].rstrip().rstrip(b"]}").rstrip()
        for candidate in (buf[:end], piece):
            try:
                return _decode_events(b"[" + candidate + b"]"), end
            except msgspec.DecodeError:
                continue
    return None


def _read_whole(path: str, data: bytes, src: _Source, reader: _Reader) -> Trace:
    """Fallback for files without a findable ``traceEvents`` array: decode the document at once."""
    try:
        top = _decode_top(data)
    except msgspec.DecodeError as exc:
        try:
            _decode_any(data)
        except msgspec.DecodeError:
            if src.truncated_reason:
                raise TraceError(path, "is cut off before any trace events", src.truncated_reason,
                                 "capture the trace again") from None
            raise TraceError(path, "is not valid JSON", str(exc),
                             "pass a torch.profiler trace (.json / .json.gz); if the profiler was killed "
                             "mid-write, capture again") from None
        raise TraceError(path, "is JSON but not a trace", "a top-level value that is not an object",
                         "pass a torch.profiler trace with a traceEvents array") from None
    if "traceEvents" not in top:
        keys = ", ".join(list(top)[:6]) or "no keys"
        raise TraceError(path, "is JSON but not a Chrome/Kineto trace: it has no traceEvents array",
                         f"top-level keys: {keys}", "pass the file torch.profiler wrote (export_chrome_trace "
                         "or tensorboard_trace_handler)")
    try:
        reader.add(_decode_events(top.pop("traceEvents")))
    except msgspec.ValidationError as exc:
        raise TraceError(path, "has a traceEvents value that is not a list of event objects", str(exc),
                         "pass the file torch.profiler wrote") from None
    return _finish(reader, {k: _decode_any(v) for k, v in top.items()}, path, src.truncated_reason)


# ---------------------------------------------------------------------------------------------
# Finishing: links, depths, metadata
# ---------------------------------------------------------------------------------------------

_MEMCPY_RE = re.compile(r"(HtoD|DtoH|DtoD|PtoP|HtoH)(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.I)
_COPY_KIND = {"htod": M.COPY_HTOD, "dtoh": M.COPY_DTOH, "dtod": M.COPY_DTOD, "ptop": M.COPY_PTOP}
_MEM_KIND = {"pageable": M.MEM_PAGEABLE, "pinned": M.MEM_PINNED, "device": M.MEM_DEVICE,
             "managed": M.MEM_MANAGED, "array": 3}


def _finish(reader: _Reader, meta: dict, path: str, truncated: str | None) -> Trace:
    if reader.n_events == 0:
        if truncated:
            raise TraceError(path, "is cut off before its first complete event", truncated,
                             "the profiler was probably killed while writing; capture the trace again")
        raise TraceError(path, "has no events", "an empty traceEvents array",
                         "the profiler recorded nothing: make sure prof.step() is called every iteration so the "
                         "schedule reaches its active steps")
    tables = {name: Table.concat(name, parts) for name, parts in reader.parts.items()}
    strings = reader.strings.strings
    warnings: list[str] = []
    if truncated:
        warnings.append(f"{path}: {truncated}; numbers cover only the events before the cut")
    if reader.bad_args:
        warnings.append(f"{path}: {reader.bad_args:,} events have an args value that is not an object of the "
                        "usual fields; their other fields were read and their args ignored")
    if reader.ignored_phases:
        desc = ", ".join(f"{n} '{p}'" for p, n in sorted(reader.ignored_phases.items()))
        warnings.append(f"{path}: ignored events of phases tracedoc does not use ({desc})")
    trace = Trace(source=path, strings=strings, tables=tables, meta={}, warnings=warnings)
    _memcpy_kinds(trace)
    link_launches(trace)
    set_cpu_depths(trace)
    trace.meta = _metadata(meta, reader, trace, truncated)
    return trace


def _memcpy_kinds(trace: Trace) -> None:
    g = trace.gpu_ops
    if not len(g):
        return
    copies = np.flatnonzero(g["kind"] == M.MEMCPY)
    if not copies.size:
        return
    uniq = np.unique(g["name"][copies])
    kinds = {}
    for sid in uniq.tolist():
        m = _MEMCPY_RE.search(trace.string(sid))
        if m:
            kinds[sid] = (_COPY_KIND.get(m.group(1).lower(), M.COPY_UNKNOWN),
                          _MEM_KIND.get((m.group(2) or "").lower(), -1),
                          _MEM_KIND.get((m.group(3) or "").lower(), -1))
    lut = np.full((len(trace.strings) + 1, 3), [M.COPY_UNKNOWN, -1, -1], dtype=np.int64)
    for sid, v in kinds.items():
        lut[sid] = v
    names = g["name"][copies]
    for col, j in (("copy_kind", 0), ("src_kind", 1), ("dst_kind", 2)):
        arr = g[col].copy()
        arr[copies] = lut[names, j]
        g[col] = arr


def link_launches(trace: Trace) -> None:
    """Set ``gpu_ops.launch`` to the runtime row that launched each GPU op.

    By correlation id first; for ops without one, by ``ac2g``-style flows (start on the runtime
    call, end on the GPU op, both with the correlation id as flow id).
    """
    g, r = trace.gpu_ops, trace.runtime
    if not len(g) or not len(r):
        return
    launch = np.full(len(g), -1, dtype=np.int64)
    rc = r["correlation"]
    valid = np.flatnonzero(rc >= 0)
    if valid.size:
        order = valid[np.argsort(rc[valid], kind="stable")]
        sorted_c = rc[order]
        gc = g["correlation"]
        pos = np.searchsorted(sorted_c, gc)
        pos_c = np.minimum(pos, sorted_c.size - 1)
        hit = (gc >= 0) & (sorted_c[pos_c] == gc)
        launch[hit] = order[pos_c[hit]]
    missing = np.flatnonzero(launch == -1)
    f = trace.flows
    if missing.size and len(f):
        launch[missing] = _link_by_flows(trace, missing)
    g["launch"] = launch


def _link_by_flows(trace: Trace, rows: np.ndarray) -> np.ndarray:
    import pandas as pd

    f, r, g = trace.flows, trace.runtime, trace.gpu_ops
    cat_ok = trace.string_ids(lambda s: s in ("ac2g", "async", "async_cpu_to_gpu", "launch"))
    fc = f["cat"]
    sel = (fc >= 0) & cat_ok[np.maximum(fc, 0)]
    starts = pd.DataFrame({"id": f["id"][sel & (f["phase"] == M.FLOW_START)],
                           "pid": f["pid"][sel & (f["phase"] == M.FLOW_START)],
                           "tid": f["tid"][sel & (f["phase"] == M.FLOW_START)],
                           "ts": f["ts_ns"][sel & (f["phase"] == M.FLOW_START)]})
    ends = pd.DataFrame({"id": f["id"][sel & (f["phase"] == M.FLOW_END)],
                         "dev": f["pid"][sel & (f["phase"] == M.FLOW_END)],
                         "stream": f["tid"][sel & (f["phase"] == M.FLOW_END)],
                         "ts": f["ts_ns"][sel & (f["phase"] == M.FLOW_END)]})
    rt = pd.DataFrame({"rrow": np.arange(len(r)), "pid": r["pid"], "tid": r["tid"], "ts": r["start_ns"]})
    gp = pd.DataFrame({"grow": rows, "dev": g["device"][rows], "stream": g["stream"][rows],
                       "ts": g["start_ns"][rows]})
    a = starts.merge(rt, on=["pid", "tid", "ts"]).drop_duplicates("id")
    b = ends.merge(gp, on=["dev", "stream", "ts"]).drop_duplicates("grow")
    j = b.merge(a[["id", "rrow"]], on="id")
    out = np.full(rows.size, -1, dtype=np.int64)
    if len(j):
        pos = np.searchsorted(rows, j["grow"].to_numpy())
        out[pos] = j["rrow"].to_numpy()
    return out


def set_cpu_depths(trace: Trace) -> None:
    """Nesting depth of each CPU op within its thread (0 = outermost), without a per-op loop.

    Ops sorted by (thread, start, -end): an op's depth is the number of earlier ops of its thread
    that are still open at its start, i.e. its rank in the thread minus the ops that already ended.
    """
    c = trace.cpu_ops
    n = len(c)
    if not n:
        return
    pid, tid, s, e = c["pid"], c["tid"], c["start_ns"], c["end_ns"]
    order = np.lexsort((-e, s, tid, pid))
    p_o, t_o = pid[order], tid[order]
    new_thread = np.ones(n, dtype=bool)
    new_thread[1:] = (p_o[1:] != p_o[:-1]) | (t_o[1:] != t_o[:-1])
    bounds = np.append(np.flatnonzero(new_thread), n)
    depth = np.zeros(n, dtype=np.int64)
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        rows = order[lo:hi]
        ss = s[rows]
        closed = np.searchsorted(np.sort(e[rows]), ss, side="right")
        depth[rows] = np.maximum(np.arange(hi - lo) - closed, 0)
    c["depth"] = depth


def _metadata(raw: dict, reader: _Reader, trace: Trace, truncated: str | None) -> dict:
    dist = raw.get("distributedInfo") if isinstance(raw.get("distributedInfo"), dict) else {}
    devices = raw.get("deviceProperties") or raw.get("computeProperties") or []
    if not isinstance(devices, list):
        devices = []
    base = raw.get("baseTimeNanoseconds")
    meta = {
        "format": "kineto",
        "schema_version": raw.get("schemaVersion"),
        "rank": _int_or_none(dist.get("rank")),
        "world_size": _int_or_none(dist.get("world_size")),
        "backend": dist.get("backend"),
        "nccl_version": dist.get("nccl_version"),
        "pg_config": dist.get("pg_config"),
        "devices": [d for d in devices if isinstance(d, dict)],
        "cuda_runtime_version": raw.get("cuda_runtime_version"),
        "cuda_driver_version": raw.get("cuda_driver_version"),
        "cupti_version": raw.get("cupti_version"),
        "display_time_unit": raw.get("displayTimeUnit"),
        "time_origin_ns": int(base) if isinstance(base, (int, float)) else 0,
        "trace_name": raw.get("traceName"),
        "record_shapes": raw.get("record_shapes"),
        "events": reader.n_events,
        "truncated": truncated,
        "other_categories": {},
        "process_names": {},
        "thread_names": {},
        "extra": {k: v for k, v in raw.items() if k not in _KNOWN_KEYS and isinstance(v, (str, int, float))},
    }
    for name, pid, tid, arg_name, labels in reader.meta_events:
        if name == "process_name" and arg_name is not None:
            meta["process_names"][str(pid)] = str(arg_name)
        elif name == "thread_name" and arg_name is not None:
            meta["thread_names"][f"{pid}/{tid}"] = str(arg_name)
        elif name == "process_labels" and labels is not None:
            meta["process_names"].setdefault(f"labels:{pid}", str(labels))
    o = trace.other_spans
    if len(o):
        cats, counts = np.unique(o["cat"], return_counts=True)
        meta["other_categories"] = {trace.string(int(c)): int(k) for c, k in zip(cats, counts)}
    return meta


_KNOWN_KEYS = {"schemaVersion", "distributedInfo", "deviceProperties", "computeProperties",
               "baseTimeNanoseconds", "displayTimeUnit", "traceName", "traceEvents"}


def _int_or_none(v: Any) -> int | None:
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None
