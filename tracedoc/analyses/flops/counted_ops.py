"""Which recorded ops carry the FLOPs: each op's formula resolved once per distinct record, and the
one op of each nest that counts (docs/flops.md: the dtype of a matmul).

Ops nest on their thread: ``aten::linear`` calls ``aten::addmm``; ``aten::conv2d`` calls
``aten::convolution`` ... ``aten::cudnn_convolution``; ``aten::scaled_dot_product_attention`` calls a
fused kernel's op. Each product is counted once:

- matrix products and convolutions count at the **leaf**: the innermost op of the nest whose FLOPs
  resolve. Its dtype is the one the kernels ran in (autocast converts the inputs of an outer
  ``aten::linear`` on the way in: the outer op records fp32, the ``addmm`` inside it bf16), and the
  kernels launched inside it are the product's own, not the casts before it;
- attention counts at the **outermost** attention op (its is_causal flag gives the masked share;
  inner matrix products of the math path belong to it);
- an old (torch < 1.11) ``cudnn_convolution_backward`` counts at itself, with the gradients the
  single-gradient ops it calls (``..._backward_input``, ``..._backward_weight``) say it computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat

import numpy as np
import orjson

from ...model.groups import Groups, isin, lex_order
from ...model.trace import Trace
from . import formulas as F
from ..host.nesting import ThreadClock, enclosing

NOT_A_FLOP_OP = "no FLOP formula for this op"


def parse(trace: Trace, sid: int, cache: dict) -> list:
    """A recorded JSON list (Input Dims, Input type, Concrete Inputs) by string id; [] if absent or bad."""
    if sid < 0:
        return []
    v = cache.get(sid)
    if v is None:
        try:
            v = orjson.loads(trace.strings[sid])
        except (orjson.JSONDecodeError, IndexError):
            v = []
        cache[sid] = v if isinstance(v, list) else []
    return cache[sid]


def resolve_each(trace: Trace, rows: np.ndarray, fn) -> list:
    """``fn(name, dims, types, concrete, flops_arg)`` for each op_shapes row in ``rows``, called once
    per distinct record (in the order records first appear)."""
    s, c = trace.op_shapes, trace.cpu_ops
    if not rows.size:
        return []
    names = c["name"][s["row"][rows]]
    flops_arg = np.nan_to_num(np.asarray(s["flops"][rows], dtype=np.float64), nan=-1.0)
    groups = Groups(names, s["dims"][rows], s["types"][rows], s["concrete"][rows], flops_arg)
    seen = groups.by_appearance()
    codes = np.empty(groups.size, dtype=np.int64)
    codes[seen] = np.arange(groups.size)
    cache: dict = {}
    out = [
        fn(
            trace.string(int(n)),
            parse(trace, int(d), cache),
            parse(trace, int(t), cache),
            parse(trace, int(cc), cache),
            float(f),
        )
        for n, d, t, cc, f in zip(*(k[seen].tolist() for k in groups.keys))
    ]
    return [out[i] for i in codes[groups.index].tolist()]


def resolve_flops(trace: Trace) -> tuple[list, np.ndarray]:
    """For every op_shapes row its ``OpFlops`` or why it has none, and whether it is a convolution
    backward whose output mask was not recorded (counted with both gradients until told otherwise)."""
    s, c = trace.op_shapes, trace.cpu_ops
    n = len(s)
    out: list = [NOT_A_FLOP_OP] * n
    assumed = np.zeros(n, dtype=bool)
    if not n:
        return out, assumed
    wanted = np.flatnonzero(trace.string_ids(F.is_flop_op)[c["name"][s["row"]]])
    if not wanted.size:
        return out, assumed
    # output sizes of forward convolutions, from the grad_output of their backward ops
    conv_out: dict = {}

    def note_backward(name, dims, types, concrete, f):
        idx = F.conv_backward_shape_indices(name)
        if idx is not None:
            go, x, w = (F.tensor_shape(dims, i) for i in idx)
            if go and x and w:
                conv_out[(tuple(x), tuple(w))] = go
        return None

    resolve_each(trace, wanted, note_backward)

    def one(name, dims, types, concrete, f):
        out_shape = None
        if name in F.CONV_FORWARD_OPS:
            x, w = F.tensor_shape(dims, 0), F.tensor_shape(dims, 1)
            out_shape = conv_out.get((tuple(x), tuple(w))) if x and w else None
        # a backward whose mask was not recorded (torch < 2.1) computed both gradients unless its
        # kernels or its single-gradient calls say otherwise (flops.py)
        hint = (True, True) if name in F.CONV_BACKWARD_OPS else None
        r = F.op_flops(name, dims, types, concrete, flops_arg=f if f >= 0 else None, conv_out=out_shape, mask_hint=hint)
        return r, hint is not None and F.conv_backward_mask(name, concrete) is None

    for i, (r, a) in zip(wanted.tolist(), resolve_each(trace, wanted, one)):
        out[i] = r
        assumed[i] = a
    return out, assumed


@dataclass
class Selection:
    """The op_shapes rows that count (sorted by start on the thread clock) and, per row, the row of the
    outermost resolved op of its nest (itself when it is outermost)."""

    idx: np.ndarray
    start: np.ndarray  # thread-clock start
    end: np.ndarray
    head: np.ndarray  # op_shapes row of the nest's outermost resolved op


def unresolved(resolved: list) -> np.ndarray:
    """Per op: resolved to the reason it has no count (a string) rather than to its FLOPs."""
    return np.fromiter(map(isinstance, resolved, repeat(str)), dtype=bool, count=len(resolved))


def select_counted(trace: Trace, resolved: list, clock: ThreadClock) -> Selection:
    s, c = trace.op_shapes, trace.cpu_ops
    ok = ~unresolved(resolved)
    cand = np.flatnonzero(ok)
    rows = s["row"][cand]
    ks, ke = clock.cpu(rows, "start_ns"), clock.cpu(rows, "end_ns")
    order = lex_order((-ke, ks))  # an op before the ops nested in it
    cand, ks, ke = cand[order], ks[order], ke[order]
    n = cand.size
    if not n:
        return Selection(cand, ks, ke, cand)
    absorbing = isin(c["name"][s["row"][cand]], np.flatnonzero(trace.string_ids(F.counts_whole_nest)))
    # inside an earlier op that ends no earlier: nested in it (ops on a thread nest properly, and the
    # thread clock keeps threads apart)
    run_end = np.maximum.accumulate(ke)
    nested = np.zeros(n, dtype=bool)
    nested[1:] = run_end[:-1] >= ke[1:]
    abs_end = np.maximum.accumulate(np.where(absorbing, ke, np.iinfo(np.int64).min))
    in_absorbing = np.zeros(n, dtype=bool)
    in_absorbing[1:] = abs_end[:-1] >= ke[1:]
    has_inner = np.zeros(n, dtype=bool)
    has_inner[:-1] = (ks[1:] < ke[:-1]) | ((ks[1:] == ks[:-1]) & (ke[1:] <= ke[:-1]))
    keep = np.where(absorbing, ~in_absorbing, ~in_absorbing & ~has_inner)
    head_pos = np.maximum.accumulate(np.where(~nested, np.arange(n), 0))
    head = cand[head_pos]
    return Selection(cand[keep], ks[keep], ke[keep], head[keep])


def children_gradients(trace: Trace, sel: Selection, clock: ThreadClock) -> tuple[np.ndarray, np.ndarray]:
    """For each selected op: whether it calls the single-gradient op for the input gradient and for the
    weight gradient (old convolution backwards call one per gradient they compute)."""
    c = trace.cpu_ops
    has = np.zeros((2, sel.idx.size), dtype=bool)
    for k, names in enumerate((F.CONV_BACKWARD_INPUT_OPS, F.CONV_BACKWARD_WEIGHT_OPS)):
        kids = np.flatnonzero(isin(c["name"], np.flatnonzero(trace.string_ids(names.__contains__))))
        if kids.size and sel.idx.size:
            at = enclosing(sel.start, sel.end, clock.cpu(kids, "start_ns"), clock.cpu(kids, "end_ns"))
            has[k, at[at >= 0]] = True
    return has[0], has[1]


@dataclass
class Counted:
    """The ops whose FLOPs are counted (one entry per op), as columns: what ``flops.analyze_flops`` builds
    from ``select_counted`` and its tables (``flops_tables``) and the roofline read."""

    rows: np.ndarray  # cpu_ops row
    name: np.ndarray  # name id
    op_class: np.ndarray  # object
    phase: np.ndarray  # object
    dtype: np.ndarray  # object (None unknown)
    flops: np.ndarray  # float64 model FLOPs (0 for recomputed ops)
    hw_flops: np.ndarray  # float64 hardware FLOPs
    bytes: np.ndarray  # float64
    recomputed: np.ndarray  # bool
    gpu_ns: np.ndarray  # int64 kernel time launched inside the op
    shapes: np.ndarray = None  # op_shapes row of each op
