"""Per-collective statistics: count, time, message sizes, algorithm and bus bandwidth."""

from __future__ import annotations

import re

import numpy as np

from ..model.trace import MATCH_CHARS, Trace
from ..model.vocab import KERNEL_COLLECTIVE_RE
from .registry import Produced, analysis

_CANON = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
          "broadcast": "broadcast", "reduce": "reduce", "sendrecv": "send_recv", "send": "send", "recv": "recv",
          "alltoall": "all_to_all", "gather": "gather", "scatter": "scatter"}
DTYPE_BYTES = {"float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
               "c10::half": 2, "c10::bfloat16": 2, "int": 4, "int32": 4, "long": 8, "int64": 8, "byte": 1,
               "uint8": 1, "char": 1, "int8": 1, "bool": 1, "short": 2, "int16": 2,
               "float8_e4m3fn": 1, "float8_e5m2": 1, "unsigned char": 1, "signed char": 1, "long int": 8,
               "c10::float8_e4m3fn": 1, "c10::float8_e5m2": 1, "complexfloat": 8, "complexdouble": 16}


def canonical(name: str) -> str:
    key = re.sub(r"[^a-z]", "", name.lower())
    if key.startswith("all") and key[3:] in ("reduce", "gather", "toall"):
        pass
    for k in sorted(_CANON, key=len, reverse=True):
        if k in key:
            return _CANON[k]
    return name.lower() or "unknown"


def bus_factor(collective: str, n: int | None) -> float:
    if not n or n < 2:
        return 1.0
    if collective == "all_reduce":
        return 2 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (n - 1) / n
    return 1.0


def collectives(trace: Trace, comm_mask: np.ndarray, gpu_ext: np.ndarray, lo: int, hi: int,
                world_size: int | None) -> list[dict]:
    import pandas as pd
    g = trace.gpu_ops
    rows = np.flatnonzero(comm_mask & (g["start_ns"] < hi) & (g["end_ns"] > lo)) if len(g) else np.zeros(0, int)
    if not rows.size:
        return []
    # Collective type: from the collective args linked by External id, else from the kernel name.
    ext = gpu_ext[rows]
    df = pd.DataFrame({"ext": ext, "name": g["name"][rows], "dur": g["end_ns"][rows] - g["start_ns"][rows]})
    coll = trace.collectives
    if len(coll):
        width = np.array([DTYPE_BYTES.get(s.lower(), 0) for s in trace.strings] + [0], dtype=np.int64)
        info = pd.DataFrame({"ext": coll["external_id"], "cname": coll["collective"],
                             "bytes": np.where((coll["in_nelems"] >= 0) & (width[coll["dtype"]] > 0),
                                               coll["in_nelems"] * width[coll["dtype"]], -1),
                             "group": coll["group_size"]})
        info = info[info["ext"] >= 0].drop_duplicates("ext")
        df = df.merge(info, on="ext", how="left")
    else:
        df["cname"] = np.nan
        df["bytes"] = -1
        df["group"] = -1
    by_kernel_name = {}
    for sid in np.unique(df["name"]).tolist():
        m = KERNEL_COLLECTIVE_RE.search(trace.string(sid)[:MATCH_CHARS])
        by_kernel_name[sid] = canonical(m.group(1)) if m else "unknown"
    by_coll_name = {sid: canonical(trace.string(int(sid))) for sid in df["cname"].dropna().unique().tolist()}
    df["collective"] = np.where(df["cname"].notna(), df["cname"].map(by_coll_name), df["name"].map(by_kernel_name))
    df["bytes"] = df["bytes"].fillna(-1).astype(np.int64)
    df["group"] = df["group"].fillna(-1).astype(np.int64)
    df.loc[df["group"] <= 0, "group"] = world_size or 0
    out = []
    for name, grp in df.groupby("collective"):
        known = grp[grp["bytes"] >= 0]
        row = {"collective": name, "count": int(len(grp)), "total_ns": int(grp["dur"].sum()),
               "mean_ns": float(grp["dur"].mean()), "message_bytes_p50": None, "message_bytes_max": None,
               "algbw_gbps": None, "busbw_gbps": None}
        if len(known):
            row["message_bytes_p50"] = float(known["bytes"].median())
            row["message_bytes_max"] = int(known["bytes"].max())
            t = known["dur"].sum()
            if t > 0:
                algbw = known["bytes"].sum() / t  # bytes per ns == GB/s
                n = int(known["group"].max()) or None
                row["algbw_gbps"] = float(algbw)
                row["busbw_gbps"] = float(algbw * bus_factor(name, n))
        out.append(row)
    out.sort(key=lambda r: -r["total_ns"])
    return out


@analysis(needs=("comm_mask", "gpu_ext", "window"), evidence=("collectives",))
def collective_table(trace: Trace, inputs) -> Produced:
    win = inputs["window"]
    rows = collectives(trace, inputs["comm_mask"], inputs["gpu_ext"], win.start_ns, win.end_ns,
                       trace.meta.world_size)
    return Produced(evidence={"collectives": rows})
