"""Device memory: peaks allocated and reserved, the device's size, the largest allocations and the curve."""

from __future__ import annotations

import numpy as np

from ...model import trace as M
from ...model.evidence import DeviceMemory, MemoryPoint, TopAlloc
from ...model.groups import Groups, distinct, largest_first
from ...model.trace import Trace
from ..core.registry import Produced, analysis


def memory(trace: Trace) -> dict:
    """Peak allocated/reserved per device from ``[memory]`` events, vs device memory."""
    mem = trace.memory
    devices = {d.id if d.id is not None else i: d for i, d in enumerate(trace.meta.devices)}
    out: dict = {
        "memory_peak_allocated_bytes": None,
        "memory_peak_reserved_bytes": None,
        "device_memory_bytes": None,
        "memory_peak_fraction": None,
        "per_device": [],
        "top_allocs": [],
        "curve": [],
    }
    gpu_devs = distinct(trace.gpu_ops["device"]) if len(trace.gpu_ops) else np.zeros(0, dtype=np.int64)
    if gpu_devs.size and int(gpu_devs[0]) in devices:
        out["device_memory_bytes"] = devices[int(gpu_devs[0])].memory_bytes
    if not len(mem):
        return out
    is_gpu = mem["device_type"] == 1
    if not is_gpu.any():
        return out
    best_frac = None
    for dev in distinct(mem["device_id"][is_gpu]).tolist():
        rows = is_gpu & (mem["device_id"] == dev)
        alloc = mem["total_allocated"][rows]
        reserved = mem["total_reserved"][rows]
        peak_a = int(alloc.max()) if (alloc >= 0).any() else None
        peak_r = int(reserved.max()) if (reserved >= 0).any() else None
        total = devices[int(dev)].memory_bytes if int(dev) in devices else None
        peak = peak_r if peak_r is not None else peak_a
        frac = peak / total if (peak is not None and total) else None
        out["per_device"].append(
            DeviceMemory(
                device=int(dev),
                peak_allocated_bytes=peak_a,
                peak_reserved_bytes=peak_r,
                device_memory_bytes=total,
                peak_fraction=frac,
            )
        )
        if out["memory_peak_allocated_bytes"] is None or (peak_a or 0) > out["memory_peak_allocated_bytes"]:
            out["memory_peak_allocated_bytes"] = peak_a
            out["memory_peak_reserved_bytes"] = peak_r
            out["device_memory_bytes"] = total
        if frac is not None and (best_frac is None or frac > best_frac):
            best_frac = frac
    out["memory_peak_fraction"] = best_frac
    # Memory curve (downsampled) of the device with the highest peak.
    rows = np.flatnonzero(is_gpu)
    order = rows[np.argsort(mem["ts_ns"][rows], kind="stable")]
    step = max(1, order.size // 400)
    out["curve"] = [
        MemoryPoint(
            ts_ns=int(mem["ts_ns"][i]),
            allocated=int(mem["total_allocated"][i]),
            reserved=int(mem["total_reserved"][i]),
            device=int(mem["device_id"][i]),
        )
        for i in order[::step].tolist()
    ]
    out["top_allocs"] = _top_allocs(trace, np.flatnonzero(is_gpu & (mem["bytes"] > 0)))
    return out


def _top_allocs(trace: Trace, rows: np.ndarray, top: int = 10) -> list[TopAlloc]:
    """Largest allocations and the innermost CPU op on the allocating thread that was running."""
    mem, c = trace.memory, trace.cpu_ops
    if not rows.size:
        return []
    # Aggregate by allocating op: attribute each alloc to the innermost open op on its thread.
    op = np.full(rows.size, -1, dtype=np.int64)
    if len(c):
        for pid, tid in set(zip(mem["pid"][rows].tolist(), mem["tid"][rows].tolist())):
            sel = np.flatnonzero((mem["pid"][rows] == pid) & (mem["tid"][rows] == tid))
            ops = np.flatnonzero((c["pid"] == pid) & (c["tid"] == tid) & (c["kind"] == M.CPU_OP))
            if not ops.size:
                continue
            order = ops[np.argsort(c["start_ns"][ops], kind="stable")]
            ts = mem["ts_ns"][rows[sel]]
            # Candidates: ops starting before ts; walk back a few to find one still open (innermost).
            idx = np.searchsorted(c["start_ns"][order], ts, side="right") - 1
            for back in range(0, 8):
                j = idx - back
                ok = (j >= 0) & (op[sel] == -1)
                jj = order[np.maximum(j, 0)]
                open_ = ok & (c["end_ns"][jj] >= ts)
                op[sel[open_]] = c["name"][jj[open_]]
    groups = Groups(op)
    size = mem["bytes"][rows]
    count, total, biggest = groups.count(), groups.sum(size), groups.max(size)
    return [
        TopAlloc(
            op=trace.string(int(groups.keys[0][i])) if groups.keys[0][i] >= 0 else None,
            count=int(count[i]),
            total_bytes=int(total[i]),
            max_bytes=int(biggest[i]),
        )
        for i in largest_first(total)[:top].tolist()
    ]


@analysis(
    produces=(
        "memory_peak_allocated_bytes",
        "memory_peak_reserved_bytes",
        "device_memory_bytes",
        "memory_peak_fraction",
    ),
    evidence=("memory_top_allocs", "memory_per_device", "memory_curve"),
)
def device_memory(trace: Trace, inputs) -> Produced:
    mem = memory(trace)
    return Produced(
        metrics={
            k: mem[k]
            for k in (
                "memory_peak_allocated_bytes",
                "memory_peak_reserved_bytes",
                "device_memory_bytes",
                "memory_peak_fraction",
            )
        },
        evidence={
            "memory_top_allocs": mem["top_allocs"],
            "memory_per_device": mem["per_device"],
            "memory_curve": mem["curve"],
        },
    )
