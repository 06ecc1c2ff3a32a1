"""FLOP formulas per op kind, each expected value worked out by hand in the comment beside it."""

from __future__ import annotations

import pytest

from tracedoc.analyses.flops.formulas import BACKWARD, FORWARD, causal_fraction, conv_output_shape, op_flops
from tracedoc.model.peaks import device_peak

F32 = "float"


def flops(name, dims, types=None, concrete=None, **kw):
    r = op_flops(name, dims, types if types is not None else [F32] * len(dims), concrete or [], **kw)
    assert not isinstance(r, str), r
    return r


# -- matrix products ---------------------------------------------------------------------------


def test_mm():
    # (64x32)(32x16): 64*16 outputs, each 32 multiply-adds = 2 FLOPs -> 2*64*16*32
    assert flops("aten::mm", [[64, 32], [32, 16]]).flops == 65_536


def test_addmm_adds_the_bias():
    # 2*64*16*32 = 65536 plus one add per output element (64*16 = 1024)
    r = flops("aten::addmm", [[16], [64, 32], [32, 16], [], []], [F32, F32, F32, "Scalar", "Scalar"])
    assert r.flops == 66_560
    assert r.dtype == "fp32"


def test_bmm_and_baddbmm():
    # 4 batches of (8x16)(16x32): 2*4*8*32*16 = 32768
    assert flops("aten::bmm", [[4, 8, 16], [4, 16, 32]]).flops == 32_768
    # plus the added [4,8,32] tensor: 4*8*32 = 1024
    assert flops("aten::baddbmm", [[4, 8, 32], [4, 8, 16], [4, 16, 32], [], []]).flops == 33_792


def test_matmul_broadcasts_and_promotes_vectors():
    # [2,3,8,16] @ [16,4]: 6 matrices of (8x16)(16x4) = 6 * 2*8*4*16 = 6144
    assert flops("aten::matmul", [[2, 3, 8, 16], [16, 4]]).flops == 6_144
    # [2,1,8,16] @ [3,16,4]: batch broadcasts to 2*3 = 6 -> 6144
    assert flops("aten::matmul", [[2, 1, 8, 16], [3, 16, 4]]).flops == 6_144
    # vector [16] @ [16,4]: one row: 2*1*4*16 = 128
    assert flops("aten::matmul", [[16], [16, 4]]).flops == 128


def test_linear_with_bias_over_a_3d_input():
    # input [2,10,32] is 20 rows; weight [16,32]: 2*20*16*32 = 20480, bias adds 20*16 = 320
    r = flops("aten::linear", [[2, 10, 32], [16, 32], [16]])
    assert r.flops == 20_800
    assert r.gemm_min_dim == 16
    # without bias
    assert flops("aten::linear", [[2, 10, 32], [16, 32], []]).flops == 20_480


def test_bf16_dtype_and_bytes():
    # bf16: 2 bytes per element; (64*32 + 32*16 + 64*16) elements = 2048+512+1024 = 3584 -> 7168 bytes
    r = flops("aten::mm", [[64, 32], [32, 16]], ["c10::BFloat16", "c10::BFloat16"])
    assert r.dtype == "bf16" and r.bytes == 7_168


def test_einsum_two_operands():
    # bij,bjk->bik with b=2, i=4, j=5, k=3: contracted j -> 2 * (2*4*5*3) = 240
    r = flops("aten::einsum", [[], [[2, 4, 5], [2, 5, 3]], []], ["", "TensorList", ""], ["bij,bjk->bik", "", ""])
    assert r.flops == 240
    # ij,ij->ij is an elementwise product: 3*4 = 12 multiplies, no additions
    r = flops("aten::einsum", [[], [[3, 4], [3, 4]], []], ["", "TensorList", ""], ["ij,ij->ij", "", ""])
    assert r.flops == 12


def test_einsum_without_equation_or_with_three_operands_is_not_counted():
    assert isinstance(op_flops("aten::einsum", [[], [[2, 4, 5], [2, 5, 3]], []], ["", "TensorList", ""], []), str)
    three = op_flops(
        "aten::einsum", [[], [[2, 3], [3, 4], [4, 5]], []], ["", "TensorList", ""], ["ij,jk,kl->il", "", ""]
    )
    assert isinstance(three, str)


def test_scaled_mm_is_fp8():
    # 2*32*64*128 = 524288, at the fp8 peak
    r = flops("aten::_scaled_mm", [[32, 128], [128, 64], [], []], ["c10::Float8_e4m3fn"] * 2 + ["float"] * 2)
    assert r.flops == 524_288 and r.dtype == "fp8"


def test_corrupt_or_mismatched_records_give_a_reason():
    assert "corrupt" in op_flops("aten::mm", [[2, 3], [3, 4], [4, 5]], [F32] * 3, [])
    assert "differ" in op_flops("aten::mm", [[2, 3], [4, 5]], [F32] * 2, [])
    assert isinstance(op_flops("aten::mm", [[2, 3]], [F32], []), str)
    assert isinstance(op_flops("aten::relu", [[2, 3]], [F32], []), str)


# -- convolution -------------------------------------------------------------------------------

CONV2D_TYPES = [F32, F32, F32, "ScalarList", "ScalarList", "ScalarList", "Scalar"]


def test_conv2d_forward_from_stride_and_padding():
    # x [2,3,8,8], w [8,3,3,3], stride 2, padding 1: out spatial (8+2-2-1)//2+1 = 4 -> out [2,8,4,4] = 256
    # each output element: 3*3*3 = 27 multiply-adds -> 2*256*27 = 13824, bias +256
    r = flops(
        "aten::conv2d",
        [[2, 3, 8, 8], [8, 3, 3, 3], [8], [], [], [], []],
        CONV2D_TYPES,
        ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"],
    )
    assert r.flops == 14_080 and r.phase == FORWARD


def test_grouped_conv_counts_the_weight_per_group():
    # depthwise: x [1,4,5,5], w [4,1,3,3], groups 4, no padding: out [1,4,3,3] = 36 elements,
    # each 1*3*3 = 9 multiply-adds -> 2*36*9 = 648
    r = flops(
        "aten::conv2d",
        [[1, 4, 5, 5], [4, 1, 3, 3], [], [], [], [], []],
        CONV2D_TYPES,
        ["", "", "", "[1, 1]", "[0, 0]", "[1, 1]", "4"],
    )
    assert r.flops == 648


def test_conv_same_padding_and_dilation():
    assert conv_output_shape([1, 3, 10, 10], [6, 3, 3, 3], [1], "same", [1]) == [1, 6, 10, 10]
    # dilation 2 makes a 3x3 kernel span 5: (10 - 5)//1 + 1 = 6
    assert conv_output_shape([1, 3, 10, 10], [6, 3, 3, 3], [1, 1], [0, 0], [2, 2]) == [1, 6, 6, 6]


def test_transposed_conv_counts_per_input_element():
    # x [1,2,3,3] (18 elements), w [2,4,2,2] (C_in, C_out, kh, kw): each input element meets 4*2*2 = 16
    # weights -> 2*18*16 = 576
    r = flops(
        "aten::conv_transpose2d",
        [[1, 2, 3, 3], [2, 4, 2, 2], [], [], [], [], [], []],
        [F32, F32, "", "ScalarList", "ScalarList", "ScalarList", "Scalar", "ScalarList"],
        ["", "", "", "[2, 2]", "[0, 0]", "[0, 0]", "1", "[1, 1]"],
    )
    assert r.flops == 576


def test_conv_without_stride_uses_the_backward_output_size_or_says_why():
    dims = [[2, 3, 8, 8], [8, 3, 3, 3], [8], [], [], [], []]
    assert "stride/padding" in op_flops("aten::conv2d", dims, CONV2D_TYPES, [])
    # the backward's grad_output [2,8,4,4] gives the output: 2*256*27 + 256 = 14080
    assert flops("aten::conv2d", dims, CONV2D_TYPES, [], conv_out=[2, 8, 4, 4]).flops == 14_080
    # torch's with_flops value is used when the shapes do not resolve
    assert flops("aten::conv2d", dims, CONV2D_TYPES, [], flops_arg=12345.0).flops == 12_345


BWD_TYPES = [
    F32,
    F32,
    F32,
    "ScalarList",
    "ScalarList",
    "ScalarList",
    "ScalarList",
    "Scalar",
    "ScalarList",
    "Scalar",
    "ScalarList",
]


def _conv_bwd(mask: str):
    return op_flops(
        "aten::convolution_backward",
        [[2, 8, 4, 4], [2, 3, 8, 8], [8, 3, 3, 3]] + [[]] * 8,
        BWD_TYPES,
        ["", "", "", "[8]", "[2, 2]", "[1, 1]", "[1, 1]", "False", "[0, 0]", "1", mask],
    )


def test_conv_backward_counts_input_and_weight_gradients_by_output_mask():
    # one pass costs as much as the forward: 2 * 256 * 27 = 13824
    both = _conv_bwd("[True, True, False]")
    assert both.flops == 27_648 and both.phase == BACKWARD
    # first layer: no input gradient; weight gradient 13824 + bias gradient (sum over 256 outputs)
    assert _conv_bwd("[False, True, True]").flops == 14_080
    assert "output mask" in op_flops(
        "aten::convolution_backward", [[2, 8, 4, 4], [2, 3, 8, 8], [8, 3, 3, 3]] + [[]] * 8, BWD_TYPES, []
    )


def test_old_single_gradient_conv_backward_ops():
    # cudnn_convolution_backward_input(self_size, grad_output [2,8,4,4], weight [8,3,3,3]): 2*256*27
    r = flops(
        "aten::cudnn_convolution_backward_input",
        [[], [2, 8, 4, 4], [8, 3, 3, 3]],
        ["", F32, F32],
        ["[2, 3, 8, 8]", "", ""],
    )
    assert r.flops == 13_824


# -- attention ---------------------------------------------------------------------------------

SDPA_TYPES = [F32, F32, F32, "", "Scalar", "Scalar", "", "Scalar"]


def _sdpa(q, k, v, causal: bool, name="aten::scaled_dot_product_attention"):
    return flops(
        name,
        [q, k, v, [], [], [], [], []],
        SDPA_TYPES,
        ["", "", "", "", "0.", "True" if causal else "False", "", "False"],
    )


def test_sdpa_forward_full_and_causal():
    # B=2, H=4, N=6, d=8: QK^T is 2*2*4*6*6*8 = 4608, PV the same -> 9216
    q = [2, 4, 6, 8]
    assert _sdpa(q, q, q, causal=False).flops == 9_216
    # causal keeps half the square score matrix
    assert _sdpa(q, q, q, causal=True).flops == 4_608


def test_gqa_uses_query_heads():
    # q [1,8,16,64], k/v [1,2,16,64]: 2*1*8*16*16*(64+64) = 524288
    assert _sdpa([1, 8, 16, 64], [1, 2, 16, 64], [1, 2, 16, 64], causal=False).flops == 524_288


def test_flash_kernel_layout_is_batch_seq_heads_dim():
    # _flash_attention_forward takes [B, N, H, d]: q [1,16,8,64] is the same work as above
    dims = [[1, 16, 8, 64], [1, 16, 2, 64], [1, 16, 2, 64]] + [[]] * 6
    conc = [""] * 8 + ["False"]
    assert flops("aten::_flash_attention_forward", dims, [F32] * 3 + [""] * 6, conc).flops == 524_288


def test_fused_attention_backward_model_and_hardware_flops():
    # causal forward of B=2,H=4,N=6,d=8 is 4608; backward model FLOPs = 2x = 9216
    # the fused kernel recomputes QK^T: 2*2*4*6*6/2 = 288 per unit of d, * d_qk 8 = 2304 -> 11520
    q = [2, 4, 6, 8]
    dims = [q, q, q, q, q, [2, 4, 6], [], [], [], [], [], [], [], [], []]
    conc = [""] * 11 + ["True", "", "", ""]
    r = flops("aten::_scaled_dot_product_flash_attention_backward", dims, [F32] * 5 + [""] * 10, conc)
    assert r.phase == BACKWARD
    assert r.flops == 9_216 and r.hardware_flops == 11_520


def test_causal_fraction_rectangular_masks():
    # top-left (torch is_causal), N_q=2, N_kv=4: rows keep 1 and 2 of 4 keys -> 3/8
    assert causal_fraction(2, 4) == pytest.approx(3 / 8)
    # bottom-right (KV cache): rows keep 3 and 4 -> 7/8
    assert causal_fraction(2, 4, bottom_right=True) == pytest.approx(7 / 8)
    # N_q=4 > N_kv=2 top-left: rows keep 1, 2, 2, 2 -> 7/8; bottom-right: 0, 0, 1, 2 -> 3/8
    assert causal_fraction(4, 2) == pytest.approx(7 / 8)
    assert causal_fraction(4, 2, bottom_right=True) == pytest.approx(3 / 8)


def test_efficient_attention_bottom_right_mask_type():
    # q [1,4,2,16] (B, N_q=4, H=2, d), k/v [1,8,2,16]; mask type 2 keeps rows 5,6,7,8 of 8 = 26/32
    # 2*1*2*4*8*(26/32)*(16+16) = 3328
    dims = [[1, 4, 2, 16], [1, 8, 2, 16], [1, 8, 2, 16]] + [[]] * 9
    conc = [""] * 9 + ["2", "", ""]
    assert flops("aten::_efficient_attention_forward", dims, [F32] * 3 + [""] * 9, conc).flops == 3_328


# -- peaks -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, row, bf16",
    [
        ("NVIDIA A100-SXM4-80GB", "A100 80GB", 312),
        ("NVIDIA A100-PCIE-40GB", "A100 40GB", 312),
        ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB", 312),
        ("NVIDIA A100-SXM4", "A100", 312),
        ("Tesla V100-SXM2-16GB", "V100 SXM2", None),
        ("Tesla V100-PCIE-32GB", "V100 PCIe", None),
        ("NVIDIA H100 80GB HBM3", "H100 SXM", 989.4),
        ("NVIDIA H100 PCIe", "H100 PCIe", 756),
        ("NVIDIA H100 NVL", "H100 NVL", 835),
        ("NVIDIA H200", "H200 SXM", 989.4),
        ("NVIDIA B200", "B200", 2250),
        ("NVIDIA A10G", "A10G", 125),
        ("NVIDIA A10", "A10", 125),
        ("NVIDIA L4", "L4", 121),
        ("NVIDIA L40S", "L40S", 362.05),
        ("Tesla T4", "T4", None),
        ("NVIDIA GeForce RTX 4090", "RTX 4090", 165.2),
        ("NVIDIA GeForce RTX 3090", "RTX 3090", 71),
        ("AMD Instinct MI250X", "MI250X (per GCD)", 191.5),
        ("AMD Instinct MI300X", "MI300X", 1307.4),
    ],
)
def test_peak_rows_match_recorded_device_names(name, row, bf16):
    peak = device_peak(name)
    assert peak is not None and peak.name == row
    assert peak.peak_tflops("bf16") == bf16
    assert peak.source


def test_unknown_devices_have_no_peak():
    for name in ("AMD Radeon Graphics", "NVIDIA GeForce GTX 1080", "", None, "NVIDIA GeForce RTX 3090 Ti"):
        assert device_peak(name) is None


def test_memory_bandwidth_follows_the_board():
    # datasheet TB/s: A100 40GB 1.555, 80GB SXM 2.039, 80GB PCIe 1.935; H100 SXM 3.35, PCIe 2.0; H200 4.8
    for name, tb in (
        ("NVIDIA A100-SXM4-40GB", 1.555),
        ("NVIDIA A100-SXM4-80GB", 2.039),
        ("NVIDIA A100 80GB PCIe", 1.935),
        ("NVIDIA H100 80GB HBM3", 3.35),
        ("NVIDIA H100 PCIe", 2.0),
        ("NVIDIA H200", 4.8),
    ):
        assert device_peak(name).hbm_tb_per_s == tb, name
    # an A100 of unnamed memory size: the highest bandwidth, so no share of it is overstated
    assert device_peak("NVIDIA A100").hbm_tb_per_s == 2.039
    # the ridge point of bf16 on an H100 SXM: 989.4 TFLOP/s / 3.35 TB/s = 295.3 FLOP/byte
    assert device_peak("NVIDIA H100 80GB HBM3").ridge_flops_per_byte("bf16") == pytest.approx(295.34, abs=0.01)
    # element-wise work runs on the vector units: MI250X per GCD 47.9 / 2 TFLOP/s, not its 95.7 / 2 matrix rate
    assert device_peak("AMD Instinct MI250X").vector_tflops == 23.95
    assert device_peak("NVIDIA H100 80GB HBM3").vector_tflops == 67


def test_fp32_and_tf32_are_distinct_dense_peaks():
    a100 = device_peak("NVIDIA A100-SXM4-40GB")
    # datasheet: FP32 19.5, TF32 312 with sparsity -> 156 dense
    assert a100.peak_tflops("fp32") == 19.5 and a100.peak_tflops("tf32") == 156
    assert device_peak("Tesla V100-SXM2-16GB").peak_tflops("fp16") == 125


def test_the_reader_keeps_shapes_of_every_op_a_formula_counts():
    from tracedoc.analyses.flops.formulas import FLOP_OPS
    from tracedoc.analyses.flops.formulas.memory import MEMORY_FORMULAS
    from tracedoc.ingest.kineto.columns import SHAPE_OP_RE

    assert [n for n in FLOP_OPS if not SHAPE_OP_RE.match(n)] == []
    assert [n for n in MEMORY_FORMULAS if not SHAPE_OP_RE.match(n)] == []
    for name in ("aten::_foreach_add_", "triton_poi_fused_gelu_3", "torch::autograd::AccumulateGrad"):
        assert SHAPE_OP_RE.match(name), name
    # views, allocations and autograd nodes launch no kernels: their shapes stay undecoded
    for name in (
        "aten::view",
        "aten::t",
        "aten::transpose",
        "aten::as_strided",
        "aten::empty_strided",
        "aten::reshape",
        "aten::detach",
        "aten::expand",
        "AddmmBackward0",
    ):
        assert not SHAPE_OP_RE.match(name), name


# -- memory-bound ops: bytes moved (each tensor read or written once) ------------------------------

BF = "c10::BFloat16"


def cost(name, dims, types, concrete=None):
    from tracedoc.analyses.flops.formulas import op_cost

    r = op_cost(name, dims, types, concrete or [""] * len(dims))
    assert not isinstance(r, str), r
    return r


def test_elementwise_reads_its_inputs_and_writes_the_broadcast_result():
    # bias add in place: self [64,64,128,128] bf16 read and written (2 x 67,108,864 B), bias [1,64,1,1] read
    # (128 B); one add per output element
    r = cost("aten::add_", [[64, 64, 128, 128], [1, 64, 1, 1], []], [BF, BF, "Scalar"])
    assert r.bytes == 2 * 64 * 64 * 128 * 128 * 2 + 64 * 2 and r.flops == 64 * 64 * 128 * 128
    assert r.op_class == "elementwise" and r.dtype == "bf16"
    # a Python scalar recorded as a 0-dim double tensor does not make the op fp64
    assert cost("aten::mul", [[4096, 2048], []], [F32, "double"]).dtype == "fp32"
    # gelu_backward(grad, self): two reads and one write of [16,512,3072] fp32 = 3 x 100,663,296 B
    assert cost("aten::gelu_backward", [[16, 512, 3072], [16, 512, 3072], []], [F32, F32, ""]).bytes == 3 * 100_663_296


def test_copies_and_casts_move_bytes_in_each_dtype_and_do_no_arithmetic():
    # copy_(dst bf16, src fp32) [2048,8192]: 16,777,216 elements x (4 read + 2 written) = 100,663,296 B
    r = cost("aten::copy_", [[2048, 8192], [2048, 8192], []], [BF, F32, "Scalar"])
    assert r.bytes == 16_777_216 * 6 and r.flops == 0 and r.op_class == "copy"
    # _to_copy(self fp32, dtype=15 (bfloat16)): the same bytes from the dtype code
    assert (
        cost(
            "aten::_to_copy",
            [[2048, 8192]] + [[]] * 6,
            [F32, "Scalar", "Scalar", "", "", "Scalar", ""],
            ["", "15", "0", "", "", "False", ""],
        ).bytes
        == 16_777_216 * 6
    )
    # fill_ writes only: 64*10 fp32 = 2,560 B
    assert cost("aten::fill_", [[64, 10], []], [F32, "Scalar"]).bytes == 2_560


def test_reductions_softmax_and_norms():
    # sum over dim 0 of [4096, 2048] bf16: reads 16,777,216 B, writes 2048 x 2 = 4,096 B
    assert (
        cost("aten::sum", [[4096, 2048], [], [], []], [BF, "ScalarList", "Scalar", ""], ["", "[0]", "True", ""]).bytes
        == 16_777_216 + 4_096
    )
    # log_softmax of [8192, 8192] fp32: read and write 268,435,456 B each; 5 FLOPs per element
    r = cost("aten::_log_softmax", [[8192, 8192], [], []], [F32, "Scalar", "Scalar"], ["", "1", "False"])
    assert r.bytes == 2 * 268_435_456 and r.flops == 5 * 8192 * 8192
    # layer norm backward over [16,512,768] fp32 with mask [True, True, True]: reads grad_out and input
    # (2 x 25,165,824 B), mean and rstd [16,512,1] (2 x 32,768 B), weight [768] (3,072 B); writes the
    # input gradient (25,165,824 B) and the weight and bias gradients (2 x 3,072 B)
    dims = [[16, 512, 768], [16, 512, 768], [], [16, 512, 1], [16, 512, 1], [768], [768], []]
    types = [F32, F32, "ScalarList", F32, F32, F32, F32, "ScalarList"]
    r = cost("aten::native_layer_norm_backward", dims, types, ["", "", "[768]", "", "", "", "", "[True, True, True]"])
    assert r.bytes == 3 * 25_165_824 + 2 * 32_768 + 3_072 + 2 * 3_072
    # without the weight gradients (mask [True, False, False]): 6,144 B fewer
    r2 = cost(
        "aten::native_layer_norm_backward", dims, types, ["", "", "[768]", "", "", "", "", "[True, False, False]"]
    )
    assert r.bytes - r2.bytes == 2 * 3_072


def test_pooling_and_embedding():
    # max_pool2d_with_indices [64,64,128,128] bf16, kernel 2 stride 2: out [64,64,64,64] bf16 + int64 indices:
    # reads 134,217,728 B, writes 33,554,432 + 134,217,728 B; 4 comparisons per output element
    r = cost(
        "aten::max_pool2d_with_indices",
        [[64, 64, 128, 128]] + [[]] * 5,
        [BF] + ["ScalarList"] * 4 + ["Scalar"],
        ["", "[2, 2]", "[2, 2]", "[0, 0]", "[1, 1]", "False"],
    )
    assert r.bytes == 134_217_728 + 33_554_432 + 134_217_728 and r.flops == 4 * 64 * 64 * 64 * 64
    # embedding(weight [8192, 768] fp32, indices [16, 512] int64): 8192 rows of 768 read and written
    # (2 x 25,165,824 B) and the indices (65,536 B)
    assert (
        cost(
            "aten::embedding", [[8192, 768], [16, 512], [], [], []], [F32, "long int", "Scalar", "Scalar", "Scalar"]
        ).bytes
        == 2 * 25_165_824 + 65_536
    )


def test_optimizers_and_compiled_kernels():
    # fused AdamW with recorded TensorLists: params [1024,1024] and [1024] (1,049,600 fp32 elements);
    # param, exp_avg, exp_avg_sq read and written, grad read: 7 x 4 B per element = 29,388,800 B
    lists = [[[1024, 1024], [1024]]] * 6
    r = cost(
        "aten::_fused_adamw_",
        lists + [[]] * 9,
        ["TensorList"] * 6 + ["Scalar"] * 9,
        [""] * 6 + ["0.001", "0.9", "0.999", "0.01", "1e-08", "False", "False", "", ""],
    )
    assert r.bytes == 1_049_600 * 28 and r.op_class == "optimizer"
    # TensorLists recorded as [] (torch does for long lists): said, not guessed
    from tracedoc.analyses.flops.formulas import op_cost

    assert "TensorList" in op_cost("aten::_fused_adamw_", [[]] * 15, ["TensorList"] * 6 + ["Scalar"] * 9, [""] * 15)
    # a Triton kernel: its buffers [4096,8192] bf16 x 2 = 134,217,728 B; FLOPs unknown
    r = cost("triton_poi_fused_gelu_3", [[4096, 8192], [4096, 8192], []], [BF, BF, "Scalar"])
    assert r.bytes == 134_217_728 and r.flops is None and r.op_class == "compiled"


def test_compiled_graph_out_variants_and_a_wrong_out_shape():
    # mm(a, b, out=buf) as torch.compile calls it: 2*2048*1024*512
    assert flops("aten::mm", [[2048, 512], [512, 1024], [2048, 1024]], [BF] * 3).flops == 2_147_483_648
    # addmm(bias, a, b, beta, alpha, out=buf): + 2048*1024 bias adds
    assert (
        flops(
            "aten::addmm", [[1024], [2048, 512], [512, 1024], [], [], [2048, 1024]], [BF] * 3 + ["Scalar"] * 2 + [BF]
        ).flops
        == 2_147_483_648 + 2_097_152
    )
    assert "corrupt" in op_flops("aten::mm", [[2048, 512], [512, 1024], [7, 7]], [BF] * 3, [])
