"""Reader for Nsight Systems SQLite exports (``nsys export --type sqlite``), every generation.

The database is opened read-only. Each table is read once, column by column as named by
``PRAGMA table_info`` (column order and presence change between exports), with NULLs turned into
``-1`` inside SQLite so every integer column arrives as exact int64 (``globalTid`` does not fit a
float). Names stay nsys ``StringIds`` ids until a ``Trace`` is built; then the distinct ids of that
trace are resolved once and mapped to the trace's own string table through a lookup array.

One process is one rank. ``read_nsys`` returns the process that did GPU work (the busiest one
when several did, with a warning); ``read_nsys_ranks`` returns one ``Trace`` per GPU process.

Time: values stay the export's raw nanoseconds. Events with ``start <= 0`` are dropped (NVIDIA's
rules filter them: they are NCCL-init and similar records logged before the capture started), and so
are events that end before ``ANALYSIS_DETAILS.startTime`` when the events are on that clock. Some
exports are zero-based instead (their events all lie below ``startTime``); then only ``start <= 0``
is dropped. ``meta["time_origin_ns"]`` maps trace time to Unix time: ``epoch = origin + t``.
"""

from __future__ import annotations

import itertools
import operator
import os
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ..errors import TraceError
from ..model import trace as M
from ..model.trace import StringTable, Table, Trace
from .kineto import set_cpu_depths

_TID_MASK = 0xFFFFFF
_PID_SHIFT = 24
_GPID_MASK = ~np.int64(_TID_MASK)  # globalTid -> globalPid: clear the TID bits
_CORR_BITS = 40
_UINT32_NONE = 0xFFFFFFFF  # CUPTI's "no stream / no event" marker

NVTX_PUSH_POP, NVTX_START_END, NVTX_DOMAIN_CREATE = 59, 60, 75

OSRT_MAX_ROWS = 5_000_000
_FETCH_ROWS = 1 << 18

# Sync names follow the Kineto spellings so analyses treat both formats alike.
_SYNC_BY_CALL = [
    (re.compile(r"^cu(da)?StreamWaitEvent", re.I), "Stream Wait Event"),
    (re.compile(r"^cu(da)?StreamSynchronize", re.I), "Stream Sync"),
    (re.compile(r"^cu(da)?EventSynchronize", re.I), "Event Sync"),
    (re.compile(r"^(cudaDeviceSynchronize|cuCtxSynchronize)", re.I), "Context Sync"),
]
_SYNC_BY_TYPE = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}

# Step ranges found by name: ProfilerStep#3, step 12, train_step, iteration_7, "iter 2", ...
# An emit_nvtx suffix (", op_id = 17", ", seq = 3", ", sizes = [...]") is allowed after the name.
_STEP_FAMILY_RE = re.compile(
    r"^\s*(?P<fam>profiler[ _]?step|train(?:ing)?[ _\-]?step|step|train[ _\-]?iter(?:ation)?|iteration|iter)"
    r"(?:[\s_#:=\-]*\d+)?\s*(?:,\s*(?:seq|op_id|sizes|stream)\b.*)?$",
    re.I,
)
_DATALOADER_RE = re.compile(r"DataLoader|DataPipe", re.I)


# ---------------------------------------------------------------------------------------------
# Database access
# ---------------------------------------------------------------------------------------------

def _decode_text(raw: bytes) -> str:
    """UTF-8 when valid; otherwise Latin-1, which maps every byte, so one stray byte (old Windows
    exports carry OEM/ANSI code-page text) never fails the read. An accented letter from another
    code page may come out as a different accented letter."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1", errors="replace")


class _Db:
    """A read-only connection plus the table/column names the file actually has."""

    def __init__(self, path: str):
        self.path = path
        self.conn = _connect(path)
        try:
            self.conn.text_factory = _decode_text
            rows = self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
            self.conn.text_factory = str
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise _corrupt(path, exc) from None
        self.tables = {r[0] for r in rows}
        self._cols: dict[str, list[str]] = {}

    def close(self) -> None:
        self.conn.close()

    def has(self, table: str) -> bool:
        return table in self.tables

    def columns(self, table: str) -> list[str]:
        if table not in self._cols:
            if table not in self.tables:
                self._cols[table] = []
            else:
                rows = self.execute(f"PRAGMA table_info({_q(table)})").fetchall()
                self._cols[table] = [r[1] for r in rows]
        return self._cols[table]

    def pick(self, table: str, *candidates: str) -> str | None:
        cols = set(self.columns(table))
        for c in candidates:
            if c in cols:
                return c
        return None

    def small(self, sql: str, params: Iterable = ()) -> list[tuple]:
        """All rows of a small query, decoding text leniently."""
        self.conn.text_factory = _decode_text
        try:
            return self.execute(sql, params).fetchall()
        except sqlite3.DatabaseError as exc:
            raise _corrupt(self.path, exc) from None
        finally:
            self.conn.text_factory = str

    def execute(self, sql: str, params: Iterable = ()) -> sqlite3.Cursor:
        try:
            return self.conn.execute(sql, tuple(params))
        except sqlite3.DatabaseError as exc:
            raise _corrupt(self.path, exc) from None

    def count(self, table: str) -> int:
        return int(self.execute(f"SELECT COUNT(*) FROM {_q(table)}").fetchone()[0])

    def read(self, table: str, ints: dict[str, tuple], texts: dict[str, tuple] | None = None,
             where: str = "") -> dict[str, Any]:
        """Columns of ``table``: ``ints`` as int64 arrays (NULL/missing -> default), ``texts`` as lists.

        ``ints`` maps an output name to ``(default, candidate column, ...)``; the first candidate
        the table has is read, and a table without any gets the default in every row.
        """
        texts = texts or {}
        exprs, names = [], []
        for out, (default, *cands) in ints.items():
            col = self.pick(table, *cands)
            exprs.append(f"CAST(COALESCE({_q(col)}, {int(default)}) AS INTEGER)" if col else str(int(default)))
            names.append(out)
        text_names = []
        for out, cands in texts.items():
            col = self.pick(table, *cands)
            exprs.append(_q(col) if col else "NULL")
            text_names.append(out)
        sql = f"SELECT {', '.join(exprs)} FROM {_q(table)}" + (f" WHERE {where}" if where else "")
        try:
            arr, text_cols = self._fetch(sql, len(names), len(text_names))
        except sqlite3.OperationalError as exc:
            if "decode" not in str(exc).lower():
                raise _corrupt(self.path, exc) from None
            # Text that is not UTF-8 (old Windows exports): read this table again, decoding leniently.
            self.conn.text_factory = _decode_text
            try:
                arr, text_cols = self._fetch(sql, len(names), len(text_names))
            finally:
                self.conn.text_factory = str
        out: dict[str, Any] = {name: arr[:, i] for i, name in enumerate(names)}
        out.update(zip(text_names, text_cols))
        return out

    def _fetch(self, sql: str, k: int, n_text: int) -> tuple[np.ndarray, list[list]]:
        """Rows in chunks: integer columns flattened straight into int64 (no per-row numpy work)."""
        cur = self.execute(sql)
        int_parts: list[np.ndarray] = []
        text_cols: list[list] = [[] for _ in range(n_text)]
        head = operator.itemgetter(slice(0, k))
        while True:
            try:
                rows = cur.fetchmany(_FETCH_ROWS)
            except sqlite3.OperationalError:
                raise  # read() tells a text-decoding failure from the rest
            except sqlite3.DatabaseError as exc:
                raise _corrupt(self.path, exc) from None
            if not rows:
                break
            flat = itertools.chain.from_iterable(map(head, rows) if n_text else rows)
            int_parts.append(np.fromiter(flat, dtype=np.int64, count=len(rows) * k).reshape(len(rows), k))
            for j in range(n_text):
                text_cols[j].extend(map(operator.itemgetter(k + j), rows))
        arr = np.concatenate(int_parts) if int_parts else np.zeros((0, k), dtype=np.int64)
        return arr, text_cols

    def strings(self, ids: np.ndarray) -> dict[int, str]:
        """``StringIds`` values of the given ids (looked up through the primary key, in batches)."""
        ids = [int(i) for i in np.unique(ids) if i >= 0]
        out: dict[int, str] = {}
        if not ids or not self.has("StringIds"):
            return out
        vcol = self.pick("StringIds", "value", "text") or "value"
        for lo in range(0, len(ids), 500):
            batch = ids[lo:lo + 500]
            marks = ",".join("?" * len(batch))
            for sid, value in self.small(f"SELECT id, {_q(vcol)} FROM StringIds WHERE id IN ({marks})", batch):
                out[int(sid)] = "" if value is None else str(value)
        return out

    def key_values(self, *tables: str) -> dict[str, str]:
        for t in tables:
            if self.has(t) and {"name", "value"} <= set(self.columns(t)):
                return {str(n): str(v) for n, v in self.small(f"SELECT name, value FROM {_q(t)}") if n is not None}
        return {}


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _connect(path: str) -> sqlite3.Connection:
    uri = Path(path).resolve().as_uri()
    last: Exception | None = None
    # mode=ro never writes; immutable=1 also skips locking, for files on read-only media.
    for suffix in ("?mode=ro", "?mode=ro&immutable=1"):
        conn = None
        try:
            conn = sqlite3.connect(uri + suffix, uri=True)
            conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
            return conn
        except sqlite3.DatabaseError as exc:
            last = exc
            if conn is not None:
                conn.close()
    raise _corrupt(path, last) from None


def _corrupt(path: str, exc: Exception | None) -> TraceError:
    return TraceError(path, "cannot be read as an SQLite database: it is corrupt or incomplete",
                      str(exc) if exc else None,
                      "export it again with `nsys export --type sqlite --force-overwrite true REPORT.nsys-rep` "
                      "and check that the copy finished")


def _check_kind(db: _Db) -> None:
    """Reject nvprof databases and SQLite files that are not nsys exports."""
    t = db.tables
    if "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL" in t or any("_id_" in db.columns(x) for x in
                                                           ("CUPTI_ACTIVITY_KIND_KERNEL", "StringTable") if x in t):
        raise TraceError(db.path, "is an nvprof database, not an Nsight Systems export",
                         "table CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL / `_id_` columns",
                         "profile with Nsight Systems (`nsys profile -o run python train.py`), export with "
                         "`nsys export --type sqlite run.nsys-rep`, or capture a torch.profiler trace")
    nsys_like = "StringIds" in t or any(x.startswith(("CUPTI_", "NVTX_")) for x in t)
    if not nsys_like:
        shown = ", ".join(sorted(t)[:6]) or "no tables"
        raise TraceError(db.path, "is an SQLite database but not an Nsight Systems export",
                         f"tables: {shown}",
                         "pass the file written by `nsys export --type sqlite`, or a torch.profiler JSON trace")


# ---------------------------------------------------------------------------------------------
# Raw events of the whole file
# ---------------------------------------------------------------------------------------------

@dataclass
class _Raw:
    """Every event of the file as numpy columns; names are raw string ids (see ``_Names``)."""

    gpu: dict[str, np.ndarray] = field(default_factory=dict)
    runtime: dict[str, np.ndarray] = field(default_factory=dict)
    syncs: dict[str, np.ndarray] = field(default_factory=dict)
    cpu: dict[str, np.ndarray] = field(default_factory=dict)
    domains: dict[tuple[int, int], str] = field(default_factory=dict)  # (globalPid, domainId) -> name
    n_events: int = 0
    warnings: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)


class _Names:
    """Raw name ids: ``>= 0`` are nsys StringIds ids, ``<= -2`` are texts this reader made or read
    inline (NVTX ``text``, memcpy labels); ``-1`` is no name."""

    def __init__(self, db: _Db):
        self.db = db
        self.labels: dict[str, int] = {}
        self.extra_text: list[str] = []
        self.cache: dict[int, str] = {}

    def add_texts(self, values: list) -> np.ndarray:
        """Raw ids for inline texts (None -> -1), hashing each distinct text once."""
        import pandas as pd

        if not values:
            return np.zeros(0, dtype=np.int64)
        codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
        # A fresh block of ids for this call's distinct texts; duplicates across calls are merged
        # later, when a trace interns them.
        base = len(self.extra_text)
        self.extra_text.extend(str(u) for u in uniques)
        ids = -2 - (base + codes.astype(np.int64))
        ids[codes < 0] = -1
        return ids

    def add_text(self, s: str) -> int:
        rid = self.labels.get(s)
        if rid is None:
            rid = self.labels[s] = -2 - len(self.extra_text)
            self.extra_text.append(s)
        return rid

    def text(self, rid: int) -> str:
        if rid <= -2:
            return self.extra_text[-2 - rid]
        return self.cache.get(rid, f"<string {rid}>")

    def to_trace(self, raw_ids: np.ndarray, strings: StringTable) -> np.ndarray:
        """Map raw ids to ids in ``strings`` through a lookup array over the distinct ids."""
        if raw_ids.size == 0:
            return np.zeros(0, dtype=np.int32)
        uniq, inv = np.unique(raw_ids, return_inverse=True)
        missing = [int(u) for u in uniq if u >= 0 and int(u) not in self.cache]
        if missing:
            self.cache.update(self.db.strings(np.asarray(missing)))
        lut = np.array([-1 if u == -1 else strings.intern(self.text(int(u))) for u in uniq.tolist()],
                       dtype=np.int32)
        return lut[inv.reshape(-1)]


def _gpid_of(gtid: np.ndarray) -> np.ndarray:
    return np.where(gtid >= 0, gtid & _GPID_MASK, -1)


def _os_pid(gpid: np.ndarray) -> np.ndarray:
    return np.where(gpid >= 0, (gpid >> _PID_SHIFT) & _TID_MASK, -1)


def _os_tid(gtid: np.ndarray) -> np.ndarray:
    return np.where(gtid >= 0, gtid & _TID_MASK, -1)


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    parts = [p for p in parts if p and len(next(iter(p.values())))]
    if not parts:
        return {}
    keys = parts[0].keys()
    return {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in keys}


def _read_gpu(db: _Db, names: _Names) -> dict[str, np.ndarray]:
    common = {
        "start": (-1, "start"), "end": (-1, "end"), "device": (-1, "deviceId"), "stream": (-1, "streamId"),
        "corr": (-1, "correlationId"), "gpid": (-1, "globalPid"), "graph_id": (-1, "graphId"),
    }
    parts = []
    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    if db.has(t):
        k = db.read(t, {**common, "demangled": (-1, "demangledName"), "short": (-1, "shortName"),
                        "gx": (-1, "gridX"), "gy": (-1, "gridY"), "gz": (-1, "gridZ"),
                        "bx": (-1, "blockX"), "by": (-1, "blockY"), "bz": (-1, "blockZ"),
                        "regs": (-1, "registersPerThread"), "smem_s": (0, "staticSharedMemory"),
                        "smem_d": (0, "dynamicSharedMemory")})
        parts.append(_gpu_part(k, M.KERNEL, k["start"].size))
    t = "CUPTI_ACTIVITY_KIND_MEMCPY"
    if db.has(t):
        c = db.read(t, {**common, "bytes": (-1, "bytes"), "copy_kind": (0, "copyKind"),
                        "src_kind": (-1, "srcKind"), "dst_kind": (-1, "dstKind")})
        n = c["start"].size
        c["name"] = _label_ids(names, [c["copy_kind"], c["src_kind"], c["dst_kind"]], _memcpy_label)
        parts.append(_gpu_part(c, M.MEMCPY, n))
    t = "CUPTI_ACTIVITY_KIND_MEMSET"
    if db.has(t):
        s = db.read(t, {**common, "bytes": (-1, "bytes"), "mem_kind": (-1, "memKind")})
        n = s["start"].size
        s["dst_kind"] = s.pop("mem_kind")
        s["name"] = _label_ids(names, [s["dst_kind"]], _memset_label)
        parts.append(_gpu_part(s, M.MEMSET, n))
    return _concat(parts)


def _gpu_part(d: dict[str, np.ndarray], kind: int, n: int) -> dict[str, np.ndarray]:
    def col(key, default=-1):
        return d[key] if key in d else np.full(n, default, dtype=np.int64)

    if kind == M.KERNEL:
        name = np.where(d["demangled"] >= 0, d["demangled"], d["short"]) if "demangled" in d else col("short")
    else:
        name = d["name"]
    return {
        "kind": np.full(n, kind, dtype=np.int64), "start": d["start"], "end": d["end"],
        "device": d["device"], "stream": d["stream"], "corr": d["corr"], "gpid": d["gpid"],
        "name": name, "graph_id": d["graph_id"],
        "gx": col("gx"), "gy": col("gy"), "gz": col("gz"), "bx": col("bx"), "by": col("by"), "bz": col("bz"),
        "regs": col("regs"),
        "smem": (col("smem_s", 0) + col("smem_d", 0)) if kind == M.KERNEL else np.full(n, -1, dtype=np.int64),
        "bytes": col("bytes"), "copy_kind": col("copy_kind", 0), "src_kind": col("src_kind"),
        "dst_kind": col("dst_kind"),
    }


def _memcpy_label(copy_kind: int, src: int, dst: int) -> str:
    kind = M.COPY_KIND_NAMES.get(copy_kind, "unknown")
    return f"Memcpy {kind} ({M.MEM_KIND_NAMES.get(src, 'unknown')} -> {M.MEM_KIND_NAMES.get(dst, 'unknown')})"


def _memset_label(mem_kind: int) -> str:
    return f"Memset ({M.MEM_KIND_NAMES.get(mem_kind, 'unknown')})"


def _label_ids(names: _Names, cols: list[np.ndarray], label: Callable[..., str]) -> np.ndarray:
    """Raw name ids for labels built from a few small-integer columns (one label per distinct combo)."""
    if cols[0].size == 0:
        return np.zeros(0, dtype=np.int64)
    stacked = np.stack(cols, axis=1)
    uniq, inv = np.unique(stacked, axis=0, return_inverse=True)
    lut = np.array([names.add_text(label(*map(int, row))) for row in uniq], dtype=np.int64)
    return lut[inv.reshape(-1)]


def _read_runtime(db: _Db) -> dict[str, np.ndarray]:
    t = "CUPTI_ACTIVITY_KIND_RUNTIME"
    if not db.has(t):
        return {}
    r = db.read(t, {"start": (-1, "start"), "end": (-1, "end"), "event_class": (-1, "eventClass"),
                    "gtid": (-1, "globalTid"), "corr": (-1, "correlationId"), "name": (-1, "nameId")})
    r["gpid"] = _gpid_of(r["gtid"])
    return r


def _read_syncs(db: _Db) -> dict[str, np.ndarray]:
    t = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
    if not db.has(t):
        return {}
    return db.read(t, {"start": (-1, "start"), "end": (-1, "end"), "device": (-1, "deviceId"),
                       "stream": (-1, "streamId"), "corr": (-1, "correlationId"), "gpid": (-1, "globalPid"),
                       "sync_type": (-1, "syncType")})


def _read_nvtx(db: _Db, names: _Names, raw: _Raw) -> dict[str, np.ndarray]:
    t = "NVTX_EVENTS"
    if not db.has(t) or not db.pick(t, "eventType"):
        return {}
    n = db.read(t, {"start": (-1, "start"), "end": (-1, "end"), "event_type": (-1, "eventType"),
                    "gtid": (-1, "globalTid"), "text_id": (-1, "textId"), "domain": (0, "domainId")},
                {"text": ("text",)},
                where=f"{_q('eventType')} IN ({NVTX_PUSH_POP}, {NVTX_START_END}, {NVTX_DOMAIN_CREATE})")
    texts = n.pop("text")
    is_domain = n["event_type"] == NVTX_DOMAIN_CREATE
    if is_domain.any():
        rows = np.flatnonzero(is_domain)
        dom_ids = n["text_id"][rows]
        no_text = np.fromiter((texts[i] is None for i in rows.tolist()), dtype=bool, count=rows.size)
        resolved = db.strings(dom_ids[no_text]) if no_text.any() else {}
        dgpid = _gpid_of(n["gtid"][rows])
        for i, r in enumerate(rows.tolist()):
            label = texts[r] if texts[r] is not None else resolved.get(int(dom_ids[i]))
            if label is not None:
                raw.domains[(int(dgpid[i]), int(n["domain"][r]))] = str(label)
    keep = ~is_domain & (n["end"] >= n["start"])
    if not keep.all():
        rows = np.flatnonzero(keep)
        n = {k: v[rows] for k, v in n.items()}
        texts = [texts[i] for i in rows.tolist()]
    # COALESCE(text, StringIds[textId]): inline text first, the shared string id otherwise.
    inline = names.add_texts(texts)
    name = np.where(inline != -1, inline, n["text_id"])
    return {"start": n["start"], "end": n["end"], "gtid": n["gtid"], "gpid": _gpid_of(n["gtid"]),
            "name": name, "kind": np.full(name.size, M.USER_ANNOTATION, dtype=np.int64),
            "domain": n["domain"], "nest": (n["event_type"] != NVTX_PUSH_POP).astype(np.int64)}


def _read_osrt(db: _Db, raw: _Raw, enabled: bool, max_rows: int) -> dict[str, np.ndarray]:
    t = "OSRT_API"
    if not enabled or not db.has(t):
        return {}
    n = db.count(t)
    if n > max_rows:
        raw.warnings.append(f"{db.path}: skipped {n:,} OS runtime (OSRT_API) calls, more than osrt_max_rows="
                            f"{max_rows:,}; pass osrt_max_rows=N to read them")
        return {}
    o = db.read(t, {"start": (-1, "start"), "end": (-1, "end"), "gtid": (-1, "globalTid"), "name": (-1, "nameId")})
    o["gpid"] = _gpid_of(o["gtid"])
    o["kind"] = np.full(o["start"].size, M.CPU_OTHER, dtype=np.int64)
    o["domain"] = np.full(o["start"].size, -1, dtype=np.int64)
    o["nest"] = np.zeros(o["start"].size, dtype=np.int64)
    return o


def _read_all(db: _Db, progress, osrt: bool, osrt_max_rows: int) -> tuple[_Raw, _Names]:
    raw = _Raw()
    names = _Names(db)
    steps = [
        lambda: setattr(raw, "gpu", _read_gpu(db, names)),
        lambda: setattr(raw, "runtime", _read_runtime(db)),
        lambda: setattr(raw, "syncs", _read_syncs(db)),
        lambda: setattr(raw, "cpu", _concat([_read_nvtx(db, names, raw), _read_osrt(db, raw, osrt, osrt_max_rows)])),
    ]
    for i, step in enumerate(steps):
        step()
        if progress:
            progress((i + 1) / (len(steps) + 1))
    raw.n_events = sum(len(d.get("start", ())) for d in (raw.gpu, raw.runtime, raw.syncs, raw.cpu))
    _fill_missing_gpids(raw, db.path)
    _apply_time_rules(db, raw)
    return raw, names


def _fill_missing_gpids(raw: _Raw, path: str) -> None:
    """GPU records without ``globalPid`` (some early exports) go to the process that made the most API calls."""
    for table in (raw.gpu, raw.syncs):
        if not table:
            continue
        missing = table["gpid"] < 0
        if not missing.any():
            continue
        rt = raw.runtime.get("gpid") if raw.runtime else None
        if rt is None or not rt.size:
            continue
        vals, counts = np.unique(rt, return_counts=True)
        table["gpid"] = np.where(missing, vals[np.argmax(counts)], table["gpid"])
        raw.warnings.append(f"{path}: {int(missing.sum()):,} GPU records have no globalPid; "
                            "assigned them to the process with the most CUDA API calls")


def _apply_time_rules(db: _Db, raw: _Raw) -> None:
    details = _first_row(db, "ANALYSIS_DETAILS", ("startTime", "stopTime", "duration"))
    session = _first_row(db, "TARGET_INFO_SESSION_START_TIME", ("utcEpochNs", "systemClockNs"))
    cap_start, cap_stop = details.get("startTime"), details.get("stopTime")
    ends = [t["end"] for t in (raw.gpu, raw.runtime, raw.syncs, raw.cpu) if t and t["end"].size]
    latest = max((int(e.max()) for e in ends), default=None)
    if cap_start is not None and latest is not None and latest < cap_start:
        clock = "zero-based"
        origin = session.get("utcEpochNs", 0)
        cap_lo, cap_hi = 0, details.get("duration")
        filter_from = None
    else:
        clock = "target" if cap_start is not None else "unknown"
        sys_ns = session.get("systemClockNs", cap_start)
        origin = session["utcEpochNs"] - sys_ns if "utcEpochNs" in session and sys_ns is not None else 0
        cap_lo, cap_hi = cap_start, cap_stop
        filter_from = cap_start
    dropped_nonpos = dropped_before = 0
    for name in ("gpu", "runtime", "syncs", "cpu"):
        t = getattr(raw, name)
        if not t:
            continue
        nonpos = t["start"] <= 0
        before = (t["end"] < filter_from) & ~nonpos if filter_from is not None else np.zeros_like(nonpos)
        drop = nonpos | before
        dropped_nonpos += int(nonpos.sum())
        dropped_before += int(before.sum())
        if drop.any():
            keep = np.flatnonzero(~drop)
            setattr(raw, name, {k: v[keep] for k, v in t.items()})
    if dropped_nonpos:
        raw.warnings.append(f"{db.path}: dropped {dropped_nonpos:,} events with start <= 0 "
                            "(recorded before the capture started)")
    if dropped_before:
        raw.warnings.append(f"{db.path}: dropped {dropped_before:,} events that ended before the capture "
                            f"start (ANALYSIS_DETAILS.startTime = {filter_from})")
    raw.meta.update({"clock": clock, "time_origin_ns": int(origin or 0), "capture_start_ns": cap_lo,
                     "capture_end_ns": cap_hi, "utc_epoch_ns": session.get("utcEpochNs"),
                     "dropped_events": {"start_not_positive": dropped_nonpos, "before_capture": dropped_before}})


def _first_row(db: _Db, table: str, cols: tuple[str, ...]) -> dict[str, int]:
    present = [c for c in cols if c in db.columns(table)]
    if not present:
        return {}
    rows = db.small(f"SELECT {', '.join(map(_q, present))} FROM {_q(table)} LIMIT 1")
    if not rows:
        return {}
    row = rows[0]
    return {c: int(v) for c, v in zip(present, row) if isinstance(v, (int, float))}


# ---------------------------------------------------------------------------------------------
# Building a Trace for a set of processes
# ---------------------------------------------------------------------------------------------

def _select(t: dict[str, np.ndarray], gpids: np.ndarray | None) -> dict[str, np.ndarray]:
    if not t:
        return t
    if gpids is None:
        return t
    rows = np.flatnonzero(np.isin(t["gpid"], gpids))
    return {k: v[rows] for k, v in t.items()}


def _sorted(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if not t or t["start"].size == 0:
        return t
    order = np.lexsort((t["end"], t["start"]))
    return {k: v[order] for k, v in t.items()}


def _n(t: dict[str, np.ndarray]) -> int:
    return int(t["start"].size) if t else 0


def link_by_correlation(g_gpid: np.ndarray, g_corr: np.ndarray, r_gpid: np.ndarray,
                        r_corr: np.ndarray) -> np.ndarray:
    """Row in the runtime arrays of the call with the same (process, correlation id); -1 if none.

    Correlation ids are unique only within a process, so the process is part of the key.
    """
    out = np.full(g_corr.size, -1, dtype=np.int64)
    if not g_corr.size or not r_corr.size:
        return out
    procs, inv = np.unique(np.concatenate([g_gpid, r_gpid]), return_inverse=True)
    inv = inv.reshape(-1).astype(np.int64)
    corr_mask = (1 << _CORR_BITS) - 1
    gk = (inv[:g_corr.size] << _CORR_BITS) | (g_corr & corr_mask)
    rk = (inv[g_corr.size:] << _CORR_BITS) | (r_corr & corr_mask)
    valid_r = np.flatnonzero(r_corr >= 0)
    if not valid_r.size:
        return out
    order = valid_r[np.argsort(rk[valid_r], kind="stable")]
    sk = rk[order]
    pos = np.minimum(np.searchsorted(sk, gk), sk.size - 1)
    hit = (g_corr >= 0) & (sk[pos] == gk)
    out[hit] = order[pos[hit]]
    return out


def _build(path: str, db: _Db, raw: _Raw, names: _Names, gpids: np.ndarray | None, options: dict,
           info: dict) -> Trace:
    st = StringTable()
    gpu = _sorted(_select(raw.gpu, gpids))
    rt = _sorted(_select(raw.runtime, gpids))
    sy = _sorted(_select(raw.syncs, gpids))
    cpu = _sorted(_select(raw.cpu, gpids))
    tables = M.empty_tables()
    devices = _devices(info, gpu, gpids)

    if _n(rt):
        ec = rt["event_class"]
        kind = np.where(ec == 0, M.RUNTIME, np.where(ec == 1, M.DRIVER, M.RUNTIME_OTHER))
        tables["runtime"] = Table("runtime", {
            "kind": kind, "pid": _os_pid(rt["gpid"]), "tid": _os_tid(rt["gtid"]), "name": names.to_trace(rt["name"], st),
            "start_ns": rt["start"], "end_ns": rt["end"], "correlation": rt["corr"],
            "external_id": np.full(_n(rt), -1), "cbid": np.full(_n(rt), -1)})
    if _n(gpu):
        n = _n(gpu)
        launch = link_by_correlation(gpu["gpid"], gpu["corr"], rt.get("gpid", np.zeros(0, np.int64)),
                                     rt.get("corr", np.zeros(0, np.int64)))
        blocks = np.where(gpu["gx"] > 0, gpu["gx"] * np.maximum(gpu["gy"], 1) * np.maximum(gpu["gz"], 1), -1)
        threads = np.where(gpu["bx"] > 0, gpu["bx"] * np.maximum(gpu["by"], 1) * np.maximum(gpu["bz"], 1), -1)
        sms = _sm_lookup(devices, gpu["device"])
        ok = (gpu["kind"] == M.KERNEL) & (blocks > 0) & (sms > 0)
        bps = np.full(n, np.nan)
        bps[ok] = blocks[ok] / sms[ok]
        wps = np.full(n, np.nan)
        ok_w = ok & (threads > 0)
        wps[ok_w] = bps[ok_w] * np.ceil(threads[ok_w] / 32.0)
        is_copy = gpu["kind"] == M.MEMCPY
        tables["gpu_ops"] = Table("gpu_ops", {
            "kind": gpu["kind"], "device": gpu["device"], "stream": gpu["stream"], "start_ns": gpu["start"],
            "end_ns": gpu["end"], "name": names.to_trace(gpu["name"], st), "correlation": gpu["corr"],
            "external_id": np.full(n, -1), "pid": _os_pid(gpu["gpid"]),
            "grid_x": gpu["gx"], "grid_y": gpu["gy"], "grid_z": gpu["gz"],
            "block_x": gpu["bx"], "block_y": gpu["by"], "block_z": gpu["bz"],
            "registers": gpu["regs"], "shared_mem": gpu["smem"], "blocks_per_sm": bps, "warps_per_sm": wps,
            "est_occupancy": np.full(n, np.nan), "bytes": gpu["bytes"],
            "copy_kind": np.where(is_copy, gpu["copy_kind"], 0), "src_kind": np.where(is_copy, gpu["src_kind"], -1),
            "dst_kind": gpu["dst_kind"], "graph_id": gpu["graph_id"], "launch": launch})
    if _n(sy):
        n = _n(sy)
        call = link_by_correlation(sy["gpid"], sy["corr"], rt.get("gpid", np.zeros(0, np.int64)),
                                   rt.get("corr", np.zeros(0, np.int64)))
        labels = _sync_labels(sy["sync_type"], call, rt.get("name"), names)
        stream = np.where((sy["stream"] == _UINT32_NONE) | (sy["stream"] < 0), -1, sy["stream"])
        tables["syncs"] = Table("syncs", {
            "device": sy["device"], "stream": stream, "name": names.to_trace(labels, st), "start_ns": sy["start"],
            "end_ns": sy["end"], "correlation": sy["corr"], "wait_on_stream": np.full(n, -1)})
    if _n(cpu):
        n = _n(cpu)
        tables["cpu_ops"] = Table("cpu_ops", {
            "kind": cpu["kind"], "pid": _os_pid(cpu["gpid"]), "tid": _os_tid(cpu["gtid"]),
            "name": names.to_trace(cpu["name"], st), "start_ns": cpu["start"], "end_ns": cpu["end"],
            "external_id": np.full(n, -1), "depth": np.zeros(n), "stack": np.full(n, -1)})

    trace = Trace(source=path, strings=st.strings, tables=tables, meta={}, warnings=list(raw.warnings))
    _set_depths(trace, cpu.get("nest") if _n(cpu) else None)
    trace.meta = _metadata(db, raw, info, trace, gpids, devices, cpu)
    _mark_steps(trace, options.get("step_range"))
    trace.meta["dataloader_ranges"] = _count_dataloader(trace)
    if not len(trace.gpu_ops):
        trace.warnings.append(f"{path}: no CUDA kernels, memcpys or memsets in the export "
                              "(was the run profiled with `-t cuda`?)")
    return trace


def _set_depths(trace: Trace, nest: np.ndarray | None) -> None:
    """Nesting depth per thread. Push/pop ranges and OS runtime calls nest strictly (group 0);
    start/end ranges may overlap them without nesting, so they get depths among themselves (group 1)."""
    if nest is None or not nest.any():
        set_cpu_depths(trace)
        return
    c = trace.cpu_ops
    depth = np.zeros(len(c), dtype=np.int64)
    for group in (0, 1):
        rows = np.flatnonzero(nest == group)
        if not rows.size:
            continue
        part = Trace(source=trace.source, strings=trace.strings, tables={"cpu_ops": c.take(rows)})
        set_cpu_depths(part)
        depth[rows] = part.cpu_ops["depth"]
    c["depth"] = depth


def _sync_labels(sync_type: np.ndarray, call: np.ndarray, rt_names: np.ndarray | None, names: _Names) -> np.ndarray:
    """Raw name ids of Kineto-style sync labels: from the API call that caused the sync when it is
    known (syncType numbering differs between nsys versions), else from ``syncType``."""
    by_type = {t: names.add_text(s) for t, s in _SYNC_BY_TYPE.items()}
    unknown = names.add_text("Sync")
    uniq_t, inv_t = np.unique(sync_type, return_inverse=True)
    out = np.array([by_type.get(int(t), unknown) for t in uniq_t], dtype=np.int64)[inv_t.reshape(-1)]
    if rt_names is not None and rt_names.size:
        linked = np.flatnonzero(call >= 0)
        if linked.size:
            call_names = rt_names[call[linked]]
            uniq, inv = np.unique(call_names, return_inverse=True)
            missing = [int(u) for u in uniq if u >= 0 and int(u) not in names.cache]
            if missing:
                names.cache.update(names.db.strings(np.asarray(missing)))
            lut = np.full(uniq.size, -1, dtype=np.int64)
            for i, u in enumerate(uniq.tolist()):
                text = names.text(int(u)) if u != -1 else ""
                for pattern, label in _SYNC_BY_CALL:
                    if pattern.match(text):
                        lut[i] = names.add_text(label)
                        break
            mapped = lut[inv.reshape(-1)]
            good = mapped != -1
            out[linked[good]] = mapped[good]
    return out


# ---------------------------------------------------------------------------------------------
# Devices, processes, metadata
# ---------------------------------------------------------------------------------------------

def _read_info(db: _Db) -> dict:
    """Device properties, process and thread names, export metadata (small tables, read once)."""
    info: dict[str, Any] = {"gpus": [], "cuda_devices": [], "processes": {}, "threads": {}, "export": {}}
    if db.has("TARGET_INFO_GPU"):
        cols = db.columns("TARGET_INFO_GPU")
        want = [c for c in ("id", "deviceId", "name", "totalMemory", "smCount", "computeMajor", "computeMinor",
                            "cuDevice", "busLocation", "uuid", "chipName") if c in cols]
        for row in db.small(f"SELECT {', '.join(map(_q, want))} FROM TARGET_INFO_GPU"):
            d = dict(zip(want, row))
            info["gpus"].append({
                "gpu_id": d.get("id", d.get("deviceId")), "cuda_id": d.get("cuDevice"), "name": d.get("name"),
                "totalGlobalMem": d.get("totalMemory"), "numSms": d.get("smCount"),
                "computeMajor": d.get("computeMajor"), "computeMinor": d.get("computeMinor"),
                "busLocation": d.get("busLocation"), "uuid": d.get("uuid"), "pid": None})
    if db.has("TARGET_INFO_CUDA_GPU"):  # ~2021 exports keep CUDA properties here
        cols = db.columns("TARGET_INFO_CUDA_GPU")
        want = [c for c in ("deviceId", "name", "globalMemorySize", "numMultiprocessors", "computeCapabilityMajor",
                            "computeCapabilityMinor", "pid", "pciBusId") if c in cols]
        for row in db.small(f"SELECT {', '.join(map(_q, want))} FROM TARGET_INFO_CUDA_GPU"):
            d = dict(zip(want, row))
            info["gpus"].append({
                "gpu_id": d.get("deviceId"), "cuda_id": d.get("deviceId"), "name": d.get("name"),
                "totalGlobalMem": d.get("globalMemorySize"), "numSms": d.get("numMultiprocessors"),
                "computeMajor": d.get("computeCapabilityMajor"), "computeMinor": d.get("computeCapabilityMinor"),
                "busLocation": d.get("pciBusId"), "uuid": None, "pid": d.get("pid")})
    if db.has("TARGET_INFO_CUDA_DEVICE"):
        cols = db.columns("TARGET_INFO_CUDA_DEVICE")
        want = [c for c in ("gpuId", "cudaId", "pid", "numMultiprocessors", "uuid") if c in cols]
        for row in db.small(f"SELECT {', '.join(map(_q, want))} FROM TARGET_INFO_CUDA_DEVICE"):
            info["cuda_devices"].append(dict(zip(want, row)))
    if db.has("PROCESSES") and {"globalPid", "pid", "name"} <= set(db.columns("PROCESSES")):
        for gpid, pid, name in db.small("SELECT globalPid, pid, name FROM PROCESSES"):
            if gpid is not None:
                info["processes"][int(gpid)] = (pid, name)
    if db.has("ThreadNames") and {"nameId", "globalTid"} <= set(db.columns("ThreadNames")):
        t = db.read("ThreadNames", {"name": (-1, "nameId"), "gtid": (-1, "globalTid")})
        texts = db.strings(t["name"])
        for sid, gtid in zip(t["name"].tolist(), t["gtid"].tolist()):
            if sid in texts and gtid >= 0:
                info["threads"][gtid] = texts[sid]
    info["export"] = db.key_values("META_DATA_EXPORT", "EXPORT_META_DATA")
    info["capture"] = db.key_values("META_DATA_CAPTURE")
    return info


def _devices(info: dict, gpu: dict[str, np.ndarray], gpids: np.ndarray | None) -> list[dict]:
    """Device dicts (Kineto ``deviceProperties`` keys) for the devices this trace's GPU ops ran on."""
    used = sorted(set(np.unique(gpu["device"]).tolist())) if _n(gpu) else []
    os_pids = set(_os_pid(np.asarray(gpids)).tolist()) if gpids is not None else None
    by_gpu_id = {g["gpu_id"]: g for g in info["gpus"]}
    props: dict[int, dict] = {}
    # TARGET_INFO_CUDA_DEVICE says which nsys GPU is which CUDA ordinal in which process.
    for cd in info["cuda_devices"]:
        if os_pids is not None and cd.get("pid") is not None and cd["pid"] not in os_pids:
            continue
        cid = cd.get("cudaId")
        if cid is None:
            continue
        g = by_gpu_id.get(cd.get("gpuId"), {})
        props.setdefault(int(cid), {**g, "numSms": g.get("numSms") or cd.get("numMultiprocessors")})
    for g in info["gpus"]:
        if os_pids is not None and g.get("pid") is not None and g["pid"] not in os_pids:
            continue
        is_cuda = (g.get("computeMajor") or 0) > 0 or (g.get("numSms") or 0) > 0
        cid = g.get("cuda_id") if g.get("cuda_id") is not None else g.get("gpu_id")
        if is_cuda and cid is not None:
            props.setdefault(int(cid), g)
    ids = used or sorted(props)
    out = []
    for d in ids:
        g = props.get(d, {})
        out.append({"id": int(d), "name": g.get("name"), "totalGlobalMem": _int(g.get("totalGlobalMem")),
                    "computeMajor": _int(g.get("computeMajor")), "computeMinor": _int(g.get("computeMinor")),
                    "numSms": _int(g.get("numSms"))})
    return out


def _int(v: Any) -> int | None:
    try:
        return int(v) if v is not None else None
    except (TypeError, ValueError):
        return None


def _sm_lookup(devices: list[dict], device: np.ndarray) -> np.ndarray:
    out = np.full(device.size, -1, dtype=np.int64)
    for d in devices:
        if d.get("numSms"):
            out[device == d["id"]] = d["numSms"]
    return out


def _metadata(db: _Db, raw: _Raw, info: dict, trace: Trace, gpids: np.ndarray | None, devices: list[dict],
              cpu: dict) -> dict:
    export = info["export"]
    selected = None if gpids is None else set(np.asarray(gpids).tolist())
    process_names, thread_names = {}, {}
    for gpid, (pid, name) in info["processes"].items():
        if selected is None or gpid in selected:
            if name is not None:
                process_names[str(pid if pid is not None else (gpid >> _PID_SHIFT) & _TID_MASK)] = str(name)
    for gtid, name in info["threads"].items():
        if selected is None or (gtid & ~_TID_MASK) in selected:
            thread_names[f"{(gtid >> _PID_SHIFT) & _TID_MASK}/{gtid & _TID_MASK}"] = name
    domains = {}
    for (gpid, dom), name in raw.domains.items():
        if selected is None or gpid in selected:
            domains[f"{(gpid >> _PID_SHIFT) & _TID_MASK}/{dom}"] = name
    pid = None
    if selected is not None and len(selected) == 1:
        pid = int((next(iter(selected)) >> _PID_SHIFT) & _TID_MASK)
    n_events = sum(len(t) for t in trace.tables.values())
    return {
        "format": "nsys",
        "schema_version": None,
        "export_version": export.get("EXPORT_SCHEMA_VERSION"),
        "nsys_version": export.get("EXPORT_PRODUCT_VERSION"),
        "rank": None,
        "world_size": None,
        "pid": pid,
        "backend": None,
        "nccl_version": None,
        "pg_config": None,
        "devices": devices,
        "cuda_runtime_version": None,
        "cuda_driver_version": None,
        "cupti_version": None,
        "display_time_unit": "ns",
        "time_origin_ns": raw.meta.get("time_origin_ns", 0),
        "clock": raw.meta.get("clock"),
        "capture_start_ns": raw.meta.get("capture_start_ns"),
        "capture_end_ns": raw.meta.get("capture_end_ns"),
        "dropped_events": raw.meta.get("dropped_events"),
        "trace_name": export.get("EXPORT_INPUT_FILE") or export.get("EXPORT_PARAM_INPUT_FILE"),
        "record_shapes": None,
        "events": n_events,
        "file_events": raw.n_events,
        "truncated": None,
        "other_categories": {},
        "process_names": process_names,
        "thread_names": thread_names,
        "nvtx_domains": domains,
        "step_range": None,
        "step_names": [],
        "extra": {k: v for k, v in export.items() if k.startswith("EXPORT_") and "PATH" not in k},
    }


# ---------------------------------------------------------------------------------------------
# Steps
# ---------------------------------------------------------------------------------------------

def _mark_steps(trace: Trace, step_range: str | None) -> None:
    """Record which NVTX range names are steps in ``meta["step_names"]``; strings are not renamed."""
    c = trace.cpu_ops
    ann = c["name"][c["kind"] == M.USER_ANNOTATION]
    if not ann.size:
        trace.meta["step_range"] = step_range
        if step_range:
            trace.warnings.append(f"{trace.source}: step_range={step_range!r} given, but the export has no NVTX ranges")
        return
    ids, counts = np.unique(ann[ann >= 0], return_counts=True)
    if step_range:
        pat = re.compile(r"^\s*" + re.escape(step_range.strip()) + r"(?:[\s_#:=\-]*\d+)?\s*(?:,.*)?$", re.I)
        chosen = [int(i) for i in ids.tolist() if pat.match(trace.strings[i])]
        trace.meta["step_range"] = step_range
        if not chosen:
            common = ", ".join(repr(trace.strings[int(i)]) for i in ids[np.argsort(-counts)][:5])
            trace.warnings.append(f"{trace.source}: no NVTX range matches step_range={step_range!r}; "
                                  f"the most frequent ranges are {common}")
    else:
        families: dict[str, list[int]] = {}
        label: dict[str, str] = {}
        count: dict[str, int] = {}
        for sid, k in zip(ids.tolist(), counts.tolist()):
            m = _STEP_FAMILY_RE.match(trace.strings[sid])
            if m:
                key = re.sub(r"[ _\-]", "", m.group("fam").lower())
                families.setdefault(key, []).append(sid)
                label.setdefault(key, m.group("fam"))
                count[key] = count.get(key, 0) + k
        if not families:
            trace.meta["step_range"] = None
            trace.meta["step_names"] = []
            return
        if "profilerstep" in families:
            best = "profilerstep"
        else:
            best = max(families, key=lambda f: (count[f], -min(families[f])))
        chosen = families[best]
        trace.meta["step_range"] = label[best]
    trace.meta["step_names"] = sorted(trace.strings[i] for i in chosen)


def _count_dataloader(trace: Trace) -> int:
    """NVTX ranges of the input pipeline (``enumerate(DataLoader)#...``, DataPipe): kept as
    USER_ANNOTATION cpu_ops under their own text; counted so reports can say they were seen."""
    c = trace.cpu_ops
    if not len(c):
        return 0
    mask = trace.string_ids(lambda s: _DATALOADER_RE.search(s) is not None)
    names = c["name"]
    ok = (names >= 0) & (c["kind"] == M.USER_ANNOTATION)
    return int(mask[names[ok]].sum()) if mask.size else 0


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------

def _open(path: str | os.PathLike) -> _Db:
    path = os.fspath(path)
    if not os.path.exists(path):
        raise TraceError(path, "does not exist", None, "check the path")
    db = _Db(path)
    try:
        _check_kind(db)
    except Exception:
        db.close()
        raise
    return db


def _gpu_processes(raw: _Raw) -> list[tuple[int, int]]:
    """(globalPid, GPU op count) of every process with GPU work, ordered by OS pid."""
    if not _n(raw.gpu):
        return []
    vals, counts = np.unique(raw.gpu["gpid"], return_counts=True)
    order = np.lexsort((vals, _os_pid(vals)))
    return [(int(vals[i]), int(counts[i])) for i in order]


def _load(path, progress, options):
    db = _open(path)
    try:
        raw, names = _read_all(db, progress, bool(options.get("osrt", True)),
                               int(options.get("osrt_max_rows", OSRT_MAX_ROWS)))
        info = _read_info(db)
    except Exception:
        db.close()
        raise
    return db, raw, names, info


_KNOWN_OPTIONS = {"step_range", "pid", "osrt", "osrt_max_rows"}


def _check_options(path: str, options: dict) -> None:
    unknown = set(options) - _KNOWN_OPTIONS
    if unknown:
        raise TraceError(os.fspath(path), f"unknown nsys reader option(s): {', '.join(sorted(unknown))}", None,
                         f"use one of {', '.join(sorted(_KNOWN_OPTIONS))}")


def read_nsys(path: str | os.PathLike, progress: Callable[[float], None] | None = None, **options) -> Trace:
    """Read an nsys SQLite export into one ``Trace``.

    Options: ``step_range="NAME"`` names the NVTX range that marks a step (default: detected by
    name); ``pid=N`` picks a process by OS pid, ``pid="all"`` keeps every process in one trace;
    ``osrt=False`` skips OS runtime calls; ``osrt_max_rows`` caps them (default 5,000,000).
    """
    _check_options(path, options)
    path = os.fspath(path)
    db, raw, names, info = _load(path, progress, options)
    try:
        procs = _gpu_processes(raw)
        want = options.get("pid")
        warn = None
        rank = world = None
        if want == "all" or (want is None and not procs):
            gpids = None
        elif want is not None:
            try:
                want = int(want)
            except (TypeError, ValueError):
                raise TraceError(path, f"pid={want!r} is not a process id", None,
                                 "pass an integer OS pid, or pid='all'") from None
            match = [g for g in _all_gpids(raw) if (g >> _PID_SHIFT) & _TID_MASK == want]
            if not match:
                seen = ", ".join(str((g >> _PID_SHIFT) & _TID_MASK) for g, _ in procs) or "none with GPU work"
                raise TraceError(path, f"has no process with pid {want}", f"pids {seen}",
                                 "pass one of those pids, or pid='all'")
            gpids = np.asarray(match, dtype=np.int64)
            gp = [g for g, _ in procs]
            if len(procs) > 1 and match[0] in gp:
                rank, world = gp.index(match[0]), len(procs)
        elif len(procs) == 1:
            gpids = np.asarray([procs[0][0]], dtype=np.int64)
        else:
            best = max(range(len(procs)), key=lambda i: (procs[i][1], -i))
            gpids = np.asarray([procs[best][0]], dtype=np.int64)
            rank, world = best, len(procs)
            others = ", ".join(f"pid {(g >> _PID_SHIFT) & _TID_MASK} ({k:,} GPU ops)"
                               for j, (g, k) in enumerate(procs) if j != best)
            warn = (f"{path}: the export holds {len(procs)} processes with GPU work; read pid "
                    f"{(procs[best][0] >> _PID_SHIFT) & _TID_MASK} ({procs[best][1]:,} GPU ops) and left out "
                    f"{others}; use read_nsys_ranks() / `tracedoc analyze` on all ranks, or pid=N / pid='all'")
        trace = _build(path, db, raw, names, gpids, options, info)
        trace.meta["rank"], trace.meta["world_size"] = rank, world
        if warn:
            trace.warnings.insert(0, warn)
    finally:
        db.close()
    if progress:
        progress(1.0)
    return trace


def _all_gpids(raw: _Raw) -> list[int]:
    found: set[int] = set()
    for t in (raw.gpu, raw.runtime, raw.syncs, raw.cpu):
        if _n(t):
            found.update(np.unique(t["gpid"]).tolist())
    return sorted(g for g in found if g >= 0)


def read_nsys_ranks(path: str | os.PathLike, progress: Callable[[float], None] | None = None,
                    **options) -> list[Trace]:
    """One ``Trace`` per process with GPU work, ordered by OS pid; ``meta["rank"]`` is that order.

    An export without GPU work gives a single trace of every process.
    """
    options.pop("pid", None)
    _check_options(path, options)
    path = os.fspath(path)
    db, raw, names, info = _load(path, progress, options)
    try:
        procs = _gpu_processes(raw)
        out = []
        if not procs:
            t = _build(path, db, raw, names, None, options, info)
            t.meta["rank"], t.meta["world_size"] = 0, 1
            out.append(t)
        for rank, (gpid, _) in enumerate(procs):
            t = _build(path, db, raw, names, np.asarray([gpid], dtype=np.int64), options, info)
            t.meta["rank"], t.meta["world_size"] = rank, len(procs)
            out.append(t)
    finally:
        db.close()
    if progress:
        progress(1.0)
    return out
