"""The evidence tables of the FLOPs analysis: FLOPs and rates by op class and by kernel class, the
operators whose FLOPs are not counted, FLOPs per step, and the summary row (tracedoc/analyses/flops/mfu.py
counts; this module lays the counts out)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from ...model.evidence import FlopsByKernelClass, FlopsByOpClass, FlopsNotCounted, FlopsPerStep, FlopsSummary
from ...model.groups import Groups, dense_codes, largest_first
from ...model.trace import Trace
from . import formulas as F
from .counted_ops import unresolved
from .kernel_credit import OVER_PEAK_NOTE, Credit
from ..host.nesting import ThreadClock, enclosing, innermost_op_names

if TYPE_CHECKING:
    from .counted_ops import Counted

COMPILED_RE = re.compile(r"^CompiledFunction|Torch-Compiled Region|^## Call CompiledFxGraph")


def _rate(flops: float, ns: float) -> float | None:
    return flops / ns / 1e3 if ns > 0 else None


def by_op_class(
    trace: Trace, counted: Counted, peak_row, in_window: np.ndarray, credit: Credit
) -> list[FlopsByOpClass]:
    """Ops whose kernels ran in the window (ops without kernels: launched in it, ``in_window``) by class,
    pass and dtype. FLOPs are what their kernels in the window ran (each op's FLOPs times the share of
    its kernel time inside the window), whenever the CPU launched them: when the CPU runs ahead, the ops
    of the window's kernels were launched before it. The rate is those FLOPs over that time; ops whose
    FLOPs exceed what their kernels can run at the peak (``flop_credit``) are left out of the rate, and
    the row says how many."""
    has_kernels = credit.op_kernel_ns > 0
    in_window = np.where(has_kernels, counted.gpu_ns > 0, in_window)
    if not in_window.any():
        return []
    dtypes = np.array([d or "unknown" for d in counted.dtype.tolist()], dtype=object)
    phases = np.where(counted.recomputed, "recompute", counted.phase).astype(object)
    groups = Groups(counted.op_class.astype(str), phases.astype(str), dtypes.astype(str))
    ran = (counted.gpu_ns > 0) & ~credit.over_peak
    share = np.divide(
        counted.gpu_ns, credit.op_kernel_ns, out=np.zeros(counted.rows.size), where=credit.op_kernel_ns > 0
    )
    share = np.where(has_kernels, share, 1.0)
    ran_flops = np.nan_to_num(counted.hw_flops, nan=0.0) * share
    model_flops = np.nan_to_num(counted.flops, nan=0.0) * share
    out = []
    for i in groups.by_appearance().tolist():  # a loop over (class, phase, dtype) groups, not ops
        mine = (groups.index == i) & in_window
        if not mine.any():
            continue
        cls, phase, dtype = (str(k[i]) for k in groups.keys)
        ns = float(counted.gpu_ns[mine & ~credit.over_peak].sum())
        hw = float(ran_flops[mine].sum())
        tflops = _rate(float(ran_flops[mine & ran].sum()), ns)
        peak = peak_row.peak_tflops(dtype) if peak_row else None
        over = int((mine & credit.over_peak).sum())
        out.append(
            FlopsByOpClass(
                op_class=f"{cls} {phase}",
                dtype=dtype,
                ops=int(mine.sum()),
                model_flops=float(model_flops[mine].sum()),
                hardware_flops=hw,
                gpu_ns=int(counted.gpu_ns[mine].sum()),
                tflops=tflops,
                peak_tflops=peak,
                of_peak_fraction=tflops / peak if tflops is not None and peak else None,
                note=f"{over} op(s) left out of the rate: {OVER_PEAK_NOTE}" if over else None,
            )
        )
    return sorted(out, key=lambda r: -r.hardware_flops)


_FAMILIES = (
    (re.compile(r"flash|fmha|attention|attn", re.I), "attention kernel"),
    (re.compile(r"conv|fprop|dgrad|wgrad|winograd|implicit_gemm|cudnn|igemm|fft2d", re.I), "convolution kernel"),
    (re.compile(r"gemm|gemv|matmul|nvjet|cutlass|xmma|wgmma|mma|Cijk_", re.I), "GEMM kernel"),
)
OVER_PEAK_CLASS = "kernels of ops faster than the peak"


def _kernel_family(name: str) -> str:
    return next((label for rx, label in _FAMILIES if rx.search(name)), "other kernel")


def by_kernel_class(
    counted: Counted, owner, compute, g, dur, tc_classes, peak_row, trace_strings, credit: Credit
) -> list[FlopsByKernelClass]:
    """FLOPs each kernel in the window ran (``flop_credit``: each op's split over the kernels that ran
    its work, by duration); grouped by what the kernel's name says it computes (GEMM, convolution,
    attention) and whether it runs on Tensor Cores. Each kernel's rate is its op's, which is at most the
    peak for the op's dtype; the kernels of ops whose FLOPs exceed what their kernels can run form one
    row without a rate, which says why."""
    sel = np.flatnonzero((owner >= 0) & compute)
    if not sel.size:
        return []
    tc, helper = tc_classes
    op = owner[sel]
    names = g["name"][sel]
    flops = credit.kernel_flops[sel]
    unit = np.select([tc[names] == 1, tc[names] == 0], [" on Tensor Cores", " on CUDA cores"], "")
    ids, inverse = dense_codes(names)
    family = np.array(
        ["helper (elementwise, layout)" if helper[n] else _kernel_family(trace_strings[n]) for n in ids.tolist()],
        dtype=object,
    )[inverse.reshape(-1)]
    cls = np.where(np.asarray([f.startswith("helper") for f in family]), family, family + unit)
    over = credit.over_peak[op]
    cls = np.where(over, OVER_PEAK_CLASS, cls)
    if over.any():  # their FLOPs by time, for the record; no rate
        total_ns = credit.op_kernel_ns[op[over]]
        flops = flops.copy()
        flops[over] = np.nan_to_num(counted.hw_flops[op[over]]) * dur[sel][over] / np.maximum(total_ns, 1)
    dtypes = np.array([d or "unknown" for d in counted.dtype[op].tolist()], dtype=object)
    groups = Groups(cls.astype(str), dtypes.astype(str))
    ns_sel = dur[sel]
    out = []
    for i in groups.by_appearance().tolist():  # a loop over (class, dtype) groups, not kernels
        mine = groups.index == i
        k, dtype = (str(key[i]) for key in groups.keys)
        ns = float(ns_sel[mine].sum())
        total = float(np.nansum(flops[mine]))
        no_rate = k == OVER_PEAK_CLASS
        tflops = None if no_rate else _rate(total, ns)
        peak = peak_row.peak_tflops(dtype) if peak_row else None
        out.append(
            FlopsByKernelClass(
                kernel_class=k,
                dtype=dtype,
                kernels=int(mine.sum()),
                flops=total,
                gpu_ns=int(ns),
                tflops=tflops,
                peak_tflops=peak,
                of_peak_fraction=tflops / peak if tflops is not None and peak else None,
                note=OVER_PEAK_NOTE if no_rate else None,
            )
        )
    return sorted(out, key=lambda r: -r.gpu_ns)


def not_counted(
    trace: Trace,
    resolved,
    owner,
    compute,
    dur,
    launching_ops,
    gpu_ext,
    compute_ns,
    clock: ThreadClock,
    ks: np.ndarray,
    ke: np.ndarray,
) -> list[FlopsNotCounted]:
    """Matmul/conv/attention ops left uncounted (with why), and the GPU time of other ops.

    An unresolved op inside a counted one (a cuDNN call under a counted conv2d), or around counted
    ones (an einsum whose bmm children count), is counted through them and not listed.
    """
    s, c = trace.op_shapes, trace.cpu_ops
    out: list[FlopsNotCounted] = []
    bad = np.flatnonzero(unresolved(resolved))
    bad = bad[trace.string_ids(F.is_flop_op)[c["name"][s["row"][bad]]]]  # ops with a formula only
    if bad.size and ks.size:
        bs, be = clock.cpu(s["row"][bad], "start_ns"), clock.cpu(s["row"][bad], "end_ns")
        inside = enclosing(ks, ke, bs, be) >= 0
        first = np.searchsorted(ks, bs, side="left")
        around = (first < ks.size) & (ks[np.minimum(first, ks.size - 1)] <= be)
        bad = bad[~inside & ~around]
    if bad.size:
        groups = Groups(c["name"][s["row"][bad]], np.array([resolved[i] for i in bad.tolist()], dtype=str))
        calls = groups.count()
        for i in groups.by_appearance().tolist():
            out.append(
                FlopsNotCounted(
                    op=trace.string(int(groups.keys[0][i])),
                    calls=int(calls[i]),
                    gpu_ns=None,
                    gpu_fraction=None,
                    reason=str(groups.keys[1][i]),
                )
            )
    if len(trace.gpu_ops) and compute_ns:
        rest = compute & (owner < 0)
        names = launching_ops.names_of(gpu_ext)
        unnamed = rest & (names < 0) & (trace.gpu_ops["launch"] >= 0)
        if unnamed.any():
            names = names.copy()
            names[unnamed] = innermost_op_names(trace, clock, trace.gpu_ops["launch"][unnamed])
        groups = Groups(names[rest])
        calls, total_ns = groups.count(), groups.sum(dur[rest])
        for i in largest_first(total_ns)[:10].tolist():
            name = int(groups.keys[0][i])
            op = trace.string(name) if name >= 0 else "(kernels with no launching op)"
            reason = (
                "a torch.compile graph: the ops inside it record no shapes"
                if COMPILED_RE.search(op)
                else "no FLOP model (elementwise, reduction, copy or unmodelled op)"
            )
            out.append(
                FlopsNotCounted(
                    op=op,
                    calls=int(calls[i]),
                    gpu_ns=int(total_ns[i]),
                    gpu_fraction=float(total_ns[i]) / compute_ns,
                    reason=reason,
                )
            )
    return out


def per_step_rows(steps, step_flops, peak) -> list[FlopsPerStep]:
    """Per step: its FLOPs over its own step time (the interval between completions); a step a pre-window
    backlog ran ahead of has no step time, so no rate either."""
    if not len(steps):
        return []
    times = steps.step_time_ns
    timed = steps.timed()
    out = []
    for i in range(len(steps)):
        t = int(times[i]) if timed[i] else None
        tf = _rate(float(step_flops[i]), t) if t is not None else None
        out.append(
            FlopsPerStep(
                step=steps.names[i],
                model_flops=float(step_flops[i]),
                step_time_ns=t,
                achieved_tflops=tf,
                mfu=tf / peak if tf is not None and peak else None,
            )
        )
    return out


def summary_row(
    m,
    device,
    peak_row,
    dominant,
    counted: Counted,
    known_ns,
    compute_ns,
    n_steps,
    has_gpu,
    peak_name: str | None = None,
) -> FlopsSummary:
    if not has_gpu:
        missing, note = (
            "no GPU kernels",
            "the trace has no GPU kernels: TFLOP/s over the step time only; MFU needs the GPU's kernels",
        )
    elif device is None:
        missing, note = "GPU not named", "the trace does not name its GPU: TFLOP/s only, no MFU"
    elif peak_row is None:
        missing, note = "GPU not in peak table", f"{device} is not in tracedoc's peak table: TFLOP/s only, no MFU"
    elif m["peak_tflops"] is None:
        missing = f"no {dominant or 'known-dtype'} peak"
        note = f"{peak_row.name} has no {dominant or 'known-dtype'} peak in the table: TFLOP/s only, no MFU"
    else:
        missing, note = None, f"MFU against the {peak_row.name} {peak_name} peak ({peak_row.source})"
        if m.get("dtype_peak_fraction") is not None and m["dtype_peak_tflops"] != m["peak_tflops"]:
            note += (
                f"; the model's FLOPs are {dominant}, at {m['dtype_peak_fraction']:.1%} of the dense {dominant} "
                f"peak ({m['dtype_peak_tflops']:g} TFLOP/s)"
            )
    if not counted.rows.size:
        missing = "no resolvable shapes"
        note = "no matmul/convolution/attention op has shapes that resolve to FLOPs; " + note
    return FlopsSummary(
        model_flops_per_step=m["model_flops_per_step"],
        hardware_flops_per_step=m["hardware_flops_per_step"],
        achieved_tflops=m["achieved_tflops"],
        mfu=m["mfu"],
        hfu=m["hfu"],
        dtype=dominant,
        peak_tflops=m["peak_tflops"],
        peak_basis=peak_name if m["peak_tflops"] is not None else None,
        dtype_peak_tflops=m.get("dtype_peak_tflops"),
        dtype_peak_fraction=m.get("dtype_peak_fraction"),
        device=device,
        peak_device=peak_row.name if peak_row else None,
        peak_source=peak_row.source if peak_row else None,
        counted_ops=int(counted.rows.size),
        recomputed_ops=int(counted.recomputed.sum()),
        counted_gpu_ns=known_ns,
        compute_gpu_ns=compute_ns,
        counted_fraction=m["flops_counted_fraction"],
        steps=n_steps,
        mfu_missing=missing,
        note=note,
    )


def flops_evidence(statement, device, peak_row, summary, by_class, by_kernel, missing, per_step=()) -> dict:
    if statement is not None:
        summary = [
            FlopsSummary(
                model_flops_per_step=None,
                hardware_flops_per_step=None,
                achieved_tflops=None,
                mfu=None,
                hfu=None,
                dtype=None,
                peak_tflops=None,
                peak_basis=None,
                dtype_peak_tflops=None,
                dtype_peak_fraction=None,
                device=device,
                peak_device=peak_row.name if peak_row else None,
                peak_source=peak_row.source if peak_row else None,
                counted_ops=0,
                recomputed_ops=0,
                counted_gpu_ns=0,
                compute_gpu_ns=None,
                counted_fraction=None,
                steps=None,
                mfu_missing=statement[0],
                note=statement[1],
            )
        ]
    return {
        "flops_summary": summary,
        "flops_by_op_class": by_class,
        "flops_by_kernel_class": by_kernel,
        "flops_not_counted": missing,
        "flops_per_step": list(per_step),
    }
