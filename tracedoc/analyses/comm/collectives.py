"""Per-collective statistics: count, time, message sizes, algorithm and bus bandwidth."""

from __future__ import annotations

import re

import numpy as np

from ...model.evidence import Collective
from ...model.groups import dense_codes, first_match
from ...model.trace import MATCH_CHARS, Trace
from ...model.vocab import KERNEL_COLLECTIVE_RE
from ...model.stats import median
from ..core.registry import Produced, analysis

_CANON = {
    "allreduce": "all_reduce",
    "allgather": "all_gather",
    "reducescatter": "reduce_scatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
    "sendrecv": "send_recv",
    "send": "send",
    "recv": "recv",
    "alltoall": "all_to_all",
    "gather": "gather",
    "scatter": "scatter",
}
DTYPE_BYTES = {
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "c10::half": 2,
    "c10::bfloat16": 2,
    "int": 4,
    "int32": 4,
    "long": 8,
    "int64": 8,
    "byte": 1,
    "uint8": 1,
    "char": 1,
    "int8": 1,
    "bool": 1,
    "short": 2,
    "int16": 2,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "unsigned char": 1,
    "signed char": 1,
    "long int": 8,
    "c10::float8_e4m3fn": 1,
    "c10::float8_e5m2": 1,
    "complexfloat": 8,
    "complexdouble": 16,
}


def canonical(name: str) -> str:
    key = re.sub(r"[^a-z]", "", name.lower())
    if key.startswith("all") and key[3:] in ("reduce", "gather", "toall"):
        pass
    for k in sorted(_CANON, key=len, reverse=True):
        if k in key:
            return _CANON[k]
    return name.lower() or "unknown"


def bus_factor(collective: str, n: int | None) -> float:
    """nccl-tests bus bandwidth factor of a collective over ``n`` ranks (doc/PERFORMANCE.md):
    all-reduce 2(n-1)/n; all-gather, reduce-scatter, all-to-all (n-1)/n; the others 1."""
    if not n or n < 2:
        return 1.0
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def collectives(
    trace: Trace, comm_mask: np.ndarray, gpu_ext: np.ndarray, lo: int, hi: int, world_size: int | None
) -> list[Collective]:
    g = trace.gpu_ops
    rows = np.flatnonzero(comm_mask & (g["start_ns"] < hi) & (g["end_ns"] > lo)) if len(g) else np.zeros(0, int)
    if not rows.size:
        return []
    # Collective type: from the collective args linked by External id (the first record of each id),
    # else from the kernel name.
    ext, names = gpu_ext[rows], g["name"][rows]
    dur = (g["end_ns"][rows] - g["start_ns"][rows]).astype(np.int64)
    linked = np.zeros(rows.size, dtype=bool)
    cname = np.full(rows.size, -1, dtype=np.int64)
    size_bytes = np.full(rows.size, -1, dtype=np.int64)
    group = np.full(rows.size, -1, dtype=np.int64)
    coll = trace.collectives
    if len(coll):
        width = np.array([DTYPE_BYTES.get(s.lower(), 0) for s in trace.strings] + [0], dtype=np.int64)
        info_bytes = np.where(
            (coll["in_nelems"] >= 0) & (width[coll["dtype"]] > 0), coll["in_nelems"] * width[coll["dtype"]], -1
        )
        record = first_match((ext,), (coll["external_id"],))
        linked = (record >= 0) & (ext >= 0)
        src = record[linked]
        cname[linked] = coll["collective"][src]
        size_bytes[linked] = info_bytes[src]
        group[linked] = coll["group_size"][src]
    kernel_ids, kernel_of = dense_codes(names)
    by_kernel_name = []
    for sid in kernel_ids.tolist():  # a loop over distinct names, not kernels
        m = KERNEL_COLLECTIVE_RE.search(trace.string(sid)[:MATCH_CHARS])
        by_kernel_name.append(canonical(m.group(1)) if m else "unknown")
    kind = np.array(by_kernel_name, dtype=object)[kernel_of.reshape(-1)]
    coll_ids, coll_of = dense_codes(cname[linked])
    kind[linked] = np.array([canonical(trace.string(int(sid))) for sid in coll_ids.tolist()], dtype=object)[
        coll_of.reshape(-1)
    ]
    group[group <= 0] = world_size or 0
    out = []
    for name in sorted(set(kind.tolist())):  # a loop over collective types, not kernels
        mine = kind == name
        d, known = dur[mine], mine & (size_bytes >= 0)
        row = {
            "collective": name,
            "count": int(d.size),
            "total_ns": int(d.sum()),
            "mean_ns": float(d.sum() / d.size),
            "message_bytes_p50": None,
            "message_bytes_max": None,
            "algbw_gbps": None,
            "busbw_gbps": None,
        }
        if known.any():
            row["message_bytes_p50"] = median(size_bytes[known].astype(np.float64))
            row["message_bytes_max"] = int(size_bytes[known].max())
            t = dur[known].sum()
            if t > 0:
                algbw = size_bytes[known].sum() / t  # bytes per ns == GB/s
                n = int(group[known].max()) or None
                row["algbw_gbps"] = float(algbw)
                row["busbw_gbps"] = float(algbw * bus_factor(name, n))
        out.append(Collective(**row))
    out.sort(key=lambda r: -r.total_ns)
    return out


@analysis(needs=("comm_mask", "gpu_ext", "window"), evidence=("collectives",))
def collective_table(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    rows = collectives(trace, inputs["comm_mask"], inputs["gpu_ext"], win.start_ns, win.end_ns, trace.meta.world_size)
    return Produced(evidence={"collectives": rows})
