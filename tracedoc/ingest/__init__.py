"""Readers: one per format, a sniffer that picks one, and a directory reader for per-rank files."""

from __future__ import annotations

import os
from typing import Callable

from ..errors import TraceError
from ..gcpause import with_paused_gc
from ..infile import not_regular, open_regular
from ..model.trace import Trace

SQLITE_MAGIC = b"SQLite format 3\x00"


def sniff(path: str) -> str:
    """Name the format of ``path``: ``kineto``, ``nsys`` or ``directory``; raise a TraceError for
    anything else (a pipe or a device is refused before a byte of it is read)."""
    if not os.path.exists(path):
        if not_regular(path) == "a symbolic link loop":
            raise TraceError(path, "is a symbolic link loop", None, "point tracedoc at the trace file itself")
        raise TraceError(path, "does not exist", None, "check the path (a trace file or a directory of rank traces)")
    if os.path.isdir(path):
        return "directory"
    lower = path.lower()
    if lower.endswith((".nsys-rep", ".qdrep")) and not_regular(path) is None:
        base = os.path.splitext(path)[0]
        raise TraceError(path, "is an Nsight Systems report, which tracedoc reads after export", None,
                         f"run `nsys export --type sqlite --output {base}.sqlite {path}` and pass the .sqlite file")
    with open_regular(path, TraceError, "trace file") as f:
        try:
            head = f.read(16)
        except OSError as exc:
            raise TraceError(path, "cannot be read", exc.strerror, "check its permissions") from None
    if head.startswith(SQLITE_MAGIC):
        return "nsys"
    if not head:
        raise TraceError(path, "is empty", "0 bytes", "capture the trace again")
    return "kineto"


@with_paused_gc
def load(path: str | os.PathLike, progress: Callable[[float], None] | None = None, workers: int | None = None,
         **options) -> Trace:
    """Read one trace file of any supported format.

    ``workers`` bounds the processes a large Kineto file is decoded with (default: CPU count);
    ``options`` are the nsys reader's (``step_range``, ``pid``, ...).
    """
    path = os.fspath(path)
    kind = sniff(path)
    if kind == "directory":
        raise TraceError(path, "is a directory", None, "use tracedoc.load_dir() or `tracedoc analyze DIR` for per-rank traces")
    if kind == "nsys":
        from .nsys import read_nsys

        return read_nsys(path, progress=progress, **options)
    from .kineto import read_kineto

    if options:
        raise TraceError(path, f"options {', '.join(sorted(options))} apply to nsys SQLite exports only", None,
                         "drop them for torch.profiler traces")
    return read_kineto(path, progress=progress, workers=workers)
