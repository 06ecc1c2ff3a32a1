"""Name-based classification: communication kernels and Tensor Core kernels.

Every classifier works on the string table once (a boolean lookup array indexed by name id), so
classifying millions of rows costs one fancy-index, not a regex per row.
"""

from __future__ import annotations

import re

import numpy as np

from ...model import trace as M
from ...model import vocab as V
from ...model.groups import distinct, isin
from ...model.trace import Trace
from ..core.registry import Produced, analysis

# Tensor Core kernel names, Volta -> Blackwell. FFMA (plain FP32 FMA) variants are excluded first.
TC_EXCLUDE_RE = re.compile(r"ffma|_fp64_|dgemm|sgemm_(?!.*tensorop)", re.I)
TC_RE = re.compile(
    r"(h884|h1688|s1688|i8816|i16832|h16816|s16816|bf16816|tf32|hmma|imma|16816|1688|884gemm|"
    r"xmma|wgmma|(?<!sub)tensorop|tensorcore|_tc_|nvjet|sm(80|86|89|90|90a|100|100a|120)_xmma|"
    r"sm(80|86|89|90|100|120)_.*(gemm|conv)|cutlass.*(s|h|bf)16816|gmma|mma_|flash_fwd|flash_bwd|"
    r"fmha|flash::|cudnn_.*_hmma|ampere_.*(h|bf|s)16816|ampere_fp16|ampere_bf16|turing_fp16|volta_h884|"
    r"volta_fp16|hopper_|sm90_|cublasLt.*tensor)",
    re.I,
)
# Matrix math on CUDA cores (FP32/FP64 gemm and conv kernels): not Tensor Core work, but work that
# could be (AMP, TF32).
CUDA_CORE_MATH_RE = re.compile(
    r"(ffma|sgemm|dgemm|gemmSN|gemv|scudnn|dcudnn|_s\d+gemm|winograd|implicit_convolve_sgemm|dgrad_engine|"
    r"wgrad_alg|fprop_engine|conv2d_grouped_direct|depthwise)",
    re.I,
)
# Helper kernels that are plainly not Tensor Core work and could not be (elementwise, reductions,
# copies, layout conversion, norms, softmax, optimizers, index math...).
HELPER_RE = re.compile(
    r"(elementwise|vectorized|reduce|reduction|softmax|layer_?norm|batch_?norm|norm_|index|scatter|gather|"
    r"copy|cat|fill|where|unrolled|pointwise|triton_(poi|red|per)|embedding|sort|topk|cumsum|dropout|"
    r"adam|sgd|multi_tensor|foreach|relu|gelu|silu|sigmoid|tanh|pool|upsample|arange|memcpy|memset|"
    r"distribution|random|philox|transpose|permute|nchw|nhwc|compute_|fft|bn_fw|bn_bw|_bn_|im2col|col2im|"
    r"nll_loss|cross_entropy|adaptive_|Offsets?Kernel|splitKreduce|cub::|Scan|GammaBeta|_offsets|"
    r"bounds_check|quantize|to_float|histogram|unique|masked|clamp|rms_?norm|SubTensorOp|Op\dd?TensorGeneric)",
    re.I,
)
# Matrix and convolution work whose names carry layout words a helper pattern would take (``nchw``,
# ``nhwc``, ``transpose``, ``fft``): MIOpen's and composable_kernel's implicit-GEMM convolutions, naive and
# assembly convolutions, rocBLAS/Tensile GEMMs, cuDNN's FFT and Winograd convolution stages. They run an
# op's arithmetic, so they are never helpers.
MATRIX_WORK_RE = re.compile(
    r"(igemm_(fwd|bwd|wrw)|implicit_?gemm|gridwise_(convolution|gemm)|naive_conv|MIOpenConv|Asm_?Conv|"
    r"conv_?(fwd|bwd|wrw)|Cijk_|xdlops|fft2d_|cgemm|winograd|_conv_)",
    re.I,
)
# Kernels templated on plain float (FP32) with no half/bf16/tf32/int8 type and no MMA marker: these run
# on CUDA cores (TF32 Tensor Core kernels carry "tf32" in their names).
FP32_TYPED_RE = re.compile(r"<\s*float\s*[,>]|\bfloat\s*,\s*float\b")
LOW_PRECISION_RE = re.compile(
    r"\bhalf\b|__half|half_t|bf16|bfloat16|fp16|\bf16|f16f16|tf32|int8|fp8|e4m3|e5m2|"
    r"hmma|imma|wgmma|mma_sync",
    re.I,
)
# Kernel names of matmul / conv / attention work, the kind Tensor Cores run.
TC_ELIGIBLE_RE = re.compile(r"(gemm|gemv|conv|matmul|linear|bmm|attention|attn|fmha|mma|winograd|cudnn)", re.I)


def name_mask(
    trace: Trace, pattern: re.Pattern, exclude: re.Pattern | None = None, ids: np.ndarray | None = None
) -> np.ndarray:
    """Per string id: does the name match ``pattern`` (and not ``exclude``)? With ``ids``, only the
    strings that column uses are tested (the rest read False)."""
    mask = trace.string_ids(pattern.search, ids)  # a match object is true, None false
    if exclude is not None:  # tested on the matching names only
        hit = np.flatnonzero(mask)
        mask[hit] &= ~trace.string_ids(exclude.search, hit)[hit]
    return mask


def kernel_class_codes(trace: Trace, ids: np.ndarray) -> np.ndarray:
    """``vocab.kernel_class`` of each name id in ``ids`` (distinct, >= 0), as an index into
    ``vocab.KERNEL_CLASSES``. Each pattern runs once per distinct name, through the trace's kept
    pattern answers; a name longer than the part patterns see is classified whole, as before."""
    out = np.full(ids.size, V.KERNEL_CLASSES.index("other"), dtype=np.int64)
    if not ids.size:
        return out
    undecided = np.ones(ids.size, dtype=bool)
    for pattern, name in V.KERNEL_CLASS_PATTERNS:
        hit = undecided & name_mask(trace, pattern, ids=ids)[ids]
        out[hit] = V.KERNEL_CLASSES.index(name)
        undecided &= ~hit
    long = [k for k, sid in enumerate(ids.tolist()) if len(trace.strings[sid]) > M.MATCH_CHARS]
    for k in long:
        out[k] = V.KERNEL_CLASSES.index(V.kernel_class(trace.strings[int(ids[k])]))
    return out


def comm_kernel_mask(trace: Trace, gpu_ext: np.ndarray) -> np.ndarray:
    """Which GPU ops are communication kernels (by name, or linked to a collective op through
    ``gpu_ext``, the External ids from ``links.gpu_external_ids``)."""
    g = trace.gpu_ops
    if not len(g):
        return np.zeros(0, dtype=bool)
    is_kernel = g["kind"] == M.KERNEL
    by_name = name_mask(trace, V.COMM_KERNEL_RE, ids=g["name"])[g["name"]]
    comm = is_kernel & by_name
    c = trace.cpu_ops
    if len(c):
        coll_ops = name_mask(trace, V.COLLECTIVE_OP_RE, ids=c["name"])[c["name"]]
        coll_ext = distinct(c["external_id"][coll_ops & (c["external_id"] >= 0)])
        if coll_ext.size:
            comm |= is_kernel & (gpu_ext >= 0) & isin(gpu_ext, coll_ext)
    return comm


def tensor_core_class(trace: Trace) -> tuple[np.ndarray, np.ndarray]:
    """Per string id of a GPU op name: Tensor Core use (1 yes, 0 no, -1 unknown) and whether the name
    is a helper kernel (elementwise, copies, norms...) that could not use Tensor Cores in any case.
    Only the distinct names of ``gpu_ops`` are classified (other strings read -1 / False).

    Checked in order: CUDA-core math (FFMA, SGEMM, FP32 cuDNN) is "no"; a Tensor Core marker (HMMA,
    xmma, wgmma, tensorop, nvjet...) is "yes"; helpers are "no", except names of matrix or convolution
    work (``MATRIX_WORK_RE``), which are never helpers; a kernel templated on plain float
    with no low-precision type is "no"; anything else is unknown.
    """
    n = len(trace.strings)
    tc = np.full(n + 1, -1, dtype=np.int8)  # the extra entry: rows without a name (id -1) are unknown
    names = trace.gpu_ops["name"]
    used = np.zeros(n + 1, dtype=bool)
    used[names[(names >= 0) & (names < n)]] = True

    def found(pattern: re.Pattern, among: np.ndarray) -> np.ndarray:
        """Of the ids marked in ``among``, those whose name ``pattern`` finds (each name tested once)."""
        ids = np.flatnonzero(among)
        return trace.string_ids(pattern.search, ids) & among if ids.size else among.copy()

    math = found(CUDA_CORE_MATH_RE, used)
    no = found(TC_EXCLUDE_RE, used) | (math & ~found(TC_RE, math))
    rest = used & ~no
    yes = found(TC_RE, rest)
    rest &= ~yes
    helper = found(HELPER_RE, rest)
    helper &= ~found(MATRIX_WORK_RE, helper)
    rest &= ~helper
    fp32 = found(FP32_TYPED_RE, rest)
    tc[no | helper | (fp32 & ~found(LOW_PRECISION_RE, fp32))] = 0
    tc[yes] = 1
    return tc, helper


@analysis(needs=("gpu_ext",), provides=("comm_mask",))
def communication_kernels(trace: Trace, inputs) -> Produced:
    return Produced(values={"comm_mask": comm_kernel_mask(trace, inputs["gpu_ext"])})


@analysis(provides=("tc_classes",))
def tensor_core_classes(trace: Trace, inputs) -> Produced:
    return Produced(values={"tc_classes": tensor_core_class(trace)})
