"""No FLOP rate above the device's peak for its dtype: each counted op's FLOPs go to the kernels that ran
its work, over all of them wherever the window cut them (tracedoc/analyses/flops/kernel_credit.py). Built traces
reproduce the patterns that used to give impossible rates: fp32 convolutions lowered to implicit-GEMM
kernels whose names carry layout words, a convolution split over FFT stages and a complex GEMM, a backward
whose recorded kernels are too short for its FLOPs, and an op cut by the window's start."""

from __future__ import annotations

import pytest
from trace_builder import TraceBuilder

import tracedoc
from tracedoc.checks import BUG_PREFIX

CONV_ARGS = {
    "Input Dims": [[32, 64, 56, 56], [64, 64, 3, 3], [], [], [], [], []],
    "Input type": ["float", "float", "", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
    "Concrete Inputs": ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1"],
}
CONV_FLOPS = 2 * (32 * 64 * 56 * 56) * (64 * 3 * 3)  # 7,398,752,256 per call, no bias


def _conv_steps(gpu: str, kernels: list[tuple[str, float]], steps: int = 3, calls: int = 8) -> TraceBuilder:
    """``steps`` 10 ms steps; in each, ``calls`` fp32 convolutions, each launching ``kernels`` (name,
    duration in us) back to back."""
    b = TraceBuilder(gpu=gpu)
    for i in range(steps):
        s = 1_000_000.0 + i * 10_000.0
        b.step(i + 1, s, s + 10_000.0)
        gpu_t = s + 200.0
        for c in range(calls):
            at = s + 10.0 + 40.0 * c
            b.cpu_op("aten::conv2d", at, at + 30.0, args=CONV_ARGS)
            for k, (name, dur) in enumerate(kernels):
                b.kernel(name, gpu_t, dur, launch_at=at + 2.0 + 5.0 * k, launch_dur=2.0)
                gpu_t += dur
    return b


def _rates(rank) -> list[tuple[str, float | None, float | None]]:
    ev = rank.evidence
    rows = [(r.kernel_class, r.tflops, r.peak_tflops) for r in ev["flops_by_kernel_class"]]
    rows += [(r.op_class, r.tflops, r.peak_tflops) for r in ev["flops_by_op_class"]]
    rows += [(r.op, r.tflops, r.peak_tflops) for r in ev["roofline"] if r.bound == "compute"]
    return rows


def _no_rate_above_peak(rank) -> None:
    assert not [w for w in rank.warnings if BUG_PREFIX in w]
    for name, tflops, peak in _rates(rank):
        assert tflops is None or peak is None or tflops <= peak * (1 + 1e-9), (name, tflops, peak)


def test_implicit_gemm_convolutions_with_layout_words_carry_their_own_flops(tmp_path):
    # MIOpen on an MI300X: the implicit-GEMM kernel (its name says nhwc) runs the convolution, a tiny
    # SubTensorOp zeroes the output first. The kernel named nhwc used to count as a layout helper and the
    # SubTensorOp (read as "tensorop", a Tensor Core marker) got every FLOP: far above the peak.
    igemm = "igemm_fwd_gtcx3_nhwc_fp32_bx0_ex1_bt128x128x16_wt32x32x2_ws2x1_wr2x2_ta1x8x2x1_1x4x1x32"
    b = _conv_steps("MI300X", [("SubTensorOpWithScalar1d", 5.0), (igemm, 400.0)])
    rank = tracedoc.analyze(b.write(tmp_path / "mi300x_conv.pt.trace.json")).ranks[0]
    _no_rate_above_peak(rank)
    rows = {r.kernel_class: r for r in rank.evidence["flops_by_kernel_class"]}
    conv = rows["convolution kernel"]
    # every FLOP on the implicit-GEMM kernel: 24 calls x 7.40 GFLOP over 24 x 400 us = 18.5 TFLOP/s
    assert conv.flops == pytest.approx(24 * CONV_FLOPS)
    assert conv.tflops == pytest.approx(CONV_FLOPS / 400e-6 / 1e12)
    assert rows["helper (elementwise, layout)"].flops == 0


def test_fft_convolution_spreads_its_flops_over_its_stages(tmp_path):
    # cuDNN's FFT convolution on a V100: forward transform, complex GEMM, inverse transform. The
    # transforms used to count as helpers ("fft"), so the short complex GEMM got every FLOP: 37 TFLOP/s
    # on a GPU whose fp32 peak is 15.7.
    b = _conv_steps(
        "V100",
        [
            ("void fft2d_r2c_32x32<float, false, 1u, false>(float2*)", 300.0),
            ("volta_cgemm_32x32_tn", 200.0),
            ("void fft2d_c2r_32x32<float, false, false, 0u, false, false>(float*)", 300.0),
        ],
    )
    rank = tracedoc.analyze(b.write(tmp_path / "v100_fft.pt.trace.json")).ranks[0]
    _no_rate_above_peak(rank)
    # over all three stages: 7.40 GFLOP in 800 us = 9.25 TFLOP/s, 59% of the fp32 peak
    (conv,) = [r for r in rank.evidence["flops_by_op_class"] if r.op_class == "conv forward"]
    assert conv.tflops == pytest.approx(CONV_FLOPS / 800e-6 / 1e12)
    assert conv.of_peak_fraction == pytest.approx(CONV_FLOPS / 800e-6 / 1e12 / 15.7)


def test_an_op_whose_recorded_kernels_are_too_short_for_its_flops_gets_no_rate_and_says_why(tmp_path):
    # A convolution backward whose data gradient ran in a kernel the trace does not link (a driver-API
    # launch an old profiler did not record): the weight-gradient sgemm it does link would have run both
    # gradients' 14.8 GFLOP in 300 us, 49 TFLOP/s on a 15.7 TFLOP/s GPU.
    b = TraceBuilder(gpu="V100")
    args = {
        "Input Dims": [[32, 64, 56, 56], [32, 64, 56, 56], [64, 64, 3, 3]],
        "Input type": ["float"] * 3,
        "Concrete Inputs": ["", "", "", "", "", "", "", "", "", "", "[True, True, False]"],
    }
    args["Input Dims"] += [[]] * 8
    args["Input type"] += [""] * 8
    for i in range(3):
        s = 1_000_000.0 + i * 10_000.0
        b.step(i + 1, s, s + 10_000.0)
        for c in range(8):
            at = s + 10.0 + 40.0 * c
            b.cpu_op("aten::convolution_backward", at, at + 30.0, args=args)
            t = s + 200.0 + 1000.0 * c
            b.unlaunched("void cudnn::detail::dgrad_engine<float, 128, 6, 7, 3, 3, 5, false>", t, 600.0)
            b.kernel("volta_sgemm_128x64_nt", t + 600.0, 300.0, launch_at=at + 5.0, launch_dur=2.0)
    rank = tracedoc.analyze(b.write(tmp_path / "v100_bwd.pt.trace.json")).ranks[0]
    _no_rate_above_peak(rank)
    rows = {r.kernel_class: r for r in rank.evidence["flops_by_kernel_class"]}
    assert "GEMM kernel on CUDA cores" not in rows
    over = rows["kernels of ops faster than the peak"]
    assert over.tflops is None and over.of_peak_fraction is None and "missing from the trace" in over.note
    (bwd,) = rank.evidence["flops_by_op_class"]
    assert bwd.tflops is None and bwd.note.startswith(f"{bwd.ops} op(s) left out of the rate")
    (row,) = [r for r in rank.evidence["roofline"] if r.op == "aten::convolution_backward"]
    assert row.tflops is None and row.of_roof_fraction is None and "missing from the trace" in row.note


def test_an_op_cut_by_the_window_brings_only_the_flops_its_kernels_ran_inside(tmp_path):
    # One 10-kernel GEMM op launched before the first step: only its last kernel runs inside the window
    # (first step start onwards). It used to bring all of its FLOPs into the window, on that one kernel.
    b = TraceBuilder(gpu="A100")
    mm = {"Input Dims": [[4096, 4096], [4096, 4096]], "Input type": ["float", "float"]}
    b.cpu_op("aten::mm", 900.0, 990.0, args=mm)
    for k in range(10):  # nine kernels before the first step (at 10 ms), the last one inside it
        b.kernel(
            "ampere_sgemm_128x64_nn",
            1_000.0 + 900.0 * k if k < 9 else 10_100.0,
            900.0,
            launch_at=905.0 + k,
            launch_dur=0.5,
        )
    for i in range(3):
        s = 10_000.0 + i * 10_000.0
        b.step(i + 1, s, s + 10_000.0)
        b.cpu_op("aten::mm", s + 10.0, s + 60.0, args=mm)
        for k in range(10):
            b.kernel("ampere_sgemm_128x64_nn", s + 1_100.0 + 900.0 * k, 900.0, launch_at=s + 20.0 + k, launch_dur=0.5)
    rank = tracedoc.analyze(b.write(tmp_path / "cut.pt.trace.json")).ranks[0]
    _no_rate_above_peak(rank)
    gemm = 2 * 4096**3
    (row,) = rank.evidence["flops_by_kernel_class"]
    # every kernel runs at its op's rate, 137 GFLOP / 9 ms; the cut op brings a tenth of its FLOPs
    assert row.tflops == pytest.approx(gemm / 9e-3 / 1e12)
    assert row.flops == pytest.approx(3.1 * gemm)
