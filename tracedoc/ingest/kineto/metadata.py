"""Finishing a Kineto trace: memcpy kinds, launch links, CPU depths and the file's metadata."""

from __future__ import annotations


from typing import Any

import numpy as np

from ...errors import TraceError
from ...gcpause import RELEASE_MIN_BYTES, release_free_memory
from ...infile import excerpt
from ...model import trace as M
from ...model.groups import distinct
from ...model.meta import Device, ProcessGroup, TraceMeta, Versions, int_or_none, torch_version
from ...model.trace import Table, Trace
from ...model.vocab import MEMCPY_NAME_RE
from ..depth import set_cpu_depths
from ..launches import link_launches
from ..values import clean_device, plain_scalar, text_value
from .columns import _Reader
from .window import slice_warning

_COPY_KIND = {"htod": M.COPY_HTOD, "dtoh": M.COPY_DTOH, "dtod": M.COPY_DTOD, "ptop": M.COPY_PTOP}
_MEM_KIND = {
    "pageable": M.MEM_PAGEABLE,
    "pinned": M.MEM_PINNED,
    "device": M.MEM_DEVICE,
    "managed": M.MEM_MANAGED,
    "array": 3,
}


def _finish(reader: _Reader, meta: dict, path: str, truncated: str | None) -> Trace:
    if reader.n_events == 0:
        if truncated:
            raise TraceError(
                path,
                "is cut off before its first complete event",
                truncated,
                "the profiler was probably killed while writing; capture the trace again",
            )
        raise TraceError(
            path,
            "has no events",
            "an empty traceEvents array",
            "the profiler recorded nothing: make sure prof.step() is called every iteration so the "
            "schedule reaches its active steps",
        )
    if reader.bad_times and not any(len(t) for parts in reader.parts.values() for t in parts):
        raise TraceError(
            path,
            "has no events with a possible timestamp",
            f"{reader.bad_times:,} events dropped; first: {_shown(reader, reader.bad_time_example)}"
            + (f"; {reader.nonfinite:,} Infinity/NaN literals" if reader.nonfinite else ""),
            "timestamps must be finite microseconds; this file was not written by torch.profiler as is",
        )
    # Each table's pieces are freed as it is joined, and on a large trace their heap pages go back to the
    # system before the next table is built: the load's peak holds the columns once, not twice.
    big = sum(p.nbytes for parts in reader.parts.values() for p in parts) >= RELEASE_MIN_BYTES
    tables = {}
    for name, parts in reader.parts.items():
        tables[name] = Table.concat(name, parts, consume=True)
        if big:
            release_free_memory()
    strings = reader.strings.strings
    warnings: list[str] = []
    if truncated:
        warnings.append(f"{path}: {truncated}; numbers cover only the events before the cut")
    if reader.bad_args:
        warnings.append(
            f"{path}: {reader.bad_args:,} events have an args value that is not an object of the "
            "usual fields; their other fields were read and their args ignored"
        )
    warnings.extend(_repair_warnings(reader, path))
    if reader.slice is not None:
        warnings.append(slice_warning(path, reader.slice, reader.outside))
    if reader.ignored_phases:
        desc = _shown(reader, ", ".join(f"{n} '{p}'" for p, n in sorted(reader.ignored_phases.items())))
        warnings.append(f"{path}: ignored events of phases tracedoc does not use ({desc})")
    trace = Trace(source=path, strings=strings, tables=tables, warnings=warnings)
    _memcpy_kinds(trace)
    link_launches(trace)
    set_cpu_depths(trace)
    trace.meta = _metadata(meta, reader, trace, truncated)
    return trace


def _shown(reader: _Reader, text: str | None) -> str | None:
    """Text read from the file, as a warning may show it: nothing of a file behind a link that leaves its
    directory (``infile.excerpt``)."""
    return excerpt(text or "", True) if reader.hides_content else text


def _repair_warnings(reader: _Reader, path: str) -> list[str]:
    """One counted warning per kind of value that was dropped, repaired or read as absent."""
    out = []
    if reader.bad_times:
        out.append(
            f"{path}: dropped {reader.bad_times:,} events with impossible timestamps (missing, not a "
            "finite number, beyond +-146 years, or a negative duration; first seen: "
            f"{_shown(reader, reader.bad_time_example)}); numbers cover the other events"
        )
    if reader.nonfinite:
        out.append(
            f"{path}: {reader.nonfinite:,} values are written as Infinity or NaN, which JSON does not "
            "allow; they were read as impossible values"
        )
    if reader.bad_utf8:
        out.append(
            f"{path}: {reader.bad_utf8:,} invalid UTF-8 sequences in strings were read as U+FFFD "
            "(\ufffd); names that hold them are shown with that character"
        )
    if reader.wrong_types:
        out.append(
            f"{path}: {reader.wrong_types:,} fields have the wrong JSON type (a list or object where a "
            "name, id or number belongs, or a number out of range); they were read as absent"
        )
    return out


def _memcpy_kinds(trace: Trace) -> None:
    g = trace.gpu_ops
    if not len(g):
        return
    copies = np.flatnonzero(g["kind"] == M.MEMCPY)
    if not copies.size:
        return
    uniq = distinct(g["name"][copies])
    kinds = {}
    for sid in uniq.tolist():
        m = MEMCPY_NAME_RE.search(trace.string(sid)[: M.MATCH_CHARS])
        if m:
            kinds[sid] = (
                _COPY_KIND.get(m.group(1).lower(), M.COPY_UNKNOWN),
                _MEM_KIND.get((m.group(2) or "").lower(), -1),
                _MEM_KIND.get((m.group(3) or "").lower(), -1),
            )
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
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not abs(base) < 2**62:
        base = 0
    extra = {k: v for k, v in raw.items() if k not in _KNOWN_KEYS and plain_scalar(v)}
    meta = TraceMeta(
        format="kineto",
        schema_version=raw.get("schemaVersion"),
        rank=_count_or_none(dist.get("rank"), 0),
        world_size=_count_or_none(dist.get("world_size"), 1),
        backend=text_value(dist.get("backend")),
        devices=[Device.from_properties(clean_device(d)) for d in devices if isinstance(d, dict)],
        process_groups=[ProcessGroup.from_properties(g) for g in groups if isinstance(g, dict)]
        if isinstance(groups, list)
        else None,
        versions=Versions(
            cuda_runtime=raw.get("cuda_runtime_version"),
            cuda_driver=raw.get("cuda_driver_version"),
            cupti=raw.get("cupti_version"),
            nccl=text_value(dist.get("nccl_version")),
            torch=torch_version(extra),
        ),
        display_time_unit=raw.get("displayTimeUnit"),
        time_origin_ns=int(base),
        trace_name=raw.get("traceName"),
        record_shapes=raw.get("record_shapes"),
        events=reader.n_events,
        truncated=truncated,
        extra=extra,
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


_KNOWN_KEYS = {
    "schemaVersion",
    "distributedInfo",
    "deviceProperties",
    "computeProperties",
    "baseTimeNanoseconds",
    "displayTimeUnit",
    "traceName",
    "traceEvents",
}


def _count_or_none(v: Any, lowest: int) -> int | None:
    """A rank or world size: an integer in [lowest, 2**31), else unknown."""
    n = int_or_none(v)
    return n if n is not None and lowest <= n < 2**31 else None
