"""Operators grouped as the TensorBoard plugin's operator view groups them: by name and input shape,
and by the ``nn.Module`` they ran in where the trace records modules."""

from __future__ import annotations

import re

import numpy as np

from ...model.evidence import ModuleOperators, OperatorShape
from ...model.groups import dense_codes, distinct, row_codes, lex_order
from ...model.trace import Trace
from .stats import ops_of_window
from ..host.nesting import ThreadClock, enclosing
from ..core.registry import Produced, analysis

# The span torch.profiler records around a module's forward (with_stack=True or with_modules=True).
MODULE_SPAN_RE = re.compile(r"^nn\.Module: (.+)$")
TOP_ROWS = 20


def _compact(shapes: str) -> str:
    """Recorded shapes as one line (``[[64, 128], [128, 256]]``) however the file laid the JSON out."""
    return re.sub(r"\s+", "", shapes).replace(",", ", ")


def _gpu_time_by_cpu_row(trace: Trace, launching_ops, gpu_ext: np.ndarray, lo: int, hi: int):
    """Per cpu_ops row: GPU ops it launched (innermost op of each External id) in the window, and their time."""
    g, n = trace.gpu_ops, len(trace.cpu_ops)
    ops, ns = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.float64)
    if not len(g) or not n:
        return ops, ns
    rows = launching_ops.rows_of(gpu_ext)
    sel = (rows >= 0) & (g["start_ns"] < hi) & (g["end_ns"] > lo)
    ops += np.bincount(rows[sel], minlength=n)
    ns += np.bincount(rows[sel], weights=(g["end_ns"] - g["start_ns"])[sel].astype(np.float64), minlength=n)
    return ops, ns


def operators_by_shape(
    trace: Trace, launching_ops, gpu_ext: np.ndarray, lo: int, hi: int, top: int = TOP_ROWS
) -> list[OperatorShape]:
    """CPU op calls whose work is in the window (``kernels.ops_of_window``: started in it, or launched
    a GPU op running in it) grouped by (name, recorded input shapes): calls, inclusive CPU time, and the
    GPU ops each launched directly. Ops without recorded shapes group by name alone."""
    c = trace.cpu_ops
    if not len(c):
        return []
    launch_rows = launching_ops.rows_of(gpu_ext) if len(trace.gpu_ops) else None
    rows = np.flatnonzero(ops_of_window(trace, launch_rows, lo, hi))
    if not rows.size:
        return []
    dims = np.full(len(c), -1, dtype=np.int64)
    s = trace.op_shapes
    if len(s):
        dims[s["row"]] = s["dims"]
    gpu_ops, gpu_ns = _gpu_time_by_cpu_row(trace, launching_ops, gpu_ext, lo, hi)
    names, shapes = c["name"][rows].astype(np.int64), dims[rows]
    inverse, rep, _ = row_codes(names, shapes)
    uniq = np.stack([names[rep], shapes[rep]], axis=1)
    calls = np.bincount(inverse)
    cpu = np.bincount(inverse, weights=(c["end_ns"] - c["start_ns"])[rows].astype(np.float64))
    launched = np.bincount(inverse, weights=gpu_ops[rows].astype(np.float64))
    gpu = np.bincount(inverse, weights=gpu_ns[rows])
    grand = float(gpu.sum()) or 1.0
    order = lex_order((-cpu, -gpu))[:top]
    return [
        OperatorShape(
            name=trace.string(int(uniq[i, 0])),
            input_shapes=_compact(trace.string(int(uniq[i, 1]))) if uniq[i, 1] >= 0 else None,
            calls=int(calls[i]),
            cpu_ns=int(round(cpu[i])),
            gpu_ops=int(launched[i]),
            gpu_ns=int(round(gpu[i])),
            share=float(gpu[i]) / grand,
        )
        for i in order.tolist()
    ]


def operators_by_module(trace: Trace, lo: int, hi: int, top: int = TOP_ROWS) -> list[ModuleOperators]:
    """``nn.Module`` spans starting in the window grouped by module: calls, CPU time, and the GPU time of
    kernels whose launch call ran inside them (each launch counted for its innermost module only)."""
    c, g, r = trace.cpu_ops, trace.gpu_ops, trace.runtime
    if not len(c):
        return []
    is_module = trace.string_ids(MODULE_SPAN_RE.match, c["name"])
    mods = np.flatnonzero(is_module[c["name"]])
    if not mods.size:
        return []
    ids, inverse = dense_codes(c["name"][mods])
    in_window = (c["start_ns"][mods] >= lo) & (c["start_ns"][mods] < hi)
    gpu = np.zeros(ids.size, dtype=np.float64)
    kernels = np.zeros(ids.size, dtype=np.float64)
    launched = (
        np.flatnonzero((g["launch"] >= 0) & (g["start_ns"] < hi) & (g["end_ns"] > lo))
        if len(g) and len(r)
        else np.zeros(0, dtype=np.int64)
    )
    if launched.size:
        clock = ThreadClock(trace)
        calls_rt = g["launch"][launched]
        qs, qe = clock.runtime(calls_rt, "start_ns"), clock.runtime(calls_rt, "end_ns")
        owner = np.full(launched.size, -1, dtype=np.int64)  # index into mods of the innermost module
        depth = c["depth"][mods]
        for d in distinct(depth).tolist():  # one sorted search per nesting depth, the deepest hit wins
            at = np.flatnonzero(depth == d)
            ks = clock.cpu(mods[at], "start_ns")
            order = np.argsort(ks, kind="stable")
            at, ks = at[order], ks[order]
            hit = enclosing(ks, clock.cpu(mods[at], "end_ns"), qs, qe)
            owner[hit >= 0] = at[hit[hit >= 0]]
        ok = owner >= 0
        in_window[owner[ok]] = True  # a module call whose kernels run in the window counts, wherever it began
        dur = (g["end_ns"] - g["start_ns"])[launched].astype(np.float64)
        gpu = np.bincount(inverse[owner[ok]], weights=dur[ok], minlength=ids.size)
        kernels = np.bincount(inverse[owner[ok]], minlength=ids.size).astype(np.float64)
    calls = np.bincount(inverse, weights=in_window.astype(np.float64), minlength=ids.size)
    cpu = np.bincount(
        inverse,
        weights=np.where(in_window, c["end_ns"][mods] - c["start_ns"][mods], 0).astype(np.float64),
        minlength=ids.size,
    )
    grand = float(gpu.sum()) or 1.0
    order = lex_order((-cpu, -gpu))
    order = order[(calls[order] > 0) | (gpu[order] > 0)][:top]
    return [
        ModuleOperators(
            module=MODULE_SPAN_RE.match(trace.string(int(ids[i]))).group(1),
            calls=int(calls[i]),
            cpu_ns=int(round(cpu[i])),
            gpu_ops=int(kernels[i]),
            gpu_ns=int(round(gpu[i])),
            share=float(gpu[i]) / grand,
        )
        for i in order.tolist()
    ]


@analysis(needs=("launching_ops", "gpu_ext", "window"), evidence=("operators_by_shape", "operators_by_module"))
def operator_groups(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    return Produced(
        evidence={
            "operators_by_shape": operators_by_shape(
                trace, inputs["launching_ops"], inputs["gpu_ext"], win.start_ns, win.end_ns
            ),
            "operators_by_module": operators_by_module(trace, win.start_ns, win.end_ns),
        }
    )
