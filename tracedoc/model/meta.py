"""Typed trace metadata: what a trace records about where and how it was captured.

Every reader fills one :class:`TraceMeta`; analyses read its fields instead of string keys. Values a
trace does not record are ``None`` (or empty), never guessed; what was recorded stays as recorded in
``properties`` (Kineto's own key names). The saved report's ``environment`` summarises it
(``analyses.core.rank.environment``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .peaks import device_peak

TORCH_VERSION_KEYS = ("torch_version", "pytorch_version", "torchVersion")


def int_or_none(v: Any) -> int | None:
    """An integer from an int, float or digit string; None for anything else (bools included)."""
    if v is None or isinstance(v, bool):
        return None
    try:
        return int(v)
    except (TypeError, ValueError, OverflowError):  # OverflowError: a float infinity
        return None


@dataclass
class Device:
    """One GPU as the trace describes it."""

    id: int | None
    name: str | None = None
    compute_major: int | None = None
    compute_minor: int | None = None
    sm_count: int | None = None
    memory_bytes: int | None = None
    peak_flops: dict[str, float] | None = None  # dense peak FLOP/s by dtype, from model/peaks.py (datasheets)
    properties: dict[str, Any] = field(default_factory=dict)  # as recorded (Kineto deviceProperties keys)

    @classmethod
    def from_properties(cls, d: dict[str, Any]) -> "Device":
        """From a Kineto ``deviceProperties`` entry (the nsys reader writes the same keys)."""
        sms = next(
            (
                int(v)
                for v in (d.get("numSms"), d.get("multiProcessorCount"))
                if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
            ),
            None,
        )
        memory = d.get("totalGlobalMem")
        memory = int(memory) if isinstance(memory, (int, float)) and not isinstance(memory, bool) else None
        name = d.get("name")
        peak = device_peak(None if name is None else str(name))
        return cls(
            id=int_or_none(d.get("id")),
            name=None if name is None else str(name),
            compute_major=int_or_none(d.get("computeMajor")),
            compute_minor=int_or_none(d.get("computeMinor")),
            sm_count=sms,
            memory_bytes=memory,
            peak_flops={k: v * 1e12 for k, v in peak.tflops.items()} if peak else None,
            properties=dict(d),
        )

    @property
    def compute_capability(self) -> float | None:
        """major.minor as a number (8.0, 9.0); None when the major version is not recorded."""
        if self.compute_major is None:
            return None
        return float(f"{self.compute_major}.{self.compute_minor or 0}")

    @property
    def is_rocm(self) -> bool:
        name = self.name or ""
        return "AMD" in name or "Radeon" in name or "Instinct" in name


@dataclass
class ProcessGroup:
    """A torch.distributed process group as Kineto's ``distributedInfo.pg_config`` records it."""

    name: str | None
    description: str | None = None
    backend: str | None = None
    size: int | None = None
    ranks: tuple[int, ...] | None = None
    properties: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_properties(cls, d: dict[str, Any]) -> "ProcessGroup":
        ranks = d.get("ranks")
        ranks = tuple(r for r in map(int_or_none, ranks) if r is not None) if isinstance(ranks, list) else None
        name, desc, backend = d.get("pg_name"), d.get("pg_desc"), d.get("backend_config")
        return cls(
            name=None if name is None else str(name),
            description=None if desc is None else str(desc),
            backend=None if backend is None else str(backend),
            size=int_or_none(d.get("pg_size")),
            ranks=ranks,
            properties=dict(d),
        )


@dataclass
class Versions:
    """Software versions as recorded (CUDA versions are CUPTI's integers, e.g. 12080 for 12.8)."""

    cuda_runtime: Any = None
    cuda_driver: Any = None
    cupti: Any = None
    nccl: Any = None
    torch: str | None = None  # written by tracedoc's capture; Kineto itself does not record it
    nsys: str | None = None
    nsys_export_schema: str | None = None


@dataclass
class TraceMeta:
    """Metadata of one rank's trace."""

    format: str | None = None  # "kineto" or "nsys"
    schema_version: Any = None  # Kineto schemaVersion
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None  # distributed backend as recorded ("nccl", "cpu:gloo,cuda:nccl")
    pid: int | None = None  # the OS process, when one export holds several (nsys)
    devices: list[Device] = field(default_factory=list)
    process_groups: list[ProcessGroup] | None = None  # None: not recorded
    versions: Versions = field(default_factory=Versions)
    time_origin_ns: int = 0  # Unix time of trace time 0: epoch_ns = time_origin_ns + t
    clock: str | None = None  # nsys: "target", "zero-based" or "unknown"
    capture_start_ns: int | None = None
    capture_end_ns: int | None = None
    display_time_unit: str | None = None
    trace_name: str | None = None
    record_shapes: Any = None
    events: int | None = None  # events in this trace
    file_events: int | None = None  # nsys: events in the whole export
    dropped_events: dict[str, int] | None = None
    truncated: str | None = None  # why the file ended early; None when complete
    sha256: str | None = None  # of the file on disk
    other_categories: dict[str, int] = field(default_factory=dict)  # X events tracedoc does not analyse
    process_names: dict[str, str] = field(default_factory=dict)
    thread_names: dict[str, str] = field(default_factory=dict)  # "pid/tid" -> name
    nvtx_domains: dict[str, str] = field(default_factory=dict)  # "pid/domain id" -> name
    step_range: str | None = None  # the range name chosen as the step (nsys)
    # Names (or string ids) of the step ranges; empty: the steps are ProfilerStep#N spans.
    step_names: list[str | int] = field(default_factory=list)
    dataloader_ranges: int | None = None  # nsys: input-pipeline NVTX ranges seen
    extra: dict[str, Any] = field(default_factory=dict)  # other scalar top-level values of the file

    def device(self, device_id: int) -> Device | None:
        """The described device with this id, if any (the last one, should the trace repeat an id)."""
        return next((d for d in reversed(self.devices) if d.id == device_id), None)


def torch_version(extra: dict[str, Any]) -> str | None:
    """The torch version among a file's extra top-level values (written by tracedoc's capture)."""
    return next((str(extra[k]) for k in TORCH_VERSION_KEYS if extra.get(k)), None)
