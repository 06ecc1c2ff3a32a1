"""Which kernels ran each counted op's FLOPs, and how many of them (tracedoc/analyses/flops/mfu.py counts the
ops; this module places their FLOPs on kernels for the rates per kernel class, op class and roofline row).

An op's FLOPs are split over the kernels that ran its work, in proportion to their time, over all of its
kernels wherever they ran, so a rate never depends on where the analysis window cut the op: an op whose
kernels straddle the window edge brings into the window only the share of its FLOPs its kernels there ran.
The kernels that ran the work are the op's matrix/convolution kernels; its helper kernels (layout, offsets,
element-wise) share the FLOPs only when the op launched nothing else, or when its other kernels alone would
have run them faster than the device's peak for the op's dtype (a convolution stage with a helper-like
name). An op that even over all of its kernels would have run faster than that peak gets no rate at all:
its FLOPs cannot have been executed in the kernel time the trace links to it (kernels of the op missing
from the trace, or an algorithm with fewer multiplications than the op's formula, Winograd or FFT), and
the tables say so instead of showing a rate above the peak.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# What a rate left out for this reason is called in the tables.
OVER_PEAK_NOTE = (
    "FLOPs faster than the device's peak for their dtype in the kernel time the trace links to "
    "the op: kernels of the op are missing from the trace (launched through a call the profiler did "
    "not record), or its algorithm does fewer multiplications than the op's formula (Winograd, FFT); "
    "no rate is shown for it"
)


@dataclass
class Credit:
    """Per GPU op: the FLOPs credited to it (0 for kernels that ran no counted op's work); per counted
    op: its total kernel time, and whether its FLOPs exceed what its kernels can run (``over_peak``)."""

    kernel_flops: np.ndarray  # float64, len(gpu_ops)
    credited: np.ndarray  # bool, len(gpu_ops): the kernel ran part of its op's counted work
    op_kernel_ns: np.ndarray  # int64 per counted op: all of its kernels' time, in or out of the window
    over_peak: np.ndarray  # bool per counted op


def op_peaks(dtypes: np.ndarray, peak_row) -> np.ndarray:
    """The device's dense peak (TFLOP/s) for each op's dtype; NaN where unknown."""
    if peak_row is None:
        return np.full(dtypes.size, np.nan)
    cache: dict = {}
    out = np.empty(dtypes.size)
    for i, d in enumerate(dtypes.tolist()):  # a lookup per distinct dtype, cached
        if d not in cache:
            p = peak_row.peak_tflops(d) if d else None
            cache[d] = float(p) if p else np.nan
        out[i] = cache[d]
    return out


def credit_flops(
    hw_flops: np.ndarray,
    dtypes: np.ndarray,
    owner: np.ndarray,
    kernel: np.ndarray,
    dur: np.ndarray,
    helper_kernel: np.ndarray,
    peak_row,
) -> Credit:
    """``owner``: the counted op (index) each GPU op was launched inside, -1 none; ``kernel``: compute
    kernels (any time); ``helper_kernel``: per GPU op, whether its name is a helper's."""
    n_ops = hw_flops.size
    kernel_flops = np.zeros(owner.size, dtype=np.float64)
    credited = np.zeros(owner.size, dtype=bool)
    owned = np.flatnonzero((owner >= 0) & kernel)
    if not n_ops or not owned.size:
        return Credit(kernel_flops, credited, np.zeros(n_ops, dtype=np.int64), np.zeros(n_ops, dtype=bool))
    op, d = owner[owned], dur[owned].astype(np.float64)
    is_helper = helper_kernel[owned]
    all_ns = np.bincount(op, weights=d, minlength=n_ops)
    work_ns = np.bincount(op, weights=np.where(is_helper, 0.0, d), minlength=n_ops)
    flops = np.nan_to_num(hw_flops, nan=0.0)
    peak_flops_per_ns = op_peaks(dtypes, peak_row) * 1e3  # TFLOP/s = 1e3 FLOP/ns
    known_peak = ~np.isnan(peak_flops_per_ns)

    def faster_than_peak(ns: np.ndarray) -> np.ndarray:
        limit = np.where(known_peak, peak_flops_per_ns, 0.0) * ns * (1 + 1e-9)
        return known_peak & (flops > 0) & (flops > limit)

    # the op's math kernels, unless they would run its FLOPs faster than the peak (or it launched none)
    spread = (work_ns <= 0) | faster_than_peak(work_ns)
    over_peak = faster_than_peak(all_ns)
    credit_ns = np.where(spread, all_ns, work_ns)
    mine = (~is_helper | spread[op]) & ~over_peak[op] & (credit_ns[op] > 0)
    kernel_flops[owned[mine]] = flops[op[mine]] * d[mine] / credit_ns[op[mine]]
    credited[owned[mine]] = True
    return Credit(kernel_flops, credited, all_ns.astype(np.int64), over_peak)
