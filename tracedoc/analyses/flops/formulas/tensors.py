"""What a recorded op's inputs are as tensors (shape, element size, dtype) and what an op costs
(``OpCost``): the vocabulary every memory-bound op family's formula is written in."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod as _prod

from .common import BACKWARD, FORWARD, dtype_of

ELEMENTWISE, COPY, REDUCTION, SOFTMAX, NORMALIZATION = "elementwise", "copy", "reduction", "softmax", "normalization"
POOLING, EMBEDDING, OPTIMIZER, COMPILED = "pooling", "embedding", "optimizer", "compiled"


# Element size by recorded type name (floating types through ``dtype_of``).
_INT_SIZES = {
    "long int": 8,
    "long": 8,
    "int": 4,
    "short int": 2,
    "short": 2,
    "signed char": 1,
    "unsigned char": 1,
    "char": 1,
    "bool": 1,
    "c10::complex<float>": 8,
    "c10::complex<double>": 16,
}
_FLOAT_SIZES = {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}
# torch ScalarType codes as Concrete Inputs record a dtype argument (c10/core/ScalarType.h order)
SCALAR_TYPES = {
    0: ("uint8", 1),
    1: ("int8", 1),
    2: ("int16", 2),
    3: ("int32", 4),
    4: ("int64", 8),
    5: ("fp16", 2),
    6: ("fp32", 4),
    7: ("fp64", 8),
    11: ("bool", 1),
    15: ("bf16", 2),
    23: ("fp8", 1),
    24: ("fp8", 1),
    25: ("fp8", 1),
    26: ("fp8", 1),
}


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
class Tensor:
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


def tensor_at(dims, types, i) -> Tensor | None:
    """Input ``i`` as a tensor (a 0-dim tensor records ``[]`` with a dtype), None when it is not one."""
    if i >= len(dims) or i >= len(types):
        return None
    d, size = dims[i], element_size(types[i])
    if size is None or not isinstance(d, list) or any(not isinstance(x, int) or isinstance(x, bool) for x in d):
        return None
    return Tensor(tuple(d), size, dtype_of(types[i]) or types[i])


def tensors_of(dims, types) -> list[tuple[int, Tensor]]:
    return [(i, t) for i in range(len(dims)) if (t := tensor_at(dims, types, i)) is not None]


def broadcast(shapes) -> tuple | None:
    n = max((len(s) for s in shapes), default=0)
    out = [1] * n
    for s in shapes:
        for k, x in enumerate(s, n - len(s)):
            if x != 1 and out[k] not in (1, x):
                return None
            out[k] = max(out[k], x) if x != 1 else out[k]
    return tuple(out)


def dtype_label(tensors) -> str | None:
    """The dtypes of the op's tensors in input order; 0-dim tensors (scalars) only when there is nothing else."""
    sized = [t for t in tensors if t.shape] or tensors
    seen = list(dict.fromkeys(t.dtype for t in sized if t.dtype))
    return "/".join(seen) or None


def cost_of(cls, name, reads, writes, flops, tensors) -> OpCost:
    phase = BACKWARD if "backward" in name else FORWARD
    return OpCost(
        cls,
        phase,
        None if flops is None else float(flops),
        float(sum(t.nbytes for t in reads) + sum(t.nbytes for t in writes)),
        dtype_label(tensors),
    )


def tensor_lists(dims, types, at) -> list[list[Tensor]] | None:
    """TensorList inputs at positions ``at`` as lists of tensors; None when the shapes were not
    recorded (torch records ``[]`` for long lists)."""
    out = []
    for i in at:
        if i >= len(dims) or not isinstance(dims[i], list):
            return None
        shapes = dims[i]
        if not shapes or not all(isinstance(s, list) for s in shapes):
            return None
        out.append([Tensor(tuple(s), 4, None) for s in shapes])
    return out


TENSOR_LISTS_MISSING = "TensorList shapes not recorded"
