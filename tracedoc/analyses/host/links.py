"""GPU op -> launch call -> CPU op, through External ids: the one place these links are resolved."""

from __future__ import annotations

import numpy as np

from ...model.groups import lex_order
from ...model import trace as M
from ...model.trace import Trace
from ..core.registry import Produced, analysis


def gpu_external_ids(trace: Trace) -> np.ndarray:
    """External id of each GPU op; its launch call's when the op carries none (-1 if neither)."""
    g = trace.gpu_ops
    ext = g["external_id"].copy()
    missing = (ext < 0) & (g["launch"] >= 0)
    if missing.any():
        ext[missing] = trace.runtime["external_id"][g["launch"][missing]]
    return ext


class OpsByExternalId:
    """``cpu_op`` rows keyed by External id: the innermost (deepest) or outermost op of each id."""

    def __init__(self, trace: Trace, innermost: bool):
        c = trace.cpu_ops
        rows = (
            np.flatnonzero((c["external_id"] >= 0) & (c["kind"] == M.CPU_OP)) if len(c) else np.zeros(0, dtype=np.int64)
        )
        order = rows[lex_order((c["depth"][rows], c["external_id"][rows]))] if rows.size else rows
        ext = c["external_id"][order] if rows.size else rows
        if innermost:  # the last (deepest) of each id
            pick = np.append(ext[1:] != ext[:-1], True) if ext.size else np.zeros(0, dtype=bool)
        else:  # the first (shallowest)
            pick = np.append(True, ext[1:] != ext[:-1]) if ext.size else np.zeros(0, dtype=bool)
        self.ext = ext[pick]
        self.rows = order[pick]
        self._names = c["name"] if len(c) else np.zeros(0, dtype=np.int32)

    def rows_of(self, ext: np.ndarray) -> np.ndarray:
        """``cpu_ops`` row for each External id (-1 where none)."""
        ext = np.asarray(ext, dtype=np.int64)
        out = np.full(ext.size, -1, dtype=np.int64)
        if not self.ext.size or not ext.size:
            return out
        pos = np.minimum(np.searchsorted(self.ext, ext), self.ext.size - 1)
        hit = (ext >= 0) & (self.ext[pos] == ext)
        out[hit] = self.rows[pos[hit]]
        return out

    def names_of(self, ext: np.ndarray) -> np.ndarray:
        """Name id of the op for each External id (-1 where none)."""
        rows = self.rows_of(ext)
        return np.where(rows >= 0, self._names[np.maximum(rows, 0)] if self._names.size else -1, -1)


@analysis(provides=("gpu_ext", "launching_ops", "kernel_ops"))
def external_id_links(trace: Trace, inputs) -> Produced:
    """External id of each GPU op, the innermost CPU op of each id, and each GPU op's launching op name."""
    gpu_ext = gpu_external_ids(trace)
    ops = OpsByExternalId(trace, innermost=True)
    return Produced(values={"gpu_ext": gpu_ext, "launching_ops": ops, "kernel_ops": ops.names_of(gpu_ext)})
