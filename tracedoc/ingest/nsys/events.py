"""Raw events of the whole export as numpy columns (names still nsys string ids), time rules applied."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ...model import trace as M
from ...model.trace import StringTable
from ..values import int_value
from .db import _Db, _q

_TID_MASK = 0xFFFFFF
_PID_SHIFT = 24
_GPID_MASK = ~np.int64(_TID_MASK)  # globalTid -> globalPid: clear the TID bits


NVTX_PUSH_POP, NVTX_START_END, NVTX_DOMAIN_CREATE = 59, 60, 75


OSRT_MAX_ROWS = 5_000_000
MAX_TIME_NS = 1 << 62


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
        self.texts = StringTable()  # this reader's own texts: raw id -2 - (id in this table)
        self.cache: dict[int, str] = {}

    def add_texts(self, values: list) -> np.ndarray:
        """Raw ids for inline texts (None -> -1), hashing each distinct text once."""
        ids = self.texts.intern_many(values).astype(np.int64)
        return np.where(ids >= 0, -2 - ids, -1)

    def add_text(self, s: str) -> int:
        return -2 - self.texts.intern(s)

    def text(self, rid: int) -> str:
        if rid <= -2:
            return self.texts.strings[-2 - rid]
        return self.cache.get(rid, f"<string {rid}>")

    def to_trace(self, raw_ids: np.ndarray, strings: StringTable) -> np.ndarray:
        """Map raw ids to ids in ``strings`` through a lookup array over the distinct ids."""
        if raw_ids.size == 0:
            return np.zeros(0, dtype=np.int32)
        uniq, inv = np.unique(raw_ids, return_inverse=True)
        uniq = uniq.tolist()
        cache = self.cache
        missing = [u for u in uniq if u >= 0 and u not in cache]
        if missing:
            cache.update(self.db.strings(np.asarray(missing)))
        extra = self.texts.strings
        texts = [None if u == -1 else extra[-2 - u] if u <= -2 else cache.get(u, f"<string {u}>") for u in uniq]
        return strings.intern_many(texts)[inv.reshape(-1)]


def _string_ids(ids: np.ndarray) -> np.ndarray:
    """StringIds ids from the file: a negative one is no name (-1), never one of this reader's own
    ids (<= -2, texts it made)."""
    return np.where(ids < 0, -1, ids)


def _gpid_of(gtid: np.ndarray) -> np.ndarray:
    return np.where(gtid >= 0, gtid & _GPID_MASK, -1)


def _os_pid(gpid: np.ndarray) -> np.ndarray:
    return np.where(gpid >= 0, (gpid >> _PID_SHIFT) & _TID_MASK, -1)


def _os_tid(gtid: np.ndarray) -> np.ndarray:
    return np.where(gtid >= 0, gtid & _TID_MASK, -1)


def _n(t: dict[str, np.ndarray]) -> int:
    return int(t["start"].size) if t else 0


def _concat(parts: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    parts = [p for p in parts if p and len(next(iter(p.values())))]
    if not parts:
        return {}
    keys = parts[0].keys()
    return {k: np.concatenate([np.asarray(p[k]) for p in parts]) for k in keys}


def _read_gpu(db: _Db, names: _Names) -> dict[str, np.ndarray]:
    common = {
        "start": (-1, "start"),
        "end": (-1, "end"),
        "device": (-1, "deviceId"),
        "stream": (-1, "streamId"),
        "corr": (-1, "correlationId"),
        "gpid": (-1, "globalPid"),
        "graph_id": (-1, "graphId"),
    }
    parts = []
    t = "CUPTI_ACTIVITY_KIND_KERNEL"
    if db.has(t):
        k = db.read(
            t,
            {
                **common,
                "demangled": (-1, "demangledName"),
                "short": (-1, "shortName"),
                "gx": (-1, "gridX"),
                "gy": (-1, "gridY"),
                "gz": (-1, "gridZ"),
                "bx": (-1, "blockX"),
                "by": (-1, "blockY"),
                "bz": (-1, "blockZ"),
                "regs": (-1, "registersPerThread"),
                "smem_s": (0, "staticSharedMemory"),
                "smem_d": (0, "dynamicSharedMemory"),
            },
        )
        parts.append(_gpu_part(k, M.KERNEL, k["start"].size))
    t = "CUPTI_ACTIVITY_KIND_MEMCPY"
    if db.has(t):
        c = db.read(
            t,
            {
                **common,
                "bytes": (-1, "bytes"),
                "copy_kind": (0, "copyKind"),
                "src_kind": (-1, "srcKind"),
                "dst_kind": (-1, "dstKind"),
            },
        )
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
        short = _string_ids(col("short"))
        name = np.where(d["demangled"] >= 0, d["demangled"], short) if "demangled" in d else short
    else:
        name = d["name"]
    return {
        "kind": np.full(n, kind, dtype=np.int64),
        "start": d["start"],
        "end": d["end"],
        "device": d["device"],
        "stream": d["stream"],
        "corr": d["corr"],
        "gpid": d["gpid"],
        "name": name,
        "graph_id": d["graph_id"],
        "gx": col("gx"),
        "gy": col("gy"),
        "gz": col("gz"),
        "bx": col("bx"),
        "by": col("by"),
        "bz": col("bz"),
        "regs": col("regs"),
        "smem": (col("smem_s", 0) + col("smem_d", 0)) if kind == M.KERNEL else np.full(n, -1, dtype=np.int64),
        "bytes": col("bytes"),
        "copy_kind": col("copy_kind", 0),
        "src_kind": col("src_kind"),
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
    r = db.read(
        t,
        {
            "start": (-1, "start"),
            "end": (-1, "end"),
            "event_class": (-1, "eventClass"),
            "gtid": (-1, "globalTid"),
            "corr": (-1, "correlationId"),
            "name": (-1, "nameId"),
        },
    )
    r["gpid"] = _gpid_of(r["gtid"])
    r["name"] = _string_ids(r["name"])
    return r


def _read_syncs(db: _Db) -> dict[str, np.ndarray]:
    t = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
    if not db.has(t):
        return {}
    return db.read(
        t,
        {
            "start": (-1, "start"),
            "end": (-1, "end"),
            "device": (-1, "deviceId"),
            "stream": (-1, "streamId"),
            "corr": (-1, "correlationId"),
            "gpid": (-1, "globalPid"),
            "sync_type": (-1, "syncType"),
        },
    )


def _read_nvtx(db: _Db, names: _Names, raw: _Raw) -> dict[str, np.ndarray]:
    t = "NVTX_EVENTS"
    if not db.has(t) or not db.pick(t, "eventType"):
        return {}
    n = db.read(
        t,
        {
            "start": (-1, "start"),
            "end": (-1, "end"),
            "event_type": (-1, "eventType"),
            "gtid": (-1, "globalTid"),
            "text_id": (-1, "textId"),
            "domain": (0, "domainId"),
        },
        {"text": ("text",)},
        where=f"{_q('eventType')} IN ({NVTX_PUSH_POP}, {NVTX_START_END}, {NVTX_DOMAIN_CREATE})",
    )
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
    name = np.where(inline != -1, inline, _string_ids(n["text_id"]))
    return {
        "start": n["start"],
        "end": n["end"],
        "gtid": n["gtid"],
        "gpid": _gpid_of(n["gtid"]),
        "name": name,
        "kind": np.full(name.size, M.USER_ANNOTATION, dtype=np.int64),
        "domain": n["domain"],
        "nest": (n["event_type"] != NVTX_PUSH_POP).astype(np.int64),
    }


def _read_osrt(db: _Db, raw: _Raw, enabled: bool, max_rows: int) -> dict[str, np.ndarray]:
    t = "OSRT_API"
    if not enabled or not db.has(t):
        return {}
    n = db.count(t)
    if n > max_rows:
        raw.warnings.append(
            f"{db.path}: skipped {n:,} OS runtime (OSRT_API) calls, more than osrt_max_rows="
            f"{max_rows:,}; pass osrt_max_rows=N to read them"
        )
        return {}
    o = db.read(t, {"start": (-1, "start"), "end": (-1, "end"), "gtid": (-1, "globalTid"), "name": (-1, "nameId")})
    o["gpid"] = _gpid_of(o["gtid"])
    o["name"] = _string_ids(o["name"])
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
    raw.warnings.extend(db.warnings)
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
        raw.warnings.append(
            f"{path}: {int(missing.sum()):,} GPU records have no globalPid; "
            "assigned them to the process with the most CUDA API calls"
        )


def _apply_time_rules(db: _Db, raw: _Raw) -> None:
    details = _first_row(db, "ANALYSIS_DETAILS", ("startTime", "stopTime", "duration"))
    session = _first_row(db, "TARGET_INFO_SESSION_START_TIME", ("utcEpochNs", "systemClockNs"))
    cap_start, cap_stop = details.get("startTime"), details.get("stopTime")
    ends = [t["end"] for t in (raw.gpu, raw.runtime, raw.syncs, raw.cpu) if t and t["end"].size]
    latest = max((int(e[e < MAX_TIME_NS].max()) for e in ends if (e < MAX_TIME_NS).any()), default=None)
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
    dropped_nonpos = dropped_before = dropped_impossible = 0
    for name in ("gpu", "runtime", "syncs", "cpu"):
        t = getattr(raw, name)
        if not t:
            continue
        nonpos = t["start"] <= 0
        # Not a possible time: an end before the start, or beyond ~146 years of nanoseconds (what a
        # REAL or text value casts to, or a wrapped integer).
        impossible = ~nonpos & ((t["end"] < t["start"]) | (t["start"] >= MAX_TIME_NS) | (t["end"] >= MAX_TIME_NS))
        before = (t["end"] < filter_from) & ~nonpos & ~impossible if filter_from is not None else np.zeros_like(nonpos)
        drop = nonpos | before | impossible
        dropped_nonpos += int(nonpos.sum())
        dropped_before += int(before.sum())
        dropped_impossible += int(impossible.sum())
        if drop.any():
            keep = np.flatnonzero(~drop)
            setattr(raw, name, {k: v[keep] for k, v in t.items()})
    if dropped_nonpos:
        raw.warnings.append(
            f"{db.path}: dropped {dropped_nonpos:,} events with start <= 0 (recorded before the capture started)"
        )
    if dropped_impossible:
        raw.warnings.append(
            f"{db.path}: dropped {dropped_impossible:,} events with impossible timestamps (end "
            "before start, or a value that is not a time); numbers cover the other events"
        )
    if dropped_before:
        raw.warnings.append(
            f"{db.path}: dropped {dropped_before:,} events that ended before the capture "
            f"start (ANALYSIS_DETAILS.startTime = {filter_from})"
        )
    raw.meta.update(
        {
            "clock": clock,
            "time_origin_ns": int(origin or 0),
            "capture_start_ns": cap_lo,
            "capture_end_ns": cap_hi,
            "utc_epoch_ns": session.get("utcEpochNs"),
            "dropped_events": {
                "start_not_positive": dropped_nonpos,
                "before_capture": dropped_before,
                "impossible_time": dropped_impossible,
            },
        }
    )


def _first_row(db: _Db, table: str, cols: tuple[str, ...]) -> dict[str, int]:
    present = [c for c in cols if c in db.columns(table)]
    if not present:
        return {}
    rows = db.small(f"SELECT {', '.join(map(_q, present))} FROM {_q(table)} LIMIT 1")
    if not rows:
        return {}
    row = rows[0]
    return {c: n for c, v in zip(present, row) if (n := int_value(v)) is not None}
