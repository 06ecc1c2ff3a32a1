"""Attention: scaled-dot-product, flash, memory-efficient and cuDNN, forward and backward."""

from __future__ import annotations

from dataclasses import dataclass

from .common import (
    ATTENTION,
    BACKWARD,
    BYTES_PER_ELEMENT,
    FORWARD,
    OpFlops,
    bool_arg,
    concrete_arg,
    dtype_of,
    int_list,
    prod,
    tensor_shape,
)


@dataclass(frozen=True)
class _AttnArgs:
    """Where an attention op's arguments hold its inputs and mask, and how it lays them out."""

    q: int
    phase: str
    causal: int | None  # index of is_causal (bool) or custom_mask_type (int)
    heads_first: bool = True  # [B, H, N, d] (sdpa) vs [B, N, H, d] (flash/efficient kernels)
    mask_type: bool = False  # causal index holds custom_mask_type: 0 none, 1 top-left, 2 bottom-right
    bottom_right: bool = False  # causal mask aligned to the bottom-right corner (flash-attn package)
    recomputes: bool = False  # the backward recomputes QK^T (fused kernels)
    attn_mask: int | None = None


ATTENTION_ARGS = {
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
    "aten::_efficient_attention_backward": _AttnArgs(
        1, BACKWARD, 14, heads_first=False, mask_type=True, recomputes=True
    ),
    "flash_attn::_flash_attn_backward": _AttnArgs(
        1, BACKWARD, 11, heads_first=False, bottom_right=True, recomputes=True
    ),
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


def attention_flops(name: str, dims, types, concrete) -> OpFlops | str:
    spec = ATTENTION_ARGS[name]
    q, k, v = tensor_shape(dims, spec.q), tensor_shape(dims, spec.q + 1), tensor_shape(dims, spec.q + 2)
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
    causal_text = concrete_arg(concrete, spec.causal) if spec.causal is not None else None
    if spec.mask_type:
        t = int_list(causal_text)
        kind = t[0] if t else 0
        frac = 1.0 if kind == 0 else causal_fraction(n_q, n_kv, bottom_right=(kind == 2))
    else:
        frac = causal_fraction(n_q, n_kv, spec.bottom_right) if bool_arg(causal_text) else 1.0
    scores = 2.0 * b * h * n_q * n_kv * frac
    forward = scores * (d_qk + d_v)
    dtype = dtype_of(types[spec.q] if spec.q < len(types) else None)
    bpe = BYTES_PER_ELEMENT.get(dtype or "", 0)
    moved = float((prod(q) * 2 + prod(k) + prod(v)) * bpe)
    if spec.phase == FORWARD:
        return OpFlops(ATTENTION, FORWARD, forward, forward, dtype, moved)
    # dS = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q: four products, twice the forward
    model = 2.0 * forward
    hardware = model + (scores * d_qk if spec.recomputes else 0.0)
    return OpFlops(ATTENTION, BACKWARD, model, hardware, dtype, 2.0 * moved)
