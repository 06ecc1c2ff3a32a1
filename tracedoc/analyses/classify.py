"""Name-based classification: communication kernels, Tensor Core kernels, sync calls, launches.

Every classifier works on the string table once (a boolean lookup array indexed by name id), so
classifying millions of rows costs one fancy-index, not a regex per row.
"""

from __future__ import annotations

import re

import numpy as np

from ..model import trace as M
from ..model.trace import Trace

COMM_KERNEL_RE = re.compile(r"nccl|rccl|hccl", re.I)
COLLECTIVE_OP_RE = re.compile(r"^(record_param_comms$|nccl:|c10d::|gloo:)")

# Tensor Core kernel names, Volta -> Blackwell. FFMA (plain FP32 FMA) variants are excluded first.
TC_EXCLUDE_RE = re.compile(r"ffma|_fp64_|dgemm|sgemm_(?!.*tensorop)", re.I)
TC_RE = re.compile(
    r"(h884|h1688|s1688|i8816|i16832|h16816|s16816|bf16816|tf32|hmma|imma|16816|1688|884gemm|"
    r"xmma|wgmma|tensorop|tensorcore|_tc_|nvjet|sm(80|86|89|90|90a|100|100a|120)_xmma|"
    r"sm(80|86|89|90|100|120)_.*(gemm|conv)|cutlass.*(s|h|bf)16816|gmma|mma_|flash_fwd|flash_bwd|"
    r"fmha|flash::|cudnn_.*_hmma|ampere_.*(h|bf|s)16816|ampere_fp16|ampere_bf16|turing_fp16|volta_h884|"
    r"volta_fp16|hopper_|sm90_|cublasLt.*tensor)", re.I)
# Kernels that are plainly not Tensor Core work (elementwise, reductions, copies, norms, softmax...).
NON_TC_RE = re.compile(
    r"(elementwise|vectorized|reduce|reduction|softmax|layer_?norm|batch_?norm|norm_|index|scatter|gather|"
    r"copy|cat|fill|where|unrolled|pointwise|triton_(poi|red|per)|embedding|sort|topk|cumsum|dropout|"
    r"adam|sgd|multi_tensor|foreach|relu|gelu|silu|sigmoid|tanh|pool|upsample|arange|memcpy|memset|"
    r"distribution|random|philox|transpose|permute|nchw|nhwc|compute_|ffma|gemv|gemmSN|sgemm|dgemm|"
    r"winograd|implicit_convolve_sgemm|fft)", re.I)
# Kernels of ops that could use Tensor Cores: matmul, conv, linear, bmm, attention.
TC_ELIGIBLE_RE = re.compile(r"(gemm|gemv|conv|matmul|linear|bmm|attention|attn|fmha|mma|winograd|cudnn)", re.I)

SYNC_CALL_RE = re.compile(
    r"^(cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize|cudaStreamWaitEvent|"
    r"hipStreamSynchronize|hipDeviceSynchronize|hipEventSynchronize|cuStreamSynchronize|cuCtxSynchronize|"
    r"cuEventSynchronize|cudaMemcpy|hipMemcpy|cuMemcpyDtoH|cuMemcpyHtoD)(_v\d+)?$")
SYNC_OP_RE = re.compile(r"^(aten::_local_scalar_dense|aten::item)$")
SYNC_MEMCPY_RE = re.compile(r"^(cudaMemcpy|hipMemcpy|cuMemcpyDtoH|cuMemcpyHtoD)(_v\d+)?$")
LAUNCH_CALL_RE = re.compile(
    r"^(cudaLaunchKernel|cudaLaunchKernelExC|cudaLaunchCooperativeKernel|cuLaunchKernel|cuLaunchKernelEx|"
    r"cudaMemcpyAsync|cudaMemsetAsync|cudaMemcpy|cudaMemset|hipLaunchKernel|hipExtLaunchKernel|"
    r"hipModuleLaunchKernel|hipMemcpyAsync|hipMemsetAsync|cudaGraphLaunch|cuGraphLaunch|hipGraphLaunch|"
    r"cudaLaunchHostFunc|cudaLaunchKernel_ptsz)(_v\d+)?$")
GRAPH_LAUNCH_RE = re.compile(r"^(cudaGraphLaunch|cuGraphLaunch|hipGraphLaunch)(_v\d+)?$")
DATALOADER_RE = re.compile(r"^enumerate\((DataLoader|DataPipe)\)#|DataLoader.*__next__|dataloader", re.I)
MULTIPROC_RE = re.compile(r"_MultiProcessingDataLoaderIter", re.I)
SINGLEPROC_RE = re.compile(r"_SingleProcessDataLoaderIter", re.I)
DATA_PARALLEL_RE = re.compile(r"(^|\W)DataParallel|^Broadcast$|torch\.nn\.parallel\.(replicate|scatter_gather)", re.I)


def name_mask(trace: Trace, pattern: re.Pattern, exclude: re.Pattern | None = None) -> np.ndarray:
    return trace.string_ids(lambda s: pattern.search(s) is not None and not (exclude and exclude.search(s)))


def comm_kernel_mask(trace: Trace) -> np.ndarray:
    """Which GPU ops are communication kernels (by name, or linked to a collective op)."""
    g = trace.gpu_ops
    if not len(g):
        return np.zeros(0, dtype=bool)
    is_kernel = g["kind"] == M.KERNEL
    by_name = name_mask(trace, COMM_KERNEL_RE)[g["name"]]
    comm = is_kernel & by_name
    c = trace.cpu_ops
    if len(c):
        coll_ops = name_mask(trace, COLLECTIVE_OP_RE)[c["name"]]
        coll_ext = np.unique(c["external_id"][coll_ops & (c["external_id"] >= 0)])
        if coll_ext.size:
            ext = g["external_id"].copy()
            # Fall back to the launch call's External id when the kernel carries none.
            launch = g["launch"]
            missing = (ext < 0) & (launch >= 0)
            if missing.any():
                ext[missing] = trace.runtime["external_id"][launch[missing]]
            comm |= is_kernel & (ext >= 0) & np.isin(ext, coll_ext)
    return comm


def tensor_core_class(trace: Trace) -> np.ndarray:
    """Per string id: 1 Tensor Core kernel, 0 not, -1 unknown."""
    out = np.full(len(trace.strings), -1, dtype=np.int8)
    for i, s in enumerate(trace.strings):
        if TC_EXCLUDE_RE.search(s):
            out[i] = 0
        elif TC_RE.search(s):
            out[i] = 1
        elif NON_TC_RE.search(s):
            out[i] = 0
    return out
