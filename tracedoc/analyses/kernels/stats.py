"""Kernel statistics, Tensor Core share, top kernels and top operators (launch statistics: ``launches``)."""

from __future__ import annotations

import re

import numpy as np

from ...model import trace as M
from ...model import vocab as V
from ...model.evidence import KernelClass, KernelTotal, OperatorTotal, TopKernel, TopOperator
from ...model.groups import Groups, dense_codes, largest_first
from ...model.trace import Trace
from ...model.stats import median
from . import classify as C
from .compiled import region_contents
from ..core.registry import Produced, analysis

TC_ELIGIBLE_OP_RE = re.compile(
    r"^aten::(mm|matmul|addmm|addmv|bmm|baddbmm|linear|conv\w*|_convolution\w*|cudnn_convolution\w*|"
    r"_scaled_dot_product\w*|scaled_dot_product\w*|einsum|_flash_attention\w*|_efficient_attention\w*|"
    r"addbmm|tensordot|mkldnn_convolution|miopen_convolution\w*)$"
)


def kernel_stats(trace: Trace) -> dict:
    """Statistics over every kernel in the trace (not only the window), as EXPECTED.json counts them."""
    g = trace.gpu_ops
    k = g["kind"] == M.KERNEL if len(g) else np.zeros(0, dtype=bool)
    dur = (g["end_ns"] - g["start_ns"])[k] if len(g) else np.zeros(0, dtype=np.int64)
    out = {
        "kernel_count": int(dur.size),
        "kernel_median_ns": median(dur) if dur.size else None,
        "kernels_under_10us_fraction": float((dur < 10_000).mean()) if dur.size else None,
    }
    return out


def occupancy_stats(trace: Trace, rows: np.ndarray) -> dict:
    """Duration-weighted est. blocks per SM over kernel rows (occupancy comes from gpu_metrics)."""
    g = trace.gpu_ops
    dur = (g["end_ns"] - g["start_ns"])[rows].astype(np.float64)
    v = g["blocks_per_sm"][rows]
    ok = ~np.isnan(v) & (dur > 0)
    return {"blocks_per_sm_mean": float(np.average(v[ok], weights=dur[ok])) if ok.any() else None}


def _overlapping(g, lo: int, hi: int) -> np.ndarray | None:
    """Mask of the GPU ops overlapping the window [lo, hi); None when there are none."""
    if not len(g):
        return None
    sel = (g["start_ns"] < hi) & (g["end_ns"] > lo)
    return sel if sel.any() else None


def kernel_totals(trace: Trace, comm_mask: np.ndarray, lo: int, hi: int) -> list[KernelTotal]:
    """Every GPU op name in the window with its count and total time: the table a diff aligns.

    Compact on purpose (name, kind, category, count, total_ns); ``top_kernels`` carries the detail
    of the largest ones.
    """
    g = trace.gpu_ops
    sel = _overlapping(g, lo, hi)
    if sel is None:
        return []
    names = g["name"][sel]
    ids, inverse = dense_codes(names)
    count = np.bincount(inverse)
    total = np.bincount(inverse, weights=(g["end_ns"] - g["start_ns"])[sel].astype(np.float64))
    kind = np.zeros(ids.size, dtype=g["kind"].dtype)
    kind[inverse[::-1]] = g["kind"][sel][::-1]  # the first row's kind of each name
    comm = np.bincount(inverse, weights=comm_mask[sel].astype(np.float64)) > 0
    order = np.argsort(-total, kind="stable")
    return [
        KernelTotal(
            name=trace.string(int(ids[i])),
            kind=M.GPU_KIND_NAMES[int(kind[i])],
            category="communication"
            if comm[i]
            else ("compute" if kind[i] == M.KERNEL else M.GPU_KIND_NAMES[int(kind[i])]),
            count=int(count[i]),
            total_ns=int(total[i]),
        )
        for i in order
    ]


def ops_of_window(trace: Trace, launch_rows: np.ndarray | None, lo: int, hi: int) -> np.ndarray:
    """Per cpu_ops row: an operator call whose work is in the window: it starts in the window, or it
    launched a GPU op that runs in it (``launch_rows``: the launching row of each GPU op, -1 none). When
    the CPU runs ahead of the GPU, the calls behind the window's kernels started before the window: they
    count with the GPU time they launched, so calls, CPU time and GPU time come from the same steps."""
    c, g = trace.cpu_ops, trace.gpu_ops
    mask = (c["start_ns"] >= lo) & (c["start_ns"] < hi)
    if launch_rows is not None and len(g):
        ran = launch_rows[(g["start_ns"] < hi) & (g["end_ns"] > lo) & (launch_rows >= 0)]
        mask[ran] = True
    return mask & (c["kind"] == M.CPU_OP)


def operator_totals(
    trace: Trace, kernel_ops: np.ndarray, lo: int, hi: int, launch_rows: np.ndarray | None = None
) -> list[OperatorTotal]:
    """Every CPU operator name with a call whose work is in the window (``ops_of_window``): calls,
    inclusive CPU time, and the GPU ops (and their time) it launched directly (innermost operator of
    each launch)."""
    c, g = trace.cpu_ops, trace.gpu_ops
    if not len(c):
        return []
    in_win = ops_of_window(trace, launch_rows, lo, hi)
    if not in_win.any():
        return []
    ids, inverse = dense_codes(c["name"][in_win])
    calls = np.bincount(inverse)
    cpu_ns = np.bincount(inverse, weights=(c["end_ns"] - c["start_ns"])[in_win].astype(np.float64))
    gpu_ops = np.zeros(ids.size, dtype=np.int64)
    gpu_ns = np.zeros(ids.size, dtype=np.float64)
    if len(g):
        launched = (g["start_ns"] < hi) & (g["end_ns"] > lo) & (kernel_ops >= 0)
        op = kernel_ops[launched]
        pos = np.searchsorted(ids, op)
        known = (pos < ids.size) & (ids[np.minimum(pos, ids.size - 1)] == op)
        np.add.at(gpu_ops, pos[known], 1)
        np.add.at(gpu_ns, pos[known], (g["end_ns"] - g["start_ns"])[launched][known].astype(np.float64))
    order = np.argsort(-cpu_ns, kind="stable")
    contents = region_contents(trace, lo, hi)  # torch.compile regions: what they ran, for the diff to match by
    return [
        OperatorTotal(
            name=trace.string(int(ids[i])),
            calls=int(calls[i]),
            cpu_ns=int(cpu_ns[i]),
            gpu_ops=int(gpu_ops[i]),
            gpu_ns=int(gpu_ns[i]),
            content=contents[int(ids[i])][0] if int(ids[i]) in contents else None,
            content_kernels=contents[int(ids[i])][1] if int(ids[i]) in contents else None,
        )
        for i in order
    ]


def tensor_cores(
    trace: Trace,
    comm_mask: np.ndarray,
    lo: int,
    hi: int,
    kernel_ops: np.ndarray,
    tc_classes: tuple[np.ndarray, np.ndarray],
) -> dict:
    """Tensor Core shares of compute time; ``tc_classes`` is ``classify.tensor_core_class(trace)``."""
    g = trace.gpu_ops
    out = {"tensor_core_fraction": None, "tensor_core_unknown_fraction": None, "tc_eligible_non_tc_fraction": None}
    if not len(g):
        return out
    compute = (g["kind"] == M.KERNEL) & ~comm_mask & (g["start_ns"] >= lo) & (g["start_ns"] < hi)
    dur = (g["end_ns"] - g["start_ns"]).astype(np.float64)
    total = dur[compute].sum()
    if total <= 0:
        return out
    tc_by_name, helper_by_name = tc_classes
    tc, helper = tc_by_name[g["name"]], helper_by_name[g["name"]]
    # only the kernels counted below (compute, not on Tensor Cores) need their names tested
    counted = compute & (tc == 0)
    eligible_name = C.name_mask(trace, C.TC_ELIGIBLE_RE, ids=g["name"][counted])[g["name"]]
    eligible_op_ids = C.name_mask(trace, TC_ELIGIBLE_OP_RE, ids=kernel_ops[counted])
    eligible_op = np.where(kernel_ops >= 0, eligible_op_ids[np.maximum(kernel_ops, 0)], False)
    # Math launched by a matmul/conv/attention op, or named like it; helpers (layout conversion,
    # bias adds, offsets) inside those ops could not have used Tensor Cores either way.
    eligible = (eligible_name | eligible_op) & ~helper
    out["tensor_core_fraction"] = float(dur[compute & (tc == 1)].sum() / total)
    out["tensor_core_unknown_fraction"] = float(dur[compute & (tc == -1)].sum() / total)
    out["tc_eligible_non_tc_fraction"] = float(dur[counted & eligible].sum() / total)
    return out


def top_kernels(
    trace: Trace, comm_mask: np.ndarray, lo: int, hi: int, tc_classes: tuple[np.ndarray, np.ndarray], top: int = 15
) -> list[TopKernel]:
    g = trace.gpu_ops
    sel = _overlapping(g, lo, hi)
    if sel is None:
        return []
    dur = (g["end_ns"] - g["start_ns"])[sel]
    tc, _ = tc_classes
    by_name = Groups(g["name"][sel])
    count, total_ns, max_ns = by_name.count(), by_name.sum(dur), by_name.max(dur)
    kinds, comms = by_name.first(g["kind"][sel]), by_name.any(comm_mask[sel])
    grand = float(dur.sum()) or 1.0
    rows = []
    for i in largest_first(total_ns)[:top].tolist():
        sid, kind, comm = int(by_name.keys[0][i]), int(kinds[i]), bool(comms[i])
        rows.append(
            TopKernel(
                name=trace.string(sid),
                kind=M.GPU_KIND_NAMES[kind],
                count=int(count[i]),
                total_ns=int(total_ns[i]),
                mean_ns=float(total_ns[i] / count[i]),
                max_ns=int(max_ns[i]),
                share=float(total_ns[i]) / grand,
                category="communication" if comm else ("compute" if kind == M.KERNEL else M.GPU_KIND_NAMES[kind]),
                tensor_core=(
                    {1: "yes", 0: "no", -1: "unknown"}[int(tc[sid])] if kind == M.KERNEL and not comm else "n/a"
                ),
            )
        )
    return rows


def top_operators(
    trace: Trace, kernel_ops: np.ndarray, lo: int, hi: int, top: int = 15, launch_rows: np.ndarray | None = None
) -> list[TopOperator]:
    """GPU time attributed to the CPU ops that launched it (through External id), with the calls and CPU
    time of the operator calls whose work is in the window (``ops_of_window``)."""
    g, c = trace.gpu_ops, trace.cpu_ops
    if not len(g):
        return []
    sel = (g["start_ns"] < hi) & (g["end_ns"] > lo) & (kernel_ops >= 0)
    if not sel.any():
        return []
    dur = (g["end_ns"] - g["start_ns"])[sel]
    by_op = Groups(kernel_ops[sel])
    gpu_ops, gpu_ns = by_op.count(), by_op.sum(dur)
    calls = {}
    if len(c):
        in_win = ops_of_window(trace, launch_rows, lo, hi)
        by_name = Groups(c["name"][in_win])
        calls = dict(
            zip(
                by_name.keys[0].tolist(),
                zip(by_name.count().tolist(), by_name.sum(c["end_ns"][in_win] - c["start_ns"][in_win]).tolist()),
            )
        )
    grand = float(dur.sum()) or 1.0
    rows = []
    for i in largest_first(gpu_ns)[:top].tolist():
        sid = int(by_op.keys[0][i])
        n_calls, cpu_ns = calls.get(sid, (0, 0))
        rows.append(
            TopOperator(
                name=trace.string(sid),
                calls=int(n_calls),
                cpu_ns=int(cpu_ns),
                gpu_ops=int(gpu_ops[i]),
                gpu_ns=int(gpu_ns[i]),
                share=float(gpu_ns[i]) / grand,
            )
        )
    return rows


def kernel_classes(trace: Trace, comm_mask: np.ndarray, lo: int, hi: int) -> list[KernelClass]:
    """GPU op time in the window by what the ops compute (``vocab.KERNEL_CLASSES``): communication
    kernels, copies and memsets ("memory"), then compute kernels by name. The rows' times sum to the
    time of every GPU op overlapping the window (the ``top_kernels`` selection)."""
    g = trace.gpu_ops
    sel = _overlapping(g, lo, hi)
    if sel is None:
        return []
    names, kind, comm = g["name"][sel], g["kind"][sel], comm_mask[sel]
    dur = (g["end_ns"] - g["start_ns"])[sel].astype(np.float64)
    ids, inverse = dense_codes(names)
    by_name = np.full(ids.size, V.KERNEL_CLASSES.index("other"), dtype=np.int64)
    named = (ids >= 0) & (ids < len(trace.strings))  # without a name: "other", as vocab.kernel_class("") says
    by_name[named] = C.kernel_class_codes(trace, ids[named])
    cls = by_name[inverse.reshape(-1)]
    cls = np.where(kind != M.KERNEL, V.KERNEL_CLASSES.index("memory"), cls)
    cls = np.where(comm, V.KERNEL_CLASSES.index("communication"), cls)
    n = len(V.KERNEL_CLASSES)
    count = np.bincount(cls, minlength=n)
    total = np.bincount(cls, weights=dur, minlength=n)
    grand = float(dur.sum()) or 1.0
    return [
        KernelClass(
            kernel_class=V.KERNEL_CLASSES[i],
            count=int(count[i]),
            total_ns=int(round(total[i])),
            share=float(total[i]) / grand,
        )
        for i in np.argsort(-total, kind="stable").tolist()
        if count[i]
    ]


def window_kernel_rows(trace: Trace, lo: int, hi: int) -> np.ndarray:
    g = trace.gpu_ops
    if not len(g):
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero((g["kind"] == M.KERNEL) & (g["start_ns"] < hi) & (g["end_ns"] > lo))


@analysis(
    needs=("window",),
    produces=("kernel_count", "kernel_median_ns", "kernels_under_10us_fraction", "blocks_per_sm_mean"),
)
def kernel_statistics(trace: Trace, inputs) -> Produced:
    rows = window_kernel_rows(trace, inputs["window"].start_ns, inputs["window"].end_ns)
    return Produced(metrics={**kernel_stats(trace), **occupancy_stats(trace, rows)})


@analysis(
    needs=("comm_mask", "window", "kernel_ops", "tc_classes"),
    produces=("tensor_core_fraction", "tensor_core_unknown_fraction", "tc_eligible_non_tc_fraction"),
)
def tensor_core_use(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    return Produced(
        metrics=tensor_cores(
            trace, inputs["comm_mask"], win.start_ns, win.end_ns, inputs["kernel_ops"], inputs["tc_classes"]
        )
    )


@analysis(needs=("comm_mask", "window", "tc_classes"), evidence=("top_kernels",))
def kernel_table(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    return Produced(
        evidence={
            "top_kernels": top_kernels(trace, inputs["comm_mask"], win.start_ns, win.end_ns, inputs["tc_classes"])
        }
    )


@analysis(needs=("comm_mask", "window"), evidence=("kernel_classes",))
def kernel_class_table(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    return Produced(evidence={"kernel_classes": kernel_classes(trace, inputs["comm_mask"], win.start_ns, win.end_ns)})


@analysis(needs=("kernel_ops", "window", "launching_ops", "gpu_ext"), evidence=("top_operators",))
def operator_table(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    rows = inputs["launching_ops"].rows_of(inputs["gpu_ext"])
    return Produced(
        evidence={
            "top_operators": top_operators(trace, inputs["kernel_ops"], win.start_ns, win.end_ns, launch_rows=rows)
        }
    )


@analysis(needs=("comm_mask", "window"), evidence=("kernel_totals",))
def kernel_total_table(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    return Produced(evidence={"kernel_totals": kernel_totals(trace, inputs["comm_mask"], win.start_ns, win.end_ns)})


@analysis(needs=("kernel_ops", "window", "launching_ops", "gpu_ext"), evidence=("operator_totals",))
def operator_total_table(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    rows = inputs["launching_ops"].rows_of(inputs["gpu_ext"])
    return Produced(
        evidence={
            "operator_totals": operator_totals(trace, inputs["kernel_ops"], win.start_ns, win.end_ns, launch_rows=rows)
        }
    )
