"""Writing an output file whole or not at all: a temporary file beside it, then a rename."""

from __future__ import annotations

import gzip
import os

from .errors import TracedocError


def write_atomic(path: str, data: str | bytes, option: str = "--output") -> None:
    """Write ``data`` to ``path`` (gzip-compressed when the path ends in ``.gz``) through a temporary
    file and a rename, so a reader never sees half a file; a clear error naming ``option`` when it
    cannot be written."""
    tmp = f"{path}.tmp-{os.getpid()}"
    raw = data.encode("utf-8") if isinstance(data, str) else data
    try:
        if path.lower().endswith(".gz"):  # the gzip header names the file as it will be, not the temporary one
            with open(tmp, "wb") as out, gzip.GzipFile(os.path.basename(path)[:-3], "wb", 6, out) as f:
                f.write(raw)
        else:
            with open(tmp, "wb") as f:
                f.write(raw)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise TracedocError(path, "cannot be written", exc.strerror, f"choose another {option} path") from None
