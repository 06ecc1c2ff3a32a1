"""Per-op roofline (docs/flops.md): one row per (op, input shapes, dtype) with calls, GPU time per
call, FLOPs, bytes moved, TFLOP/s, TB/s, arithmetic intensity, whether the shape is compute- or
memory-bound on this device (by its ridge point, peak FLOP/s / memory bandwidth) and how close it
comes to that roof.

Every compute kernel in the window belongs to exactly one row, so the rows add up to the compute
time: a kernel launched inside a counted matmul/conv/attention op belongs to that op (the one the
FLOPs analysis counts, so no product is counted twice), else to the innermost op around its launch
that has a memory model (element-wise, copies, reductions, softmax, normalisation, pooling,
embedding, optimizers, Triton kernels of compiled graphs), else to the op that launched it, as a row
without FLOPs or bytes. FLOPs are the hardware FLOPs the kernels executed (a fused attention backward
recomputes QK^T); bytes are a lower bound (``opflops.memory``), so a memory-bound row above the
device's bandwidth read part of its data from cache, which its note says.

Fused optimizers record no shapes for their TensorLists; their parameters are then those the last
backward pass before them accumulated gradients for (``AccumulateGrad``), when that is unambiguous.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ...model import trace as M
from ...model.evidence import BelowRoof, RooflineRow
from ...model.groups import Groups, dense_codes, distinct, first_match, isin
from ...model.peaks import DevicePeak, device_peak
from ...model.trace import Trace
from . import formulas as F
from .kernel_credit import OVER_PEAK_NOTE
from .counted_ops import parse, resolve_each
from .mfu import device_name
from ..host.nesting import ThreadClock, enclosing
from .formulas import memory as MEM
from .formulas.optimizers import optimizer_flops_per_param, optimizer_touches_per_param
from .formulas.tensors import COMPILED, OPTIMIZER, TENSOR_LISTS_MISSING, tensor_at
from ..core.registry import Produced, analysis

ROW_CAP = 100  # rows kept in the evidence table (most GPU time first); the rest are summed into one last row
UNMODELLED = "unmodelled"
ACCUMULATE_GRAD = "torch::autograd::AccumulateGrad"
FROM_GRADIENTS = "parameters from the gradients the backward pass accumulated (TensorLists not recorded)"
_FLOP_CLASSES = (F.MATMUL, F.CONV, F.ATTENTION)
# Triton kernel kinds inductor emits for point-wise and reduction code (memory-bound by construction);
# templates (triton_tem_*) are matrix products whose FLOPs the record does not give
_TRITON_MEMORY = ("triton_poi_", "triton_red_", "triton_per_")


@dataclass
class _Instances:
    """One entry per op call that launched compute kernels in the window."""

    row: np.ndarray  # cpu_ops row (-1: kernels with no launching op)
    gpu_ns: np.ndarray
    name: np.ndarray  # name id
    dims: np.ndarray  # shapes string id (-1 none)
    op_class: np.ndarray  # object
    dtype: np.ndarray  # object (None unknown)
    flops: np.ndarray  # NaN unknown
    bytes: np.ndarray  # NaN unknown
    note: np.ndarray  # object: what the numbers rest on, or why there are none


def _deepest_owner(trace: Trace, clock: ThreadClock, rows: np.ndarray, qs: np.ndarray, qe: np.ndarray) -> np.ndarray:
    """Index into ``rows`` (cpu ops) of the deepest one enclosing each query span (-1 none): ops of one
    depth do not overlap on a thread, so each depth is one sorted search."""
    out = np.full(qs.size, -1, dtype=np.int64)
    depth = trace.cpu_ops["depth"][rows]
    for d in distinct(depth).tolist():
        at = np.flatnonzero(depth == d)
        ks = clock.cpu(rows[at], "start_ns")
        order = np.argsort(ks, kind="stable")
        at, ks = at[order], ks[order]
        hit = enclosing(ks, clock.cpu(rows[at], "end_ns"), qs, qe)
        out[hit >= 0] = at[hit[hit >= 0]]
    return out


def _launch_spans(trace: Trace, clock: ThreadClock, kernels: np.ndarray, launch_rows: np.ndarray):
    """Where each kernel was launched, on the thread clock: its launch call's span, else the span of
    the op its External id names; (-1, -1) when neither is known."""
    g = trace.gpu_ops
    qs = np.full(kernels.size, -1, dtype=np.int64)
    qe = np.full(kernels.size, -2, dtype=np.int64)
    call = g["launch"][kernels]
    by_call = call >= 0
    if by_call.any():
        qs[by_call], qe[by_call] = clock.runtime(call[by_call], "start_ns"), clock.runtime(call[by_call], "end_ns")
    by_op = ~by_call & (launch_rows >= 0)
    if by_op.any():
        qs[by_op], qe[by_op] = clock.cpu(launch_rows[by_op], "start_ns"), clock.cpu(launch_rows[by_op], "end_ns")
    return qs, qe


def _memory_ops(trace: Trace) -> tuple[np.ndarray, list]:
    """op_shapes rows of ops with a memory model, and each one's ``OpCost`` or why it has none."""
    s, c = trace.op_shapes, trace.cpu_ops
    if not len(s):
        return np.zeros(0, dtype=np.int64), []
    rows = np.flatnonzero(trace.string_ids(F.has_memory_formula)[c["name"][s["row"]]])
    return rows, resolve_each(trace, rows, lambda n, d, t, cc, f: MEM.op_cost(n, d, t, cc))


def _instances(trace: Trace, flop_ops, lo: int, hi: int, comm_mask, gpu_ext, launching_ops, clock) -> tuple:
    """Each compute kernel in the window with the op call it belongs to, and those calls."""
    g, c, s = trace.gpu_ops, trace.cpu_ops, trace.op_shapes
    kern = np.flatnonzero((g["kind"] == M.KERNEL) & ~comm_mask & (g["start_ns"] < hi) & (g["end_ns"] > lo))
    owner = np.full(kern.size, -1, dtype=np.int64)  # cpu row
    counted = flop_ops.counted if flop_ops is not None else None
    if counted is not None and counted.rows.size:
        fo = flop_ops.kernel_owner[kern]
        owner[fo >= 0] = counted.rows[fo[fo >= 0]]
    launch_rows = launching_ops.rows_of(gpu_ext[kern])
    mem_idx, mem_cost = _memory_ops(trace)
    mem_rows = s["row"][mem_idx] if mem_idx.size else mem_idx
    rest = owner < 0
    if rest.any():
        qs, qe = _launch_spans(trace, clock, kern[rest], launch_rows[rest])
        if mem_rows.size:
            hit = _deepest_owner(trace, clock, mem_rows, qs, qe)
            owner[np.flatnonzero(rest)[hit >= 0]] = mem_rows[hit[hit >= 0]]
        left = np.flatnonzero(owner < 0)
        known = launch_rows[left] >= 0
        owner[left[known]] = launch_rows[left[known]]
        unnamed = left[~known]
        if unnamed.size:  # no External id: the innermost op around the launch call
            qs, qe = _launch_spans(trace, clock, kern[unnamed], launch_rows[unnamed])
            ops = np.flatnonzero(c["kind"] == M.CPU_OP)
            hit = _deepest_owner(trace, clock, ops, qs, qe) if ops.size else np.full(unnamed.size, -1)
            owner[unnamed[hit >= 0]] = ops[hit[hit >= 0]]
    dur = (g["end_ns"] - g["start_ns"])[kern].astype(np.int64)
    rows, inverse = dense_codes(owner)
    gpu_ns = np.bincount(inverse, weights=dur, minlength=rows.size).astype(np.int64)
    n = rows.size
    names = np.where(rows >= 0, c["name"][np.maximum(rows, 0)], -1) if len(c) else np.full(n, -1, dtype=np.int64)
    inst = _Instances(
        rows,
        gpu_ns,
        names,
        np.full(n, -1, dtype=np.int64),
        np.full(n, UNMODELLED, dtype=object),
        np.full(n, None, dtype=object),
        np.full(n, np.nan),
        np.full(n, np.nan),
        np.full(n, None, dtype=object),
    )
    if len(s):  # the shapes record of each call
        at = first_match((rows,), (s["row"],))
        inst.dims[at >= 0] = s["dims"][at[at >= 0]]
    if counted is not None and counted.rows.size:
        k = first_match((rows,), (counted.rows,))
        hit = k >= 0
        inst.op_class[hit] = counted.op_class[k[hit]].astype(str)
        inst.dtype[hit] = counted.dtype[k[hit]]
        # the share of each op's FLOPs and bytes its kernels inside the window ran (``flop_credit``)
        credit = flop_ops.credit
        total = credit.op_kernel_ns[k[hit]] if credit is not None else inst.gpu_ns[hit]
        share = np.divide(inst.gpu_ns[hit], total, out=np.ones(int(hit.sum())), where=total > 0)
        inst.flops[hit] = counted.hw_flops[k[hit]] * share
        inst.bytes[hit] = np.where(counted.bytes[k[hit]] > 0, counted.bytes[k[hit]] * share, np.nan)
    if mem_rows.size:
        j = first_match((rows,), (mem_rows,))
        hit = (j >= 0) & (inst.op_class == UNMODELLED)
        costs = [mem_cost[i] for i in j[hit].tolist()]  # one entry per modelled call
        ok = np.array([not isinstance(x, str) for x in costs], dtype=bool)
        at = np.flatnonzero(hit)
        inst.note[at[~ok]] = np.array([x for x in costs if isinstance(x, str)] + [None], dtype=object)[:-1]
        good = [x for x in costs if not isinstance(x, str)]
        inst.op_class[at[ok]] = np.array([x.op_class for x in good] + [None], dtype=object)[:-1]
        inst.dtype[at[ok]] = np.array([x.dtype for x in good] + [None], dtype=object)[:-1]
        inst.flops[at[ok]] = np.array([np.nan if x.flops is None else x.flops for x in good], dtype=np.float64)
        inst.bytes[at[ok]] = np.array([x.bytes for x in good], dtype=np.float64)
    _why_unmodelled(trace, inst)
    return inst, kern, inverse, dur


def _why_unmodelled(trace: Trace, inst: _Instances) -> None:
    """The note of calls left without numbers that have none yet."""
    left = (inst.op_class == UNMODELLED) & np.array([n is None for n in inst.note.tolist()], dtype=bool)
    if not left.any():
        return
    flop_names = trace.string_ids(F.is_flop_op)
    name = inst.name
    no_op = left & (name < 0)
    flop_op = left & (name >= 0) & flop_names[np.maximum(name, 0)]
    inst.note[no_op] = "no launching op recorded for these kernels"
    inst.note[flop_op & (inst.dims < 0)] = "no shapes recorded (profile with record_shapes=True)"
    inst.note[flop_op & (inst.dims >= 0)] = "its recorded shapes give no FLOP count (flops_not_counted says why)"
    inst.note[left & ~no_op & ~flop_op] = "no FLOP or memory model for this op"


def _optimizer_params(trace: Trace, flop_ops, inst: _Instances) -> None:
    """Fused optimizers whose TensorList shapes were not recorded: their parameters are the tensors the
    last backward pass before them accumulated gradients into (AccumulateGrad ops after the last
    forward matmul/conv/attention op). Calls between the same forward op share those parameters;
    when they are different optimizers, the split is unknown and nothing is filled in."""
    c, s = trace.cpu_ops, trace.op_shapes
    missing = np.flatnonzero(inst.note == TENSOR_LISTS_MISSING)
    todo = [i for i in missing.tolist() if optimizer_flops_per_param(trace.string(int(inst.name[i]))) is not None]
    counted = flop_ops.counted if flop_ops is not None else None
    if not todo or counted is None or not len(s):
        return
    fwd = np.sort(c["start_ns"][counted.rows[(counted.phase == F.FORWARD) & ~counted.recomputed]])
    acc_ids = np.flatnonzero(trace.string_ids(lambda n: n == ACCUMULATE_GRAD))
    acc = np.flatnonzero(isin(c["name"][s["row"]], acc_ids)) if acc_ids.size else np.zeros(0, dtype=np.int64)
    if not fwd.size or not acc.size:
        return
    cache: dict = {}
    acc_start = c["start_ns"][s["row"][acc]]
    sizes = []
    for k in acc.tolist():  # one parse per distinct record (cached)
        dims, types = parse(trace, int(s["dims"][k]), cache), parse(trace, int(s["types"][k]), cache)
        t = tensor_at(dims, types, 0)
        sizes.append((t.numel, t.size, t.dtype) if t is not None else (0, 0, None))
    stretch = {}
    for i in todo:
        t = c["start_ns"][inst.row[i]]
        k = int(np.searchsorted(fwd, t, side="left")) - 1
        if k >= 0:
            stretch.setdefault(int(fwd[k]), []).append(i)
    for begin, calls in stretch.items():
        names = {int(inst.name[i]) for i in calls}
        end = max(c["start_ns"][inst.row[i]] for i in calls)
        mine = [sizes[j] for j in np.flatnonzero((acc_start > begin) & (acc_start < end)).tolist()]
        if len(names) != 1 or not mine or any(size == 0 for _, size, _ in mine):
            continue
        name = trace.string(names.pop())
        concrete = parse(trace, int(s["concrete"][_shapes_row(trace, inst.row[calls[0]])]), cache)
        touches = optimizer_touches_per_param(name, concrete)
        params = sum(n for n, _, _ in mine)
        moved = sum(n * size for n, size, _ in mine) * touches
        for i in calls:
            inst.op_class[i] = OPTIMIZER
            inst.dtype[i] = "/".join(dict.fromkeys(d for _, _, d in mine if d)) or None
            inst.flops[i] = params * optimizer_flops_per_param(name) / len(calls)
            inst.bytes[i] = moved / len(calls)
            inst.note[i] = FROM_GRADIENTS


def _shapes_row(trace: Trace, cpu_row: int) -> int:
    s = trace.op_shapes
    hit = np.flatnonzero(s["row"] == cpu_row)
    return int(hit[0]) if hit.size else -1


def _union_ns(kern_start: np.ndarray, kern_end: np.ndarray, group: np.ndarray, n: int, lo: int, hi: int) -> np.ndarray:
    """Per group, the length of the union of its kernels' spans inside [lo, hi)."""
    if not group.size:
        return np.zeros(n, dtype=np.int64)
    span = hi - lo + 1
    s = group * span + (np.clip(kern_start, lo, hi) - lo)
    e = group * span + (np.clip(kern_end, lo, hi) - lo)
    order = np.argsort(s, kind="stable")
    s, e, grp = s[order], e[order], group[order]
    run = np.maximum.accumulate(e)
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > run[:-1]
    starts = np.flatnonzero(new)
    ends = np.maximum.reduceat(e, starts)
    return np.bincount(grp[starts], weights=(ends - s[starts]).astype(np.float64), minlength=n).astype(np.int64)


def _shape_text(trace: Trace, dims_sid: int, cache: dict) -> str | None:
    """The tensor inputs' shapes of a record, ``[4096, 2048] x [2048, 8192]``; None without shapes."""
    if dims_sid < 0:
        return None
    dims = parse(trace, dims_sid, cache)
    shown = [
        d
        for d in dims
        if isinstance(d, list) and d and (all(isinstance(x, int) for x in d) or all(isinstance(x, list) for x in d))
    ]
    if not shown:
        return "[]"
    return " x ".join(
        json.dumps(d, separators=(", ", ":")) if not d or not isinstance(d[0], list) else f"{len(d)} tensors"
        for d in shown
    )


def _roof(peak_row: DevicePeak | None, cls: str, dtype: str | None) -> tuple[float | None, float | None]:
    """(peak TFLOP/s, memory TB/s) the row is measured against: matrix classes the dtype's (Tensor
    Core) peak, other ops the CUDA-core (vector) rate (PyTorch computes element-wise work on half
    types in fp32) or fp64's for double; none for rows without a model."""
    if peak_row is None:
        return None, None
    if cls == UNMODELLED:
        return None, peak_row.hbm_tb_per_s
    if cls in _FLOP_CLASSES:
        peak = peak_row.peak_tflops(dtype)
    elif dtype and "fp64" in dtype.split("/"):
        peak = peak_row.peak_tflops("fp64")
    else:
        peak = peak_row.vector_tflops
    return peak, peak_row.hbm_tb_per_s


def _rate_columns(row: dict, peak, bw, compiled_kind: str) -> None:
    ns, flops, moved = row["gpu_ns"], row["flops"], row["bytes"]
    row["tflops"] = flops / ns / 1e3 if flops is not None and ns else None
    row["tb_per_s"] = moved / ns / 1e3 if moved is not None and ns else None
    row["flop_per_byte"] = flops / moved if flops is not None and moved else None
    row["ridge_flop_per_byte"] = peak / bw if peak and bw else None
    row["peak_tflops"], row["bandwidth_tb_per_s"] = peak, bw
    ai, ridge = row["flop_per_byte"], row["ridge_flop_per_byte"]
    bound = roof = None
    if ai is not None and ridge is not None:
        bound = "compute" if ai >= ridge else "memory"
        roof = peak if bound == "compute" else ai * bw
    elif row["op_class"] == COMPILED and compiled_kind == "memory" and bw:
        bound = "memory"
    row["bound"], row["roof_tflops"] = bound, roof
    if bound == "memory" and row["tb_per_s"] is not None and bw:
        frac = row["tb_per_s"] / bw
    elif bound == "compute" and row["tflops"] is not None and peak:
        frac = row["tflops"] / peak
    else:
        frac = None
    if frac is not None and frac > 1 and bound == "compute":  # no kernel runs faster than its peak: say why
        row["note"] = (row.get("note") + "; " if row.get("note") else "") + OVER_PEAK_NOTE
        row["tflops"] = frac = None
    if frac is not None and frac > 1 and bound == "memory":
        if "bandwidth" not in (row.get("note") or ""):
            row["note"] = (
                row.get("note") + "; " if row.get("note") else ""
            ) + "above the memory bandwidth: part of the data came from cache"
        frac = None
    row["of_roof_fraction"] = frac


def roofline(
    trace: Trace, flop_ops, lo: int, hi: int, comm_mask, gpu_ext, launching_ops, device: str | None, cap: int = ROW_CAP
) -> list[RooflineRow]:
    """The roofline rows, most GPU time first; rows past ``cap`` summed into a last row."""
    g = trace.gpu_ops
    if not len(g) or hi <= lo:
        return []
    clock = ThreadClock(trace)
    inst, kern, inverse, dur = _instances(trace, flop_ops, lo, hi, comm_mask, gpu_ext, launching_ops, clock)
    if not inst.row.size:
        return []
    _optimizer_params(trace, flop_ops, inst)
    peak_row = device_peak(device) if device else None
    cls_ids, cls_code = dense_codes(inst.op_class.astype(str))
    dt_ids, dt_code = dense_codes(np.array(["" if d is None else d for d in inst.dtype.tolist()], dtype=str))
    groups = Groups(inst.name, inst.dims, cls_code, dt_code)
    union = _union_ns(g["start_ns"][kern], g["end_ns"][kern], groups.index[inverse], groups.size, lo, hi)
    first = groups.first(np.arange(inst.row.size))
    calls, gpu_ns = groups.count(), groups.sum(inst.gpu_ns)
    flops, moved = groups.sum(inst.flops), groups.sum(inst.bytes)  # NaN where any call's is unknown
    op_names = [trace.string(int(n)) if n >= 0 else "(kernels with no launching op)" for n in inst.name[first].tolist()]
    order = sorted(range(groups.size), key=lambda k: (-int(gpu_ns[k]), op_names[k]))
    cache: dict = {}
    rows = []
    for k in order[: cap if len(order) <= cap else cap - 1]:  # a loop over the rows shown, not over calls
        i = int(first[k])
        n = int(calls[k]) if inst.row[i] >= 0 else None
        row = {
            "op": op_names[k],
            "op_class": str(inst.op_class[i]),
            "input_shapes": _shape_text(trace, int(inst.dims[i]), cache),
            "dtype": inst.dtype[i],
            "calls": n,
            "gpu_ns": int(gpu_ns[k]),
            "gpu_ns_per_call": float(gpu_ns[k]) / n if n else None,
            "flops": None if np.isnan(flops[k]) else float(flops[k]),
            "bytes": None if np.isnan(moved[k]) else float(moved[k]),
            "step_fraction": float(union[k]) / (hi - lo),
            "note": inst.note[i],
        }
        row["flops_per_call"] = row["flops"] / n if row["flops"] is not None and n else None
        row["bytes_per_call"] = row["bytes"] / n if row["bytes"] is not None and n else None
        peak, bw = _roof(peak_row, row["op_class"], row["dtype"])
        if row["note"] == FROM_GRADIENTS and bw and row["bytes"] and row["bytes"] / row["gpu_ns"] / 1e3 > bw:
            row["note"] = (
                FROM_GRADIENTS + "; more bytes than the memory bandwidth moves in the kernels' time: part "
                "of the data came from cache, or the optimizer updates fewer parameters than got "
                "gradients (a sharded optimizer)"
            )
        _rate_columns(row, peak, bw, "memory" if row["op"].startswith(_TRITON_MEMORY) else "unknown")
        rows.append(RooflineRow(**row))
    if len(order) > cap:
        rest = np.asarray(order[cap - 1 :])
        real = inst.row[first[rest]] >= 0  # not the kernels without a launching op
        rows.append(_rest_row(rest.size, int(calls[rest][real].sum()), int(gpu_ns[rest].sum())))
    return rows


def _rest_row(n_rows: int, calls: int, gpu_ns: int) -> RooflineRow:
    row = {
        "op": f"({n_rows} more op/shape rows)",
        "op_class": "mixed",
        "input_shapes": None,
        "dtype": None,
        "calls": calls,
        "gpu_ns": gpu_ns,
        "gpu_ns_per_call": None,
        "flops": None,
        "bytes": None,
        "step_fraction": None,
        "note": "summed so that the rows add up to the compute time; rates are per row above",
    }
    row.update(
        dict.fromkeys(
            (
                "flops_per_call",
                "bytes_per_call",
                "tflops",
                "tb_per_s",
                "flop_per_byte",
                "ridge_flop_per_byte",
                "peak_tflops",
                "bandwidth_tb_per_s",
                "bound",
                "roof_tflops",
                "of_roof_fraction",
            )
        )
    )
    return RooflineRow(**row)


GAP_ROWS = 10  # rows of the below-roof table
GAPS_NAMED = 3  # rows the metric names


def below_roof(rows: list[RooflineRow], top: int = GAP_ROWS) -> list[BelowRoof]:
    """The rows whose distance to their roof costs the most step time: share of the step x (1 - share
    of the roof reached), the time the step would lose if the op ran at its roof."""
    out = []
    for r in rows:
        frac, share = r.of_roof_fraction, r.step_fraction
        if frac is None or share is None:
            continue
        out.append(
            BelowRoof(
                op_class=r.op_class,
                op=r.op,
                input_shapes=r.input_shapes,
                dtype=r.dtype,
                bound=r.bound,
                of_roof_fraction=frac,
                step_fraction=share,
                below_roof_step_fraction=share * (1.0 - frac),
                calls=r.calls,
                gpu_ns_per_call=r.gpu_ns_per_call,
            )
        )
    out.sort(key=lambda r: -r.below_roof_step_fraction)
    return out[:top]


def gaps_text(gaps: list[BelowRoof], n: int = GAPS_NAMED) -> str | None:
    """``"matmul aten::mm [4096, 8192] x [8192, 2048] bf16 at 62% of its compute roof, 6.3% of the step; ..."``"""
    if not gaps:
        return None
    return "; ".join(
        f"{g.op_class} {g.op} {g.input_shapes or ''} {g.dtype or ''}".replace("  ", " ")
        + f" at {g.of_roof_fraction:.0%} of its {g.bound} roof, {g.step_fraction:.1%} of the step"
        for g in gaps[:n]
    )


@analysis(
    needs=("flop_ops", "window", "comm_mask", "gpu_ext", "launching_ops"),
    produces=("roofline_gaps",),
    evidence=("roofline", "roofline_below_roof"),
    offload={},  # provides no value: only its metric and tables come back from the child
)
def op_roofline(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    rows = roofline(
        trace,
        inputs["flop_ops"],
        win.start_ns,
        win.end_ns,
        inputs["comm_mask"],
        inputs["gpu_ext"],
        inputs["launching_ops"],
        device_name(trace),
        cap=ROW_CAP,
    )
    gaps = below_roof(rows)
    return Produced(
        metrics={"roofline_gaps": gaps_text(gaps)}, evidence={"roofline": rows, "roofline_below_roof": gaps}
    )
