"""The name vocabulary: which op, call and range names mean a step, the input pipeline, a sync, a
launch or a collective. Readers and analyses both match names against these patterns, so each
pattern exists once.

Patterns are matched against the string table once (``Trace.string_ids``), never per row.
``search`` is meant unless a pattern is anchored.
"""

from __future__ import annotations

import re

# -- steps -------------------------------------------------------------------------------------
# The step span torch.profiler records (category user_annotation, cpu_op or Operator by version).
PROFILER_STEP_RE = re.compile(r"^ProfilerStep#(\d+)$")
# NVTX ranges that name a step: ProfilerStep#3, step 12, train_step, iteration_7, "iter 2", ...
# An emit_nvtx suffix (", op_id = 17", ", seq = 3", ", sizes = [...]") is allowed after the name.
STEP_FAMILY_RE = re.compile(
    r"^\s*(?P<fam>profiler[ _]?step|train(?:ing)?[ _\-]?step|step|train[ _\-]?iter(?:ation)?|iteration|iter)"
    r"(?:[\s_#:=\-]*\d+)?\s*(?:,\s*(?:seq|op_id|sizes|stream)\b.*)?$",
    re.I,
)
# The family key of a step-family match (``train_step`` and ``train-step`` are one family).
STEP_FAMILY_SEPARATORS_RE = re.compile(r"[ _\-]")


def user_step_range_re(step_range: str) -> re.Pattern:
    """The pattern of a user-named step range: the name, an optional number, an optional suffix."""
    return re.compile(r"^\s*" + re.escape(step_range.strip()) + r"(?:[\s_#:=\-]*\d+)?\s*(?:,.*)?$", re.I)


# -- input pipeline ----------------------------------------------------------------------------
# The iterator's __next__ span (``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__``),
# DataPipe iterators, and NVTX ranges or python functions naming the DataLoader.
DATALOADER_RE = re.compile(r"^enumerate\((DataLoader|DataPipe)\)#|DataLoader.*__next__|dataloader", re.I)
MULTIPROC_DATALOADER_RE = re.compile(r"_MultiProcessingDataLoaderIter", re.I)
SINGLEPROC_DATALOADER_RE = re.compile(r"_SingleProcessDataLoaderIter", re.I)

# -- synchronization ---------------------------------------------------------------------------
# Explicit syncs: calls whose purpose is to wait for the device, and synchronous copies.
SYNC_CALL_RE = re.compile(
    r"^(cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize|cudaStreamWaitEvent|"
    r"hipStreamSynchronize|hipDeviceSynchronize|hipEventSynchronize|cuStreamSynchronize|cuCtxSynchronize|"
    r"cuEventSynchronize|cudaMemcpy|hipMemcpy|cuMemcpyDtoH|cuMemcpyHtoD)(_v\d+)?$"
)
# A stream told to wait for an event: it blocks that stream, not the host.
STREAM_WAIT_CALL_RE = re.compile(r"^(cudaStreamWaitEvent|hipStreamWaitEvent)")
# Synchronous (blocking) copy calls: a subset of SYNC_CALL_RE.
SYNC_MEMCPY_RE = re.compile(r"^(cudaMemcpy|hipMemcpy|cuMemcpyDtoH|cuMemcpyHtoD)(_v\d+)?$")
# CPU ops that read a device value back (``.item()``) and so block until the device drains.
SYNC_OP_RE = re.compile(r"^(aten::_local_scalar_dense|aten::item)$")
# Implicit syncs: calls that synchronize the device as a side effect (freeing and allocating device
# memory, pinned host allocation, the caching allocator's empty_cache). A copy from or to pageable
# host memory (``cudaMemcpyAsync`` included) is also synchronous; that is told by the copy's memory
# kind (``gpu_ops.src_kind`` / ``dst_kind``), not by the call's name.
IMPLICIT_SYNC_CALL_RE = re.compile(
    r"^(cudaFree|cudaFreeHost|cudaMalloc|cudaMallocHost|cudaHostAlloc|cudaHostRegister|cudaHostUnregister|"
    r"cuMemFree|cuMemAlloc|cuMemHostAlloc|cuMemFreeHost|hipFree|hipHostFree|hipMalloc|hipHostMalloc|"
    r"hipHostRegister)(_v\d+)?$"
)
IMPLICIT_SYNC_OP_RE = re.compile(r"empty_cache|emptyCache")
# Device allocations among the implicit syncs: they block only when the allocator is short of memory.
ALLOC_CALL_RE = re.compile(r"^(cudaMalloc|cuMemAlloc|hipMalloc)(_v\d+)?$")
# Device frees among the implicit syncs: the caching allocator releasing memory to the driver.
FREE_CALL_RE = re.compile(r"^(cudaFree|cuMemFree|hipFree)(_v\d+)?$")
# GPU-side sync/wait markers, named as Kineto names them; nsys sync records get these names from
# the call that caused them (``SYNC_MARKER_BY_CALL``), else from their type (``SYNC_MARKER_BY_TYPE``).
SYNC_MARKER_BY_CALL: tuple[tuple[re.Pattern, str], ...] = (
    (re.compile(r"^cu(da)?StreamWaitEvent", re.I), "Stream Wait Event"),
    (re.compile(r"^cu(da)?StreamSynchronize", re.I), "Stream Sync"),
    (re.compile(r"^cu(da)?EventSynchronize", re.I), "Event Sync"),
    (re.compile(r"^(cudaDeviceSynchronize|cuCtxSynchronize)", re.I), "Context Sync"),
)
SYNC_MARKER_BY_TYPE = {1: "Event Sync", 2: "Stream Wait Event", 3: "Stream Sync", 4: "Context Sync"}
SYNC_MARKER_UNKNOWN = "Sync"

# -- launches ----------------------------------------------------------------------------------
LAUNCH_CALL_RE = re.compile(
    r"^(cudaLaunchKernel|cudaLaunchKernelExC|cudaLaunchCooperativeKernel|cuLaunchKernel|cuLaunchKernelEx|"
    r"cudaMemcpyAsync|cudaMemsetAsync|cudaMemcpy|cudaMemset|hipLaunchKernel|hipExtLaunchKernel|"
    r"hipModuleLaunchKernel|hipMemcpyAsync|hipMemsetAsync|cudaGraphLaunch|cuGraphLaunch|hipGraphLaunch|"
    r"cudaLaunchHostFunc|cudaLaunchKernel_ptsz)(_v\d+)?$"
)
GRAPH_LAUNCH_RE = re.compile(r"^(cudaGraphLaunch|cuGraphLaunch|hipGraphLaunch)(_v\d+)?$")
# Flow categories that join a launch call to its GPU op (Kineto ``ac2g`` and older spellings).
LAUNCH_FLOW_CATEGORIES = frozenset({"ac2g", "async", "async_cpu_to_gpu", "launch"})

# -- collectives -------------------------------------------------------------------------------
COMM_KERNEL_RE = re.compile(r"nccl|rccl|hccl", re.I)
COLLECTIVE_OP_RE = re.compile(r"^(record_param_comms$|nccl:|c10d::|gloo:)")
# The collective type inside an NCCL/RCCL kernel name (``ncclDevKernel_AllReduce_Sum_f32_RING_LL``).
KERNEL_COLLECTIVE_RE = re.compile(
    r"(AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|SendRecv|Send|Recv|AllToAll|Gather|Scatter)", re.I
)
# Single-process multi-GPU data parallelism (torch.nn.DataParallel).
DATA_PARALLEL_RE = re.compile(r"(^|\W)DataParallel|^Broadcast$|torch\.nn\.parallel\.(replicate|scatter_gather)", re.I)

# -- copies ------------------------------------------------------------------------------------
# A Kineto memcpy name: direction, then optionally (source kind -> destination kind).
MEMCPY_NAME_RE = re.compile(r"(HtoD|DtoH|DtoD|PtoP|HtoH)(?:\s*\((\w+)\s*->\s*(\w+)\))?", re.I)

# -- what a kernel computes --------------------------------------------------------------------
# Kernel classes by name, checked in this order after communication kernels (classify.comm_kernel_mask)
# and copies/memsets (the op's kind): attention before GEMM (fused attention kernels run MMAs), norms
# before convolution (cuDNN's batch-norm kernels), convolution before GEMM (implicit-GEMM convolutions).
ATTENTION_KERNEL_RE = re.compile(r"flash|fmha|attention|attn|sdpa", re.I)
NORM_KERNEL_RE = re.compile(r"norm|bn_fw|bn_bw|_bn_|GammaBeta", re.I)
CONV_KERNEL_RE = re.compile(r"conv|fprop|dgrad|wgrad|winograd|implicit_gemm|cudnn|im2col|col2im", re.I)
GEMM_KERNEL_RE = re.compile(r"gemm|gemv|Cijk_|matmul|nvjet|cutlass|xmma|wgmma|hmma|imma|(?<![a-z])mma|cublas", re.I)
REDUCTION_KERNEL_RE = re.compile(
    r"reduce|reduction|softmax|cumsum|scan|argmax|argmin|topk|sort|triton_(red|per)_|"
    r"nll_loss|cross_entropy|histogram|unique",
    re.I,
)
ELEMENTWISE_KERNEL_RE = re.compile(
    r"elementwise|vectorized|unrolled|pointwise|triton_poi_|fill|copy|cat_|where|relu|gelu|silu|sigmoid|tanh|"
    r"dropout|clamp|masked|index|scatter|gather|embedding|transpose|permute|adam|sgd|multi_tensor|foreach|pool|"
    r"upsample|arange|random|philox|distribution|compare|bitwise|pow|exp|log|sqrt|add|mul|div",
    re.I,
)
KERNEL_CLASSES = ("GEMM", "convolution", "attention", "elementwise", "reduction", "communication", "memory", "other")


# The class each kernel-name pattern gives, in order of precedence: the first that matches decides.
KERNEL_CLASS_PATTERNS: tuple[tuple[re.Pattern, str], ...] = (
    (ATTENTION_KERNEL_RE, "attention"),
    (NORM_KERNEL_RE, "reduction"),
    (CONV_KERNEL_RE, "convolution"),
    (GEMM_KERNEL_RE, "GEMM"),
    (REDUCTION_KERNEL_RE, "reduction"),
    (ELEMENTWISE_KERNEL_RE, "elementwise"),
)


def kernel_class(name: str) -> str:
    """The class of a compute kernel by its name (communication and copies are told apart before)."""
    return next((cls for pattern, cls in KERNEL_CLASS_PATTERNS if pattern.search(name)), "other")
