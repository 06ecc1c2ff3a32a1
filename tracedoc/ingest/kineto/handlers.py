"""One chunk's events of one class -> the rows of their table. Each handler reads its events' fields
through ``rows`` (``StructRows`` or ``ScanRows``: the same values from either decoder) and appends a
``Table`` to the reader's parts."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from ...model import trace as M
from ...model.groups import distinct, isin
from ...model.numbers import to_int64
from ...model.trace import Table
from .argvalues import _first_input, _ranks_text
from .rows import StructRows, raw_lengths

_GPU_CATS = {
    "kernel": M.KERNEL,
    "Kernel": M.KERNEL,
    "gpu_memcpy": M.MEMCPY,
    "Memcpy": M.MEMCPY,
    "gpu_memset": M.MEMSET,
    "Memset": M.MEMSET,
}
_CPU_CATS = {
    "cpu_op": M.CPU_OP,
    "Operator": M.CPU_OP,
    "user_annotation": M.USER_ANNOTATION,
    "python_function": M.PYTHON_FUNCTION,
}
_RUNTIME_CATS = {"cuda_runtime": M.RUNTIME, "Runtime": M.RUNTIME, "cuda_driver": M.DRIVER}


def _runtime_kind(cat: Any) -> int:
    return _RUNTIME_CATS.get(cat, M.RUNTIME_OTHER)


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
    "var_mean|std_mean|embedding|index_select"
)
SHAPE_OP_RE = re.compile(
    r"^(?:(?:aten|flash_attn)::\w*(?:mm|mv|matmul|linear|einsum|conv|attention|attn)\w*"
    rf"|aten::(?:(?:{_MEMORY_OPS})_?|\w+_backward(?:_data)?|_foreach_\w+|_fused_\w+|\w*norm\w*|_?\w*softmax\w*"
    r"|\w*pool\d?d\w*|native_dropout\w*)"
    r"|triton_\w+|torch::autograd::AccumulateGrad)$"
)
# CPU ops of collectives whose first input is the message (record_param_comms, nccl:*, gloo:*): their
# shapes give the size on torch versions that record no collective args. (c10d::*_base_ ops take
# the output tensor first, so their shapes are not used.)
_COLLECTIVE_OP_RE = re.compile(r"^(record_param_comms$|nccl:|gloo:)")


def external_ids(sub: StructRows) -> np.ndarray:
    ext = sub.int64("external_id")
    missing = ext == -1
    if missing.any():
        ext = np.where(missing, sub.int64("external_id_legacy"), ext)
    return ext


def gpu(r, sub, ts, cats, dur, phases):
    n = sub.n
    end = ts + dur
    pid = sub.ids("pid", r)
    tid = sub.ids("tid", r)
    device = sub.int64("device")
    stream = sub.int64("stream")
    device = np.where(device == -1, pid, device)
    stream = np.where(stream == -1, tid, stream)
    ext = external_ids(sub)
    grid = sub.triples("grid")
    block = sub.triples("block")
    kind = cats.lookup(_GPU_CATS.__getitem__)
    base = r.rows["gpu_ops"]
    r.rows["gpu_ops"] += n
    r.parts["gpu_ops"].append(
        Table(
            "gpu_ops",
            {
                "kind": kind,
                "device": device,
                "stream": stream,
                "start_ns": ts,
                "end_ns": end,
                "name": sub.names("name", r),
                "correlation": sub.int64("correlation"),
                "external_id": ext,
                "pid": np.full(n, -1),
                "grid_x": grid[:, 0],
                "grid_y": grid[:, 1],
                "grid_z": grid[:, 2],
                "block_x": block[:, 0],
                "block_y": block[:, 1],
                "block_z": block[:, 2],
                "registers": sub.int64("registers"),
                "shared_mem": sub.int64("shared_memory"),
                "blocks_per_sm": sub.float64("blocks_per_sm"),
                "warps_per_sm": sub.float64("warps_per_sm"),
                "est_occupancy": sub.float64("occupancy"),
                "bytes": sub.int64("bytes"),
                "copy_kind": np.zeros(n),
                "src_kind": np.full(n, -1),
                "dst_kind": np.full(n, -1),
                "graph_id": sub.int64("graph_id"),
                "launch": np.full(n, -1),
            },
        )
    )
    has_coll = np.flatnonzero(sub.given("collective"))
    if has_coll.size:
        _collectives(r, M.COLLECTIVE_FROM_KERNEL, sub.take(has_coll), has_coll + base, ext[has_coll])


def cpu(r, sub, ts, cats, dur, phases):
    n = sub.n
    ext = external_ids(sub)
    base = r.rows["cpu_ops"]
    r.rows["cpu_ops"] += n
    r.parts["cpu_ops"].append(
        Table(
            "cpu_ops",
            {
                "kind": cats.lookup(_CPU_CATS.__getitem__),
                "pid": sub.ids("pid", r),
                "tid": sub.ids("tid", r),
                "name": sub.names("name", r),
                "start_ns": ts,
                "end_ns": ts + dur,
                "external_id": ext,
                "depth": np.zeros(n),
                "stack": sub.names("call_stack", r) if sub.given("call_stack").any() else np.full(n, -1),
            },
        )
    )
    names = r.parts["cpu_ops"][-1]["name"]
    _shapes(r, sub, names, base)
    coll = sub.given("collective")
    has_coll = np.flatnonzero(coll)
    if has_coll.size:
        _collectives(r, M.COLLECTIVE_FROM_CPU_OP, sub.take(has_coll), has_coll + base, ext[has_coll])
    shaped = _collective_op_rows(r, names)
    if shaped.size:
        shaped = shaped[~coll[shaped] & (raw_lengths(sub.take(shaped), "input_dims") > 4)]
    if shaped.size:
        sel = sub.take(shaped)
        sizes = [_first_input(d, t) for d, t in zip(sel.raws("input_dims"), sel.raws("input_type"))]
        keep = [k for k, (nelems, _) in enumerate(sizes) if nelems >= 0]
        if keep:
            rows = shaped[keep]
            _collectives(
                r,
                M.COLLECTIVE_FROM_CPU_OP,
                sub.take(rows),
                rows + base,
                ext[rows],
                names=sub.take(rows).values("name"),
                shapes=[sizes[k] for k in keep],
            )


def _shapes(r, sub, names: np.ndarray, base: int) -> None:
    """Recorded shapes of the ops FLOPs are counted for; other ops' shapes stay undecoded."""
    wants = r._wants_shapes
    strings = r.strings.strings
    if wants.size < len(strings):  # classify names interned since the last chunk
        wants = r._wants_shapes = np.concatenate(
            [
                wants,
                np.fromiter(
                    (SHAPE_OP_RE.match(x[: M.MATCH_CHARS]) is not None for x in strings[wants.size :]),
                    dtype=bool,
                    count=len(strings) - wants.size,
                ),
            ]
        )
    cand = np.flatnonzero(np.append(wants, False)[names])  # a row without a name (-1) reads the False
    if not cand.size:
        return
    keep = cand[raw_lengths(sub.take(cand), "input_dims") > 0]
    if not keep.size:
        return
    sel = sub.take(keep)
    r.parts["op_shapes"].append(
        Table(
            "op_shapes",
            {
                "row": keep.astype(np.int64) + base,
                "dims": sel.text_ids("input_dims", r),
                "types": sel.text_ids("input_type", r),
                "concrete": sel.text_ids("concrete_inputs", r),
                "flops": sel.float64("flops"),
            },
        )
    )


def _collective_op_rows(r, name_ids: np.ndarray) -> np.ndarray:
    """Rows whose name is a collective CPU op (looked up once per distinct name)."""
    cache = r.__dict__.setdefault("_coll_names", {})
    uniq = distinct(name_ids)
    for sid in uniq.tolist():
        if sid not in cache:
            cache[sid] = sid >= 0 and _COLLECTIVE_OP_RE.match(r.strings.strings[sid][: M.MATCH_CHARS]) is not None
    hits = [sid for sid in uniq.tolist() if cache[sid]]
    return np.flatnonzero(isin(name_ids, hits)) if hits else np.zeros(0, dtype=np.int64)


def _collectives(r, source, sub, rows, ext, names=None, shapes=None):
    def text(field):
        return [None if v is None else str(v) for v in sub.values(field)]

    seq = [s if s is not None else low for s, low in zip(sub.values("seq"), sub.values("seq_lower"))]
    cols = {
        "source": np.full(sub.n, source),
        "row": rows,
        "external_id": ext,
        "collective": r.names([str(v) for v in sub.values("collective")] if names is None else names),
        "in_nelems": sub.int64("in_nelems"),
        "out_nelems": sub.int64("out_nelems"),
        "group_size": sub.int64("group_size"),
        "dtype": r.names(text("dtype")),
        "pg_name": r.names(text("pg_name")),
        "pg_ranks": r.names([_ranks_text(v) for v in sub.values("pg_ranks")]),
        "seq": to_int64(seq),
    }
    if shapes is not None:  # sizes from the op's first input: nelems and dtype
        cols["in_nelems"] = np.asarray([n for n, _ in shapes], dtype=np.int64)
        cols["dtype"] = r.names([t for _, t in shapes])
    r.parts["collectives"].append(Table("collectives", cols))


def runtime(r, sub, ts, cats, dur, phases):
    r.parts["runtime"].append(
        Table(
            "runtime",
            {
                "kind": cats.lookup(_runtime_kind),
                "pid": sub.ids("pid", r),
                "tid": sub.ids("tid", r),
                "name": sub.names("name", r),
                "start_ns": ts,
                "end_ns": ts + dur,
                "correlation": sub.int64("correlation"),
                "external_id": external_ids(sub),
                "cbid": sub.int64("cbid"),
            },
        )
    )


def _device_stream(r, sub):
    device = sub.int64("device")
    stream = sub.int64("stream")
    device = np.where(device == -1, sub.ids("pid", r), device)
    stream = np.where(stream == -1, sub.ids("tid", r), stream)
    return device, stream


def gpu_annot(r, sub, ts, cats, dur, phases):
    device, stream = _device_stream(r, sub)
    r.parts["gpu_annotations"].append(
        Table(
            "gpu_annotations",
            {
                "device": device,
                "stream": stream,
                "name": sub.names("name", r),
                "start_ns": ts,
                "end_ns": ts + dur,
                "external_id": external_ids(sub),
            },
        )
    )


def sync(r, sub, ts, cats, dur, phases):
    device, stream = _device_stream(r, sub)
    r.parts["syncs"].append(
        Table(
            "syncs",
            {
                "device": device,
                "stream": stream,
                "name": sub.names("name", r),
                "start_ns": ts,
                "end_ns": ts + dur,
                "correlation": sub.int64("correlation"),
                "wait_on_stream": sub.int64("wait_on_stream"),
            },
        )
    )


def flow(r, sub, ts, cats, dur, phases):
    phase = {"s": M.FLOW_START, "t": M.FLOW_STEP, "f": M.FLOW_END}
    r.parts["flows"].append(
        Table(
            "flows",
            {
                "id": sub.int64("id"),
                "phase": phases.lookup(phase.__getitem__),
                "cat": cats.text_ids(r.strings),
                "pid": sub.ids("pid", r),
                "tid": sub.ids("tid", r),
                "ts_ns": ts,
            },
        )
    )


def instant(r, sub, ts, cats, dur, phases):
    keep = np.flatnonzero(sub.equals("name", "[memory]"))
    if not keep.size:
        return
    sub = sub.take(keep)
    ts = ts[keep]
    r.parts["memory"].append(
        Table(
            "memory",
            {
                "ts_ns": ts,
                "device_type": sub.int64("device_type"),
                "device_id": sub.int64("device_id"),
                "bytes": sub.int64("mem_bytes"),
                "total_allocated": sub.int64("total_allocated"),
                "total_reserved": sub.int64("total_reserved"),
                "addr": sub.int64("addr"),
                "pid": sub.ids("pid", r),
                "tid": sub.ids("tid", r),
            },
        )
    )


def meta(r, sub, ts, cats, dur, phases):
    r.meta_events.extend(
        zip(sub.values("name"), sub.values("pid"), sub.values("tid"), sub.values("args_name"), sub.values("labels"))
    )


def other(r, sub, ts, cats, dur, phases):
    r.parts["other_spans"].append(
        Table(
            "other_spans",
            {
                "cat": cats.text_ids(r.strings),
                "name": r.names([None if v is None else str(v) for v in sub.values("name")]),
                "pid": sub.ids("pid", r),
                "tid": sub.ids("tid", r),
                "start_ns": ts,
                "end_ns": ts + dur,
            },
        )
    )
