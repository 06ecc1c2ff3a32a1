"""Building one ``Trace`` from the raw events of a set of processes."""

from __future__ import annotations

import numpy as np

from ...model import trace as M
from ...model import vocab as V
from ...model.trace import StringTable, Table, Trace
from ...model.groups import isin, lex_order
from ..depth import set_cpu_depths
from ..launches import link_by_correlation
from ..steps import count_dataloader_ranges, mark_steps
from .db import _Db
from .events import _n, _Names, _Raw, _os_pid, _os_tid
from .metadata import _devices, _metadata, _sm_lookup

_UINT32_NONE = 0xFFFFFFFF  # CUPTI's "no stream / no event" marker


def _select(t: dict[str, np.ndarray], gpids: np.ndarray | None) -> dict[str, np.ndarray]:
    if not t:
        return t
    if gpids is None:
        return t
    rows = np.flatnonzero(isin(t["gpid"], gpids))
    return {k: v[rows] for k, v in t.items()}


def _sorted(t: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    if not t or t["start"].size == 0:
        return t
    order = lex_order((t["end"], t["start"]))
    return {k: v[order] for k, v in t.items()}


def _build(path: str, db: _Db, raw: _Raw, names: _Names, gpids: np.ndarray | None, options: dict, info: dict) -> Trace:
    st = StringTable()
    gpu = _sorted(_select(raw.gpu, gpids))
    rt = _sorted(_select(raw.runtime, gpids))
    sy = _sorted(_select(raw.syncs, gpids))
    cpu = _sorted(_select(raw.cpu, gpids))
    tables = M.empty_tables()
    devices = _devices(info, gpu, gpids)

    if _n(rt):
        ec = rt["event_class"]
        kind = np.where(ec == 0, M.RUNTIME, np.where(ec == 1, M.DRIVER, M.RUNTIME_OTHER))
        tables["runtime"] = Table(
            "runtime",
            {
                "kind": kind,
                "pid": _os_pid(rt["gpid"]),
                "tid": _os_tid(rt["gtid"]),
                "name": names.to_trace(rt["name"], st),
                "start_ns": rt["start"],
                "end_ns": rt["end"],
                "correlation": rt["corr"],
                "external_id": np.full(_n(rt), -1),
                "cbid": np.full(_n(rt), -1),
            },
        )
    if _n(gpu):
        n = _n(gpu)
        launch = link_by_correlation(
            gpu["gpid"], gpu["corr"], rt.get("gpid", np.zeros(0, np.int64)), rt.get("corr", np.zeros(0, np.int64))
        )
        blocks = np.where(gpu["gx"] > 0, gpu["gx"] * np.maximum(gpu["gy"], 1) * np.maximum(gpu["gz"], 1), -1)
        threads = np.where(gpu["bx"] > 0, gpu["bx"] * np.maximum(gpu["by"], 1) * np.maximum(gpu["bz"], 1), -1)
        sms = _sm_lookup(devices, gpu["device"])
        ok = (gpu["kind"] == M.KERNEL) & (blocks > 0) & (sms > 0)
        bps = np.full(n, np.nan)
        bps[ok] = blocks[ok] / sms[ok]
        wps = np.full(n, np.nan)
        ok_w = ok & (threads > 0)
        wps[ok_w] = bps[ok_w] * np.ceil(threads[ok_w] / 32.0)
        is_copy = gpu["kind"] == M.MEMCPY
        tables["gpu_ops"] = Table(
            "gpu_ops",
            {
                "kind": gpu["kind"],
                "device": gpu["device"],
                "stream": gpu["stream"],
                "start_ns": gpu["start"],
                "end_ns": gpu["end"],
                "name": names.to_trace(gpu["name"], st),
                "correlation": gpu["corr"],
                "external_id": np.full(n, -1),
                "pid": _os_pid(gpu["gpid"]),
                "grid_x": gpu["gx"],
                "grid_y": gpu["gy"],
                "grid_z": gpu["gz"],
                "block_x": gpu["bx"],
                "block_y": gpu["by"],
                "block_z": gpu["bz"],
                "registers": gpu["regs"],
                "shared_mem": gpu["smem"],
                "blocks_per_sm": bps,
                "warps_per_sm": wps,
                "est_occupancy": np.full(n, np.nan),
                "bytes": gpu["bytes"],
                "copy_kind": np.where(is_copy, gpu["copy_kind"], 0),
                "src_kind": np.where(is_copy, gpu["src_kind"], -1),
                "dst_kind": gpu["dst_kind"],
                "graph_id": gpu["graph_id"],
                "launch": launch,
            },
        )
    if _n(sy):
        n = _n(sy)
        call = link_by_correlation(
            sy["gpid"], sy["corr"], rt.get("gpid", np.zeros(0, np.int64)), rt.get("corr", np.zeros(0, np.int64))
        )
        labels = _sync_labels(sy["sync_type"], call, rt.get("name"), names)
        stream = np.where((sy["stream"] == _UINT32_NONE) | (sy["stream"] < 0), -1, sy["stream"])
        tables["syncs"] = Table(
            "syncs",
            {
                "device": sy["device"],
                "stream": stream,
                "name": names.to_trace(labels, st),
                "start_ns": sy["start"],
                "end_ns": sy["end"],
                "correlation": sy["corr"],
                "wait_on_stream": np.full(n, -1),
            },
        )
    if _n(cpu):
        n = _n(cpu)
        tables["cpu_ops"] = Table(
            "cpu_ops",
            {
                "kind": cpu["kind"],
                "pid": _os_pid(cpu["gpid"]),
                "tid": _os_tid(cpu["gtid"]),
                "name": names.to_trace(cpu["name"], st),
                "start_ns": cpu["start"],
                "end_ns": cpu["end"],
                "external_id": np.full(n, -1),
                "depth": np.zeros(n),
                "stack": np.full(n, -1),
            },
        )

    trace = Trace(source=path, strings=st.strings, tables=tables, warnings=list(raw.warnings))
    set_cpu_depths(trace, cpu.get("nest") if _n(cpu) else None)
    trace.meta = _metadata(db, raw, info, trace, gpids, devices, cpu)
    mark_steps(trace, options.get("step_range"))
    trace.meta.dataloader_ranges = count_dataloader_ranges(trace)
    if not len(trace.gpu_ops):
        trace.warnings.append(
            f"{path}: no CUDA kernels, memcpys or memsets in the export (was the run profiled with `-t cuda`?)"
        )
    return trace


def _sync_labels(sync_type: np.ndarray, call: np.ndarray, rt_names: np.ndarray | None, names: _Names) -> np.ndarray:
    """Raw name ids of Kineto-style sync labels: from the API call that caused the sync when it is
    known (syncType numbering differs between nsys versions), else from ``syncType``."""
    by_type = {t: names.add_text(s) for t, s in V.SYNC_MARKER_BY_TYPE.items()}
    unknown = names.add_text(V.SYNC_MARKER_UNKNOWN)
    uniq_t, inv_t = np.unique(sync_type, return_inverse=True)
    out = np.array([by_type.get(int(t), unknown) for t in uniq_t], dtype=np.int64)[inv_t.reshape(-1)]
    if rt_names is not None and rt_names.size:
        linked = np.flatnonzero(call >= 0)
        if linked.size:
            call_names = rt_names[call[linked]]
            uniq, inv = np.unique(call_names, return_inverse=True)
            missing = [int(u) for u in uniq if u >= 0 and int(u) not in names.cache]
            if missing:
                names.cache.update(names.db.strings(np.asarray(missing)))
            lut = np.full(uniq.size, -1, dtype=np.int64)
            for i, u in enumerate(uniq.tolist()):
                text = names.text(int(u)) if u != -1 else ""
                for pattern, label in V.SYNC_MARKER_BY_CALL:
                    if pattern.match(text):
                        lut[i] = names.add_text(label)
                        break
            mapped = lut[inv.reshape(-1)]
            good = mapped != -1
            out[linked[good]] = mapped[good]
    return out
