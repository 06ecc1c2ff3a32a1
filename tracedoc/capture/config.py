"""What a capture session is asked to do (``CaptureConfig``) and where it runs (rank, world size, job tag)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass


@dataclass
class CaptureConfig:
    outdir: str = "tracedoc_traces"
    skip_first: int = 5
    warmup: int = 1
    active: int = 3
    initial: bool = True  # capture once on schedule; False: only on trigger
    activities: tuple[str, ...] | None = None  # None: cpu, plus cuda when available
    # Shapes give FLOPs and MFU; their cost on the tiny CPU loop was within the noise (+-4% CPU time per
    # step, benchmarks/bench_shapes_overhead.py).
    record_shapes: bool = True
    # torch's own FLOP estimates cost +11-15% there, and torch 2.13 does not write them into the trace
    # (tracedoc counts FLOPs from the shapes): opt-in.
    with_flops: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    trigger_file: str | None = None  # None: <outdir>/TRIGGER; "" disables the file trigger
    signal: bool = True  # SIGUSR2 triggers a capture
    poll_interval_s: float = 0.1
    monitor: bool = True
    monitor_interval_s: float = 10.0
    batch_size: int | None = None
    report: bool = True
    dist_timeout_s: float = 300.0
    wait_reports: bool = True  # at close, wait for the analyses to finish

    def validate(self) -> None:
        for name in ("skip_first", "warmup"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.active < 1:
            raise ValueError(f"active must be >= 1, got {self.active}")
        if self.batch_size is not None and self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")


def _env_int(name: str) -> int | None:
    v = os.environ.get(name)
    try:
        return int(v) if v not in (None, "") else None
    except ValueError:
        return None


def rank_and_world() -> tuple[int, int]:
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    if rank is None or world is None:
        dist = sys.modules.get("torch.distributed")
        try:
            if dist is not None and dist.is_available() and dist.is_initialized():
                return dist.get_rank(), dist.get_world_size()
        except Exception:
            pass
    return (rank or 0), (world or 1)


def run_tag() -> str:
    """A name every rank of one distributed job agrees on without communicating."""
    for name in ("TRACEDOC_RUN_ID", "TORCHELASTIC_RUN_ID"):
        v = os.environ.get(name, "")
        if v and v.lower() != "none":
            return "".join(c if c.isalnum() or c in "-_." else "_" for c in v)[:64]
    # torchrun without a rendezvous id: local ranks share the agent process as parent. Multi-node jobs
    # without an id should set TRACEDOC_RUN_ID (documented in the CLI help).
    return f"{os.environ.get('MASTER_PORT', 'x')}-{os.getppid()}"
