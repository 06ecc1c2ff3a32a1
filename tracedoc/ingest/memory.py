"""Will a trace fit in memory? Estimated before a byte of its events is decoded, refused in one line if not.

On Linux a process that runs out of memory is ended by the kernel's OOM killer with SIGKILL: no
exception, no message. The only way to say something is to check before allocating, so a trace's
need is estimated from its size (:func:`trace_need`) and compared with what is free
(:func:`free_memory`): ``MemAvailable`` of ``/proc/meminfo`` (what can be used without swapping)
and, where the process runs under a cgroup memory limit (a container, a job scheduler's slot), that
limit less what the cgroup already uses. Where neither can be read (macOS, Windows) nothing is refused.

``TRACEDOC_MEMORY_CHECK=off`` skips the check (for a machine whose memory the estimate misjudges).
"""

from __future__ import annotations

import os
from typing import NamedTuple

from ..errors import TraceError

# What analysing a trace holds beyond the interpreter, per byte of its JSON: the columns, the string
# table and the analyses' working arrays, the critical path's the largest. Measured peaks above the
# interpreter (38 MiB) with every analysis in the one process, cpu_ops shape, whose columns are the
# largest per byte: 0.84x the JSON at 200 MB and 0.82x at 1 GiB (the load alone: 0.38x and 0.33x);
# 0.95 leaves a margin. The critical path runs in a forked child beside the other analyses only when
# the memory free at that moment holds the child as well (``analyses.core.offload.child_fits``), so what a
# trace needs is what it needs without one (benchmarks/README.md, Memory).
NEED_PER_JSON_BYTE = 0.95
# A decode worker holds a few chunks, their decoded events and their columns (measured 20-30 MB of its
# own; the analyses that follow need more than the load, so this matters only with many workers).
NEED_PER_WORKER = 64 << 20
# Reading a slice (``--steps``) holds the columns of the slice only; what it needs beyond the workers
# is not known before reading, so only this much is asked for.
NEED_SLICE = 128 << 20
# A gzip file's trailer holds its JSON size mod 4 GiB; trace JSON compresses 10-50 times, so a
# trailer saying less than this many times the compressed size has wrapped (or is no trailer).
MIN_GZIP_RATIO = 4
GUESS_GZIP_RATIO = 10
UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as a huge number
_OFF = ("off", "0", "no", "false")


class Free(NamedTuple):
    """Bytes free for this process (None: not known) and where the number comes from."""

    bytes: int | None
    sources: list[str]


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    if text == "max":
        return UNLIMITED
    try:
        return int(text)
    except ValueError:
        return None


def mem_available(meminfo: str = "/proc/meminfo") -> int | None:
    """``MemAvailable`` in bytes, or None where the file is missing (not Linux) or lacks it."""
    try:
        with open(meminfo) as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def cgroup_headroom(proc_cgroup: str = "/proc/self/cgroup", root: str = "/sys/fs/cgroup") -> tuple[int, int] | None:
    """(limit, limit - usage) of the tightest cgroup memory limit over this process's cgroup and its
    ancestors (cgroup v2 ``memory.max``, v1 ``memory.limit_in_bytes``); None where no limit is set."""
    try:
        with open(proc_cgroup) as f:
            lines = f.read().splitlines()
    except OSError:
        return None
    found: list[tuple[int, int]] = []
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, rel = parts
        if controllers == "":  # v2: one unified hierarchy
            base, files = root, ("memory.max", "memory.current")
        elif "memory" in controllers.split(","):
            base, files = os.path.join(root, "memory"), ("memory.limit_in_bytes", "memory.usage_in_bytes")
        else:
            continue
        rel = rel.strip("/")
        dirs = []
        while True:  # the cgroup and every ancestor: a limit set anywhere above applies too
            dirs.append(os.path.join(base, rel) if rel else base)
            if not rel:
                break
            rel = os.path.dirname(rel)
        for d in dirs:
            limit, used = _read_int(os.path.join(d, files[0])), _read_int(os.path.join(d, files[1]))
            if limit is not None and used is not None and limit < UNLIMITED:
                found.append((limit, max(0, limit - used)))
    return min(found, key=lambda x: x[1]) if found else None


def free_memory() -> Free:
    """What this process may still allocate: the smaller of ``MemAvailable`` and the cgroup's headroom."""
    avail = mem_available()
    cg = cgroup_headroom()
    sources = []
    if avail is not None:
        sources.append(f"MemAvailable {_size(avail)}")
    if cg is not None:
        sources.append(f"cgroup memory.max {_size(cg[0])}, {_size(cg[1])} of it unused")
    known = [x for x in (avail, cg[1] if cg else None) if x is not None]
    return Free(min(known) if known else None, sources)


def json_bytes(size: int, gzipped: bool, trailer_size: int) -> int:
    """The JSON a file holds: its size, or for gzip the trailer's size where it is plausible, else a
    guess of ``GUESS_GZIP_RATIO`` times the compressed size."""
    if not gzipped:
        return size
    if trailer_size >= MIN_GZIP_RATIO * size:
        return trailer_size
    return GUESS_GZIP_RATIO * size


def trace_need(json_size: int, workers: int, sliced: bool = False) -> int:
    """Bytes analysing a trace of ``json_size`` bytes of JSON needs beyond the loaded interpreter."""
    extra = NEED_PER_WORKER * workers if workers > 1 else 0
    if sliced:
        return NEED_SLICE + extra
    return int(NEED_PER_JSON_BYTE * json_size) + extra


def check_fits(path: str, json_size: int, workers: int, sliced: bool = False, free: Free | None = None) -> None:
    """Raise a one-line ``TraceError`` when the trace will not fit in the memory free now."""
    if os.environ.get("TRACEDOC_MEMORY_CHECK", "").strip().lower() in _OFF:
        return
    free = free_memory() if free is None else free
    if free.bytes is None:
        return
    need = trace_need(json_size, workers, sliced)
    if need <= free.bytes:
        return
    what = "a slice of it" if sliced else f"its {_size(json_size)} of JSON"
    raise TraceError(
        path,
        f"needs about {_size(need)} of memory to analyse {what}, more than is free ({_size(free.bytes)})",
        "; ".join(free.sources),
        "analyse a slice of its steps with `--steps A:B` (e.g. --steps 0:2), free memory, or use a "
        "machine with more (TRACEDOC_MEMORY_CHECK=off skips this check)",
    )


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n / 1024:,.0f} KiB"
