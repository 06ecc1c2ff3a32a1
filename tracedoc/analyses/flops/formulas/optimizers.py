"""Fused and foreach optimizers and ``_foreach_*`` ops: bytes from their TensorList inputs and, where
torch did not record those shapes, the tensors touched per parameter element."""

from __future__ import annotations

from .common import FORWARD, concrete_arg
from .tensors import ELEMENTWISE, OPTIMIZER, TENSOR_LISTS_MISSING, OpCost, tensor_lists


def optimizer_cost(name, dims, types, concrete, kind) -> OpCost | str:
    if kind == "sgd":
        momentum = concrete_arg(concrete, 4)
        updated = [0, 2] if momentum not in (None, "0", "0.") else [0]
        lists = tensor_lists(dims, types, [0, 1] + updated[1:])
        read_only, per_element = [1], 4 if len(updated) > 1 else 2
    else:
        amsgrad = concrete_arg(concrete, 11) == "True"
        updated = [0, 2, 3] + ([4] if amsgrad else [])
        lists = tensor_lists(dims, types, [0, 1, 2, 3] + ([4] if amsgrad else []))
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


def foreach_cost(name, dims, types, concrete) -> OpCost | str:
    """_foreach_<op>(self[], other...): every list read, ``self`` written (in place) or a new list."""
    at = [i for i in range(len(dims)) if i < len(types) and types[i] == "TensorList"]
    lists = tensor_lists(dims, types, at)
    if lists is None:
        return TENSOR_LISTS_MISSING
    n = sum(t.numel for t in lists[0])
    moved = sum(t.numel for lst in lists for t in lst) + n
    return OpCost(ELEMENTWISE, FORWARD, float(n), float(moved * 4), None)
