"""Matrix products: mm, addmm, bmm, baddbmm, addbmm, matmul, linear, mv, addmv, _scaled_mm, einsum."""

from __future__ import annotations

import re

from .common import BYTES_PER_ELEMENT, FORWARD, MATMUL, OpFlops, concrete_arg, dtype_of, prod, tensor_shape


def _gemm(batch: int, m: int, n: int, k: int, dtype, extra_adds: int = 0) -> OpFlops:
    flops = 2.0 * batch * m * n * k + extra_adds
    bpe = BYTES_PER_ELEMENT.get(dtype or "", 0)
    return OpFlops(
        MATMUL, FORWARD, flops, flops, dtype, float(batch * (m * k + k * n + m * n) * bpe), gemm_min_dim=min(m, n, k)
    )


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


def _extra_input_ok(dims, i: int, out: list[int]) -> bool:
    """Whether input ``i`` past the operands is what the op's overloads put there: nothing, a scalar
    or dtype (``mm.dtype``), or the result tensor of an ``out=`` call (``mm.out``, which compiled graphs
    record: ``extern_kernels.mm(a, b, out=buf)``) with the product's shape."""
    if i >= len(dims):
        return True
    d = dims[i]
    return d == [] or d == out


def _mm(dims, types, concrete, a=0, b=1, bias=None, out_at=None) -> OpFlops | str:
    x, w = tensor_shape(dims, a), tensor_shape(dims, b)
    if x is None or w is None or len(x) != 2 or len(w) != 2:
        return "operand shapes not recorded as 2-D"
    if x[1] != w[0]:
        return f"inner dimensions differ ({x} x {w})"
    if out_at is not None and not _extra_input_ok(dims, out_at, [x[0], w[1]]):
        return f"input {out_at} {dims[out_at]} is not the [{x[0]}, {w[1]}] result: the record is corrupt"
    adds = x[0] * w[1] if bias is not None and tensor_shape(dims, bias) else 0
    return _gemm(1, x[0], w[1], x[1], dtype_of(types[a] if a < len(types) else None), adds)


def _bmm(dims, types, concrete, a=0, b=1, bias=None, out_at=None) -> OpFlops | str:
    x, w = tensor_shape(dims, a), tensor_shape(dims, b)
    if x is None or w is None or len(x) != 3 or len(w) != 3:
        return "operand shapes not recorded as 3-D"
    if x[2] != w[1] or x[0] != w[0]:
        return f"batch or inner dimensions differ ({x} x {w})"
    if out_at is not None and not _extra_input_ok(dims, out_at, [x[0], x[1], w[2]]):
        return f"input {out_at} {dims[out_at]} is not the {[x[0], x[1], w[2]]} result: the record is corrupt"
    adds = x[0] * x[1] * w[2] if bias is not None and tensor_shape(dims, bias) else 0
    return _gemm(x[0], x[1], w[2], x[2], dtype_of(types[a] if a < len(types) else None), adds)


def _matmul(dims, types, concrete) -> OpFlops | str:
    x, w = tensor_shape(dims, 0), tensor_shape(dims, 1)
    if x is None or w is None:
        return "operand shapes not recorded"
    s = _matmul_shapes(x, w)
    if isinstance(s, str):
        return s
    return _gemm(*s, dtype_of(types[0] if types else None))


def _linear(dims, types, concrete) -> OpFlops | str:
    x, w = tensor_shape(dims, 0), tensor_shape(dims, 1)
    if x is None or w is None or not x or len(w) != 2:
        return "input or weight shape not recorded"
    if x[-1] != w[1]:
        return f"input features {x[-1]} differ from weight {w}"
    rows = prod(x[:-1])
    adds = rows * w[0] if tensor_shape(dims, 2) else 0
    return _gemm(1, rows, w[0], w[1], dtype_of(types[0] if types else None), adds)


def _mv(dims, types, concrete, a=0, v=1, bias=None) -> OpFlops | str:
    x, vec = tensor_shape(dims, a), tensor_shape(dims, v)
    if x is None or vec is None or len(x) != 2 or len(vec) != 1:
        return "matrix or vector shape not recorded"
    adds = x[0] if bias is not None and tensor_shape(dims, bias) else 0
    return _gemm(1, x[0], 1, x[1], dtype_of(types[a] if a < len(types) else None), adds)


def _scaled_mm(dims, types, concrete) -> OpFlops | str:
    r = _mm(dims, types, concrete)
    if isinstance(r, str):
        return r
    return OpFlops(
        r.op_class,
        r.phase,
        r.flops,
        r.hardware_flops,
        dtype_of(types[0] if types else None) or "fp8",
        r.bytes / 4 if r.dtype == "fp32" else r.bytes,
        r.gemm_min_dim,
    )


_EINSUM_RE = re.compile(r"^\s*([a-zA-Z]*)\s*,\s*([a-zA-Z]*)\s*(?:->\s*([a-zA-Z]*)\s*)?$")


def _einsum(dims, types, concrete) -> OpFlops | str:
    eq = concrete_arg(concrete, 0)
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
    products = prod(size.values())
    contracted = set(size) - set(out)
    flops = 2.0 * products if contracted else float(products)
    k = prod(size[c] for c in contracted) if contracted else 1
    dtype = dtype_of(types[1] if len(types) > 1 else None)  # "TensorList" in current torch: unknown
    bpe = BYTES_PER_ELEMENT.get(dtype or "", 0)
    outn = prod(size[c] for c in out) if out else 1
    return OpFlops(
        MATMUL,
        FORWARD,
        flops,
        flops,
        dtype,
        float((prod(a) + prod(b) + outn) * bpe),
        gemm_min_dim=min([k] + [size[c] for c in out]) if out else k,
    )


# Inputs past the operands: mm(self, mat2[, out]), addmm(self, mat1, mat2, beta, alpha[, out]) and the
# like; the out= overloads are what torch.compile's graphs call.
MATMUL_FORMULAS = {
    "aten::mm": lambda d, t, c: _mm(d, t, c, out_at=2),
    "aten::addmm": lambda d, t, c: _mm(d, t, c, 1, 2, bias=0, out_at=5),
    "aten::_addmm_activation": lambda d, t, c: _mm(d, t, c, 1, 2, bias=0),
    "aten::bmm": lambda d, t, c: _bmm(d, t, c, out_at=2),
    "aten::baddbmm": lambda d, t, c: _bmm(d, t, c, 1, 2, bias=0, out_at=5),
    "aten::addbmm": lambda d, t, c: _bmm(d, t, c, 1, 2, bias=0),
    "aten::matmul": _matmul,
    "aten::linear": _linear,
    "aten::einsum": _einsum,
    "aten::mv": lambda d, t, c: _mv(d, t, c),
    "aten::addmv": lambda d, t, c: _mv(d, t, c, 1, 2, bias=0),
    "aten::_scaled_mm": _scaled_mm,
}

# Most inputs each matrix product takes; a record with more mixed up several ops' inputs.
MAX_INPUTS = {
    "aten::mm": 3,
    "aten::matmul": 3,
    "aten::bmm": 3,
    "aten::mv": 3,
    "aten::linear": 3,
    "aten::einsum": 3,
    "aten::addmm": 6,
    "aten::baddbmm": 6,
    "aten::addbmm": 6,
    "aten::addmv": 6,
    "aten::_addmm_activation": 6,
}
