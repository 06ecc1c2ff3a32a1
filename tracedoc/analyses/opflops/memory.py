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

from dataclasses import dataclass
from math import prod as _prod

from .common import BACKWARD, FORWARD, bool_list, concrete_arg, dtype_of, int_list

ELEMENTWISE, COPY, REDUCTION, SOFTMAX, NORMALIZATION = "elementwise", "copy", "reduction", "softmax", "normalization"
POOLING, EMBEDDING, OPTIMIZER, COMPILED = "pooling", "embedding", "optimizer", "compiled"

# Element size by recorded type name (floating types through ``dtype_of``).
_INT_SIZES = {"long int": 8, "long": 8, "int": 4, "short int": 2, "short": 2, "signed char": 1, "unsigned char": 1,
              "char": 1, "bool": 1, "c10::complex<float>": 8, "c10::complex<double>": 16}
_FLOAT_SIZES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
# torch ScalarType codes as Concrete Inputs record a dtype argument (c10/core/ScalarType.h order)
_SCALAR_TYPES = {0: ("uint8", 1), 1: ("int8", 1), 2: ("int16", 2), 3: ("int32", 4), 4: ("int64", 8),
                 5: ("fp16", 2), 6: ("fp32", 4), 7: ("fp64", 8), 11: ("bool", 1), 15: ("bf16", 2),
                 23: ("fp8", 1), 24: ("fp8", 1), 25: ("fp8", 1), 26: ("fp8", 1)}


@dataclass(frozen=True)
class OpCost:
    """The FLOPs and bytes one op costs, for the roofline."""

    op_class: str
    phase: str  # FORWARD or BACKWARD (compiled kernels: FORWARD unless run in a backward pass)
    flops: float | None  # None: unknown
    bytes: float
    dtype: str | None  # dtype label of the tensors it reads ("bf16", "bf16/fp32" when mixed)


def element_size(type_name) -> int | None:
    if not isinstance(type_name, str) or not type_name:
        return None
    d = dtype_of(type_name)
    return _FLOAT_SIZES.get(d) if d else _INT_SIZES.get(type_name)


@dataclass(frozen=True)
class _Tensor:
    """A tensor argument: its shape, element size and dtype."""

    shape: tuple
    size: int  # bytes per element
    dtype: str | None

    @property
    def numel(self) -> int:
        return _prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.size


def _tensor(dims, types, i) -> _Tensor | None:
    """Input ``i`` as a tensor (a 0-dim tensor records ``[]`` with a dtype), None when it is not one."""
    if i >= len(dims) or i >= len(types):
        return None
    d, size = dims[i], element_size(types[i])
    if size is None or not isinstance(d, list) or any(not isinstance(x, int) or isinstance(x, bool) for x in d):
        return None
    return _Tensor(tuple(d), size, dtype_of(types[i]) or types[i])


def _tensors(dims, types) -> list[tuple[int, _Tensor]]:
    return [(i, t) for i in range(len(dims)) if (t := _tensor(dims, types, i)) is not None]


def _broadcast(shapes) -> tuple | None:
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for k, x in enumerate(s, n - len(s)):
            if x != 1 and out[k] not in (1, x):
                return None
            out[k] = max(out[k], x) if x != 1 else out[k]
    return tuple(out)


def _label(tensors) -> str | None:
    """The dtypes of the op's tensors in input order; 0-dim tensors (scalars) only when there is nothing else."""
    sized = [t for t in tensors if t.shape] or tensors
    seen = list(dict.fromkeys(t.dtype for t in sized if t.dtype))
    return "/".join(seen) or None


def _cost(cls, name, reads, writes, flops, tensors) -> OpCost:
    phase = BACKWARD if "backward" in name else FORWARD
    return OpCost(cls, phase, None if flops is None else float(flops),
                  float(sum(t.nbytes for t in reads) + sum(t.nbytes for t in writes)), _label(tensors))


# -- the op families -------------------------------------------------------------------------------

def _elementwise(name, dims, types, concrete, per_element=1.0) -> OpCost | str:
    """Reads every tensor input, writes the broadcast result (in place: into ``self``)."""
    ts = [t for _, t in _tensors(dims, types)]
    if not ts:
        return "no tensor input shapes recorded"
    shape = _broadcast([t.shape for t in ts])
    if shape is None:
        return "input shapes do not broadcast"
    sized = [t for t in ts if t.shape] or ts
    size = ts[0].size if name.endswith("_") else max(t.size for t in sized)
    out = _Tensor(shape, size, ts[0].dtype)
    return _cost(ELEMENTWISE, name, ts, [out], per_element * out.numel, ts)


def _dropout(name, dims, types, concrete) -> OpCost | str:
    """native_dropout(input, p, train): the output and a one-byte keep mask per element."""
    x = _tensor(dims, types, 0)
    if x is None:
        return "input shape not recorded"
    return _cost(ELEMENTWISE, name, [x], [x, _Tensor(x.shape, 1, "bool")], x.numel, [x])


def _fill(name, dims, types, concrete) -> OpCost | str:
    t = _tensor(dims, types, 0)
    return "output shape not recorded" if t is None else _cost(COPY, name, [], [t], 0, [t])


def _copy_into(name, dims, types, concrete) -> OpCost | str:
    dst, src = _tensor(dims, types, 0), _tensor(dims, types, 1)
    if dst is None or src is None:
        return "source or destination shape not recorded"
    return _cost(COPY, name, [src], [dst], 0, [dst, src])


def _copy_as(name, dims, types, concrete, dtype_at=None) -> OpCost | str:
    """A copy to a new tensor (clone, contiguous, _to_copy), in the dtype the call asks for."""
    src = _tensor(dims, types, 0)
    if src is None:
        return "input shape not recorded"
    code = int_list(concrete_arg(concrete, dtype_at)) if dtype_at is not None else None
    label, size = _SCALAR_TYPES.get(code[0], (src.dtype, src.size)) if code and len(code) == 1 else (src.dtype, src.size)
    return _cost(COPY, name, [src], [_Tensor(src.shape, size, label)], 0, [src])


def _reduced(shape: tuple, dim_text, keep) -> tuple:
    dims = int_list(dim_text)
    if not dims:  # no dim (or []): every element into one
        return ()
    n = len(shape)
    drop = {d % n for d in dims} if n else set()
    return tuple(1 if i in drop else x for i, x in enumerate(shape) if keep or i not in drop)


def _reduction(name, dims, types, concrete, dim_at=1) -> OpCost | str:
    src = _tensor(dims, types, 0)
    if src is None:
        return "input shape not recorded"
    out = _Tensor(_reduced(src.shape, concrete_arg(concrete, dim_at), False), src.size, src.dtype)
    return _cost(REDUCTION, name, [src], [out], src.numel, [src])


def _softmax(name, dims, types, concrete, per_element) -> OpCost | str:
    ts = [t for _, t in _tensors(dims, types)]
    if not ts:
        return "input shape not recorded"
    if "backward" in name:  # (grad_output, output, dim, input_dtype): grad_input like grad_output
        code = int_list(concrete_arg(concrete, 3))
        label, size = _SCALAR_TYPES.get(code[0], (ts[0].dtype, ts[0].size)) if code else (ts[0].dtype, ts[0].size)
        out = _Tensor(ts[0].shape, size, label)
    else:  # (self, dim, half_to_float)
        wide = concrete_arg(concrete, 2) == "True"
        out = _Tensor(ts[0].shape, 4 if wide else ts[0].size, "fp32" if wide else ts[0].dtype)
    return _cost(SOFTMAX, name, ts, [out], per_element * out.numel, ts)


def _norm(name, dims, types, concrete, spec) -> OpCost | str:
    """spec: (indices read, main input, outputs [(like input i, mask position)], mask index, per element,
    per-row outputs (mean, rstd) for forward ops)."""
    reads_at, main_at, outputs, mask_at, per_element, row_stats = spec
    main = _tensor(dims, types, main_at)
    if main is None:
        return "input shape not recorded"
    mask = bool_list(concrete_arg(concrete, mask_at)) if mask_at is not None else None
    reads = [t for i in reads_at if (t := _tensor(dims, types, i)) is not None]
    writes = []
    for like, pos in outputs:
        t = _tensor(dims, types, like)
        if t is not None and (mask is None or pos >= len(mask) or mask[pos]):
            writes.append(t)
    if row_stats:  # mean and rstd per normalised row, in fp32
        norm_shape = int_list(concrete_arg(concrete, 1))
        w = _tensor(dims, types, 2)
        inner = _prod(norm_shape) if norm_shape else (w.numel if w is not None and w.shape else 0)
        if inner:
            writes.append(_Tensor((row_stats * main.numel // inner,), 4, "fp32"))
    return _cost(NORMALIZATION, name, reads, writes, per_element * main.numel, [main])


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
        go, x = _tensor(dims, types, 0), _tensor(dims, types, 1)
        if go is None or x is None:
            return "grad_output or input shape not recorded"
        idx = _tensor(dims, types, len(dims) - 1) if with_indices else None
        return _cost(POOLING, name, [go] + ([idx] if idx else []), [x], go.numel, [go])
    x = _tensor(dims, types, 0)
    if x is None:
        return "input shape not recorded"
    args = [int_list(concrete_arg(concrete, i)) for i in (1, 2, 3)]
    dil = int_list(concrete_arg(concrete, 4)) if with_indices else None
    ceil = concrete_arg(concrete, 5 if with_indices else 4) == "True"
    shape = _pool_out(x.shape, args[0], args[1], args[2], dil, ceil)
    if shape is None:
        return "kernel size, stride or padding not recorded"
    out = _Tensor(shape, x.size, x.dtype)
    writes = [out] + ([_Tensor(shape, 8, "int64")] if with_indices else [])
    return _cost(POOLING, name, [x], writes, out.numel * _prod(args[0] * 2 if len(args[0]) == 1 else args[0]), [x])


def _gather_rows(name, dims, types, concrete) -> OpCost | str:
    """embedding(weight, indices) / index_select(self, dim, index): the selected rows are read and written."""
    emb = name.endswith("embedding")
    src, idx = _tensor(dims, types, 0), _tensor(dims, types, 1 if emb else 2)
    if src is None or idx is None or not src.shape:
        return "table or index shape not recorded"
    dim = 0 if emb else (int_list(concrete_arg(concrete, 1)) or [0])[0] % len(src.shape)
    rows = idx.numel * _prod(src.shape[dim + 1:]) * (1 if emb else _prod(src.shape[:dim]))
    moved = _Tensor((rows,), src.size, src.dtype)
    return _cost(EMBEDDING, name, [moved, idx], [moved], 0, [src])


def _lists(dims, types, at) -> list[list[_Tensor]] | None:
    """TensorList inputs at positions ``at`` as lists of tensors; None when the shapes were not
    recorded (torch records ``[]`` for long lists)."""
    out = []
    for i in at:
        if i >= len(dims) or not isinstance(dims[i], list):
            return None
        shapes = dims[i]
        if not shapes or not all(isinstance(s, list) for s in shapes):
            return None
        out.append([_Tensor(tuple(s), 4, None) for s in shapes])
    return out


TENSOR_LISTS_MISSING = "TensorList shapes not recorded"


def _optimizer(name, dims, types, concrete, kind) -> OpCost | str:
    if kind == "sgd":
        momentum = concrete_arg(concrete, 4)
        updated = [0, 2] if momentum not in (None, "0", "0.") else [0]
        lists = _lists(dims, types, [0, 1] + updated[1:])
        read_only, per_element = [1], 4 if len(updated) > 1 else 2
    else:
        amsgrad = concrete_arg(concrete, 11) == "True"
        updated = [0, 2, 3] + ([4] if amsgrad else [])
        lists = _lists(dims, types, [0, 1, 2, 3] + ([4] if amsgrad else []))
        read_only, per_element = [1], ADAM_FLOPS_PER_ELEMENT + (1 if name.endswith("adamw_") else 0)
    if lists is None:
        return TENSOR_LISTS_MISSING
    params = lists[0]
    moved = sum(t.numel for t in params) * 4  # fp32 master weights and states (the lists' dtypes are not recorded)
    n_lists = len(updated) * 2 + len(read_only)
    return OpCost(OPTIMIZER, FORWARD, float(per_element * sum(t.numel for t in params)), float(moved * n_lists), None)


# Adam per parameter element: m = b1 m + (1-b1) g (3), v = b2 v + (1-b2) g^2 (4), the update
# p -= lr m_hat / (sqrt(v_hat) + eps) with the bias corrections folded into scalars (5); AdamW's
# decoupled weight decay p *= 1 - lr wd adds one.
ADAM_FLOPS_PER_ELEMENT = 12


def optimizer_touches_per_param(name: str, concrete) -> int | None:
    """Tensors read or written per parameter element by a fused optimizer (the lists it reads, plus
    those it updates in place written once more), for traces that do not record its TensorList
    shapes: bytes = parameters x element size x this. None for other ops."""
    if name in ("aten::_fused_adam_", "aten::_fused_adamw_"):
        amsgrad = concrete_arg(concrete, 11) == "True"
        return (4 if amsgrad else 3) * 2 + 1  # param, exp_avg, exp_avg_sq (max_exp_avg_sq) read+written; grad read
    if name == "aten::_fused_sgd_":
        momentum = concrete_arg(concrete, 4)
        return 2 * 2 + 1 if momentum not in (None, "0", "0.") else 2 + 1
    return None


def optimizer_flops_per_param(name: str) -> float | None:
    if name in ("aten::_fused_adam_", "aten::_fused_adamw_"):
        return float(ADAM_FLOPS_PER_ELEMENT + (1 if name.endswith("adamw_") else 0))
    return 4.0 if name == "aten::_fused_sgd_" else None


def _foreach(name, dims, types, concrete) -> OpCost | str:
    """_foreach_<op>(self[], other...): every list read, ``self`` written (in place) or a new list."""
    at = [i for i in range(len(dims)) if i < len(types) and types[i] == "TensorList"]
    lists = _lists(dims, types, at)
    if lists is None:
        return TENSOR_LISTS_MISSING
    n = sum(t.numel for t in lists[0])
    moved = sum(t.numel for lst in lists for t in lst) + n
    return OpCost(ELEMENTWISE, FORWARD, float(n), float(moved * 4), None)


def _concat(name, dims, types, concrete) -> OpCost | str:
    lists = _lists(dims, types, [0])
    if lists is None:
        return TENSOR_LISTS_MISSING
    size = element_size(types[0]) if types and types[0] != "TensorList" else 4
    n = sum(t.numel for t in lists[0])
    return OpCost(COPY, FORWARD, 0.0, float(2 * n * (size or 4)), None)


def _compiled(name, dims, types, concrete) -> OpCost | str:
    """A Triton kernel torch.compile generated: each buffer it takes is read or written at least once."""
    ts = [t for _, t in _tensors(dims, types) if t.shape]
    if not ts:
        return "no buffer shapes recorded"
    return OpCost(COMPILED, FORWARD, None, float(sum(t.nbytes for t in ts)), _label(ts))


_UNARY_OR_BINARY = ("add", "sub", "mul", "div", "neg", "exp", "log", "sqrt", "rsqrt", "pow", "abs", "relu", "clamp",
                    "clamp_min", "clamp_max", "gelu", "silu", "sigmoid", "tanh", "where", "masked_fill", "square",
                    "reciprocal", "hardtanh", "leaky_relu", "elu", "softplus", "mish", "hardswish", "hardsigmoid",
                    "minimum", "maximum", "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "bitwise_and",
                    "erf", "sin", "cos", "floor", "sign", "addcmul", "addcdiv", "lerp", "threshold")
_BACKWARD_ELEMENTWISE = ("threshold_backward", "gelu_backward", "silu_backward", "sigmoid_backward",
                         "tanh_backward", "hardtanh_backward", "leaky_relu_backward", "elu_backward",
                         "native_dropout_backward", "hardswish_backward", "mish_backward", "softplus_backward")

# name -> cost function(name, dims, types, concrete)
MEMORY_FORMULAS: dict = {}
for _op in _UNARY_OR_BINARY:
    MEMORY_FORMULAS[f"aten::{_op}"] = MEMORY_FORMULAS[f"aten::{_op}_"] = _elementwise
for _op in _BACKWARD_ELEMENTWISE:
    MEMORY_FORMULAS[f"aten::{_op}"] = _elementwise
MEMORY_FORMULAS.update({
    "aten::native_dropout": _dropout,
    "aten::fill_": _fill, "aten::zero_": _fill,
    "aten::copy_": _copy_into,
    "aten::_to_copy": lambda n, d, t, c: _copy_as(n, d, t, c, dtype_at=1),
    "aten::clone": _copy_as, "aten::contiguous": _copy_as,
    "aten::cat": _concat, "aten::stack": _concat,
    **{f"aten::{r}": _reduction for r in ("sum", "mean", "amax", "amin", "prod", "any", "all", "argmax", "argmin",
                                          "var", "std", "var_mean", "std_mean", "norm")},
    "aten::linalg_vector_norm": lambda n, d, t, c: _reduction(n, d, t, c, dim_at=2),
    "aten::_softmax": lambda n, d, t, c: _softmax(n, d, t, c, 5.0),
    "aten::_log_softmax": lambda n, d, t, c: _softmax(n, d, t, c, 5.0),
    "aten::_softmax_backward_data": lambda n, d, t, c: _softmax(n, d, t, c, 4.0),
    "aten::_log_softmax_backward_data": lambda n, d, t, c: _softmax(n, d, t, c, 4.0),
    # normalisation: forward 8 FLOPs per element (mean 1, variance 3, normalise 2, scale and shift 2),
    # backward twice that (like every backward pass); RMS norm 4 (square, sum, scale by rstd, weight)
    "aten::native_layer_norm": lambda n, d, t, c: _norm(n, d, t, c, ((0, 2, 3), 0, ((0, 0),), None, 8.0, 2)),
    "aten::native_layer_norm_backward": lambda n, d, t, c: _norm(
        n, d, t, c, ((0, 1, 3, 4, 5), 1, ((1, 0), (5, 1), (6, 2)), 7, 16.0, 0)),
    "aten::native_batch_norm": lambda n, d, t, c: _norm(n, d, t, c, ((0, 1, 2), 0, ((0, 0),), None, 8.0, 0)),
    "aten::cudnn_batch_norm": lambda n, d, t, c: _norm(n, d, t, c, ((0, 1, 2), 0, ((0, 0),), None, 8.0, 0)),
    "aten::miopen_batch_norm": lambda n, d, t, c: _norm(n, d, t, c, ((0, 1, 2), 0, ((0, 0),), None, 8.0, 0)),
    "aten::native_batch_norm_backward": lambda n, d, t, c: _norm(
        n, d, t, c, ((0, 1, 2, 5, 6), 1, ((1, 0), (2, 1), (2, 2)), 9, 16.0, 0)),
    "aten::cudnn_batch_norm_backward": lambda n, d, t, c: _norm(
        n, d, t, c, ((0, 1, 2, 5, 6), 0, ((0, 0), (2, 1), (2, 2)), None, 16.0, 0)),
    "aten::native_group_norm": lambda n, d, t, c: _norm(n, d, t, c, ((0, 1, 2), 0, ((0, 0),), None, 8.0, 0)),
    "aten::native_group_norm_backward": lambda n, d, t, c: _norm(
        n, d, t, c, ((0, 1, 2, 3, 4), 1, ((1, 0), (4, 1), (4, 2)), 9, 16.0, 0)),
    "aten::_fused_rms_norm": lambda n, d, t, c: _norm(n, d, t, c, ((0, 2), 0, ((0, 0),), None, 4.0, 1)),
    "aten::_fused_rms_norm_backward": lambda n, d, t, c: _norm(
        n, d, t, c, ((0, 1, 3, 4), 1, ((1, 0), (4, 1)), 5, 8.0, 0)),
    "aten::max_pool2d_with_indices": lambda n, d, t, c: _pool(n, d, t, c, True),
    "aten::max_pool2d_with_indices_backward": lambda n, d, t, c: _pool(n, d, t, c, True),
    "aten::avg_pool2d": lambda n, d, t, c: _pool(n, d, t, c, False),
    "aten::avg_pool2d_backward": lambda n, d, t, c: _pool(n, d, t, c, False),
    "aten::embedding": _gather_rows, "aten::index_select": _gather_rows,
    "aten::_fused_adam_": lambda n, d, t, c: _optimizer(n, d, t, c, "adam"),
    "aten::_fused_adamw_": lambda n, d, t, c: _optimizer(n, d, t, c, "adam"),
    "aten::_fused_sgd_": lambda n, d, t, c: _optimizer(n, d, t, c, "sgd"),
})
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
        fn = _foreach if name.startswith(FOREACH_PREFIX) else _compiled if name.startswith(COMPILED_PREFIX) else None
    if fn is None:
        return "no memory model for this op"
    try:
        return fn(name, dims, types, concrete)
    except (TypeError, ValueError, IndexError, ZeroDivisionError) as exc:  # shapes of an unexpected form
        return f"unexpected recorded shapes ({exc})"
