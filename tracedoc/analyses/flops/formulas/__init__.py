"""FLOPs of one recorded operator from its input shapes (a multiply-add counts as 2 FLOPs).

``op_flops`` takes what torch.profiler records with ``record_shapes=True`` for one op — its name,
``Input Dims``, ``Input type`` and ``Concrete Inputs`` — and returns an ``OpFlops`` or, when the op
cannot be counted from what was recorded, a string saying why. Covered: matrix products (mm, addmm,
bmm, baddbmm, addbmm, matmul, linear, einsum of two operands, mv, _scaled_mm), convolution forward
and backward (input and weight gradients counted separately from the output mask), and attention
(scaled-dot-product, flash, memory-efficient, cuDNN; forward and backward; causal masks count only
the unmasked area).

Model FLOPs are what the math needs; ``hardware_flops`` add the work a fused attention backward
repeats (it recomputes QK^T instead of storing the attention matrix).
"""

from __future__ import annotations

import math

from .attention import ATTENTION_ARGS, attention_flops, causal_fraction
from .common import (
    ATTENTION,
    BACKWARD,
    CONV,
    FORWARD,
    MATMUL,
    OpFlops,
    bool_list,
    concrete_arg,
    dtype_of,
    tensor_shape,
)
from .conv import (
    CONV_BACKWARD_ARGS,
    CONV_BACKWARD_SINGLE,
    CONV_FORWARD_ARGS,
    conv_backward_flops,
    conv_backward_single_flops,
    conv_forward_flops,
    conv_output_shape,
)
from .matmul import MATMUL_FORMULAS, MAX_INPUTS
from .memory import OpCost, has_memory_formula, op_cost

__all__ = [
    "ATTENTION",
    "BACKWARD",
    "CONV",
    "FORWARD",
    "MATMUL",
    "OpCost",
    "OpFlops",
    "causal_fraction",
    "conv_output_shape",
    "dtype_of",
    "has_memory_formula",
    "is_flop_op",
    "op_cost",
    "op_flops",
    "tensor_shape",
]

FLOP_OPS: frozenset[str] = (
    frozenset(MATMUL_FORMULAS)
    | frozenset(CONV_FORWARD_ARGS)
    | frozenset(CONV_BACKWARD_ARGS)
    | frozenset(CONV_BACKWARD_SINGLE)
    | frozenset(ATTENTION_ARGS)
)
# Ops that only forward passes use (gradients of linear/addmm are mm, of convolution
# convolution_backward, of attention its backward op): seen inside a backward pass, they are
# recomputation (activation checkpointing). mm/bmm/matmul/einsum also compute gradients, so they
# are never taken for recomputation.
FORWARD_ONLY_OPS: frozenset[str] = (
    frozenset({"aten::linear", "aten::addmm", "aten::_addmm_activation"})
    | frozenset(CONV_FORWARD_ARGS)
    | frozenset(n for n, a in ATTENTION_ARGS.items() if a.phase == FORWARD)
)
# Ops torch's with_flops=True annotates; their "flops" arg is used when shapes cannot be resolved.
_FLOPS_ARG_CLASS = {
    "aten::conv2d": CONV,
    "aten::mm": MATMUL,
    "aten::addmm": MATMUL,
    "aten::bmm": MATMUL,
    "aten::baddbmm": MATMUL,
    "aten::matmul": MATMUL,
    "aten::linear": MATMUL,
}


CONV_FORWARD_OPS: frozenset[str] = frozenset(CONV_FORWARD_ARGS)
CONV_BACKWARD_OPS: frozenset[str] = frozenset(CONV_BACKWARD_ARGS)
ATTENTION_OPS: frozenset[str] = frozenset(ATTENTION_ARGS)
# Single-gradient ops that old (torch < 1.11) convolution backwards call, one per gradient computed
CONV_BACKWARD_INPUT_OPS = frozenset(n for n, w in CONV_BACKWARD_SINGLE.items() if w == "input")
CONV_BACKWARD_WEIGHT_OPS = frozenset(n for n, w in CONV_BACKWARD_SINGLE.items() if w == "weight")
CONV_BACKWARD_WITH_CHILDREN = frozenset(
    {
        "aten::cudnn_convolution_backward",
        "aten::miopen_convolution_backward",
        "aten::cudnn_convolution_transpose_backward",
    }
)


def counts_whole_nest(name: str) -> bool:
    """Ops counted at the outermost of their nest (attention; old convolution backwards, whose
    single-gradient calls say what they computed); matrix products and convolutions count at the leaf."""
    return name in ATTENTION_OPS or name in CONV_BACKWARD_WITH_CHILDREN


def conv_backward_shape_indices(name: str) -> tuple[int, int, int] | None:
    """(grad_output, input, weight) input positions of a convolution backward op, None for other ops."""
    spec = CONV_BACKWARD_ARGS.get(name)
    return spec[:3] if spec else None


def conv_backward_mask(name: str, concrete: list) -> list[bool] | None:
    """The recorded output mask (input grad, weight grad, bias grad) of a convolution backward, if any."""
    spec = CONV_BACKWARD_ARGS.get(name)
    return bool_list(concrete_arg(concrete, spec[4])) if spec and isinstance(concrete, list) else None


# Whether the shapes of an op with this name are worth decoding (matmul, conv, attention): the set's own
# method, which ``Trace.string_ids`` maps over a string table in C and keeps with the trace.
is_flop_op = FLOP_OPS.__contains__


def op_flops(
    name: str,
    dims: list,
    types: list,
    concrete: list | None = None,
    flops_arg: float | None = None,
    conv_out: list[int] | None = None,
    mask_hint: tuple[bool, bool] | None = None,
) -> OpFlops | str:
    """FLOPs of one op, or why they cannot be counted.

    ``dims``/``types``/``concrete``: the op's ``Input Dims``, ``Input type`` and ``Concrete Inputs``.
    ``flops_arg``: the ``flops`` arg torch wrote with ``with_flops=True``, used when the shapes do not
    resolve. ``conv_out``: the output shape of a forward convolution taken from its backward op, for
    traces that did not record stride and padding. ``mask_hint``: (input grad, weight grad) computed by
    a convolution backward whose output mask was not recorded.
    """
    dims = dims if isinstance(dims, list) else []
    types = types if isinstance(types, list) else []
    concrete = concrete if isinstance(concrete, list) else []
    try:
        if len(dims) > MAX_INPUTS.get(name, len(dims)):
            r = f"{len(dims)} inputs recorded for an op that takes {MAX_INPUTS[name]}: the record is corrupt"
        elif name in MATMUL_FORMULAS:
            r = MATMUL_FORMULAS[name](dims, types, concrete)
        elif name in CONV_FORWARD_ARGS:
            r = conv_forward_flops(name, dims, types, concrete, conv_out)
        elif name in CONV_BACKWARD_ARGS:
            r = conv_backward_flops(name, dims, types, concrete, mask_hint)
        elif name in CONV_BACKWARD_SINGLE:
            r = conv_backward_single_flops(name, dims, types, concrete)
        elif name in ATTENTION_ARGS:
            r = attention_flops(name, dims, types, concrete)
        else:
            r = "no FLOP formula for this op"
    except (TypeError, ValueError, IndexError) as exc:  # shapes of an unexpected form
        r = f"unexpected recorded shapes ({exc})"
    if isinstance(r, str) and flops_arg is not None and flops_arg > 0 and name in _FLOPS_ARG_CLASS:
        dtype = dtype_of(types[0] if types else None)
        return OpFlops(_FLOPS_ARG_CLASS[name], FORWARD, float(flops_arg), float(flops_arg), dtype, 0.0)
    if isinstance(r, OpFlops) and not (math.isfinite(r.flops) and r.flops >= 0):
        return "shapes give no finite FLOP count"
    return r
