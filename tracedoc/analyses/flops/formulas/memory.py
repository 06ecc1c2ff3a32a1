"""Bytes moved (and a per-element FLOP count) of memory-bound ops: element-wise, copies and casts,
reductions, softmax, normalisation, pooling, embedding lookups, optimizers and compiled (Triton) kernels.

``op_cost`` takes what torch.profiler records for one op (``Input Dims``, ``Input type``, ``Concrete
Inputs``) and returns an ``OpCost`` or, when the record does not say enough, a string saying why.

Bytes are a lower bound, like those of the matrix products: every tensor the op reads is read once,
every tensor it writes is written once, at the element size of its dtype. Work that stays in caches
or registers is not counted, so a measured rate above the device's memory bandwidth means the data
came from cache, never that more bytes moved. FLOPs of these ops follow a per-element convention
(``flops_per_element`` in each entry: one for an arithmetic element-wise op, the operation count of
the usual algorithm for the others); they only place the op on the roofline, where these ops sit far
below any GPU's ridge point. Copies, casts and fills do no arithmetic (0 FLOPs); compiled kernels
record only their buffers, so their FLOPs are unknown (None).
"""

from __future__ import annotations

from math import prod as _prod

from .common import FORWARD, bool_list, concrete_arg, int_list
from .optimizers import foreach_cost, optimizer_cost
from .tensors import (
    COMPILED,
    COPY,
    ELEMENTWISE,
    EMBEDDING,
    NORMALIZATION,
    POOLING,
    REDUCTION,
    SCALAR_TYPES,
    SOFTMAX,
    TENSOR_LISTS_MISSING,
    OpCost,
    Tensor,
    broadcast,
    cost_of,
    dtype_label,
    element_size,
    tensor_at,
    tensor_lists,
    tensors_of,
)

# -- the op families -------------------------------------------------------------------------------


def _elementwise(name, dims, types, concrete, per_element=1.0) -> OpCost | str:
    """Reads every tensor input, writes the broadcast result (in place: into ``self``)."""
    ts = [t for _, t in tensors_of(dims, types)]
    if not ts:
        return "no tensor input shapes recorded"
    shape = broadcast([t.shape for t in ts])
    if shape is None:
        return "input shapes do not broadcast"
    sized = [t for t in ts if t.shape] or ts
    size = ts[0].size if name.endswith("_") else max(t.size for t in sized)
    out = Tensor(shape, size, ts[0].dtype)
    return cost_of(ELEMENTWISE, name, ts, [out], per_element * out.numel, ts)


def _dropout(name, dims, types, concrete) -> OpCost | str:
    """native_dropout(input, p, train): the output and a one-byte keep mask per element."""
    x = tensor_at(dims, types, 0)
    if x is None:
        return "input shape not recorded"
    return cost_of(ELEMENTWISE, name, [x], [x, Tensor(x.shape, 1, "bool")], x.numel, [x])


def _fill(name, dims, types, concrete) -> OpCost | str:
    t = tensor_at(dims, types, 0)
    return "output shape not recorded" if t is None else cost_of(COPY, name, [], [t], 0, [t])


def _copy_into(name, dims, types, concrete) -> OpCost | str:
    dst, src = tensor_at(dims, types, 0), tensor_at(dims, types, 1)
    if dst is None or src is None:
        return "source or destination shape not recorded"
    return cost_of(COPY, name, [src], [dst], 0, [dst, src])


def _copy_as(name, dims, types, concrete, dtype_at=None) -> OpCost | str:
    """A copy to a new tensor (clone, contiguous, _to_copy), in the dtype the call asks for."""
    src = tensor_at(dims, types, 0)
    if src is None:
        return "input shape not recorded"
    code = int_list(concrete_arg(concrete, dtype_at)) if dtype_at is not None else None
    label, size = SCALAR_TYPES.get(code[0], (src.dtype, src.size)) if code and len(code) == 1 else (src.dtype, src.size)
    return cost_of(COPY, name, [src], [Tensor(src.shape, size, label)], 0, [src])


def _reduced(shape: tuple, dim_text, keep) -> tuple:
    dims = int_list(dim_text)
    if not dims:  # no dim (or []): every element into one
        return ()
    n = len(shape)
    drop = {d % n for d in dims} if n else set()
    return tuple(1 if i in drop else x for i, x in enumerate(shape) if keep or i not in drop)


def _reduction(name, dims, types, concrete, dim_at=1) -> OpCost | str:
    src = tensor_at(dims, types, 0)
    if src is None:
        return "input shape not recorded"
    out = Tensor(_reduced(src.shape, concrete_arg(concrete, dim_at), False), src.size, src.dtype)
    return cost_of(REDUCTION, name, [src], [out], src.numel, [src])


def _softmax(name, dims, types, concrete, per_element) -> OpCost | str:
    ts = [t for _, t in tensors_of(dims, types)]
    if not ts:
        return "input shape not recorded"
    if "backward" in name:  # (grad_output, output, dim, input_dtype): grad_input like grad_output
        code = int_list(concrete_arg(concrete, 3))
        label, size = SCALAR_TYPES.get(code[0], (ts[0].dtype, ts[0].size)) if code else (ts[0].dtype, ts[0].size)
        out = Tensor(ts[0].shape, size, label)
    else:  # (self, dim, half_to_float)
        wide = concrete_arg(concrete, 2) == "True"
        out = Tensor(ts[0].shape, 4 if wide else ts[0].size, "fp32" if wide else ts[0].dtype)
    return cost_of(SOFTMAX, name, ts, [out], per_element * out.numel, ts)


def _norm(name, dims, types, concrete, spec) -> OpCost | str:
    """spec: (indices read, main input, outputs [(like input i, mask position)], mask index, per element,
    per-row outputs (mean, rstd) for forward ops)."""
    reads_at, main_at, outputs, mask_at, per_element, row_stats = spec
    main = tensor_at(dims, types, main_at)
    if main is None:
        return "input shape not recorded"
    mask = bool_list(concrete_arg(concrete, mask_at)) if mask_at is not None else None
    reads = [t for i in reads_at if (t := tensor_at(dims, types, i)) is not None]
    writes = []
    for like, pos in outputs:
        t = tensor_at(dims, types, like)
        if t is not None and (mask is None or pos >= len(mask) or mask[pos]):
            writes.append(t)
    if row_stats:  # mean and rstd per normalised row, in fp32
        norm_shape = int_list(concrete_arg(concrete, 1))
        w = tensor_at(dims, types, 2)
        inner = _prod(norm_shape) if norm_shape else (w.numel if w is not None and w.shape else 0)
        if inner:
            writes.append(Tensor((row_stats * main.numel // inner,), 4, "fp32"))
    return cost_of(NORMALIZATION, name, reads, writes, per_element * main.numel, [main])


def _pool_out(x: tuple, kernel, stride, padding, dilation, ceil: bool) -> tuple | None:
    n = 2
    if len(x) < 3 or not kernel:
        return None
    k = kernel * n if len(kernel) == 1 else kernel
    s = (stride * n if len(stride) == 1 else stride) if stride else k
    p = (padding * n if len(padding) == 1 else padding) if padding else [0, 0]
    d = (dilation * n if len(dilation) == 1 else dilation) if dilation else [1, 1]
    out = []
    for i in range(n):
        span = x[-n + i] + 2 * p[i] - d[i] * (k[i] - 1) - 1
        o = (-(-span // s[i]) if ceil else span // s[i]) + 1
        if ceil and (o - 1) * s[i] >= x[-n + i] + p[i]:
            o -= 1
        out.append(o)
    return (*x[:-n], *out) if all(o > 0 for o in out) else None


def _pool(name, dims, types, concrete, with_indices: bool) -> OpCost | str:
    if "backward" in name:  # (grad_output, self, ...[, indices]): grad_input like self
        go, x = tensor_at(dims, types, 0), tensor_at(dims, types, 1)
        if go is None or x is None:
            return "grad_output or input shape not recorded"
        idx = tensor_at(dims, types, len(dims) - 1) if with_indices else None
        return cost_of(POOLING, name, [go] + ([idx] if idx else []), [x], go.numel, [go])
    x = tensor_at(dims, types, 0)
    if x is None:
        return "input shape not recorded"
    args = [int_list(concrete_arg(concrete, i)) for i in (1, 2, 3)]
    dil = int_list(concrete_arg(concrete, 4)) if with_indices else None
    ceil = concrete_arg(concrete, 5 if with_indices else 4) == "True"
    shape = _pool_out(x.shape, args[0], args[1], args[2], dil, ceil)
    if shape is None:
        return "kernel size, stride or padding not recorded"
    out = Tensor(shape, x.size, x.dtype)
    writes = [out] + ([Tensor(shape, 8, "int64")] if with_indices else [])
    return cost_of(POOLING, name, [x], writes, out.numel * _prod(args[0] * 2 if len(args[0]) == 1 else args[0]), [x])


def _gather_rows(name, dims, types, concrete) -> OpCost | str:
    """embedding(weight, indices) / index_select(self, dim, index): the selected rows are read and written."""
    emb = name.endswith("embedding")
    src, idx = tensor_at(dims, types, 0), tensor_at(dims, types, 1 if emb else 2)
    if src is None or idx is None or not src.shape:
        return "table or index shape not recorded"
    dim = 0 if emb else (int_list(concrete_arg(concrete, 1)) or [0])[0] % len(src.shape)
    rows = idx.numel * _prod(src.shape[dim + 1 :]) * (1 if emb else _prod(src.shape[:dim]))
    moved = Tensor((rows,), src.size, src.dtype)
    return cost_of(EMBEDDING, name, [moved, idx], [moved], 0, [src])


def _concat(name, dims, types, concrete) -> OpCost | str:
    lists = tensor_lists(dims, types, [0])
    if lists is None:
        return TENSOR_LISTS_MISSING
    size = element_size(types[0]) if types and types[0] != "TensorList" else 4
    n = sum(t.numel for t in lists[0])
    return OpCost(COPY, FORWARD, 0.0, float(2 * n * (size or 4)), None)


def _compiled(name, dims, types, concrete) -> OpCost | str:
    """A Triton kernel torch.compile generated: each buffer it takes is read or written at least once."""
    ts = [t for _, t in tensors_of(dims, types) if t.shape]
    if not ts:
        return "no buffer shapes recorded"
    return OpCost(COMPILED, FORWARD, None, float(sum(t.nbytes for t in ts)), dtype_label(ts))


_UNARY_OR_BINARY = (
    "add",
    "sub",
    "mul",
    "div",
    "neg",
    "exp",
    "log",
    "sqrt",
    "rsqrt",
    "pow",
    "abs",
    "relu",
    "clamp",
    "clamp_min",
    "clamp_max",
    "gelu",
    "silu",
    "sigmoid",
    "tanh",
    "where",
    "masked_fill",
    "square",
    "reciprocal",
    "hardtanh",
    "leaky_relu",
    "elu",
    "softplus",
    "mish",
    "hardswish",
    "hardsigmoid",
    "minimum",
    "maximum",
    "eq",
    "ne",
    "lt",
    "le",
    "gt",
    "ge",
    "logical_not",
    "bitwise_and",
    "erf",
    "sin",
    "cos",
    "floor",
    "sign",
    "addcmul",
    "addcdiv",
    "lerp",
    "threshold",
)
_BACKWARD_ELEMENTWISE = (
    "threshold_backward",
    "gelu_backward",
    "silu_backward",
    "sigmoid_backward",
    "tanh_backward",
    "hardtanh_backward",
    "leaky_relu_backward",
    "elu_backward",
    "native_dropout_backward",
    "hardswish_backward",
    "mish_backward",
    "softplus_backward",
)

# name -> cost function(name, dims, types, concrete)
MEMORY_FORMULAS: dict = {}
for _op in _UNARY_OR_BINARY:
    MEMORY_FORMULAS[f"aten::{_op}"] = MEMORY_FORMULAS[f"aten::{_op}_"] = _elementwise
for _op in _BACKWARD_ELEMENTWISE:
    MEMORY_FORMULAS[f"aten::{_op}"] = _elementwise
MEMORY_FORMULAS.update(
    {
        "aten::native_dropout": _dropout,
        "aten::fill_": _fill,
        "aten::zero_": _fill,
        "aten::copy_": _copy_into,
        "aten::_to_copy": lambda n, d, t, c: _copy_as(n, d, t, c, dtype_at=1),
        "aten::clone": _copy_as,
        "aten::contiguous": _copy_as,
        "aten::cat": _concat,
        "aten::stack": _concat,
        **{
            f"aten::{r}": _reduction
            for r in (
                "sum",
                "mean",
                "amax",
                "amin",
                "prod",
                "any",
                "all",
                "argmax",
                "argmin",
                "var",
                "std",
                "var_mean",
                "std_mean",
                "norm",
            )
        },
        "aten::linalg_vector_norm": lambda n, d, t, c: _reduction(n, d, t, c, dim_at=2),
        "aten::_softmax": lambda n, d, t, c: _softmax(n, d, t, c, 5.0),
        "aten::_log_softmax": lambda n, d, t, c: _softmax(n, d, t, c, 5.0),
        "aten::_softmax_backward_data": lambda n, d, t, c: _softmax(n, d, t, c, 4.0),
        "aten::_log_softmax_backward_data": lambda n, d, t, c: _softmax(n, d, t, c, 4.0),
        # normalisation: forward 8 FLOPs per element (mean 1, variance 3, normalise 2, scale and shift 2),
        # backward twice that (like every backward pass); RMS norm 4 (square, sum, scale by rstd, weight)
        "aten::native_layer_norm": lambda n, d, t, c: _norm(n, d, t, c, ((0, 2, 3), 0, ((0, 0),), None, 8.0, 2)),
        "aten::native_layer_norm_backward": lambda n, d, t, c: _norm(
            n, d, t, c, ((0, 1, 3, 4, 5), 1, ((1, 0), (5, 1), (6, 2)), 7, 16.0, 0)
        ),
        "aten::native_batch_norm": lambda n, d, t, c: _norm(n, d, t, c, ((0, 1, 2), 0, ((0, 0),), None, 8.0, 0)),
        "aten::cudnn_batch_norm": lambda n, d, t, c: _norm(n, d, t, c, ((0, 1, 2), 0, ((0, 0),), None, 8.0, 0)),
        "aten::miopen_batch_norm": lambda n, d, t, c: _norm(n, d, t, c, ((0, 1, 2), 0, ((0, 0),), None, 8.0, 0)),
        "aten::native_batch_norm_backward": lambda n, d, t, c: _norm(
            n, d, t, c, ((0, 1, 2, 5, 6), 1, ((1, 0), (2, 1), (2, 2)), 9, 16.0, 0)
        ),
        "aten::cudnn_batch_norm_backward": lambda n, d, t, c: _norm(
            n, d, t, c, ((0, 1, 2, 5, 6), 0, ((0, 0), (2, 1), (2, 2)), None, 16.0, 0)
        ),
        "aten::native_group_norm": lambda n, d, t, c: _norm(n, d, t, c, ((0, 1, 2), 0, ((0, 0),), None, 8.0, 0)),
        "aten::native_group_norm_backward": lambda n, d, t, c: _norm(
            n, d, t, c, ((0, 1, 2, 3, 4), 1, ((1, 0), (4, 1), (4, 2)), 9, 16.0, 0)
        ),
        "aten::_fused_rms_norm": lambda n, d, t, c: _norm(n, d, t, c, ((0, 2), 0, ((0, 0),), None, 4.0, 1)),
        "aten::_fused_rms_norm_backward": lambda n, d, t, c: _norm(
            n, d, t, c, ((0, 1, 3, 4), 1, ((1, 0), (4, 1)), 5, 8.0, 0)
        ),
        "aten::max_pool2d_with_indices": lambda n, d, t, c: _pool(n, d, t, c, True),
        "aten::max_pool2d_with_indices_backward": lambda n, d, t, c: _pool(n, d, t, c, True),
        "aten::avg_pool2d": lambda n, d, t, c: _pool(n, d, t, c, False),
        "aten::avg_pool2d_backward": lambda n, d, t, c: _pool(n, d, t, c, False),
        "aten::embedding": _gather_rows,
        "aten::index_select": _gather_rows,
        "aten::_fused_adam_": lambda n, d, t, c: optimizer_cost(n, d, t, c, "adam"),
        "aten::_fused_adamw_": lambda n, d, t, c: optimizer_cost(n, d, t, c, "adam"),
        "aten::_fused_sgd_": lambda n, d, t, c: optimizer_cost(n, d, t, c, "sgd"),
    }
)
FOREACH_PREFIX = "aten::_foreach_"
COMPILED_PREFIX = "triton_"


def has_memory_formula(name: str) -> bool:
    return name in MEMORY_FORMULAS or name.startswith((FOREACH_PREFIX, COMPILED_PREFIX))


def op_cost(name: str, dims, types, concrete) -> OpCost | str:
    """Bytes and per-element FLOPs of one memory-bound op, or why they cannot be counted."""
    dims = dims if isinstance(dims, list) else []
    types = types if isinstance(types, list) else []
    concrete = concrete if isinstance(concrete, list) else []
    fn = MEMORY_FORMULAS.get(name)
    if fn is None:
        fn = (
            foreach_cost if name.startswith(FOREACH_PREFIX) else _compiled if name.startswith(COMPILED_PREFIX) else None
        )
    if fn is None:
        return "no memory model for this op"
    try:
        return fn(name, dims, types, concrete)
    except (TypeError, ValueError, IndexError, ZeroDivisionError) as exc:  # shapes of an unexpected form
        return f"unexpected recorded shapes ({exc})"
