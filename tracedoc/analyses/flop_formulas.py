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
import re
from dataclasses import dataclass

# Classes of counted work
MATMUL, CONV, ATTENTION = "matmul", "conv", "attention"
FORWARD, BACKWARD = "forward", "backward"

_BYTES_PER_ELEMENT = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}


@dataclass(frozen=True)
class OpFlops:
    op_class: str  # MATMUL, CONV or ATTENTION
    phase: str  # FORWARD or BACKWARD
    flops: float  # model FLOPs
    hardware_flops: float  # FLOPs the kernels execute (>= flops: fused attention backward recomputes)
    dtype: str | None  # "fp32", "bf16", "fp16", "fp64", "fp8", "int8"; None unknown
    bytes: float  # lower bound of bytes moved (operands read once, result written once); 0 unknown
    gemm_min_dim: int = 0  # smallest of M, N, K for matrix products (0 otherwise)


def dtype_of(type_name: str | None) -> str | None:
    """Canonical dtype of a recorded ``Input type`` entry (``float`` -> fp32, ``c10::BFloat16`` -> bf16)."""
    if not type_name:
        return None
    t = type_name.lower()
    if "float8" in t or "fp8" in t:
        return "fp8"
    if "bfloat16" in t:
        return "bf16"
    if "half" in t or t == "float16":
        return "fp16"
    if t in ("float", "float32"):
        return "fp32"
    if t in ("double", "float64"):
        return "fp64"
    if t in ("signed char", "char", "int8", "unsigned char", "uint8"):
        return "int8"
    return None


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


def _tensor(dims: list, i: int) -> list[int] | None:
    """The shape of input ``i`` when it is a recorded tensor shape (a list of ints)."""
    if i >= len(dims):
        return None
    d = dims[i]
    if not isinstance(d, list) or any(not isinstance(x, int) or isinstance(x, bool) for x in d):
        return None
    return d


def _concrete(concrete: list, i: int) -> str | None:
    if not concrete or i >= len(concrete):
        return None
    v = concrete[i]
    return v if isinstance(v, str) and v != "" else None


def _int_list(text: str | None) -> list[int] | None:
    """``"[2, 2]"`` -> [2, 2]; ``"3"`` -> [3]; None when absent or not integers."""
    if text is None:
        return None
    body = text.strip().strip("[]()")
    if not body:
        return []
    try:
        return [int(x) for x in body.split(",") if x.strip()]
    except ValueError:
        return None


def _bool_list(text: str | None) -> list[bool] | None:
    if text is None:
        return None
    body = text.strip().strip("[]()")
    vals = [x.strip().lower() for x in body.split(",") if x.strip()]
    if not vals or any(v not in ("true", "false", "1", "0") for v in vals):
        return None
    return [v in ("true", "1") for v in vals]


def _bool(text: str | None) -> bool | None:
    vals = _bool_list(text)
    return vals[0] if vals and len(vals) == 1 else None


# -- matrix products -----------------------------------------------------------------------------

def _gemm(batch: int, m: int, n: int, k: int, dtype, extra_adds: int = 0) -> OpFlops:
    flops = 2.0 * batch * m * n * k + extra_adds
    bpe = _BYTES_PER_ELEMENT.get(dtype or "", 0)
    return OpFlops(MATMUL, FORWARD, flops, flops, dtype, float(batch * (m * k + k * n + m * n) * bpe),
                   gemm_min_dim=min(m, n, k))


def _matmul_shapes(a: list[int], b: list[int]) -> tuple[int, int, int, int] | str:
    """(batch, M, N, K) of torch.matmul(a, b) with 1-D promotion and batch broadcasting."""
    if not a or not b:
        return "scalar operand"
    a2 = [1] + a if len(a) == 1 else a
    b2 = b + [1] if len(b) == 1 else b
    if a2[-1] != b2[-2]:
        return f"inner dimensions differ ({a2[-1]} vs {b2[-2]})"
    ba, bb = a2[:-2], b2[:-2]
    n = max(len(ba), len(bb))
    ba, bb = [1] * (n - len(ba)) + ba, [1] * (n - len(bb)) + bb
    batch = 1
    for x, y in zip(ba, bb):
        if x != y and 1 not in (x, y):
            return f"batch dimensions do not broadcast ({a} x {b})"
        batch *= max(x, y)
    return batch, a2[-2], b2[-1], a2[-1]


def _mm(dims, types, concrete, a=0, b=1, bias=None) -> OpFlops | str:
    x, w = _tensor(dims, a), _tensor(dims, b)
    if x is None or w is None or len(x) != 2 or len(w) != 2:
        return "operand shapes not recorded as 2-D"
    if x[1] != w[0]:
        return f"inner dimensions differ ({x} x {w})"
    adds = x[0] * w[1] if bias is not None and _tensor(dims, bias) else 0
    return _gemm(1, x[0], w[1], x[1], dtype_of(types[a] if a < len(types) else None), adds)


def _bmm(dims, types, concrete, a=0, b=1, bias=None) -> OpFlops | str:
    x, w = _tensor(dims, a), _tensor(dims, b)
    if x is None or w is None or len(x) != 3 or len(w) != 3:
        return "operand shapes not recorded as 3-D"
    if x[2] != w[1] or x[0] != w[0]:
        return f"batch or inner dimensions differ ({x} x {w})"
    adds = x[0] * x[1] * w[2] if bias is not None and _tensor(dims, bias) else 0
    return _gemm(x[0], x[1], w[2], x[2], dtype_of(types[a] if a < len(types) else None), adds)


def _matmul(dims, types, concrete) -> OpFlops | str:
    x, w = _tensor(dims, 0), _tensor(dims, 1)
    if x is None or w is None:
        return "operand shapes not recorded"
    s = _matmul_shapes(x, w)
    if isinstance(s, str):
        return s
    return _gemm(*s, dtype_of(types[0] if types else None))


def _linear(dims, types, concrete) -> OpFlops | str:
    x, w = _tensor(dims, 0), _tensor(dims, 1)
    if x is None or w is None or not x or len(w) != 2:
        return "input or weight shape not recorded"
    if x[-1] != w[1]:
        return f"input features {x[-1]} differ from weight {w}"
    rows = _prod(x[:-1])
    adds = rows * w[0] if _tensor(dims, 2) else 0
    return _gemm(1, rows, w[0], w[1], dtype_of(types[0] if types else None), adds)


def _mv(dims, types, concrete, a=0, v=1, bias=None) -> OpFlops | str:
    x, vec = _tensor(dims, a), _tensor(dims, v)
    if x is None or vec is None or len(x) != 2 or len(vec) != 1:
        return "matrix or vector shape not recorded"
    adds = x[0] if bias is not None and _tensor(dims, bias) else 0
    return _gemm(1, x[0], 1, x[1], dtype_of(types[a] if a < len(types) else None), adds)


def _scaled_mm(dims, types, concrete) -> OpFlops | str:
    r = _mm(dims, types, concrete)
    if isinstance(r, str):
        return r
    return OpFlops(r.op_class, r.phase, r.flops, r.hardware_flops, dtype_of(types[0] if types else None) or "fp8",
                   r.bytes / 4 if r.dtype == "fp32" else r.bytes, r.gemm_min_dim)


_EINSUM_RE = re.compile(r"^\s*([a-zA-Z]*)\s*,\s*([a-zA-Z]*)\s*(?:->\s*([a-zA-Z]*)\s*)?$")


def _einsum(dims, types, concrete) -> OpFlops | str:
    eq = _concrete(concrete, 0)
    shapes = dims[1] if len(dims) > 1 and isinstance(dims[1], list) else None
    if eq is None:
        return "equation not recorded"
    m = _EINSUM_RE.match(eq.replace(" ", ""))
    if m is None or shapes is None or len(shapes) != 2:
        return "only two-operand equations without '...' are counted"
    sa, sb = m.group(1), m.group(2)
    out = m.group(3)
    if out is None:  # implicit output: letters that appear once, sorted
        letters = sa + sb
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    a, b = shapes
    if not (isinstance(a, list) and isinstance(b, list)) or len(a) != len(sa) or len(b) != len(sb):
        return "operand shapes do not match the equation"
    size: dict[str, int] = {}
    for letters, shape in ((sa, a), (sb, b)):
        for c, n in zip(letters, shape):
            if size.get(c, n) != n and 1 not in (size[c], n):
                return f"dimension {c!r} has sizes {size[c]} and {n}"
            size[c] = max(size.get(c, n), n)
    products = _prod(size.values())
    contracted = set(size) - set(out)
    flops = 2.0 * products if contracted else float(products)
    k = _prod(size[c] for c in contracted) if contracted else 1
    dtype = dtype_of(types[1] if len(types) > 1 else None)  # "TensorList" in current torch: unknown
    bpe = _BYTES_PER_ELEMENT.get(dtype or "", 0)
    outn = _prod(size[c] for c in out) if out else 1
    return OpFlops(MATMUL, FORWARD, flops, flops, dtype, float((_prod(a) + _prod(b) + outn) * bpe),
                   gemm_min_dim=min([k] + [size[c] for c in out]) if out else k)


# -- convolution ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class _ConvArgs:
    bias: int | None
    stride: int | None
    padding: int | None
    dilation: int | None
    transposed: int | None = None  # index of the bool, or None
    always_transposed: bool = False
    output_padding: int | None = None


_CONV_FWD = {
    "aten::conv1d": _ConvArgs(2, 3, 4, 5), "aten::conv2d": _ConvArgs(2, 3, 4, 5),
    "aten::conv3d": _ConvArgs(2, 3, 4, 5), "aten::_convolution_mode": _ConvArgs(2, 3, 4, 5),
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
        return 2.0 * _prod(x) * _prod(w[1:])
    return 2.0 * _prod(out) * _prod(w[1:])


def _conv_forward(name: str, dims, types, concrete, conv_out: list[int] | None) -> OpFlops | str:
    spec = _CONV_FWD[name]
    x, w = _tensor(dims, 0), _tensor(dims, 1)
    if x is None or w is None or len(x) < 3 or len(x) != len(w):
        return "input or weight shape not recorded"
    transposed = spec.always_transposed or bool(_bool(_concrete(concrete, spec.transposed))
                                                if spec.transposed is not None else False)
    has_bias = spec.bias is not None and bool(_tensor(dims, spec.bias))
    stride = _int_list(_concrete(concrete, spec.stride)) if spec.stride is not None else None
    pad_text = _concrete(concrete, spec.padding) if spec.padding is not None else None
    padding = pad_text.strip("'\"") if pad_text and pad_text.strip("'\"") in ("same", "valid") else _int_list(pad_text)
    dilation = _int_list(_concrete(concrete, spec.dilation)) if spec.dilation is not None else [1]
    out = None
    if not transposed:
        out = conv_output_shape(x, w, stride, padding, dilation) if stride is not None and padding is not None \
            else None
        if out is None and conv_out is not None and len(conv_out) == len(x):
            out = conv_out
        if out is None:
            return "stride/padding not recorded and no backward op shows the output size"
    flops = _conv_cost(x, w, out, transposed)
    if has_bias and out is not None:
        flops += _prod(out)
    dtype = dtype_of(types[0] if types else None)
    bpe = _BYTES_PER_ELEMENT.get(dtype or "", 0)
    moved = _prod(x) + _prod(w) + (_prod(out) if out else _prod(x))
    return OpFlops(CONV, FORWARD, flops, flops, dtype, float(moved * bpe))


# name -> (grad_output, input, weight, transposed index, output_mask index, bias_sizes index)
_CONV_BWD = {
    "aten::convolution_backward": (0, 1, 2, 7, 10, 3),
    "aten::convolution_backward_overrideable": (0, 1, 2, 6, 9, None),
    "aten::cudnn_convolution_backward": (1, 0, 2, None, 9, None),
    "aten::mkldnn_convolution_backward": (1, 0, 2, None, 7, None),
    "aten::miopen_convolution_backward": (1, 0, 2, None, 9, None),
    "aten::_slow_conv2d_backward": (0, 1, 2, None, 6, None),
    "aten::cudnn_convolution_transpose_backward": (1, 0, 2, None, 10, None),
}
# Older single-gradient ops: (which gradient, grad_output index, the other tensor, its role)
_CONV_BWD_SINGLE = {
    "aten::cudnn_convolution_backward_input": "input",
    "aten::cudnn_convolution_backward_weight": "weight",
    "aten::miopen_convolution_backward_input": "input",
    "aten::miopen_convolution_backward_weight": "weight",
}


def _conv_backward(name: str, dims, types, concrete, mask_hint: tuple[bool, bool] | None) -> OpFlops | str:
    go_i, x_i, w_i, tr_i, mask_i, bias_i = _CONV_BWD[name]
    go, x, w = _tensor(dims, go_i), _tensor(dims, x_i), _tensor(dims, w_i)
    if go is None or x is None or w is None or len(go) != len(x) or len(w) != len(x):
        return "grad_output, input or weight shape not recorded"
    transposed = "transpose" in name or bool(_bool(_concrete(concrete, tr_i)) if tr_i is not None else False)
    mask = _bool_list(_concrete(concrete, mask_i))
    if mask is None:
        if mask_hint is None:
            return "output mask (which gradients were computed) not recorded"
        mask = list(mask_hint) + [False]
    pass_cost = _conv_cost(x, w, go, transposed)
    flops = pass_cost * (int(mask[0]) + int(mask[1]))
    if len(mask) > 2 and mask[2] and (bias_i is None or _int_list(_concrete(concrete, bias_i)) != []):
        flops += _prod(go)
    dtype = dtype_of(types[go_i] if go_i < len(types) else None)
    bpe = _BYTES_PER_ELEMENT.get(dtype or "", 0)
    return OpFlops(CONV, BACKWARD, flops, flops, dtype, float((_prod(go) + 2 * _prod(x) + 2 * _prod(w)) * bpe))


def _conv_backward_single(name: str, dims, types, concrete) -> OpFlops | str:
    # cudnn_convolution_backward_input(int[] self_size, Tensor grad_output, Tensor weight, ...)
    # cudnn_convolution_backward_weight(int[] weight_size, Tensor grad_output, Tensor self, ...)
    which = _CONV_BWD_SINGLE[name]
    go, other = _tensor(dims, 1), _tensor(dims, 2)
    size = _int_list(_concrete(concrete, 0))
    if go is None or other is None:
        return "grad_output or operand shape not recorded"
    if which == "input":
        w = other
        flops = 2.0 * _prod(go) * _prod(w[1:])
    else:
        w = size if size else None
        if w is None:
            return "weight size not recorded"
        flops = 2.0 * _prod(go) * _prod(w[1:])
    dtype = dtype_of(types[1] if len(types) > 1 else None)
    return OpFlops(CONV, BACKWARD, flops, flops, dtype, 0.0)


# -- attention -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class _AttnArgs:
    q: int
    phase: str
    causal: int | None  # index of is_causal (bool) or custom_mask_type (int)
    heads_first: bool = True  # [B, H, N, d] (sdpa) vs [B, N, H, d] (flash/efficient kernels)
    mask_type: bool = False  # causal index holds custom_mask_type: 0 none, 1 top-left, 2 bottom-right
    bottom_right: bool = False  # causal mask aligned to the bottom-right corner (flash-attn package)
    recomputes: bool = False  # the backward recomputes QK^T (fused kernels)
    attn_mask: int | None = None


_ATTENTION = {
    "aten::scaled_dot_product_attention": _AttnArgs(0, FORWARD, 5, attn_mask=3),
    "aten::_scaled_dot_product_attention_math": _AttnArgs(0, FORWARD, 5, attn_mask=3),
    "aten::_scaled_dot_product_flash_attention": _AttnArgs(0, FORWARD, 4),
    "aten::_scaled_dot_product_flash_attention_for_cpu": _AttnArgs(0, FORWARD, 4),
    "aten::_scaled_dot_product_efficient_attention": _AttnArgs(0, FORWARD, 6),
    "aten::_scaled_dot_product_cudnn_attention": _AttnArgs(0, FORWARD, 6),
    "aten::_scaled_dot_product_fused_attention_overrideable": _AttnArgs(0, FORWARD, 5),
    "aten::_flash_attention_forward": _AttnArgs(0, FORWARD, 8, heads_first=False),
    "aten::_efficient_attention_forward": _AttnArgs(0, FORWARD, 9, heads_first=False, mask_type=True),
    "flash_attn::_flash_attn_forward": _AttnArgs(0, FORWARD, 5, heads_first=False, bottom_right=True),
    "aten::_scaled_dot_product_flash_attention_backward": _AttnArgs(1, BACKWARD, 11, recomputes=True),
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": _AttnArgs(1, BACKWARD, 7, recomputes=True),
    "aten::_scaled_dot_product_efficient_attention_backward": _AttnArgs(1, BACKWARD, 11, recomputes=True),
    "aten::_scaled_dot_product_cudnn_attention_backward": _AttnArgs(1, BACKWARD, 14, recomputes=True),
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": _AttnArgs(1, BACKWARD, 13, recomputes=True),
    "aten::_flash_attention_backward": _AttnArgs(1, BACKWARD, 11, heads_first=False, recomputes=True),
    "aten::_efficient_attention_backward": _AttnArgs(1, BACKWARD, 14, heads_first=False, mask_type=True,
                                                     recomputes=True),
    "flash_attn::_flash_attn_backward": _AttnArgs(1, BACKWARD, 11, heads_first=False, bottom_right=True,
                                                  recomputes=True),
}


def causal_fraction(n_q: int, n_kv: int, bottom_right: bool = False) -> float:
    """Share of the N_q x N_kv score matrix a causal mask keeps.

    Square matrices keep half (the usual convention: the diagonal is not counted twice). Otherwise
    row i keeps min(i + 1, N_kv) keys when the mask is aligned top-left (torch's ``is_causal``) and
    clip(i + 1 + N_kv - N_q, 0, N_kv) when aligned bottom-right (flash-attn, KV cache).
    """
    if n_q == n_kv:
        return 0.5
    if n_q <= 0 or n_kv <= 0:
        return 0.0
    shift = n_kv - n_q if bottom_right else 0
    # sum over i of clip(i + 1 + shift, 0, n_kv), in closed form per piece
    lo = min(max(0, -shift), n_q)  # first row keeping >= 1 key is i = -shift (rows before keep 0)
    full = max(lo, min(n_q, n_kv - shift))  # from row `full` on, rows keep all n_kv keys
    # rows lo .. full-1 keep i + 1 + shift keys
    k0, k1 = lo + 1 + shift, full + shift  # kept keys in first and last partial row
    partial = (k0 + k1) * (full - lo) / 2 if full > lo else 0.0
    kept = partial + (n_q - full) * n_kv
    return kept / (n_q * n_kv)


def _attention(name: str, dims, types, concrete) -> OpFlops | str:
    spec = _ATTENTION[name]
    q, k, v = _tensor(dims, spec.q), _tensor(dims, spec.q + 1), _tensor(dims, spec.q + 2)
    if q is None or k is None or v is None:
        return "query, key or value shape not recorded"
    if len(q) != 4 or len(k) != 4 or len(v) != 4:
        return "query/key/value are not 4-D (variable-length batches cannot be counted from shapes)"
    if spec.heads_first:
        b, h, n_q, d_qk = q
        n_kv, d_v = k[2], v[3]
    else:
        b, n_q, h, d_qk = q
        n_kv, d_v = k[1], v[3]
    causal_text = _concrete(concrete, spec.causal) if spec.causal is not None else None
    if spec.mask_type:
        t = _int_list(causal_text)
        kind = t[0] if t else 0
        frac = 1.0 if kind == 0 else causal_fraction(n_q, n_kv, bottom_right=(kind == 2))
    else:
        frac = causal_fraction(n_q, n_kv, spec.bottom_right) if _bool(causal_text) else 1.0
    scores = 2.0 * b * h * n_q * n_kv * frac
    forward = scores * (d_qk + d_v)
    dtype = dtype_of(types[spec.q] if spec.q < len(types) else None)
    bpe = _BYTES_PER_ELEMENT.get(dtype or "", 0)
    moved = float((_prod(q) * 2 + _prod(k) + _prod(v)) * bpe)
    if spec.phase == FORWARD:
        return OpFlops(ATTENTION, FORWARD, forward, forward, dtype, moved)
    # dS = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q: four products, twice the forward
    model = 2.0 * forward
    hardware = model + (scores * d_qk if spec.recomputes else 0.0)
    return OpFlops(ATTENTION, BACKWARD, model, hardware, dtype, 2.0 * moved)


# -- dispatch ------------------------------------------------------------------------------------

_MATMUL = {
    "aten::mm": lambda d, t, c: _mm(d, t, c),
    "aten::addmm": lambda d, t, c: _mm(d, t, c, 1, 2, bias=0),
    "aten::_addmm_activation": lambda d, t, c: _mm(d, t, c, 1, 2, bias=0),
    "aten::bmm": lambda d, t, c: _bmm(d, t, c),
    "aten::baddbmm": lambda d, t, c: _bmm(d, t, c, 1, 2, bias=0),
    "aten::addbmm": lambda d, t, c: _bmm(d, t, c, 1, 2, bias=0),
    "aten::matmul": _matmul,
    "aten::linear": _linear,
    "aten::einsum": _einsum,
    "aten::mv": lambda d, t, c: _mv(d, t, c),
    "aten::addmv": lambda d, t, c: _mv(d, t, c, 1, 2, bias=0),
    "aten::_scaled_mm": _scaled_mm,
}

FLOP_OPS: frozenset[str] = frozenset(_MATMUL) | frozenset(_CONV_FWD) | frozenset(_CONV_BWD) | \
    frozenset(_CONV_BWD_SINGLE) | frozenset(_ATTENTION)
# Ops whose forward math repeated inside a backward pass is recomputation (activation checkpointing).
FORWARD_ONLY_OPS: frozenset[str] = frozenset({"aten::linear", "aten::addmm", "aten::_addmm_activation",
                                              "aten::matmul", "aten::einsum", "aten::baddbmm"}) | \
    frozenset(_CONV_FWD) | frozenset(n for n, a in _ATTENTION.items() if a.phase == FORWARD)
# Ops torch's with_flops=True annotates; their "flops" arg is used when shapes cannot be resolved.
_FLOPS_ARG_CLASS = {"aten::conv2d": CONV, "aten::mm": MATMUL, "aten::addmm": MATMUL, "aten::bmm": MATMUL,
                    "aten::baddbmm": MATMUL, "aten::matmul": MATMUL, "aten::linear": MATMUL}


CONV_FORWARD_OPS: frozenset[str] = frozenset(_CONV_FWD)
CONV_BACKWARD_OPS: frozenset[str] = frozenset(_CONV_BWD)


def conv_backward_shape_indices(name: str) -> tuple[int, int, int] | None:
    """(grad_output, input, weight) input positions of a convolution backward op, None for other ops."""
    spec = _CONV_BWD.get(name)
    return spec[:3] if spec else None


def needs_shapes(name: str) -> bool:
    """Whether the shapes of an op with this name are worth decoding (matmul, conv, attention)."""
    return name in FLOP_OPS


def op_flops(name: str, dims: list, types: list, concrete: list | None = None, flops_arg: float | None = None,
             conv_out: list[int] | None = None, mask_hint: tuple[bool, bool] | None = None) -> OpFlops | str:
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
        if name in _MATMUL:
            r = _MATMUL[name](dims, types, concrete)
        elif name in _CONV_FWD:
            r = _conv_forward(name, dims, types, concrete, conv_out)
        elif name in _CONV_BWD:
            r = _conv_backward(name, dims, types, concrete, mask_hint)
        elif name in _CONV_BWD_SINGLE:
            r = _conv_backward_single(name, dims, types, concrete)
        elif name in _ATTENTION:
            r = _attention(name, dims, types, concrete)
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
