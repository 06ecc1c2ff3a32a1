"""Model FLOPs, achieved TFLOP/s and MFU from the shapes a trace records (docs/flops.md).

Each matmul/conv/attention op with recorded shapes gets its FLOPs (``opflops``); each product counts
once, at the op of its nest that ``flop_ops`` selects (the leaf GEMM or convolution, the outermost
attention op), whose dtype is the one its kernels ran in. Ops of compiled graphs that record shapes
count like eager ones. Backward ops are counted as recorded (no "3x forward"). Forward ops that run
again inside a backward pass are recomputation (activation checkpointing): they count as hardware
FLOPs, not model FLOPs. Each counted op owns the GPU kernels launched inside it, which gives the share
of GPU time whose FLOPs are known, TF32 use (fp32 ops whose kernels run on Tensor Cores), and rates
per op class and per kernel class. Rates per step divide the FLOPs of a step by the report's one step
time (step p50).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...model import trace as M
from ...model.groups import Groups, distinct, isin
from ...model.metrics import metric_names
from ...model.trace import Trace
from . import formulas as F
from ...model.peaks import DevicePeak, device_peak
from ...model.reportstep import STEPS, ReportStep
from .kernel_credit import Credit, credit_flops
from .counted_ops import Counted, Selection, children_gradients, resolve_flops, select_counted
from .evidence_tables import by_kernel_class, by_op_class, flops_evidence, not_counted, per_step_rows, summary_row
from ..host.nesting import ThreadClock, enclosing, kernel_owners, union_on_clock
from ..core.registry import Produced, analysis

BACKWARD_FRAME_RE = re.compile(r"Backward\d*$|^autograd::engine::evaluate_function")
SOFTMAX_OP_RE = re.compile(
    r"^aten::(_?softmax|_softmax_backward_data|_masked_softmax\w*|"
    r"_scaled_dot_product_attention_math)$"
)

METRIC_NAMES = metric_names(topic="flops")  # the metric table's FLOPs section


@dataclass
class FlopOps:
    """What the roofline reads from the FLOPs analysis: the counted ops and which of them launched
    each GPU op (index into ``counted``, -1 none)."""

    counted: Counted
    kernel_owner: np.ndarray
    credit: Credit | None = None  # which kernels ran each op's FLOPs (``flop_credit``)


_DGRAD_RE = re.compile(r"dgrad", re.I)
_WGRAD_RE = re.compile(r"wgrad", re.I)


def _fix_unrecorded_masks(
    trace: Trace, counted: Counted, assumed: np.ndarray, sel: Selection, clock: ThreadClock, owner, compute, helper
) -> None:
    """Convolution backwards counted with both gradients because their output mask was not recorded:
    keep only the gradients they computed. Old ones (torch < 1.11) call one single-gradient op per
    gradient; otherwise, when every kernel they launched (helpers aside) names the same one gradient
    (cuDNN's dgrad / wgrad), only that one ran."""
    if not assumed.any():
        return
    has_input, has_weight = children_gradients(trace, sel, clock)
    g = trace.gpu_ops
    for i in np.flatnonzero(assumed).tolist():
        n = int(has_input[i]) + int(has_weight[i])
        if n == 0 and len(g):
            names = [trace.string(int(k)) for k in distinct(g["name"][(owner == i) & compute & ~helper[g["name"]]])]
            dgrad = bool(names) and all(_DGRAD_RE.search(k) and not _WGRAD_RE.search(k) for k in names)
            wgrad = bool(names) and all(_WGRAD_RE.search(k) and not _DGRAD_RE.search(k) for k in names)
            n = 1 if dgrad or wgrad else 0
        if n == 1:
            counted.flops[i] /= 2
            counted.hw_flops[i] /= 2


def _in_backward(trace: Trace, rows: np.ndarray, clock: ThreadClock) -> np.ndarray:
    """Whether each cpu op row runs inside an autograd backward frame of its thread."""
    c = trace.cpu_ops
    frames = np.flatnonzero(trace.string_ids(BACKWARD_FRAME_RE.search)[c["name"]])
    if not frames.size or not rows.size:
        return np.zeros(rows.size, dtype=bool)
    us, ue = union_on_clock(trace, frames, clock)
    return enclosing(us, ue, clock.cpu(rows, "start_ns"), clock.cpu(rows, "end_ns")) >= 0


def analyze_flops(
    trace: Trace,
    steps,
    lo: int,
    hi: int,
    comm_mask: np.ndarray,
    gpu_ext: np.ndarray,
    launching_ops,
    tc_classes,
    step: ReportStep = ReportStep(None, None),
) -> tuple[dict, dict, FlopOps | None]:
    """Metrics (``METRIC_NAMES``), evidence tables and the counted ops (for the roofline).

    ``step``: the report's one step time (``model.reportstep``). FLOPs counted per step span divide by it
    when it is the median over those steps; FLOPs counted over the window (no step spans) by the window."""
    m: dict = {k: None for k in METRIC_NAMES}
    g, c = trace.gpu_ops, trace.cpu_ops
    device = device_name(trace)
    peak_row = device_peak(device) if device else None
    kernel = (g["kind"] == M.KERNEL) & ~comm_mask if len(g) else np.zeros(0, dtype=bool)
    in_win = (g["start_ns"] < hi) & (g["end_ns"] > lo) if len(g) else kernel
    compute = kernel & in_win
    dur = (g["end_ns"] - g["start_ns"]).astype(np.int64) if len(g) else np.zeros(0, dtype=np.int64)
    compute_ns = int(dur[compute].sum())
    statement = _no_shapes_statement(trace)
    if statement is not None:
        return m, flops_evidence(statement, device, peak_row, [], [], [], []), None

    clock = ThreadClock(trace)
    resolved, mask_assumed = resolve_flops(trace)
    sel = select_counted(trace, resolved, clock)
    s = trace.op_shapes
    rows = s["row"][sel.idx]
    res = [resolved[i] for i in sel.idx.tolist()]
    in_backward = _in_backward(trace, rows, clock)
    forward_only = _name_ids(trace, F.FORWARD_ONLY_OPS)
    # run again inside a backward pass: recomputation (the op, or the outer op of its nest, is one
    # only forward passes use: an addmm, or a linear whose bias-free product is an mm)
    recomputed = in_backward & (isin(c["name"][rows], forward_only) | isin(c["name"][s["row"][sel.head]], forward_only))
    # A matrix product's pass is where it runs (mm computes gradients inside backward nodes).
    phase = np.array(
        [F.BACKWARD if bw and r.op_class == F.MATMUL else r.phase for r, bw in zip(res, in_backward)], dtype=object
    )
    counted = Counted(
        rows=rows,
        name=c["name"][rows],
        op_class=np.array([r.op_class for r in res], dtype=object),
        phase=phase,
        dtype=np.array([r.dtype for r in res], dtype=object),
        flops=np.array([0.0 if rc else r.flops for r, rc in zip(res, recomputed)], dtype=np.float64),
        hw_flops=np.array([r.hardware_flops for r in res], dtype=np.float64),
        bytes=np.array([r.bytes for r in res], dtype=np.float64),
        recomputed=recomputed,
        gpu_ns=np.zeros(rows.size, dtype=np.int64),
        shapes=sel.idx,
    )

    kernel_owner = kernel_owners(trace, rows, sel.start, clock, kernel, gpu_ext, launching_ops)
    helper = tc_classes[1]
    if rows.size:
        owned = (kernel_owner >= 0) & compute
        counted.gpu_ns = np.bincount(kernel_owner[owned], weights=dur[owned], minlength=rows.size).astype(np.int64)
        if len(g):
            _mark_tf32(counted, kernel_owner, compute, g, tc_classes, peak_row)
        _fix_unrecorded_masks(trace, counted, mask_assumed[sel.idx], sel, clock, kernel_owner, compute, helper)

    credit = credit_flops(
        counted.hw_flops,
        counted.dtype,
        kernel_owner,
        kernel,
        dur,
        helper[g["name"]] if len(g) else np.zeros(0, dtype=bool),
        peak_row,
    )
    known_ns = int(dur[(kernel_owner >= 0) & compute].sum()) if len(g) else 0
    m["flops_counted_fraction"] = known_ns / compute_ns if compute_ns else None

    # Per step: ops by the step their CPU start falls in; rates over the report's step time.
    start = c["start_ns"][rows]
    step_flops, step_hw, time_ns = _per_step_flops(steps, start, counted, lo, hi)
    n_steps = len(steps) if len(steps) else 0
    per_step_ns = (step.ns if step.source == STEPS else None) if n_steps else time_ns
    dominant = _dominant_dtype(counted)
    dtype_peak = peak_row.peak_tflops(dominant) if peak_row and dominant else None
    peak = mfu_peak(peak_row, dominant)
    total, total_hw = float(step_flops.sum()), float(step_hw.sum())
    if n_steps:
        m["model_flops_per_step"] = total / n_steps
        m["hardware_flops_per_step"] = total_hw / n_steps
        total, total_hw = m["model_flops_per_step"], m["hardware_flops_per_step"]
    if per_step_ns and per_step_ns > 0:
        m["achieved_tflops"] = total / per_step_ns / 1e3
        achieved_hw = total_hw / per_step_ns / 1e3
        if peak and len(g):
            m["peak_tflops"] = peak
            m["mfu"] = m["achieved_tflops"] / peak
            m["hfu"] = achieved_hw / peak
        if dtype_peak and len(g):
            m["dtype_peak_tflops"] = dtype_peak
            m["dtype_peak_fraction"] = m["achieved_tflops"] / dtype_peak
        if peak_row and peak_row.tensor_core_tflops and len(g):
            m["tensor_core_mfu"] = m["achieved_tflops"] / peak_row.tensor_core_tflops
    total_model = float(counted.flops.sum())
    if total_model > 0:
        fp32 = counted.dtype == "fp32"
        m["fp32_flops_fraction"] = float(counted.flops[fp32].sum() / total_model)
    if compute_ns:
        m["small_gemm_fraction"] = float(_small_gemm_ns(counted, peak_row) / compute_ns) if peak_row else None
        m["unfused_attention_fraction"] = _softmax_ns(trace, clock, gpu_ext, launching_ops, compute, dur) / compute_ns

    in_window = (start >= lo) & (start < hi)
    by_class = by_op_class(trace, counted, peak_row, in_window, credit)
    by_kernel = by_kernel_class(counted, kernel_owner, compute, g, dur, tc_classes, peak_row, trace.strings, credit)
    missing = not_counted(
        trace, resolved, kernel_owner, compute, dur, launching_ops, gpu_ext, compute_ns, clock, sel.start, sel.end
    )
    per_step = per_step_rows(steps, step_flops, peak)
    summary = summary_row(
        m,
        device,
        peak_row,
        dominant,
        counted,
        known_ns,
        compute_ns,
        n_steps,
        len(g) > 0,
        mfu_peak_name(peak_row, dominant),
    )
    evidence = flops_evidence(None, device, peak_row, [summary], by_class, by_kernel, missing, per_step)
    return m, evidence, FlopOps(counted, kernel_owner, credit)


EVIDENCE_NAMES = ("flops_summary", "flops_by_op_class", "flops_by_kernel_class", "flops_not_counted", "flops_per_step")


@analysis(
    needs=("step_spans", "window", "report_step", "comm_mask", "gpu_ext", "launching_ops", "tc_classes"),
    produces=METRIC_NAMES,
    evidence=EVIDENCE_NAMES,
    provides=("flop_ops",),
)
def flop_rates(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    metrics, evidence, ops = analyze_flops(
        trace,
        inputs["step_spans"],
        win.start_ns,
        win.end_ns,
        inputs["comm_mask"],
        inputs["gpu_ext"],
        inputs["launching_ops"],
        inputs["tc_classes"],
        inputs["report_step"],
    )
    return Produced(metrics=metrics, evidence=evidence, values={"flop_ops": ops})


# -- pieces --------------------------------------------------------------------------------------


def mfu_peak(peak_row: DevicePeak | None, dtype: str | None) -> float | None:
    """The one peak MFU is measured against: the device's dense 16-bit Tensor Core peak (what the
    hardware offers a mixed-precision model), or the peak of the dtype used where that is higher (fp8)
    or the device has no 16-bit peak. A model in fp32 is not measured against the fp32 peak: its rate
    against that is ``dtype_peak_fraction``, a different figure."""
    if peak_row is None:
        return None
    own = peak_row.peak_tflops(dtype) if dtype else None
    tc = peak_row.tensor_core_tflops
    if own is None and tc is None:
        return None
    return max(p for p in (own, tc) if p is not None) if dtype else tc


def mfu_peak_name(peak_row: DevicePeak | None, dtype: str | None) -> str | None:
    """What ``mfu_peak`` is, in words: ``dense 16-bit Tensor Core`` or ``dense fp8``."""
    peak = mfu_peak(peak_row, dtype)
    if peak is None:
        return None
    tc = peak_row.tensor_core_tflops
    return "dense 16-bit Tensor Core" if tc is not None and peak == tc else f"dense {dtype}"


def device_name(trace: Trace) -> str | None:
    """Name of the first described GPU that ran ops (else the first named one)."""
    g = trace.gpu_ops
    used = set(distinct(g["device"]).tolist()) if len(g) else set()
    named = [d for d in trace.meta.devices if d.name]
    return next((d.name for d in named if d.id in used), named[0].name if named else None)


def _name_ids(trace: Trace, names) -> np.ndarray:
    return np.flatnonzero(trace.string_ids(lambda n: n in names))


def _no_shapes_statement(trace: Trace) -> tuple[str, str] | None:
    """(short reason, full statement) when the trace gives nothing to count FLOPs from."""
    c = trace.cpu_ops
    shapes = trace.tables.get("op_shapes")
    flop_ops = trace.string_ids(F.is_flop_op)[c["name"]] if len(c) else np.zeros(0, dtype=bool)
    if shapes is not None and len(shapes) and flop_ops[shapes["row"]].any():  # shapes of a FLOP op
        return None
    if trace.meta.format == "nsys":
        return "nsys records no shapes", (
            "Nsight Systems exports record no operator shapes: FLOPs and MFU need a "
            "torch.profiler trace with record_shapes=True (or --model for the formula)"
        )
    if not len(c):
        return "no CPU operators", "the trace has no CPU operators, so there are no shapes to count FLOPs from"
    if not flop_ops.any():
        return (
            "no matmul/conv/attention ops",
            "the trace has no matmul, convolution or attention operators to count FLOPs from",
        )
    return "no shapes recorded", (
        f"{int(flop_ops.sum())} matmul/convolution/attention operators have no recorded shapes: profile with "
        "record_shapes=True (tracedoc run and tracedoc.profile do by default) to get FLOPs and MFU"
    )


def _mark_tf32(counted: Counted, owner, compute, g, tc_classes, peak_row) -> None:
    """fp32 ops whose kernels run on Tensor Cores used TF32 (fp32 inputs reach Tensor Cores only so)."""
    tc = tc_classes[0][g["name"]]
    on_tc = (owner >= 0) & compute & (tc == 1)
    if not on_tc.any():
        return
    hit = np.zeros(counted.rows.size, dtype=bool)
    hit[distinct(owner[on_tc])] = True
    counted.dtype[hit & (counted.dtype == "fp32")] = "tf32"


def _dominant_dtype(counted: Counted) -> str | None:
    """The dtype with the most hardware FLOPs (of equal totals, the first by name)."""
    if not counted.rows.size:
        return None
    known = np.array([d is not None for d in counted.dtype.tolist()], dtype=bool) & ~np.isnan(counted.hw_flops)
    if not known.any():
        return None
    by_dtype = Groups(counted.dtype[known].astype(str))
    flops = counted.hw_flops[known]
    totals = np.array([np.nansum(flops[by_dtype.index == i]) for i in range(by_dtype.size)])  # a loop over dtypes
    return str(by_dtype.keys[0][int(np.argmax(totals))])


def _per_step_flops(steps, start, counted: Counted, lo: int, hi: int):
    if len(steps):
        s, e = steps.cpu_start_ns, steps.cpu_end_ns
        order = np.argsort(s, kind="stable")
        idx = np.searchsorted(s[order], start, side="right") - 1
        ok = (idx >= 0) & (start < e[order][np.maximum(idx, 0)])
        step_of = np.where(ok, order[np.maximum(idx, 0)], -1)
        sel = step_of >= 0
        flops = np.bincount(step_of[sel], weights=counted.flops[sel], minlength=len(steps))
        hw = np.bincount(step_of[sel], weights=counted.hw_flops[sel], minlength=len(steps))
        time_ns = int(steps.end_ns.max() - steps.cpu_start_ns.min())
        return flops, hw, time_ns
    sel = (start >= lo) & (start < hi)
    return np.array([counted.flops[sel].sum()]), np.array([counted.hw_flops[sel].sum()]), int(hi - lo)


def _small_gemm_ns(counted: Counted, peak_row: DevicePeak | None) -> float:
    """Kernel time of matrix products whose shapes are memory-bound on this device (arithmetic
    intensity below the ridge point peak / bandwidth for their dtype)."""
    if peak_row is None or not counted.rows.size:
        return 0.0
    by_dtype = {d: peak_row.ridge_flops_per_byte(d) or np.nan for d in set(counted.dtype.tolist())}
    ridge = np.array([by_dtype[d] for d in counted.dtype], dtype=np.float64)
    ok = (counted.op_class == F.MATMUL) & (counted.gpu_ns > 0) & (counted.bytes > 0) & ~np.isnan(ridge)
    intensity = np.divide(counted.hw_flops, counted.bytes, out=np.zeros(counted.rows.size), where=counted.bytes > 0)
    return float(counted.gpu_ns[ok & (intensity < ridge)].sum())


def _softmax_ns(trace: Trace, clock: ThreadClock, gpu_ext, launching_ops, compute, dur) -> float:
    """Kernel time of explicit softmax and unfused (math) attention ops: the memory-bound part of
    attention that fused kernels (FlashAttention) keep on chip."""
    g, c = trace.gpu_ops, trace.cpu_ops
    if not len(g):
        return 0.0
    soft = trace.string_ids(SOFTMAX_OP_RE.match)
    ops = np.flatnonzero(soft[c["name"]])
    if not ops.size:
        return 0.0
    us, ue = union_on_clock(trace, ops, clock)
    hit = np.zeros(len(g), dtype=bool)
    by_call = compute & (g["launch"] >= 0)
    call = g["launch"][by_call]
    hit[by_call] = enclosing(us, ue, clock.runtime(call, "start_ns"), clock.runtime(call, "end_ns")) >= 0
    names = launching_ops.names_of(gpu_ext)
    hit |= compute & ~by_call & (names >= 0) & soft[np.maximum(names, 0)]
    return float(dur[hit].sum())
