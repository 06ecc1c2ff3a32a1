"""Shared pieces of the FLOP formulas: the result type, dtypes and readers of recorded arguments."""

from __future__ import annotations

from dataclasses import dataclass

# Classes of counted work
MATMUL, CONV, ATTENTION = "matmul", "conv", "attention"
FORWARD, BACKWARD = "forward", "backward"

BYTES_PER_ELEMENT = {"fp64": 8, "fp32": 4, "tf32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1}


@dataclass(frozen=True)
class OpFlops:
    """The FLOPs and bytes of one matmul, convolution or attention op."""

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


def prod(xs) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


def tensor_shape(dims: list, i: int) -> list[int] | None:
    """The shape of input ``i`` when it is a recorded tensor shape (a list of ints)."""
    if i >= len(dims):
        return None
    d = dims[i]
    if not isinstance(d, list) or any(not isinstance(x, int) or isinstance(x, bool) for x in d):
        return None
    return d


def concrete_arg(concrete: list, i: int) -> str | None:
    if not concrete or i >= len(concrete):
        return None
    v = concrete[i]
    return v if isinstance(v, str) and v != "" else None


def int_list(text: str | None) -> list[int] | None:
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


def bool_list(text: str | None) -> list[bool] | None:
    if text is None:
        return None
    body = text.strip().strip("[]()")
    vals = [x.strip().lower() for x in body.split(",") if x.strip()]
    if not vals or any(v not in ("true", "false", "1", "0") for v in vals):
        return None
    return [v in ("true", "1") for v in vals]


def bool_arg(text: str | None) -> bool | None:
    vals = bool_list(text)
    return vals[0] if vals and len(vals) == 1 else None
