"""Readers: one per format, a sniffer that picks one, and a directory reader for per-rank files."""

from __future__ import annotations

import os
import re
from typing import Callable

from ..errors import TraceError, UsageError, warn
from ..gcpause import with_trace_settings
from ..infile import not_regular, open_regular
from ..model.trace import Trace

SQLITE_MAGIC = b"SQLite format 3\x00"


def sniff(path: str) -> str:
    """Name the format of ``path``: ``kineto``, ``nsys`` or ``directory``; raise a TraceError for
    anything else (a pipe or a device is refused before a byte of it is read). Each input is sniffed
    once: the stages after it take the name (``kind``) instead of opening the file again."""
    if not os.path.exists(path):
        if not_regular(path) == "a symbolic link loop":
            raise TraceError(path, "is a symbolic link loop", None, "point tracedoc at the trace file itself")
        raise TraceError(path, "does not exist", None, "check the path (a trace file or a directory of rank traces)")
    if os.path.isdir(path):
        return "directory"
    lower = path.lower()
    if lower.endswith((".nsys-rep", ".qdrep")) and not_regular(path) is None:
        base = os.path.splitext(path)[0]
        raise TraceError(
            path,
            "is an Nsight Systems report, which tracedoc reads after export",
            None,
            f"run `nsys export --type sqlite --output {base}.sqlite {path}` and pass the .sqlite file",
        )
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


@with_trace_settings
def load(
    path: str | os.PathLike,
    progress: Callable[[float], None] | None = None,
    workers: int | None = None,
    *,
    kind: str | None = None,
    **options,
) -> Trace:
    """Read one trace file of any supported format.

    ``workers`` bounds the processes a large Kineto file is decoded with (default: CPU count);
    ``steps`` (``"A:B"``) reads a slice of a Kineto trace, ``ProfilerStep#A`` to ``#B``; the other
    ``options`` are the nsys reader's (``step_range``, ``pid``, ...). ``kind``: the file's format when the
    caller has sniffed it already (``sniff``).
    """
    path = os.fspath(path)
    kind = kind or sniff(path)
    if kind == "directory":
        raise TraceError(
            path, "is a directory", None, "use tracedoc.load_dir() or `tracedoc analyze DIR` for per-rank traces"
        )
    steps = options.pop("steps", None)
    if kind == "nsys":
        from .nsys import read_nsys

        check_kineto_options(path, steps)
        return read_nsys(path, progress=progress, **options)
    from .kineto import read_kineto

    check_nsys_options(path, options)
    return read_kineto(path, progress=progress, workers=workers, steps=steps)


def check_kineto_options(path: str, steps) -> None:
    """``--steps`` given for an nsys export: a usage error (its steps are NVTX ranges, chosen by
    ``--step-range``)."""
    if steps is not None:
        raise UsageError(
            path, "--steps applies to torch.profiler traces only", None, "drop the option for nsys exports"
        )


def check_nsys_options(path: str, options: dict) -> None:
    """The nsys reader's options (``step_range``, ``pid``) given for a file that is not an nsys export: a
    usage error naming them as the command line does."""
    if options:
        flags = ", ".join("--" + k.replace("_", "-") for k in sorted(options))
        raise UsageError(
            path,
            f"{flags} {'applies' if len(options) == 1 else 'apply'} to nsys SQLite exports only",
            None,
            "drop the option for torch.profiler traces",
        )


_TRACE_FILE_RE = re.compile(r"\.(json|json\.gz|sqlite|sqlite3)$", re.I)


def is_trace_name(name: str) -> bool:
    """Whether a directory's entry named ``name`` is read as a rank trace: ``.json``, ``.json.gz`` or
    ``.sqlite``, not tracedoc's own report (``.report.json``) nor a hidden (temporary) file."""
    return bool(_TRACE_FILE_RE.search(name)) and not name.endswith(".report.json") and not name.startswith(".")


def rank_files(directory: str, *, required: bool = True) -> list[str]:
    """The trace files of a per-rank directory (paths, sorted by name): regular ``.json``, ``.json.gz``
    and ``.sqlite`` files, not tracedoc's own reports nor hidden (temporary) files. An entry named like a
    trace that is not a regular file (a pipe, a directory, a link loop or a broken link) is skipped,
    with a warning when ``required``. An empty or unreadable directory is an error when ``required``,
    else it has none."""
    try:
        names = sorted(os.listdir(directory))
    except OSError as exc:
        if not required:
            return []
        raise TraceError(directory, "cannot be listed", exc.strerror, "check the path and its permissions") from None
    files = []
    for n in names:
        if not is_trace_name(n):
            continue
        p = os.path.join(directory, n)
        why = not_regular(p)
        if why is None:
            files.append(p)
        elif required:
            warn(p, f"skipped: it is {why.replace('unreadable', 'a file that cannot be read')}, not a trace file")
    if not files and required:
        raise TraceError(
            directory,
            "holds no trace files",
            f"{len(names)} entries, none a regular file ending in .json, .json.gz or .sqlite",
            "point tracedoc at the directory torch.profiler wrote its rank traces to",
        )
    return files
