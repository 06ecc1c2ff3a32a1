"""Decoded events -> numpy columns, chunk by chunk (the ``_Reader``), merged across worker processes."""

from __future__ import annotations

import re
from typing import Any, Callable

import numpy as np

from ...model import trace as M
from ...model.groups import distinct, isin
from ...model.numbers import BAD_NUMBER
from ...model.trace import StringTable, Table
from ..values import int_value
from . import handlers as H
from .coded import _codes, _Coded
from .decode import Event
from .handlers import _CPU_CATS, _GPU_CATS, _RUNTIME_CATS, SHAPE_OP_RE  # noqa: F401 - SHAPE_OP_RE: tests read it
from .rows import StructRows

# Event classes
C_IGNORE, C_GPU, C_CPU, C_RUNTIME, C_GPU_ANNOT, C_SYNC, C_FLOW, C_INSTANT, C_META, C_OTHER, C_DROPPED = range(11)
_SPAN_CLASSES = np.array([C_GPU, C_CPU, C_RUNTIME, C_GPU_ANNOT, C_SYNC, C_OTHER], dtype=np.int8)
# No clock of a real trace reads beyond ~146 years from its origin; below this bound ts + dur cannot
# overflow int64, so every end computed from a kept event is exact.
MAX_ABS_TIME_NS = 1 << 62


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


def _classes(ph: list, cat: list) -> tuple[np.ndarray, _Coded, _Coded]:
    """``_classify`` of every event, evaluated once per distinct (phase, category) pair, with the phases
    and categories coded. Raises ``TypeError`` as ``_classify`` does for a list or object category."""
    ph_codes, cat_codes = _codes(ph), _codes(cat)
    if ph_codes is None or cat_codes is None:
        cls = np.fromiter(map(_classify, ph, cat), dtype=np.int8, count=len(ph))
        return cls, _Coded.of(ph), _Coded.of(cat)
    (pc, phs), (cc, cats) = ph_codes, cat_codes
    table = np.array([[_classify(p, c) for c in cats] for p in phs], dtype=np.int8).reshape(len(phs), len(cats))
    return table[pc, cc], _Coded(pc, phs), _Coded(cc, cats)


_STREAM_RE = re.compile(r"^\s*stream\s+(\d+)", re.I)
LABEL_ID_BASE = -(1 << 40)
_COUNTS = ("bad_times", "wrong_types", "bad_utf8", "nonfinite", "outside")
_STRING_COLS = {"name", "stack", "cat", "collective", "dtype", "pg_name", "pg_ranks", "dims", "types", "concrete"}


class _Reader:
    """Accumulates one file's columns chunk by chunk."""

    def __init__(self, source: str):
        self.source = source
        self.strings = StringTable()
        self.parts: dict[str, list[Table]] = {name: [] for name in M.SCHEMAS}
        self.rows = {"gpu_ops": 0, "cpu_ops": 0}  # rows in parts so far: where the next part's rows start
        self.meta_events: list[tuple] = []
        self.n_events = 0
        self.bad_args = 0
        self.bad_times = 0  # events dropped: timestamp or duration not a possible time
        self.bad_time_example: str | None = None
        self.hides_content = False  # the file is a link out of its directory: warnings quote none of it
        self.wrong_types = 0  # fields of the wrong JSON type, read as absent
        self.bad_utf8 = 0  # invalid UTF-8 sequences decoded as U+FFFD
        self.nonfinite = 0  # Infinity/NaN written where JSON needs a number
        self.ignored_phases: dict[str, int] = {}
        self.window: tuple[int, int] | None = None  # a slice (--steps): events starting outside are dropped
        self.outside = 0  # events dropped for starting outside the window
        self.slice: Any = None  # the window.Window of a slice, for its warning
        self._id_cache: dict[Any, int] = {}
        self._wants_shapes = np.zeros(0, dtype=bool)  # per string id: a name whose shapes FLOPs need

    # -- helpers -------------------------------------------------------------------------------
    def ids(self, values: list) -> np.ndarray:
        """pid/tid values (ints, digit strings, ``"stream 7"``, labels) to int64.

        Non-numeric labels get ids ``LABEL_ID_BASE - string id``, far below any real (possibly
        negative) process or thread id.
        """
        try:
            arr = np.array(values, dtype=np.int64)
            if arr.shape == (len(values),):  # nested lists make a 2-D array: not ids
                return arr
        except (TypeError, ValueError, OverflowError):
            pass
        cache = self._id_cache
        out = np.empty(len(values), dtype=np.int64)
        for i, v in enumerate(values):
            if isinstance(v, (list, dict)):
                self.wrong_types += 1
                out[i] = -1
                continue
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
            return self._checked_id(int_value(v))
        s = str(v)
        if s.strip().lstrip("-").isdigit() and len(s) < 20:
            return self._checked_id(int_value(int(s)))
        m = _STREAM_RE.match(s[:64])
        if m and len(m.group(1)) < 19:
            return int(m.group(1))
        return LABEL_ID_BASE - self.strings.intern(s)

    def _checked_id(self, n: int | None) -> int:
        """An id within range (far above the label ids), else absent and counted."""
        if n is None or n <= LABEL_ID_BASE:
            self.wrong_types += 1
            return -1
        return n

    def names(self, values: list) -> np.ndarray:
        try:
            return self.strings.intern_many(values)
        except TypeError:  # a list or object where a string belongs: read as absent
            return self.strings.intern_many(self._scalars(values))

    def _scalars(self, values: list) -> list:
        clean = [None if isinstance(v, (list, dict)) else v for v in values]
        self.wrong_types += sum(1 for v in values if isinstance(v, (list, dict)))
        return clean

    # -- chunk results from worker processes ---------------------------------------------------
    def export(self) -> dict:
        return {
            "parts": self.parts,
            "strings": self.strings.strings,
            "meta_events": self.meta_events,
            "n_events": self.n_events,
            "bad_args": self.bad_args,
            "ignored": self.ignored_phases,
            "counts": {k: getattr(self, k) for k in _COUNTS},
            "bad_time_example": self.bad_time_example,
        }

    def merge(self, chunk: dict) -> None:
        """Append another reader's columns, remapping its string ids into ours."""
        lut = np.array([self.strings.intern(x) for x in chunk["strings"]] + [-1], dtype=np.int64)
        offsets = dict(self.rows)
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
                    t["row"] = t["row"] + np.where(
                        src == M.COLLECTIVE_FROM_KERNEL, offsets["gpu_ops"], offsets["cpu_ops"]
                    )
                elif name == "op_shapes":
                    t["row"] = t["row"] + offsets["cpu_ops"]
                self.parts[name].append(t)
                if name in self.rows:
                    self.rows[name] += len(t)
        self.meta_events.extend(chunk["meta_events"])
        self.n_events += chunk["n_events"]
        self.bad_args += chunk["bad_args"]
        for k, v in chunk["counts"].items():
            setattr(self, k, getattr(self, k) + v)
        self.bad_time_example = self.bad_time_example or chunk["bad_time_example"]
        for k, v in chunk["ignored"].items():
            self.ignored_phases[k] = self.ignored_phases.get(k, 0) + v

    # -- per chunk -----------------------------------------------------------------------------
    def add(self, evs: "list[Event] | StructRows") -> None:
        """One chunk's events: decoded structs, or rows of either decoder (``rows``)."""
        rows = evs if isinstance(evs, StructRows) else StructRows(evs)
        n = rows.n
        if n == 0:
            return
        self.n_events += n
        self.bad_args += rows.bad_args
        self.bad_utf8 += rows.bad_utf8
        self.nonfinite += rows.nonfinite
        coded = rows.coded_phases()
        ph = None
        if coded is not None:
            phases, cats = coded
            table = np.array([[_classify(p, c) for c in cats.distinct] for p in phases.distinct], dtype=np.int8)
            cls = table.reshape(len(phases.distinct), len(cats.distinct))[phases.codes, cats.codes]
        else:
            ph, cat = rows.values("ph"), rows.values("cat")
            try:
                cls, phases, cats = _classes(ph, cat)
            except TypeError:  # a list or object as ph or cat: read as absent
                ph, cat = self._scalars(ph), self._scalars(cat)
                cls, phases, cats = _classes(ph, cat)
        ts, dur = rows.times()
        self._drop_impossible_times(rows, cls, ts, dur)
        if self.window is not None:
            self._drop_outside(cls, ts)
        by_class = {c: np.flatnonzero(cls == c) for c in distinct(cls).tolist()}
        for c, idx in by_class.items():
            if c == C_DROPPED:
                continue
            if c == C_IGNORE:
                ignored = (
                    (ph[i] for i in idx.tolist())
                    if ph is not None
                    else (phases.distinct[k] for k in phases.codes[idx].tolist())
                )
                for p in ignored:
                    if isinstance(p, (list, dict)):
                        self.wrong_types += 1
                    else:
                        self.ignored_phases[str(p)[:20]] = self.ignored_phases.get(str(p)[:20], 0) + 1
                continue
            handler = _HANDLERS[c]
            handler(self, rows.take(idx), ts[idx], cats.take(idx), dur[idx], phases.take(idx))

    def _drop_impossible_times(self, rows: StructRows, cls: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> None:
        """Mark events whose time is not a possible time (missing, non-finite, out of range, negative
        duration) as dropped, and count them; metadata events carry no time and are kept."""
        timed = (cls != C_META) & (cls != C_IGNORE)
        bad = timed & ((ts == BAD_NUMBER) | (ts >= MAX_ABS_TIME_NS) | (ts <= -MAX_ABS_TIME_NS))
        spans = isin(cls, _SPAN_CLASSES)
        bad |= spans & ((dur == BAD_NUMBER) | (dur < 0) | (dur >= MAX_ABS_TIME_NS))
        if not bad.any():
            return
        cls[bad] = C_DROPPED
        self.bad_times += int(bad.sum())
        if self.bad_time_example is None:
            ts_text, dur_text = rows.time_text(int(np.flatnonzero(bad)[0]))
            self.bad_time_example = (
                f'"ts": {ts_text[:40].decode("utf-8", "replace")}, "dur": {dur_text[:40].decode("utf-8", "replace")}'
            )

    def _drop_outside(self, cls: np.ndarray, ts: np.ndarray) -> None:
        """Mark timed events that start outside the window as dropped, and count them."""
        start, end = self.window
        out = (cls != C_META) & (cls != C_IGNORE) & (cls != C_DROPPED) & ((ts < start) | (ts >= end))
        if out.any():
            cls[out] = C_DROPPED
            self.outside += int(out.sum())


_HANDLERS: dict[int, Callable] = {
    C_GPU: H.gpu,
    C_CPU: H.cpu,
    C_RUNTIME: H.runtime,
    C_GPU_ANNOT: H.gpu_annot,
    C_SYNC: H.sync,
    C_FLOW: H.flow,
    C_INSTANT: H.instant,
    C_META: H.meta,
    C_OTHER: H.other,
}
