"""Convolution forward (incl. transposed) and backward (input and weight gradients per the output mask)."""

from __future__ import annotations

from dataclasses import dataclass

from .common import (
    BACKWARD,
    BYTES_PER_ELEMENT,
    CONV,
    FORWARD,
    OpFlops,
    bool_arg,
    bool_list,
    concrete_arg,
    dtype_of,
    int_list,
    prod,
    tensor_shape,
)


@dataclass(frozen=True)
class _ConvArgs:
    """Where a convolution op's arguments hold its bias, stride, padding and dilation."""

    bias: int | None
    stride: int | None
    padding: int | None
    dilation: int | None
    transposed: int | None = None  # index of the bool, or None
    always_transposed: bool = False
    output_padding: int | None = None


CONV_FORWARD_ARGS = {
    "aten::conv1d": _ConvArgs(2, 3, 4, 5),
    "aten::conv2d": _ConvArgs(2, 3, 4, 5),
    "aten::conv3d": _ConvArgs(2, 3, 4, 5),
    "aten::_convolution_mode": _ConvArgs(2, 3, 4, 5),
    "aten::convolution": _ConvArgs(2, 3, 4, 5, transposed=6, output_padding=7),
    "aten::_convolution": _ConvArgs(2, 3, 4, 5, transposed=6, output_padding=7),
    "aten::convolution_overrideable": _ConvArgs(2, 3, 4, 5, transposed=6, output_padding=7),
    "aten::cudnn_convolution": _ConvArgs(None, 3, 2, 4),
    "aten::cudnn_convolution_relu": _ConvArgs(2, 3, 4, 5),
    "aten::cudnn_convolution_add_relu": _ConvArgs(4, 5, 6, 7),
    "aten::mkldnn_convolution": _ConvArgs(2, 4, 3, 5),
    "aten::miopen_convolution": _ConvArgs(2, 4, 3, 5),
    "aten::miopen_depthwise_convolution": _ConvArgs(2, 4, 3, 5),
    "aten::_slow_conv2d_forward": _ConvArgs(3, 4, 5, None),
    "aten::thnn_conv2d": _ConvArgs(3, 4, 5, None),
    "aten::conv_transpose1d": _ConvArgs(2, 3, 4, 7, always_transposed=True, output_padding=5),
    "aten::conv_transpose2d": _ConvArgs(2, 3, 4, 7, always_transposed=True, output_padding=5),
    "aten::conv_transpose3d": _ConvArgs(2, 3, 4, 7, always_transposed=True, output_padding=5),
    "aten::cudnn_convolution_transpose": _ConvArgs(None, 4, 2, 5, always_transposed=True, output_padding=3),
    "aten::miopen_convolution_transpose": _ConvArgs(2, 5, 3, 6, always_transposed=True, output_padding=4),
}


def _spatial(values: list[int] | None, n: int, default: int | None) -> list[int] | None:
    if values is None:
        return [default] * n if default is not None else None
    if len(values) == 1:
        return values * n
    return values if len(values) == n else None


def conv_output_shape(x: list[int], w: list[int], stride, padding, dilation) -> list[int] | None:
    """Output shape [N, C_out, *spatial] of a (non-transposed) convolution, or None if not computable."""
    n = len(x) - 2
    s, d = _spatial(stride, n, 1), _spatial(dilation, n, 1)
    if s is None or d is None or n < 1:
        return None
    if isinstance(padding, str):
        if padding == "same":
            return [x[0], w[0], *x[2:]]
        if padding == "valid":
            p = [0] * n
        else:
            return None
    else:
        p = _spatial(padding, n, None)
        if p is None:
            return None
    out = [(x[2 + i] + 2 * p[i] - d[i] * (w[2 + i] - 1) - 1) // s[i] + 1 for i in range(n)]
    if any(o <= 0 for o in out):
        return None
    return [x[0], w[0], *out]


def _conv_cost(x: list[int], w: list[int], out: list[int] | None, transposed: bool) -> float:
    """FLOPs of one convolution pass (forward, input gradient or weight gradient: all cost the same)."""
    if transposed:  # every input element meets C_out/groups * prod(kernel) weights
        return 2.0 * prod(x) * prod(w[1:])
    return 2.0 * prod(out) * prod(w[1:])


def conv_forward_flops(name: str, dims, types, concrete, conv_out: list[int] | None) -> OpFlops | str:
    spec = CONV_FORWARD_ARGS[name]
    x, w = tensor_shape(dims, 0), tensor_shape(dims, 1)
    if x is None or w is None or len(x) < 3 or len(x) != len(w):
        return "input or weight shape not recorded"
    transposed = spec.always_transposed or bool(
        bool_arg(concrete_arg(concrete, spec.transposed)) if spec.transposed is not None else False
    )
    has_bias = spec.bias is not None and bool(tensor_shape(dims, spec.bias))
    stride = int_list(concrete_arg(concrete, spec.stride)) if spec.stride is not None else None
    pad_text = concrete_arg(concrete, spec.padding) if spec.padding is not None else None
    padding = pad_text.strip("'\"") if pad_text and pad_text.strip("'\"") in ("same", "valid") else int_list(pad_text)
    dilation = int_list(concrete_arg(concrete, spec.dilation)) if spec.dilation is not None else [1]
    out = None
    if not transposed:
        out = conv_output_shape(x, w, stride, padding, dilation) if stride is not None and padding is not None else None
        if out is None and conv_out is not None and len(conv_out) == len(x):
            out = conv_out
        if out is None:
            return "stride/padding not recorded and no backward op shows the output size"
    flops = _conv_cost(x, w, out, transposed)
    if has_bias and out is not None:
        flops += prod(out)
    dtype = dtype_of(types[0] if types else None)
    bpe = BYTES_PER_ELEMENT.get(dtype or "", 0)
    moved = prod(x) + prod(w) + (prod(out) if out else prod(x))
    return OpFlops(CONV, FORWARD, flops, flops, dtype, float(moved * bpe))


# name -> (grad_output, input, weight, transposed index, output_mask index, bias_sizes index)
CONV_BACKWARD_ARGS = {
    "aten::convolution_backward": (0, 1, 2, 7, 10, 3),
    "aten::convolution_backward_overrideable": (0, 1, 2, 6, 9, None),
    # torch 1.7-1.10: (self, grad_output, weight, padding, stride, dilation, groups, benchmark,
    # deterministic, allow_tf32, output_mask); those versions record no Concrete Inputs, so the mask
    # comes from the single-gradient ops it calls (analyses/flops/counted_ops.py)
    "aten::cudnn_convolution_backward": (1, 0, 2, None, 10, None),
    "aten::mkldnn_convolution_backward": (1, 0, 2, None, 7, None),
    "aten::miopen_convolution_backward": (1, 0, 2, None, 9, None),
    "aten::_slow_conv2d_backward": (0, 1, 2, None, 6, None),
    "aten::cudnn_convolution_transpose_backward": (1, 0, 2, None, 11, None),
}
# Older single-gradient ops: (which gradient, grad_output index, the other tensor, its role)
CONV_BACKWARD_SINGLE = {
    "aten::cudnn_convolution_backward_input": "input",
    "aten::cudnn_convolution_backward_weight": "weight",
    "aten::miopen_convolution_backward_input": "input",
    "aten::miopen_convolution_backward_weight": "weight",
}


def conv_backward_flops(name: str, dims, types, concrete, mask_hint: tuple[bool, bool] | None) -> OpFlops | str:
    go_i, x_i, w_i, tr_i, mask_i, bias_i = CONV_BACKWARD_ARGS[name]
    go, x, w = tensor_shape(dims, go_i), tensor_shape(dims, x_i), tensor_shape(dims, w_i)
    if go is None or x is None or w is None or len(go) != len(x) or len(w) != len(x):
        return "grad_output, input or weight shape not recorded"
    transposed = "transpose" in name or bool(bool_arg(concrete_arg(concrete, tr_i)) if tr_i is not None else False)
    mask = bool_list(concrete_arg(concrete, mask_i))
    if mask is not None and len(mask) < 2:  # another argument where the mask belongs: not a mask
        mask = None
    if mask is None:
        if mask_hint is None:
            return "output mask (which gradients were computed) not recorded"
        mask = list(mask_hint) + [False]
    pass_cost = _conv_cost(x, w, go, transposed)
    flops = pass_cost * (int(mask[0]) + int(mask[1]))
    if len(mask) > 2 and mask[2] and (bias_i is None or int_list(concrete_arg(concrete, bias_i)) != []):
        flops += prod(go)
    dtype = dtype_of(types[go_i] if go_i < len(types) else None)
    bpe = BYTES_PER_ELEMENT.get(dtype or "", 0)
    # each gradient reads grad_output and one operand and writes the other's gradient
    grads = int(mask[0]) + int(mask[1])
    return OpFlops(CONV, BACKWARD, flops, flops, dtype, float((prod(go) + grads * (prod(x) + prod(w))) * bpe))


def conv_backward_single_flops(name: str, dims, types, concrete) -> OpFlops | str:
    # cudnn_convolution_backward_input(int[] self_size, Tensor grad_output, Tensor weight, ...)
    # cudnn_convolution_backward_weight(int[] weight_size, Tensor grad_output, Tensor self, ...)
    which = CONV_BACKWARD_SINGLE[name]
    go, other = tensor_shape(dims, 1), tensor_shape(dims, 2)
    size = int_list(concrete_arg(concrete, 0))
    if go is None or other is None:
        return "grad_output or operand shape not recorded"
    if which == "input":
        w = other
        flops = 2.0 * prod(go) * prod(w[1:])
    else:
        w = size if size else None
        if w is None:
            return "weight size not recorded"
        flops = 2.0 * prod(go) * prod(w[1:])
    dtype = dtype_of(types[1] if len(types) > 1 else None)
    bpe = BYTES_PER_ELEMENT.get(dtype or "", 0)
    written = prod(size) if size else 0  # the input's or weight's gradient, sized by the first argument
    return OpFlops(CONV, BACKWARD, flops, flops, dtype, float((prod(go) + prod(other) + written) * bpe))
