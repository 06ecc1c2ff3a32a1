"""Finishing a Kineto trace: memcpy kinds, launch links, CPU depths and the file's metadata."""

from __future__ import annotations


import numpy as np

from ...errors import TraceError
from ...model import trace as M
from ...model.meta import Device, ProcessGroup, TraceMeta, Versions, int_or_none, torch_version
from ...model.trace import Table, Trace
from ...model.vocab import MEMCPY_NAME_RE
from ..depth import set_cpu_depths
from ..launches import link_launches
from .columns import _Reader

_COPY_KIND = {"htod": M.COPY_HTOD, "dtoh": M.COPY_DTOH, "dtod": M.COPY_DTOD, "ptop": M.COPY_PTOP}
_MEM_KIND = {"pageable": M.MEM_PAGEABLE, "pinned": M.MEM_PINNED, "device": M.MEM_DEVICE,
             "managed": M.MEM_MANAGED, "array": 3}


def _finish(reader: _Reader, meta: dict, path: str, truncated: str | None) -> Trace:
    if reader.n_events == 0:
        if truncated:
            raise TraceError(path, "is cut off before its first complete event", truncated,
                             "the profiler was probably killed while writing; capture the trace again")
        raise TraceError(path, "has no events", "an empty traceEvents array",
                         "the profiler recorded nothing: make sure prof.step() is called every iteration so the "
                         "schedule reaches its active steps")
    tables = {name: Table.concat(name, parts) for name, parts in reader.parts.items()}
    strings = reader.strings.strings
    warnings: list[str] = []
    if truncated:
        warnings.append(f"{path}: {truncated}; numbers cover only the events before the cut")
    if reader.bad_args:
        warnings.append(f"{path}: {reader.bad_args:,} events have an args value that is not an object of the "
                        "usual fields; their other fields were read and their args ignored")
    if reader.ignored_phases:
        desc = ", ".join(f"{n} '{p}'" for p, n in sorted(reader.ignored_phases.items()))
        warnings.append(f"{path}: ignored events of phases tracedoc does not use ({desc})")
    trace = Trace(source=path, strings=strings, tables=tables, warnings=warnings)
    _memcpy_kinds(trace)
    link_launches(trace)
    set_cpu_depths(trace)
    trace.meta = _metadata(meta, reader, trace, truncated)
    return trace


def _memcpy_kinds(trace: Trace) -> None:
    g = trace.gpu_ops
    if not len(g):
        return
    copies = np.flatnonzero(g["kind"] == M.MEMCPY)
    if not copies.size:
        return
    uniq = np.unique(g["name"][copies])
    kinds = {}
    for sid in uniq.tolist():
        m = MEMCPY_NAME_RE.search(trace.string(sid))
        if m:
            kinds[sid] = (_COPY_KIND.get(m.group(1).lower(), M.COPY_UNKNOWN),
                          _MEM_KIND.get((m.group(2) or "").lower(), -1),
                          _MEM_KIND.get((m.group(3) or "").lower(), -1))
    lut = np.full((len(trace.strings) + 1, 3), [M.COPY_UNKNOWN, -1, -1], dtype=np.int64)
    for sid, v in kinds.items():
        lut[sid] = v
    names = g["name"][copies]
    for col, j in (("copy_kind", 0), ("src_kind", 1), ("dst_kind", 2)):
        arr = g[col].copy()
        arr[copies] = lut[names, j]
        g[col] = arr


def _metadata(raw: dict, reader: _Reader, trace: Trace, truncated: str | None) -> TraceMeta:
    dist = raw.get("distributedInfo") if isinstance(raw.get("distributedInfo"), dict) else {}
    devices = raw.get("deviceProperties") or raw.get("computeProperties") or []
    if not isinstance(devices, list):
        devices = []
    groups = dist.get("pg_config")
    base = raw.get("baseTimeNanoseconds")
    backend = dist.get("backend")
    extra = {k: v for k, v in raw.items() if k not in _KNOWN_KEYS and isinstance(v, (str, int, float))}
    meta = TraceMeta(
        format="kineto", schema_version=raw.get("schemaVersion"),
        rank=int_or_none(dist.get("rank")), world_size=int_or_none(dist.get("world_size")),
        backend=None if backend is None else str(backend),
        devices=[Device.from_properties(d) for d in devices if isinstance(d, dict)],
        process_groups=[ProcessGroup.from_properties(g) for g in groups if isinstance(g, dict)]
        if isinstance(groups, list) else None,
        versions=Versions(cuda_runtime=raw.get("cuda_runtime_version"), cuda_driver=raw.get("cuda_driver_version"),
                          cupti=raw.get("cupti_version"), nccl=dist.get("nccl_version"), torch=torch_version(extra)),
        display_time_unit=raw.get("displayTimeUnit"),
        time_origin_ns=int(base) if isinstance(base, (int, float)) else 0,
        trace_name=raw.get("traceName"), record_shapes=raw.get("record_shapes"), events=reader.n_events,
        truncated=truncated, extra=extra,
    )
    for name, pid, tid, arg_name, labels in reader.meta_events:
        if name == "process_name" and arg_name is not None:
            meta.process_names[str(pid)] = str(arg_name)
        elif name == "thread_name" and arg_name is not None:
            meta.thread_names[f"{pid}/{tid}"] = str(arg_name)
        elif name == "process_labels" and labels is not None:
            meta.process_names.setdefault(f"labels:{pid}", str(labels))
    o = trace.other_spans
    if len(o):
        cats, counts = np.unique(o["cat"], return_counts=True)
        meta.other_categories = {trace.string(int(c)): int(k) for c, k in zip(cats, counts)}
    return meta


_KNOWN_KEYS = {"schemaVersion", "distributedInfo", "deviceProperties", "computeProperties",
               "baseTimeNanoseconds", "displayTimeUnit", "traceName", "traceEvents"}
