"""Bounded reading of a training log or a config file, through ``tracedoc.infile`` (the one place every
reader opens its input: regular files only, refused at once otherwise; gzip inflated in blocks within
``infile.inflate_limit`` of its compressed size and the machine's memory, a clear error past it).

What logs add: a log is read into memory whole (its columns are built from every line), so a plain file
larger than the memory budget is refused by its size before a byte is read, and one within it is read
in one read (no blocks to join). The budget is an eighth of the machine's memory (or of the
address-space limit, when one is set): reading, decoding to text, splitting into lines and building
columns take several times the file's size at their peak. A ``.gz`` log cut off mid-write keeps what
was written before the cut (the readers then see a cut-off last line), said in ``truncated``.
"""

from __future__ import annotations

import os

from .. import infile
from .errors import LogError

MEMORY_SHARE = 8  # a log may take this fraction (1/8) of the machine's memory
CONFIG_MAX_BYTES = 64 * 2**20  # no real config file comes near this


def memory_budget() -> int:
    """Bytes one log may occupy in memory on this machine."""
    total = infile.memory_bytes() or 16 * 2**30
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft not in (resource.RLIM_INFINITY, -1) and soft > 0:
            total = min(total, soft)
    except (ImportError, ValueError, OSError):
        pass
    return max(64 * 2**20, total // MEMORY_SHARE)


def _size_text(n: float) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} bytes"


def require_regular_file(path: str, what: str = "log") -> int:
    """The size of ``path``; a LogError at once for pipes, devices, sockets, directories and missing files."""
    why = infile.not_regular(path)
    if why is not None:
        if why.startswith("unreadable"):
            raise LogError(
                path,
                "cannot be read",
                why[len("unreadable (") : -1] if why.endswith(")") else why,
                f"check the {what} path and its permissions",
            )
        raise LogError(
            path, f"is {why}, not a {what} file", None, f"save the {what} to a file first and pass that file"
        )
    return os.stat(path).st_size


def read_bounded(
    path: str, what: str = "log", max_bytes: int | None = None, truncated: list[str] | None = None
) -> bytes:
    """The content of a log or config file, gzip inflated, within the bounds above (LogError past them).
    ``truncated`` collects why a gzip stream stopped early, when it did."""
    size = require_regular_file(path, what)
    budget = memory_budget() if max_bytes is None else max_bytes
    with infile.open_regular(path, LogError, f"{what} file") as fh:
        gzipped = fh.read(2) == b"\x1f\x8b"
        if not gzipped:
            if size > budget:
                raise LogError(
                    path,
                    f"is {_size_text(size)}, more than tracedoc reads into memory as one {what} "
                    f"on this machine ({_size_text(budget)})",
                    None,
                    f"pass a shorter excerpt of the {what} (e.g. `tail -n 1000000`)",
                )
            fh.seek(0)
            data = fh.read()  # one read sized from the file's size, checked against the budget above
            if len(data) > budget:  # the file grew while being read
                raise LogError(
                    path,
                    f"grew past {_size_text(budget)} while being read",
                    None,
                    f"copy the {what} once it is complete and pass the copy",
                )
            return data
    reasons = truncated if truncated is not None else []
    limit = min(infile.inflate_limit(size), max(budget, infile.INFLATE_FLOOR_BYTES))
    return infile.read_input(path, LogError, f"{what} file", limit=limit, on_truncated=reasons.append)
