"""Writing an output file whole or not at all: a temporary file beside it, then a rename.

Every file tracedoc writes (reports, overlays, captured traces and their reports) goes through
``replace_atomically``, so a reader never sees half a file and concurrent writers leave one whole one.
"""

from __future__ import annotations

import gzip
import os
import tempfile
from collections.abc import Callable
from typing import BinaryIO

from .errors import TracedocError

TMP_PREFIX = ".tracedoc-tmp-"


def _umask() -> int:
    """The process umask, read without changing it (``os.umask`` sets it, which races other threads)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


FILE_MODE = 0o666 & ~_umask()  # what open() would give a new file; mkstemp's own is 0600


def replace_atomically(path: str, write: Callable[[BinaryIO], None], suffix: str = "") -> None:
    """Call ``write`` on a new temporary file in ``path``'s directory, then rename it to ``path``.

    The temporary file is removed when anything fails (the exception is raised again)."""
    fd, tmp = tempfile.mkstemp(prefix=TMP_PREFIX, suffix=suffix, dir=os.path.dirname(os.path.abspath(path)))
    try:
        os.fchmod(fd, FILE_MODE)
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_atomic(path: str, data: str | bytes, option: str | None = "--output") -> None:
    """Write ``data`` to ``path`` (gzip-compressed when the path ends in ``.gz``) whole or not at all; a
    clear error naming ``option`` (the command-line option that chose the path) when it cannot be written."""
    raw = data.encode("utf-8") if isinstance(data, str) else data

    def write(f: BinaryIO) -> None:
        if path.lower().endswith(".gz"):  # the gzip header names the file as it will be, not the temporary one
            with gzip.GzipFile(os.path.basename(path)[:-3], mode="wb", compresslevel=6, fileobj=f) as gz:
                gz.write(raw)
        else:
            f.write(raw)

    try:
        replace_atomically(path, write)
    except OSError as exc:
        raise TracedocError(path, "cannot be written", exc.strerror or str(exc),
                            f"choose another {option} path" if option else "check the directory and free space") from None
