"""Launch links: which runtime call launched each GPU op (``gpu_ops.launch``), for every reader.

The key is (process, correlation id): CUPTI numbers correlations per process, so in a file that
holds several processes the same id names different launches. A GPU op whose process is not
recorded (Kineto writes the device as the GPU op's pid) is joined on the correlation id alone.
Ops that stay unlinked are joined through launch flows (Kineto ``ac2g``: a flow that starts on the
call and ends on the op, both with the correlation id as flow id).
"""

from __future__ import annotations

import numpy as np

from ..model import trace as M
from ..model.groups import first_match
from ..model.trace import Trace
from ..model.vocab import LAUNCH_FLOW_CATEGORIES

_CORR_BITS = 40  # correlation ids fit in 40 bits; the process index goes above them


def link_by_correlation(
    gpu_process: np.ndarray, gpu_corr: np.ndarray, call_process: np.ndarray, call_corr: np.ndarray
) -> np.ndarray:
    """Row in the call arrays with the same (process, correlation id) as each GPU-side record; -1 if none.

    A negative ``gpu_process`` means "not recorded": that record matches the first call with its
    correlation id in any process.
    """
    out = np.full(gpu_corr.size, -1, dtype=np.int64)
    if not gpu_corr.size or not call_corr.size:
        return out
    known = gpu_process >= 0
    if known.any():
        rows = np.flatnonzero(known)
        out[rows] = _join(gpu_process[rows], gpu_corr[rows], call_process, call_corr)
    if not known.all():
        rows = np.flatnonzero(~known)
        anyone = np.zeros(rows.size, dtype=np.int64)
        out[rows] = _join(anyone, gpu_corr[rows], np.zeros(call_corr.size, dtype=np.int64), call_corr)
    return out


def _join(g_proc: np.ndarray, g_corr: np.ndarray, c_proc: np.ndarray, c_corr: np.ndarray) -> np.ndarray:
    """Sorted-key join on (process, correlation): one searchsorted, no per-row Python."""
    out = np.full(g_corr.size, -1, dtype=np.int64)
    procs, inv = np.unique(np.concatenate([g_proc, c_proc]), return_inverse=True)
    if procs.size == 1:  # one process: the correlation id is the key
        gk, ck = g_corr, c_corr
    else:
        inv = inv.reshape(-1).astype(np.int64)
        corr_mask = (1 << _CORR_BITS) - 1
        gk = (inv[: g_corr.size] << _CORR_BITS) | (g_corr & corr_mask)
        ck = (inv[g_corr.size :] << _CORR_BITS) | (c_corr & corr_mask)
    valid = np.flatnonzero(c_corr >= 0)
    if not valid.size:
        return out
    order = valid[np.argsort(ck[valid], kind="stable")]
    sk = ck[order]
    pos = np.minimum(np.searchsorted(sk, gk), sk.size - 1)
    hit = (g_corr >= 0) & (sk[pos] == gk)
    out[hit] = order[pos[hit]]
    return out


def link_launches(trace: Trace) -> None:
    """Set ``gpu_ops.launch`` to the ``runtime`` row that launched each GPU op (-1 if unknown)."""
    g, r = trace.gpu_ops, trace.runtime
    if not len(g) or not len(r):
        return
    launch = link_by_correlation(g["pid"], g["correlation"], r["pid"], r["correlation"])
    missing = np.flatnonzero(launch == -1)
    if missing.size and len(trace.flows):
        launch[missing] = _link_by_flows(trace, missing)
    g["launch"] = launch


def _link_by_flows(trace: Trace, rows: np.ndarray) -> np.ndarray:
    """Launch rows of GPU ops ``rows`` through launch flow events: a flow start at a runtime call's
    (pid, tid, start) and its end at the op's (device, stream, start). Of several flow starts with
    one id, the first that lands on a call counts (the first such call); of several flow ends on one
    op, the first counts."""
    f, r, g = trace.flows, trace.runtime, trace.gpu_ops
    cat_ok = trace.string_ids(lambda s: s in LAUNCH_FLOW_CATEGORIES, f["cat"])
    fc = f["cat"]
    sel = (fc >= 0) & cat_ok[np.maximum(fc, 0)]
    is_start = np.flatnonzero(sel & (f["phase"] == M.FLOW_START))
    is_end = np.flatnonzero(sel & (f["phase"] == M.FLOW_END))
    out = np.full(rows.size, -1, dtype=np.int64)
    # Flow id -> runtime row.
    call_of_start = first_match(
        (f["pid"][is_start], f["tid"][is_start], f["ts_ns"][is_start]), (r["pid"], r["tid"], r["start_ns"])
    )
    hit = call_of_start >= 0
    ids, first = np.unique(f["id"][is_start][hit], return_index=True)
    call_of_id = call_of_start[hit][first]
    # GPU op -> the first flow end on it -> its id's runtime row.
    end_of_op = first_match(
        (g["device"][rows], g["stream"][rows], g["start_ns"][rows]),
        (f["pid"][is_end], f["tid"][is_end], f["ts_ns"][is_end]),
    )
    linked = np.flatnonzero(end_of_op >= 0)
    if not linked.size or not ids.size:
        return out
    flow_id = f["id"][is_end][end_of_op[linked]]
    at = np.minimum(np.searchsorted(ids, flow_id), ids.size - 1)
    known = ids[at] == flow_id
    out[linked[known]] = call_of_id[at[known]]
    return out
