"""The system a trace ran on and what the trace holds: devices, job size, backend, health flags."""

from __future__ import annotations


from ...model.evidence import TableRows
from ...model.groups import distinct
from ...model.meta import TraceMeta
from ...model.trace import Trace
from ..host import cpu_ops as host
from .registry import Produced, analysis


# Kineto's category for CUPTI range-profiler records: per-kernel hardware counters (FLOP instruction
# counts and the like) measured by replaying each kernel, recorded instead of kernel activity.
PROFILER_RANGE_CATEGORY = "cuda_profiler_range"


@analysis(
    produces=(
        "gpu_count",
        "compute_capability",
        "tensor_core_capable",
        "world_size",
        "backend",
        "uses_data_parallel",
        "has_gpu_ops",
        "gpu_op_count",
        "has_host_events",
        "truncated",
        "profiler_range_events",
        "runtime_calls",
    )
)
def system(trace: Trace, inputs) -> Produced:
    g, meta = trace.gpu_ops, trace.meta
    gpu_devs = sorted(set(distinct(g["device"]).tolist())) if len(g) else []
    cc = compute_capability(meta, gpu_devs)
    rocm = any(d.is_rocm for d in meta.devices)
    if cc is None:
        capable = None
    elif rocm:
        capable = True if cc >= 9.0 else None
    else:
        capable = cc >= 7.0
    return Produced(
        metrics={
            "gpu_count": len(gpu_devs),
            "compute_capability": cc,
            "tensor_core_capable": capable,
            "world_size": meta.world_size,
            "backend": cuda_backend(meta.backend),
            "uses_data_parallel": host.uses_data_parallel(trace),
            "has_gpu_ops": bool(len(g)),
            "gpu_op_count": len(g),
            "has_host_events": bool(len(trace.cpu_ops) or len(trace.runtime)),
            "truncated": bool(meta.truncated),
            "profiler_range_events": int(meta.other_categories.get(PROFILER_RANGE_CATEGORY, 0)),
            "runtime_calls": len(trace.runtime),
        }
    )


@analysis(evidence=("contents",), provides=("warnings",))
def contents(trace: Trace, inputs) -> Produced:
    """Rows per table, event categories left unanalysed, and the reader's warnings."""
    other = trace.meta.other_categories
    rows = [TableRows(table=name, rows=n) for name, n in trace.summary().items()]
    rows += [TableRows(table=f"other: {cat}", rows=n) for cat, n in sorted(other.items())]
    warnings = list(trace.warnings)
    accel = {k: v for k, v in other.items() if k.startswith(("mtia", "xpu", "privateuse1"))}
    if accel and not len(trace.gpu_ops):
        warnings.append(
            f"{trace.source}: accelerator events of categories {', '.join(sorted(accel))} are present; "
            "tracedoc's GPU analyses cover CUDA and ROCm kernels, memcpy and memset"
        )
    return Produced(evidence={"contents": rows}, values={"warnings": warnings})


def cuda_backend(backend) -> str | None:
    """The backend used for CUDA tensors: ``"cpu:gloo,cuda:nccl"`` -> ``"nccl"``."""
    if not backend:
        return None
    text = str(backend)
    if ":" not in text:
        return text
    pairs = dict(p.split(":", 1) for p in text.split(",") if ":" in p)
    return pairs.get("cuda") or next(iter(pairs.values()), None)


def compute_capability(meta: TraceMeta, gpu_devs: list[int]) -> float | None:
    """major.minor of the first device that ran GPU ops (else the first described), as a number."""
    for dev in gpu_devs + [d.id for d in meta.devices]:
        d = meta.device(dev)
        if d is not None and d.compute_major is not None:
            return d.compute_capability
    return None
