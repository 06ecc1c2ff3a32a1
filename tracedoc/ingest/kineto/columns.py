"""Decoded events -> numpy columns, chunk by chunk (the ``_Reader``), merged across worker processes."""

from __future__ import annotations

import operator
import re
from typing import Any, Callable

import numpy as np

from ...model import trace as M
from ...model.groups import distinct, isin
from ...model.numbers import BAD_NUMBER, decimal_text_to_scaled_int, to_float64, to_int64
from ...model.trace import StringTable, Table
from ..values import int_value
from .argvalues import _external_ids, _first_input, _ranks_text, raw_triples
from .coded import _codes, _Coded
from .decode import _EMPTY_ARGS, Args, Event

# Event classes
C_IGNORE, C_GPU, C_CPU, C_RUNTIME, C_GPU_ANNOT, C_SYNC, C_FLOW, C_INSTANT, C_META, C_OTHER, C_DROPPED = range(11)
_SPAN_CLASSES = np.array([C_GPU, C_CPU, C_RUNTIME, C_GPU_ANNOT, C_SYNC, C_OTHER], dtype=np.int8)
# No clock of a real trace reads beyond ~146 years from its origin; below this bound ts + dur cannot
# overflow int64, so every end computed from a kept event is exact.
MAX_ABS_TIME_NS = 1 << 62

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


# Ops whose recorded shapes are kept, by name: matrix products, convolutions and attention (FLOPs are
# counted from them), and the memory-bound ops the roofline derives bytes for (element-wise, copies,
# reductions, softmax, normalisation, pooling, embedding lookups, optimizers, Triton kernels of compiled
# graphs; AccumulateGrad gives the parameters an optimizer updates). Broad on purpose; the formulas in
# analyses/opflops decide what they can count. Views, allocations and autograd nodes stay undecoded.
_MEMORY_OPS = (
    "add|sub|mul|div|neg|exp|log|sqrt|rsqrt|pow|abs|relu|clamp|clamp_min|clamp_max|gelu|silu|sigmoid|tanh|where|"
    "masked_fill|square|reciprocal|hardtanh|leaky_relu|elu|softplus|mish|hardswish|hardsigmoid|minimum|maximum|"
    "eq|ne|lt|le|gt|ge|logical_not|bitwise_and|erf|sin|cos|floor|sign|addcmul|addcdiv|lerp|threshold|"
    "fill|zero|copy|_to_copy|clone|contiguous|cat|stack|sum|mean|amax|amin|prod|any|all|argmax|argmin|var|std|"
    "var_mean|std_mean|embedding|index_select")
SHAPE_OP_RE = re.compile(
    r"^(?:(?:aten|flash_attn)::\w*(?:mm|mv|matmul|linear|einsum|conv|attention|attn)\w*"
    rf"|aten::(?:(?:{_MEMORY_OPS})_?|\w+_backward(?:_data)?|_foreach_\w+|_fused_\w+|\w*norm\w*|_?\w*softmax\w*"
    r"|\w*pool\d?d\w*|native_dropout\w*)"
    r"|triton_\w+|torch::autograd::AccumulateGrad)$")
_STREAM_RE = re.compile(r"^\s*stream\s+(\d+)", re.I)
LABEL_ID_BASE = -(1 << 40)
_COUNTS = ("bad_times", "wrong_types", "bad_utf8", "nonfinite", "outside")
_STRING_COLS = {"name", "stack", "cat", "collective", "dtype", "pg_name", "pg_ranks", "dims", "types", "concrete"}
# CPU ops of collectives whose first input is the message (record_param_comms, nccl:*, gloo:*): their
# shapes give the size on torch versions that record no collective args. (c10d::*_base_ ops take
# the output tensor first, so their shapes are not used.)
_COLLECTIVE_OP_RE = re.compile(r"^(record_param_comms$|nccl:|gloo:)")


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
        return {"parts": self.parts, "strings": self.strings.strings, "meta_events": self.meta_events,
                "n_events": self.n_events, "bad_args": self.bad_args, "ignored": self.ignored_phases,
                "counts": {k: getattr(self, k) for k in _COUNTS}, "bad_time_example": self.bad_time_example}

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
                    t["row"] = t["row"] + np.where(src == M.COLLECTIVE_FROM_KERNEL, offsets["gpu_ops"],
                                                   offsets["cpu_ops"])
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
    def add(self, evs: list[Event]) -> None:
        n = len(evs)
        if n == 0:
            return
        self.n_events += n
        self.bad_args += getattr(evs, "bad_args", 0)
        self.bad_utf8 += getattr(evs, "bad_utf8", 0)
        self.nonfinite += getattr(evs, "nonfinite", 0)
        ph = [e.ph for e in evs]
        cat = [e.cat for e in evs]
        try:
            cls, phases, cats = _classes(ph, cat)
        except TypeError:  # a list or object as ph or cat: read as absent
            ph, cat = self._scalars(ph), self._scalars(cat)
            cls, phases, cats = _classes(ph, cat)
        ts = decimal_text_to_scaled_int([e.ts for e in evs])
        dur = decimal_text_to_scaled_int([e.dur for e in evs])
        self._drop_impossible_times(evs, cls, ts, dur)
        if self.window is not None:
            self._drop_outside(cls, ts)
        by_class = {c: np.flatnonzero(cls == c) for c in distinct(cls).tolist()}
        for c, idx in by_class.items():
            if c == C_DROPPED:
                continue
            if c == C_IGNORE:
                for p in (ph[i] for i in idx.tolist()):
                    if isinstance(p, (list, dict)):
                        self.wrong_types += 1
                    else:
                        self.ignored_phases[str(p)[:20]] = self.ignored_phases.get(str(p)[:20], 0) + 1
                continue
            sub = _take(evs, idx)
            handler = self._handlers[c]
            handler(self, sub, ts[idx], cats.take(idx), dur[idx], phases.take(idx))

    def _drop_impossible_times(self, evs: list[Event], cls: np.ndarray, ts: np.ndarray, dur: np.ndarray) -> None:
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
            i = int(np.flatnonzero(bad)[0])
            e = evs[i]
            self.bad_time_example = f'"ts": {bytes(e.ts)[:40].decode("utf-8", "replace")}, ' \
                                    f'"dur": {bytes(e.dur)[:40].decode("utf-8", "replace")}'

    def _drop_outside(self, cls: np.ndarray, ts: np.ndarray) -> None:
        """Mark timed events that start outside the window as dropped, and count them."""
        start, end = self.window
        out = (cls != C_META) & (cls != C_IGNORE) & (cls != C_DROPPED) & ((ts < start) | (ts >= end))
        if out.any():
            cls[out] = C_DROPPED
            self.outside += int(out.sum())

    def _gpu(self, sub, ts, cats, dur, phases):
        args = [e.args or _EMPTY_ARGS for e in sub]
        n = len(sub)
        end = ts + dur
        pid = self.ids([e.pid for e in sub])
        tid = self.ids([e.tid for e in sub])
        device = to_int64([a.device for a in args])
        stream = to_int64([a.stream for a in args])
        device = np.where(device == -1, pid, device)
        stream = np.where(stream == -1, tid, stream)
        ext = _external_ids(args)
        grid = raw_triples([a.grid for a in args])
        block = raw_triples([a.block for a in args])
        kind = cats.lookup(_GPU_CATS.__getitem__)
        base = self.rows["gpu_ops"]
        self.rows["gpu_ops"] += n
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
            self._collectives(M.COLLECTIVE_FROM_KERNEL, [args[i] for i in has_coll],
                              np.asarray(has_coll) + base, ext[has_coll])

    def _cpu(self, sub, ts, cats, dur, phases):
        args = [e.args or _EMPTY_ARGS for e in sub]
        n = len(sub)
        ext = _external_ids(args)
        stacks = [a.call_stack for a in args]
        base = self.rows["cpu_ops"]
        self.rows["cpu_ops"] += n
        self.parts["cpu_ops"].append(Table("cpu_ops", {
            "kind": cats.lookup(_CPU_CATS.__getitem__),
            "pid": self.ids([e.pid for e in sub]), "tid": self.ids([e.tid for e in sub]),
            "name": self.names([e.name for e in sub]), "start_ns": ts,
            "end_ns": ts + dur, "external_id": ext, "depth": np.zeros(n),
            "stack": self.names(stacks) if any(s is not None for s in stacks) else np.full(n, -1),
        }))
        names = self.parts["cpu_ops"][-1]["name"]
        self._shapes(args, names, base)
        has_coll = [i for i, a in enumerate(args) if a.collective is not None]
        if has_coll:
            self._collectives(M.COLLECTIVE_FROM_CPU_OP, [args[i] for i in has_coll],
                              np.asarray(has_coll) + base, ext[has_coll])
        shaped = self._collective_op_rows(self.parts["cpu_ops"][-1]["name"])
        shaped = [i for i in shaped.tolist() if args[i].collective is None and len(args[i].input_dims) > 4]
        if shaped:
            sizes = [_first_input(args[i]) for i in shaped]
            keep = [k for k, (nelems, _) in enumerate(sizes) if nelems >= 0]
            if keep:
                rows = np.asarray([shaped[k] for k in keep])
                self._collectives(M.COLLECTIVE_FROM_CPU_OP, [args[i] for i in rows], rows + base, ext[rows],
                                  names=[sub[i].name for i in rows], shapes=[sizes[k] for k in keep])

    def _shapes(self, args: list[Args], names: np.ndarray, base: int) -> None:
        """Recorded shapes of the ops FLOPs are counted for; other ops' shapes stay undecoded."""
        wants = self._wants_shapes
        strings = self.strings.strings
        if wants.size < len(strings):  # classify names interned since the last chunk
            wants = self._wants_shapes = np.concatenate(
                [wants, np.fromiter((SHAPE_OP_RE.match(x[:M.MATCH_CHARS]) is not None for x in strings[wants.size:]), dtype=bool,
                                    count=len(strings) - wants.size)])
        cand = np.flatnonzero(np.append(wants, False)[names])  # a row without a name (-1) reads the False
        keep = [i for i in cand.tolist() if args[i].input_dims]
        if not keep:
            return
        sel = [args[i] for i in keep]

        def text(raws):
            return self.names([bytes(r).decode("utf-8", "replace") if r else None for r in raws])

        self.parts["op_shapes"].append(Table("op_shapes", {
            "row": np.asarray(keep, dtype=np.int64) + base, "dims": text([a.input_dims for a in sel]),
            "types": text([a.input_type for a in sel]), "concrete": text([a.concrete_inputs for a in sel]),
            "flops": to_float64([a.flops for a in sel]),
        }))

    def _collective_op_rows(self, name_ids: np.ndarray) -> np.ndarray:
        """Rows whose name is a collective CPU op (looked up once per distinct name)."""
        cache = self.__dict__.setdefault("_coll_names", {})
        uniq = distinct(name_ids)
        for sid in uniq.tolist():
            if sid not in cache:
                cache[sid] = sid >= 0 and _COLLECTIVE_OP_RE.match(self.strings.strings[sid][:M.MATCH_CHARS]) is not None
        hits = [sid for sid in uniq.tolist() if cache[sid]]
        return np.flatnonzero(isin(name_ids, hits)) if hits else np.zeros(0, dtype=np.int64)

    def _collectives(self, source, args, rows, ext, names=None, shapes=None):
        cols = {
            "source": np.full(len(args), source), "row": rows, "external_id": ext,
            "collective": self.names([str(a.collective) for a in args] if names is None else names),
            "in_nelems": to_int64([a.in_nelems for a in args]),
            "out_nelems": to_int64([a.out_nelems for a in args]),
            "group_size": to_int64([a.group_size for a in args]),
            "dtype": self.names([None if a.dtype is None else str(a.dtype) for a in args]),
            "pg_name": self.names([None if a.pg_name is None else str(a.pg_name) for a in args]),
            "pg_ranks": self.names([_ranks_text(a.pg_ranks) for a in args]),
            "seq": to_int64([a.seq if a.seq is not None else a.seq_lower for a in args]),
        }
        if shapes is not None:  # sizes from the op's first input: nelems and dtype
            cols["in_nelems"] = np.asarray([n for n, _ in shapes], dtype=np.int64)
            cols["dtype"] = self.names([t for _, t in shapes])
        self.parts["collectives"].append(Table("collectives", cols))

    def _runtime(self, sub, ts, cats, dur, phases):
        args = [e.args or _EMPTY_ARGS for e in sub]
        self.parts["runtime"].append(Table("runtime", {
            "kind": cats.lookup(_runtime_kind),
            "pid": self.ids([e.pid for e in sub]), "tid": self.ids([e.tid for e in sub]),
            "name": self.names([e.name for e in sub]), "start_ns": ts,
            "end_ns": ts + dur,
            "correlation": to_int64([a.correlation for a in args]),
            "external_id": _external_ids(args), "cbid": to_int64([a.cbid for a in args]),
        }))

    def _device_stream(self, sub, args):
        device = to_int64([a.device for a in args])
        stream = to_int64([a.stream for a in args])
        device = np.where(device == -1, self.ids([e.pid for e in sub]), device)
        stream = np.where(stream == -1, self.ids([e.tid for e in sub]), stream)
        return device, stream

    def _gpu_annot(self, sub, ts, cats, dur, phases):
        args = [e.args or _EMPTY_ARGS for e in sub]
        device, stream = self._device_stream(sub, args)
        self.parts["gpu_annotations"].append(Table("gpu_annotations", {
            "device": device, "stream": stream, "name": self.names([e.name for e in sub]),
            "start_ns": ts, "end_ns": ts + dur, "external_id": _external_ids(args),
        }))

    def _sync(self, sub, ts, cats, dur, phases):
        args = [e.args or _EMPTY_ARGS for e in sub]
        device, stream = self._device_stream(sub, args)
        self.parts["syncs"].append(Table("syncs", {
            "device": device, "stream": stream, "name": self.names([e.name for e in sub]),
            "start_ns": ts, "end_ns": ts + dur,
            "correlation": to_int64([a.correlation for a in args]),
            "wait_on_stream": to_int64([a.wait_on_stream for a in args]),
        }))

    def _flow(self, sub, ts, cats, dur, phases):
        phase = {"s": M.FLOW_START, "t": M.FLOW_STEP, "f": M.FLOW_END}
        self.parts["flows"].append(Table("flows", {
            "id": to_int64([e.id for e in sub]),
            "phase": phases.lookup(phase.__getitem__),
            "cat": cats.text_ids(self.strings),
            "pid": self.ids([e.pid for e in sub]), "tid": self.ids([e.tid for e in sub]), "ts_ns": ts,
        }))

    def _instant(self, sub, ts, cats, dur, phases):
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

    def _meta(self, sub, ts, cats, dur, phases):
        for e in sub:
            a = e.args or _EMPTY_ARGS
            self.meta_events.append((e.name, e.pid, e.tid, a.name, a.labels))

    def _other(self, sub, ts, cats, dur, phases):
        self.parts["other_spans"].append(Table("other_spans", {
            "cat": cats.text_ids(self.strings),
            "name": self.names([None if e.name is None else str(e.name) for e in sub]),
            "pid": self.ids([e.pid for e in sub]), "tid": self.ids([e.tid for e in sub]),
            "start_ns": ts, "end_ns": ts + dur,
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
