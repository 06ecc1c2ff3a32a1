"""Per-op roofline and the FLOP counting it rests on, on traces built by hand: every expected number is
worked out from the shapes in the comment beside it (never from tracedoc's own formulas)."""

from __future__ import annotations

import json
import re

import pytest
from trace_builder import TraceBuilder

import tracedoc
from tracedoc.render import render_html, render_md, render_text

BF16, F32 = "c10::BFloat16", "float"
# A100 80GB SXM (trace_builder's "A100"): datasheet bf16 dense 312 TFLOP/s, FP32 19.5, HBM 2.039 TB/s
A100_BF16, A100_FP32, A100_TB = 312.0, 19.5, 2.039


def op(b: TraceBuilder, name: str, start: float, end: float, dims, types, concrete=None) -> None:
    args = {"Input Dims": dims, "Input type": types}
    if concrete is not None:
        args["Concrete Inputs"] = concrete
    b.cpu_op(name, start, end, args=args)


def launch(b: TraceBuilder, kernel: str, at: float, gpu_at: float, dur: float) -> None:
    """A kernel whose launch call (at ``at``, 2 us) runs inside whatever CPU op spans that time."""
    b.kernel(kernel, gpu_at, dur, launch_at=at, launch_dur=2.0)


def rows_by_op(result) -> dict:
    return {(r.op, r.input_shapes): r for r in result.ranks[0].evidence["roofline"]}


# -- two ops by hand -------------------------------------------------------------------------------

GEMM = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x32"
LN = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float>"


def two_ops_trace(tmp_path, steps: int = 3):
    """Per 2 ms step: a bf16 mm [4096,4096] x [4096,8192] whose kernel runs 1000 us, a fp32 layer norm over
    [8192,1024] (weight and bias [1024]) whose kernel runs 40 us, and an unmodelled op (30 us)."""
    b = TraceBuilder(gpu="A100")
    for i in range(steps):
        s = 1_000_000.0 + i * 2_000.0
        b.step(i + 1, s, s + 2_000.0)
        op(b, "aten::mm", s + 10, s + 30, [[4096, 4096], [4096, 8192]], [BF16, BF16], ["", ""])
        launch(b, GEMM, s + 20, s + 100, 1_000.0)
        op(
            b,
            "aten::native_layer_norm",
            s + 40,
            s + 60,
            [[8192, 1024], [], [1024], [1024], []],
            [F32, "ScalarList", F32, F32, "Scalar"],
            ["", "[1024]", "", "", "1e-05"],
        )
        launch(b, LN, s + 50, s + 1_150, 40.0)
        b.cpu_op("aten::nonzero", s + 70, s + 90)
        launch(b, "void at::native::nonzero_kernel<float>", s + 80, s + 1_200, 30.0)
    return tracedoc.analyze(str(b.write(tmp_path / "two_ops.pt.trace.json")))


def test_roofline_rates_agree_with_a_hand_computation_on_two_ops(tmp_path):
    result = two_ops_trace(tmp_path)
    rows = rows_by_op(result)

    # mm (M=4096, K=4096, N=8192), bf16: FLOPs 2*M*N*K = 2*4096*8192*4096 = 274,877,906,944 per call;
    # bytes (M*K + K*N + M*N) * 2 = (16,777,216 + 33,554,432 + 33,554,432) * 2 = 167,772,160 per call
    mm = rows[("aten::mm", "[4096, 4096] x [4096, 8192]")]
    assert (mm.op_class, mm.dtype, mm.calls) == ("matmul", "bf16", 3)
    assert mm.gpu_ns_per_call == 1_000_000
    assert mm.flops_per_call == 274_877_906_944 and mm.bytes_per_call == 167_772_160
    # 274.878 GFLOP in 1 ms = 274.878 TFLOP/s; 0.1678 GB in 1 ms = 0.1678 TB/s; 274877906944 / 167772160 = 1638.4 FLOP/B
    assert mm.tflops == pytest.approx(274.877906944)
    assert mm.tb_per_s == pytest.approx(0.16777216)
    assert mm.flop_per_byte == pytest.approx(1638.4)
    # ridge 312 / 2.039 = 153.0 FLOP/B < 1638.4: compute-bound, at 274.878 / 312 = 88.1% of the bf16 peak
    assert mm.ridge_flop_per_byte == pytest.approx(153.016, abs=1e-3)
    assert mm.bound == "compute" and mm.roof_tflops == A100_BF16
    assert mm.of_roof_fraction == pytest.approx(0.881019, abs=1e-6)
    # 1 ms of a 2 ms step (3 steps, window 6 ms)
    assert mm.step_fraction == pytest.approx(3 * 1_000 / 6_000)

    # layer norm over 8192 rows of 1024, fp32: reads input 8192*1024*4 = 33,554,432 B and weight and bias
    # 2*1024*4 = 8,192 B; writes the output 33,554,432 B and mean and rstd 2*8192*4 = 65,536 B
    ln = rows[("aten::native_layer_norm", "[8192, 1024] x [1024] x [1024]")]
    assert (ln.op_class, ln.dtype, ln.calls) == ("normalization", "fp32", 3)
    assert ln.bytes_per_call == 33_554_432 + 8_192 + 33_554_432 + 65_536  # 67,182,592
    # 67,182,592 B in 40 us = 1.67956 TB/s; of the 2.039 TB/s bandwidth: 82.37%
    assert ln.tb_per_s == pytest.approx(1.6795648)
    # 8 FLOPs per element (mean, variance, normalise, scale and shift) = 67,108,864; intensity 0.9989
    # FLOP/B, below the CUDA-core ridge 19.5 / 2.039 = 9.56: memory-bound
    assert ln.flops_per_call == 8 * 8192 * 1024
    assert ln.bound == "memory" and ln.ridge_flop_per_byte == pytest.approx(9.5635, abs=1e-4)
    assert ln.of_roof_fraction == pytest.approx(1.6795648 / 2.039)


def test_rows_are_complete_and_unmodelled_ops_stay_without_numbers(tmp_path):
    result = two_ops_trace(tmp_path)
    rows = result.ranks[0].evidence["roofline"]
    # every kernel of the window in exactly one row: (1000 + 40 + 30) us x 3 steps
    assert sum(r.gpu_ns for r in rows) == 3 * 1_070_000
    other = next(r for r in rows if r.op == "aten::nonzero")
    assert other.op_class == "unmodelled" and other.flops is None and other.bytes is None
    assert other.of_roof_fraction is None and other.gpu_ns == 90_000
    assert [r.op for r in rows] == ["aten::mm", "aten::native_layer_norm", "aten::nonzero"]  # most time first
    # the API gives the same rows as a DataFrame
    df = result.roofline()
    assert list(df["op"]) == [r.op for r in rows] and df.loc[0, "tflops"] == pytest.approx(274.877906944)


def test_rows_past_the_cap_are_summed_so_the_total_stays_complete(tmp_path, monkeypatch):
    from tracedoc.analyses.flops import roofline

    monkeypatch.setattr(roofline, "ROW_CAP", 2)
    rows = two_ops_trace(tmp_path).ranks[0].evidence["roofline"]
    assert [r.op for r in rows] == ["aten::mm", "(2 more op/shape rows)"]
    assert rows[1].calls == 6 and rows[1].gpu_ns == 3 * (40_000 + 30_000) and rows[1].tflops is None


def test_roofline_in_every_format(tmp_path):
    result = two_ops_trace(tmp_path)
    doc = json.loads(result.to_json())
    assert doc["ranks"][0]["evidence"]["roofline"][0]["op"] == "aten::mm"
    page = render_html(result)
    assert '<section id="roofline">' in page and 'class="sortable"' in page
    assert re.search(r'data-sort="274\.8779069\d*">274\.9<', page)  # the raw rate the column sorts on
    md = render_md(result)
    assert "Roofline per op and shape" in md and "| aten::mm |" in md and "88.1%" in md
    text = render_text(result, top=5)
    assert "Roofline per op and shape" in text and "yer_norm " in text  # cut to its column, its end kept
    assert "aten::native_layer_norm" in render_text(result, top=5, full_names=True)
    assert "Roofline" not in render_text(result)  # the default summary stays short


# -- FLOPs at the leaf GEMM under autocast ---------------------------------------------------------


def autocast_linear_trace(tmp_path):
    """bf16 autocast as torch records it: aten::linear sees fp32 inputs, casts them (aten::_to_copy ->
    aten::copy_, an element-wise kernel) and calls aten::addmm on bf16 tensors (the GEMM kernel)."""
    b = TraceBuilder(gpu="A100")
    for i in range(3):
        s = 1_000_000.0 + i * 1_000.0
        b.step(i + 1, s, s + 1_000.0)
        op(b, "aten::linear", s + 10, s + 100, [[4096, 4096], [4096, 4096], [4096]], [F32, F32, F32], ["", "", ""])
        op(
            b,
            "aten::_to_copy",
            s + 15,
            s + 35,
            [[4096, 4096], [], [], [], [], [], []],
            [F32, "Scalar", "Scalar", "", "", "Scalar", ""],
            ["", "15", "0", "", "", "False", ""],
        )
        op(b, "aten::copy_", s + 20, s + 30, [[4096, 4096], [4096, 4096], []], [BF16, F32, "Scalar"], ["", "", "False"])
        launch(b, "void at::native::vectorized_elementwise_kernel<4, bfloat16_copy_kernel_cuda>", s + 22, s + 200, 50.0)
        op(
            b,
            "aten::addmm",
            s + 40,
            s + 90,
            [[4096], [4096, 4096], [4096, 4096], [], []],
            [BF16] * 3 + ["Scalar"] * 2,
            ["", "", "", "1", "1"],
        )
        launch(b, GEMM, s + 50, s + 260, 600.0)
    return tracedoc.analyze(str(b.write(tmp_path / "autocast.pt.trace.json")))


def test_autocast_products_take_the_leaf_dtype_and_only_the_gemm_kernel(tmp_path):
    result = autocast_linear_trace(tmp_path)
    m, ev = result.ranks[0].metrics, result.ranks[0].evidence
    # counted once, at the addmm: 2*4096^3 + 4096*4096 bias adds = 137,455,730,688 per step
    assert m["model_flops_per_step"] == 2 * 4096**3 + 4096 * 4096
    assert ev["flops_summary"][0].dtype == "bf16" and m["peak_tflops"] == A100_BF16
    # the class rate is over the GEMM kernel's 600 us only: 137.456 GFLOP / 0.6 ms = 229.09 TFLOP/s
    (cls,) = ev["flops_by_op_class"]
    assert cls.dtype == "bf16" and cls.gpu_ns == 3 * 600_000
    assert cls.tflops == pytest.approx((2 * 4096**3 + 4096 * 4096) / 600e-6 / 1e12)
    # the cast is a copy row: 4096*4096 fp32 read (4 B) and bf16 written (2 B) = 100,663,296 B in 50 us
    rows = rows_by_op(result)
    cast = rows[("aten::copy_", "[4096, 4096] x [4096, 4096]")]
    assert cast.op_class == "copy" and cast.flops_per_call == 0
    assert cast.bytes_per_call == 4096 * 4096 * 6 and cast.tb_per_s == pytest.approx(100_663_296 / 50e-6 / 1e12)
    # share of compute time with counted FLOPs: 600 of 650 us
    assert m["flops_counted_fraction"] == pytest.approx(600 / 650)


def test_rates_divide_by_the_step_p50_not_the_whole_window(tmp_path):
    # steps of 1 ms, 1 ms and 5 ms: the p50 is 1 ms, the window 7 ms
    b = TraceBuilder(gpu="A100")
    for i, (s, length) in enumerate(((1_000_000.0, 1_000.0), (1_001_000.0, 1_000.0), (1_002_000.0, 5_000.0))):
        b.step(i + 1, s, s + length)
        op(b, "aten::mm", s + 10, s + 30, [[1024, 1024], [1024, 1024]], [BF16, BF16], ["", ""])
        launch(b, GEMM, s + 20, s + 100, 500.0)
    result = tracedoc.analyze(str(b.write(tmp_path / "uneven.pt.trace.json")))
    m = result.ranks[0].metrics
    assert m["step_time_p50_ns"] == 1_000_000
    # 2*1024^3 = 2,147,483,648 FLOPs per step over 1 ms = 2.147 TFLOP/s (over the 7 ms window: 0.92)
    assert m["achieved_tflops"] == pytest.approx(2 * 1024**3 / 1e-3 / 1e12)
    assert m["mfu"] == pytest.approx(2 * 1024**3 / 1e-3 / 1e12 / A100_BF16)


# -- compiled graphs and every SDPA variant ---------------------------------------------------------


def test_compiled_graph_matmuls_with_out_tensors_count(tmp_path):
    b = TraceBuilder(gpu="A100")
    s = 1_000_000.0
    b.step(1, s, s + 2_000.0)
    b.cpu_op("Torch-Compiled Region: 0/0", s + 5, s + 500)
    b.cpu_op("CompiledFunction", s + 6, s + 490)
    # extern_kernels.mm(a, b, out=buf) and addmm(bias, a, b, out=buf), as torch.compile's graphs call them
    op(b, "aten::mm", s + 10, s + 30, [[2048, 512], [512, 1024], [2048, 1024]], [BF16] * 3, ["", "", ""])
    launch(b, GEMM, s + 20, s + 600, 100.0)
    op(
        b,
        "aten::addmm",
        s + 40,
        s + 60,
        [[1024], [2048, 512], [512, 1024], [], [], [2048, 1024]],
        [BF16] * 3 + ["Scalar"] * 2 + [BF16],
        ["", "", "", "1", "1", ""],
    )
    launch(b, GEMM, s + 50, s + 700, 100.0)
    op(
        b,
        "triton_poi_fused_gelu_0",
        s + 70,
        s + 80,
        [[2048, 1024], [2048, 1024], []],
        [BF16, BF16, "Scalar"],
        ["", "", "2097152"],
    )
    launch(b, "triton_poi_fused_gelu_0", s + 72, s + 800, 10.0)
    result = tracedoc.analyze(str(b.write(tmp_path / "compiled.pt.trace.json")))
    # mm 2*2048*1024*512 = 2,147,483,648; addmm the same + 2048*1024 bias adds = 2,149,580,800
    assert result.ranks[0].metrics["model_flops_per_step"] == 2_147_483_648 + 2_149_580_800
    tri = rows_by_op(result)[("triton_poi_fused_gelu_0", "[2048, 1024] x [2048, 1024]")]
    # a Triton kernel's buffers: 2 x 2048*1024 bf16 = 8,388,608 B in 10 us = 0.839 TB/s, memory-bound, no FLOPs
    assert tri.op_class == "compiled" and tri.flops is None and tri.bytes_per_call == 8_388_608
    assert tri.bound == "memory" and tri.of_roof_fraction == pytest.approx(0.8388608 / A100_TB)


QKV = [2, 8, 512, 64]  # B, H, N, d (heads first, as the sdpa ops take them)
# causal forward: QK^T and PV over half the 512x512 score matrix: 2 * 2*2*8*512*512*64 / 2 = 536,870,912
ATTN_FWD = 2 * 2 * 2 * 8 * 512 * 512 * 64 // 2


@pytest.mark.parametrize(
    "fwd, bwd, causal_at, bwd_causal_at, inner",
    [
        (
            "aten::_scaled_dot_product_cudnn_attention",
            "aten::_scaled_dot_product_cudnn_attention_backward",
            6,
            14,
            None,
        ),
        (
            "aten::_scaled_dot_product_flash_attention",
            "aten::_scaled_dot_product_flash_attention_backward",
            4,
            11,
            "aten::_flash_attention_backward",
        ),
        (
            "aten::_scaled_dot_product_efficient_attention",
            "aten::_scaled_dot_product_efficient_attention_backward",
            6,
            11,
            "aten::_efficient_attention_backward",
        ),
    ],
)
def test_every_sdpa_variant_counts_once_forward_and_backward(tmp_path, fwd, bwd, causal_at, bwd_causal_at, inner):
    b = TraceBuilder(gpu="A100")
    s = 1_000_000.0
    b.step(1, s, s + 3_000.0)
    conc = [""] * 9
    conc[causal_at] = "True"
    op(
        b,
        "aten::scaled_dot_product_attention",
        s + 10,
        s + 60,
        [QKV, QKV, QKV, [], [], [], [], []],
        [BF16] * 3 + ["", "Scalar", "Scalar", "", "Scalar"],
        ["", "", "", "", "0.", "True", "", "False"],
    )
    op(b, fwd, s + 15, s + 55, [QKV, QKV, QKV] + [[]] * 6, [BF16] * 3 + [""] * 6, conc)
    launch(b, "cudnn_generated_fort_native_sdpa_sm80_flash_fprop", s + 20, s + 100, 50.0)
    b.cpu_op("autograd::engine::evaluate_function: ScaledDotProductAttentionBackward0", s + 100, s + 300)
    bconc = [""] * 16
    bconc[bwd_causal_at] = "True"
    op(b, bwd, s + 110, s + 290, [QKV] * 5 + [[2, 8, 512]] + [[]] * 10, [BF16] * 5 + [F32] + [""] * 10, bconc)
    if inner:  # the fused kernel's own op, nested: [B, N, H, d]
        iconc = [""] * 16
        iconc[11 if "flash" in inner else 14] = "True" if "flash" in inner else "1"
        q = [2, 512, 8, 64]
        op(b, inner, s + 120, s + 280, [q] * 5 + [[2, 8, 512]] + [[]] * 10, [BF16] * 5 + [F32] + [""] * 10, iconc)
    launch(b, "cudnn_generated_fort_native_sdpa_sm80_flash_bprop", s + 200, s + 200, 120.0)
    result = tracedoc.analyze(str(b.write(tmp_path / "sdpa.pt.trace.json")))
    m = result.ranks[0].metrics
    # backward = 4 products (dV, dP, dQ, dK) = 2x the forward; the fused kernel also recomputes QK^T
    # (half the forward): hardware = 2.5x
    assert m["model_flops_per_step"] == ATTN_FWD + 2 * ATTN_FWD
    assert m["hardware_flops_per_step"] == ATTN_FWD + 2.5 * ATTN_FWD
    classes = {r.op_class: r for r in result.ranks[0].evidence["flops_by_op_class"]}
    assert classes["attention backward"].ops == 1 and classes["attention forward"].ops == 1
    rows = [r for r in result.ranks[0].evidence["roofline"] if r.op_class == "attention"]
    assert sorted(r.flops for r in rows) == [ATTN_FWD, 2.5 * ATTN_FWD]  # one row each, hardware FLOPs


# -- convolution backward: what it computed, old and new ----------------------------------------------

X1, W1, Y1 = [8, 3, 32, 32], [16, 3, 3, 3], [8, 16, 32, 32]  # first layer
X2, W2, Y2 = [8, 16, 32, 32], [16, 16, 1, 1], [8, 16, 32, 32]  # a 1x1 layer
# forward: out elements x 2 x (C_in x kh x kw): layer 1 8*16*32*32 * 2*27 = 7,077,888; layer 2 131072 * 2*16 = 4,194,304
FWD1, FWD2 = 8 * 16 * 32 * 32 * 2 * 27, 8 * 16 * 32 * 32 * 2 * 16


def test_torch_1_9_conv_backward_counts_the_gradients_its_calls_computed(tmp_path):
    """torch 1.8-1.10: no Concrete Inputs; cudnn_convolution_backward calls _backward_input and
    _backward_weight, one per gradient it computes (the first layer's input needs none)."""
    b = TraceBuilder(gpu="V100")
    s = 1_000_000.0
    b.step(1, s, s + 5_000.0)
    t = s + 10
    for x, w in ((X1, W1), (X2, W2)):
        op(b, "aten::conv2d", t, t + 40, [x, w, [], [], [], [], []], [F32, F32] + [""] * 5)
        op(b, "aten::cudnn_convolution", t + 5, t + 35, [x, w] + [[]] * 7, [F32, F32] + [""] * 7)
        launch(b, "volta_scudnn_128x64_relu_interior_nn_v1", t + 10, t + 1_000, 20.0)
        t += 50
    for x, w, y, grads in ((X2, W2, Y2, ("input", "weight")), (X1, W1, Y1, ("weight",))):
        b.cpu_op("CudnnConvolutionBackward", t, t + 100)
        op(b, "aten::cudnn_convolution_backward", t + 5, t + 95, [x, y, w] + [[]] * 8, [F32] * 3 + [""] * 8)
        for k, g in enumerate(grads):
            child = t + 10 + 40 * k
            other = w if g == "input" else x
            op(
                b,
                f"aten::cudnn_convolution_backward_{g}",
                child,
                child + 30,
                [[], y, other] + [[]] * 7,
                ["", F32, F32] + [""] * 7,
            )
            # a 1x1 input gradient runs as a GEMM kernel whose name says neither dgrad nor wgrad
            launch(
                b,
                "volta_sgemm_128x64_nt" if g == "input" else "cudnn::detail::wgrad_alg0_engine<float>",
                child + 5,
                t + 2_000 + 100 * k,
                20.0,
            )
        t += 110
    m = tracedoc.analyze(str(b.write(tmp_path / "old_conv.pt.trace.json"))).ranks[0].metrics
    # forward 1x each; backward: the 1x1 layer both gradients (2x its forward), the first layer only the
    # weight gradient (1x)
    assert m["model_flops_per_step"] == (FWD1 + FWD2) + 2 * FWD2 + FWD1


def test_conv_whose_mask_skips_the_input_gradient_counts_only_the_weight_gradient(tmp_path):
    b = TraceBuilder(gpu="A100")
    s = 1_000_000.0
    b.step(1, s, s + 2_000.0)
    types = [BF16] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"]
    op(
        b,
        "aten::convolution_backward",
        s + 10,
        s + 60,
        [Y1, X1, W1] + [[]] * 8,
        types,
        ["", "", "", "[16]", "[1, 1]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", "[False, True, True]"],
    )
    launch(b, "sm80_xmma_wgrad_implicit_gemm_indexed_bf16bf16_bf16f32_f32", s + 20, s + 100, 30.0)
    result = tracedoc.analyze(str(b.write(tmp_path / "first_conv.pt.trace.json")))
    # weight gradient FWD1 = 7,077,888 + bias gradient (one add per output element, 131,072)
    assert result.ranks[0].metrics["model_flops_per_step"] == FWD1 + 8 * 16 * 32 * 32
    (row,) = [r for r in result.ranks[0].evidence["roofline"] if r.op_class == "conv"]
    # bytes: grad_output read + the input read + the weight gradient written, bf16:
    # (131,072 + 24,576 + 432) * 2 = 312,160
    assert row.bytes_per_call == (8 * 16 * 32 * 32 + 8 * 3 * 32 * 32 + 16 * 27) * 2


# -- fused optimizer without recorded TensorLists, and the low_mfu evidence -------------------------


def adamw_trace(tmp_path, kernel_us: float):
    b = TraceBuilder(gpu="A100")
    for i in range(2):
        s = 1_000_000.0 + i * 3_000.0
        b.step(i + 1, s, s + 3_000.0)
        op(b, "aten::mm", s + 10, s + 20, [[256, 1024], [1024, 1024]], [BF16, BF16], ["", ""])
        launch(b, GEMM, s + 12, s + 100, 50.0)
        # the backward pass accumulates gradients into a [1024, 1024] weight and a [1024] bias (fp32)
        op(b, "torch::autograd::AccumulateGrad", s + 100, s + 110, [[1024, 1024]], [F32], [""])
        op(b, "torch::autograd::AccumulateGrad", s + 120, s + 130, [[1024]], [F32], [""])
        op(
            b,
            "aten::_fused_adamw_",
            s + 200,
            s + 300,
            [[]] * 6 + [[]] * 9,
            ["TensorList"] * 6 + ["Scalar"] * 9,
            [""] * 6 + ["0.001", "0.9", "0.999", "0.01", "1e-08", "False", "False", "", ""],
        )
        launch(b, "multi_tensor_apply_kernel<FusedAdamMathFunctor<float, 4>>", s + 210, s + 1_000, kernel_us)
    return rows_by_op(tracedoc.analyze(str(b.write(tmp_path / "adamw.pt.trace.json"))))[("aten::_fused_adamw_", "[]")]


def test_fused_adamw_takes_its_parameters_from_the_backward_pass(tmp_path):
    adam = adamw_trace(tmp_path, 20.0)
    # 1,049,600 fp32 parameters; AdamW reads and writes param, exp_avg and exp_avg_sq and reads the grad:
    # 7 x 4 B = 28 B each = 29,388,800 B per call; in 20 us = 1.469 TB/s
    assert adam.op_class == "optimizer" and adam.bytes_per_call == 1_049_600 * 28
    assert adam.tb_per_s == pytest.approx(1_049_600 * 28 / 20e-6 / 1e12)
    assert adam.of_roof_fraction == pytest.approx(1_049_600 * 28 / 20e-6 / 1e12 / A100_TB)


def test_an_optimizer_faster_than_the_bandwidth_says_what_that_can_mean(tmp_path):
    # 29.4 MB in 5 us is 5.9 TB/s, beyond the A100's 2.039: cached data, or fewer parameters than gradients
    adam = adamw_trace(tmp_path, 5.0)
    assert adam.tb_per_s == pytest.approx(1_049_600 * 28 / 5e-6 / 1e12) and adam.of_roof_fraction is None
    assert "cache" in adam.note and "sharded" in adam.note


def test_low_mfu_names_the_ops_furthest_below_their_roof(tmp_path):
    """fp32 GEMMs on CUDA cores filling 2 ms steps: five [1024,1024]x[1024,1024] at 150 us and five
    [64,1024]x[1024,64] at 230 us. The finding names the small shape, which loses the most step time."""
    b = TraceBuilder(gpu="A100")
    for i in range(3):
        s = 1_000_000.0 + i * 2_000.0
        b.step(i + 1, s, s + 2_000.0)
        gpu_t = s + 50
        for k in range(10):
            big = k % 2 == 0
            dims = [[1024, 1024], [1024, 1024]] if big else [[64, 1024], [1024, 64]]
            op(b, "aten::mm", s + 5 + 4 * k, s + 8 + 4 * k, dims, [F32, F32], ["", ""])
            dur = 150.0 if big else 230.0
            launch(b, "ampere_sgemm_128x64_nn", s + 6 + 4 * k, gpu_t, dur)
            gpu_t += dur
    result = tracedoc.analyze(str(b.write(tmp_path / "fp32_gemms.pt.trace.json")))
    finding = next(f for f in result.verdicts[0].findings if f.label == "low_mfu")
    gaps = finding.evidence["roofline_below_roof"]
    # big: 2*1024^3 = 2,147,483,648 FLOPs in 150 us = 14.32 TFLOP/s, 73.4% of the 19.5 FP32 peak; 750 us
    # of each 2 ms step: it loses 0.375 x 0.266 = 10% of the step
    # small: 2*64*64*1024 = 8,388,608 FLOPs, (64*1024*2 + 64*64) * 4 = 540,672 B: 15.5 FLOP/B, above the
    # FP32 ridge 19.5 / 2.039 = 9.56, so compute-bound, at 8.39 MFLOP / 230 us = 0.0365 TFLOP/s = 0.19% of
    # 19.5; 1150 us of the step: it loses 0.575 x 0.998 = 57%
    small, big = gaps[0], gaps[1]
    assert small.input_shapes == "[64, 1024] x [1024, 64]" and small.bound == "compute"
    assert small.of_roof_fraction == pytest.approx(8_388_608 / 230e-6 / 1e12 / 19.5)
    assert small.step_fraction == pytest.approx(1_150 / 2_000)
    assert big.of_roof_fraction == pytest.approx(2 * 1024**3 / 150e-6 / 1e12 / 19.5)
    assert big.below_roof_step_fraction == pytest.approx(0.375 * (1 - 2 * 1024**3 / 150e-6 / 1e12 / 19.5))
    assert "[64, 1024] x [1024, 64]" in finding.message and "57.5% of the step" in finding.message
