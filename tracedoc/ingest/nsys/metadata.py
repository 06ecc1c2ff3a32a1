"""Devices, processes, thread names and export metadata of an nsys export."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model.groups import distinct
from ...model.meta import Device, TraceMeta, Versions
from ...model.trace import Trace
from ..values import DEVICE_INTS, int_value, text_value
from .db import _Db, _q
from .events import _PID_SHIFT, _TID_MASK, _Raw, _n, _os_pid


def _read_info(db: _Db) -> dict:
    """Device properties, process and thread names, export metadata (small tables, read once)."""
    info: dict[str, Any] = {"gpus": [], "cuda_devices": [], "processes": {}, "threads": {}, "export": {}}
    if db.has("TARGET_INFO_GPU"):
        cols = db.columns("TARGET_INFO_GPU")
        want = [
            c
            for c in (
                "id",
                "deviceId",
                "name",
                "totalMemory",
                "smCount",
                "computeMajor",
                "computeMinor",
                "cuDevice",
                "busLocation",
                "uuid",
                "chipName",
            )
            if c in cols
        ]
        for row in db.small(f"SELECT {', '.join(map(_q, want))} FROM TARGET_INFO_GPU"):
            d = _typed(dict(zip(want, row)), ("name", "busLocation", "uuid", "chipName"))
            info["gpus"].append(
                {
                    "gpu_id": d.get("id", d.get("deviceId")),
                    "cuda_id": d.get("cuDevice"),
                    "name": d.get("name"),
                    "totalGlobalMem": d.get("totalMemory"),
                    "numSms": d.get("smCount"),
                    "computeMajor": d.get("computeMajor"),
                    "computeMinor": d.get("computeMinor"),
                    "busLocation": d.get("busLocation"),
                    "uuid": d.get("uuid"),
                    "pid": None,
                }
            )
    if db.has("TARGET_INFO_CUDA_GPU"):  # ~2021 exports keep CUDA properties here
        cols = db.columns("TARGET_INFO_CUDA_GPU")
        want = [
            c
            for c in (
                "deviceId",
                "name",
                "globalMemorySize",
                "numMultiprocessors",
                "computeCapabilityMajor",
                "computeCapabilityMinor",
                "pid",
                "pciBusId",
            )
            if c in cols
        ]
        for row in db.small(f"SELECT {', '.join(map(_q, want))} FROM TARGET_INFO_CUDA_GPU"):
            d = _typed(dict(zip(want, row)), ("name", "pciBusId"))
            info["gpus"].append(
                {
                    "gpu_id": d.get("deviceId"),
                    "cuda_id": d.get("deviceId"),
                    "name": d.get("name"),
                    "totalGlobalMem": d.get("globalMemorySize"),
                    "numSms": d.get("numMultiprocessors"),
                    "computeMajor": d.get("computeCapabilityMajor"),
                    "computeMinor": d.get("computeCapabilityMinor"),
                    "busLocation": d.get("pciBusId"),
                    "uuid": None,
                    "pid": d.get("pid"),
                }
            )
    if db.has("TARGET_INFO_CUDA_DEVICE"):
        cols = db.columns("TARGET_INFO_CUDA_DEVICE")
        want = [c for c in ("gpuId", "cudaId", "pid", "numMultiprocessors", "uuid") if c in cols]
        for row in db.small(f"SELECT {', '.join(map(_q, want))} FROM TARGET_INFO_CUDA_DEVICE"):
            info["cuda_devices"].append(_typed(dict(zip(want, row)), ("uuid",)))
    if db.has("PROCESSES") and {"globalPid", "pid", "name"} <= set(db.columns("PROCESSES")):
        for gpid, pid, name in db.small("SELECT globalPid, pid, name FROM PROCESSES"):
            if int_value(gpid) is not None:
                info["processes"][int(gpid)] = (int_value(pid), text_value(name))
    if db.has("ThreadNames") and {"nameId", "globalTid"} <= set(db.columns("ThreadNames")):
        t = db.read("ThreadNames", {"name": (-1, "nameId"), "gtid": (-1, "globalTid")})
        texts = db.strings(t["name"])
        for sid, gtid in zip(t["name"].tolist(), t["gtid"].tolist()):
            if sid in texts and gtid >= 0:
                info["threads"][gtid] = texts[sid]
    info["export"] = db.key_values("META_DATA_EXPORT", "EXPORT_META_DATA")
    info["capture"] = db.key_values("META_DATA_CAPTURE")
    return info


def _typed(row: dict[str, Any], texts: tuple[str, ...]) -> dict[str, Any]:
    """A metadata row with text columns as text and every other column an integer or None."""
    return {k: (text_value(v) if k in texts else int_value(v)) for k, v in row.items()}


def _devices(info: dict, gpu: dict[str, np.ndarray], gpids: np.ndarray | None) -> list[Device]:
    """The devices this trace's GPU ops ran on (properties under Kineto ``deviceProperties`` keys)."""
    used = sorted(set(distinct(gpu["device"]).tolist())) if _n(gpu) else []
    os_pids = set(_os_pid(np.asarray(gpids)).tolist()) if gpids is not None else None
    by_gpu_id = {g["gpu_id"]: g for g in info["gpus"]}
    props: dict[int, dict] = {}
    # TARGET_INFO_CUDA_DEVICE says which nsys GPU is which CUDA ordinal in which process.
    for cd in info["cuda_devices"]:
        if os_pids is not None and cd.get("pid") is not None and cd["pid"] not in os_pids:
            continue
        cid = cd.get("cudaId")
        if cid is None:
            continue
        g = by_gpu_id.get(cd.get("gpuId"), {})
        props.setdefault(int(cid), {**g, "numSms": g.get("numSms") or cd.get("numMultiprocessors")})
    for g in info["gpus"]:
        if os_pids is not None and g.get("pid") is not None and g["pid"] not in os_pids:
            continue
        is_cuda = (g.get("computeMajor") or 0) > 0 or (g.get("numSms") or 0) > 0
        cid = g.get("cuda_id") if g.get("cuda_id") is not None else g.get("gpu_id")
        if is_cuda and cid is not None:
            props.setdefault(int(cid), g)
    ids = used or sorted(props)
    out = []
    for d in ids:
        g = props.get(d, {})
        out.append(
            Device.from_properties(
                {
                    "id": int(d),
                    "name": text_value(g.get("name")),
                    **{
                        k: int_value(g.get(k), DEVICE_INTS[k])
                        for k in ("totalGlobalMem", "computeMajor", "computeMinor", "numSms")
                    },
                }
            )
        )
    return out


def _sm_lookup(devices: list[Device], device: np.ndarray) -> np.ndarray:
    out = np.full(device.size, -1, dtype=np.int64)
    for d in devices:
        if d.sm_count:
            out[device == d.id] = d.sm_count
    return out


def _metadata(
    db: _Db, raw: _Raw, info: dict, trace: Trace, gpids: np.ndarray | None, devices: list[Device], cpu: dict
) -> TraceMeta:
    export = info["export"]
    selected = None if gpids is None else set(np.asarray(gpids).tolist())
    process_names, thread_names = {}, {}
    for gpid, (pid, name) in info["processes"].items():
        if selected is None or gpid in selected:
            if name is not None:
                process_names[str(pid if pid is not None else (gpid >> _PID_SHIFT) & _TID_MASK)] = str(name)
    for gtid, name in info["threads"].items():
        if selected is None or (gtid & ~_TID_MASK) in selected:
            thread_names[f"{(gtid >> _PID_SHIFT) & _TID_MASK}/{gtid & _TID_MASK}"] = name
    domains = {}
    for (gpid, dom), name in raw.domains.items():
        if selected is None or gpid in selected:
            domains[f"{(gpid >> _PID_SHIFT) & _TID_MASK}/{dom}"] = name
    pid = None
    if selected is not None and len(selected) == 1:
        pid = int((next(iter(selected)) >> _PID_SHIFT) & _TID_MASK)
    n_events = sum(len(t) for t in trace.tables.values())
    return TraceMeta(
        format="nsys",
        pid=pid,
        devices=devices,
        versions=Versions(
            nsys=export.get("EXPORT_PRODUCT_VERSION"), nsys_export_schema=export.get("EXPORT_SCHEMA_VERSION")
        ),
        display_time_unit="ns",
        time_origin_ns=raw.meta.get("time_origin_ns", 0),
        clock=raw.meta.get("clock"),
        capture_start_ns=raw.meta.get("capture_start_ns"),
        capture_end_ns=raw.meta.get("capture_end_ns"),
        dropped_events=raw.meta.get("dropped_events"),
        trace_name=export.get("EXPORT_INPUT_FILE") or export.get("EXPORT_PARAM_INPUT_FILE"),
        events=n_events,
        file_events=raw.n_events,
        process_names=process_names,
        thread_names=thread_names,
        nvtx_domains=domains,
        extra={k: v for k, v in export.items() if k.startswith("EXPORT_") and "PATH" not in k},
    )
