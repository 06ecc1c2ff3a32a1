"""Bounded reading of a training log or a config file: regular files only, a size the machine can hold,
gzip inflated in blocks up to a limit.

A log is read into memory whole (its columns are built from every line), so what may be read is
bounded before the first byte: a pipe or a device (``/dev/zero``) is refused at once, a plain file
larger than the memory budget is refused with its size, and a ``.gz`` file is inflated block by block
into a list of pieces (joined once, so the work is linear in the output) and refused as soon as the
output passes the smaller of ``GZIP_MAX_RATIO`` x its compressed size and the memory budget.

The memory budget is an eighth of the machine's memory (or of the address-space limit, when one is
set): reading, decoding to text, splitting into lines and building columns take several times the
file's size at their peak.
"""

from __future__ import annotations

import os
import stat
import zlib

from .errors import LogError

try:  # ISA-L's inflate, zlib's interface (the trace reader uses it too)
    from isal import isal_zlib as _inflate
except ImportError:  # a platform without its wheels
    _inflate = zlib  # type: ignore[assignment]
_INFLATE_ERRORS = (zlib.error, _inflate.error)

GZIP_MAX_RATIO = 250  # text logs compress 5-20x, very repetitive ones up to ~100x; deflate's ceiling is 1032x
GZIP_MIN_LIMIT = 64 * 2**20  # a small .gz may always inflate to this much
MEMORY_SHARE = 8  # a log may take this fraction (1/8) of the machine's memory
CONFIG_MAX_BYTES = 64 * 2**20  # no real config file comes near this
_BLOCK = 1 << 20

_SPECIAL_KINDS = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
                  (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def memory_budget() -> int:
    """Bytes one log may occupy in memory on this machine."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        total = 16 * 2**30
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
    """The size of ``path``; a LogError at once for pipes, devices, sockets and missing files."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise LogError(path, "cannot be read", exc.strerror, f"check the {what} path and its permissions") from None
    if stat.S_ISREG(st.st_mode):
        return st.st_size
    kind = next((name for test, name in _SPECIAL_KINDS if test(st.st_mode)), "not a regular file")
    raise LogError(path, f"is {kind}, not a {what} file", None,
                   f"save the {what} to a file first and pass that file")


def gzip_limit(compressed: int, budget: int | None = None) -> int:
    """How many bytes a .gz file of ``compressed`` bytes may inflate to."""
    budget = memory_budget() if budget is None else budget
    return min(budget, max(GZIP_MIN_LIMIT, GZIP_MAX_RATIO * compressed))


def read_bounded(path: str, what: str = "log", max_bytes: int | None = None) -> bytes:
    """The content of a log or config file, gzip inflated, within the limits above (LogError past them)."""
    size = require_regular_file(path, what)
    budget = memory_budget() if max_bytes is None else max_bytes
    try:
        fh = open(path, "rb", buffering=0)
    except OSError as exc:
        raise LogError(path, "cannot be read", exc.strerror, f"check the {what} path and its permissions") from None
    with fh:
        magic = fh.read(2)
        if magic != b"\x1f\x8b":
            if size > budget:
                raise LogError(path, f"is {_size_text(size)}, more than tracedoc reads into memory as one {what} "
                               f"on this machine ({_size_text(budget)})", None,
                               f"pass a shorter excerpt of the {what} (e.g. `tail -n 1000000`)")
            fh.seek(0)
            data = fh.read()  # one read sized from the file's size, checked against the budget above
            if len(data) > budget:  # the file grew while being read
                raise LogError(path, f"grew past {_size_text(budget)} while being read", None,
                               f"copy the {what} once it is complete and pass the copy")
            return data
        return _inflate_bounded(fh, magic, size, gzip_limit(size, budget), path, what)


def _inflate_bounded(fh, head: bytes, size: int, limit: int, path: str, what: str) -> bytes:
    z = _inflate.decompressobj(16 + zlib.MAX_WBITS)
    pieces: list[bytes] = []
    have = 0
    pending = head
    while True:
        if not pending:
            pending = fh.read(_BLOCK)
            if not pending:
                break  # a stream cut off mid-write keeps what was inflated; the readers see a cut-off last line
        try:
            if z.eof:  # another gzip member, or zero padding
                if not pending.strip(b"\0"):
                    pending = b""
                    continue
                z = _inflate.decompressobj(16 + zlib.MAX_WBITS)
            piece = z.decompress(pending, _BLOCK)
            pending = z.unused_data if z.eof else z.unconsumed_tail
        except _INFLATE_ERRORS as exc:
            if not pieces:
                raise LogError(path, "is a damaged gzip file", str(exc), f"re-copy the {what}") from None
            break  # corrupt after some good output: keep that
        have += len(piece)
        if have > limit:
            why = (f"{GZIP_MAX_RATIO}x its compressed size, far beyond what text logs compress to (a gzip bomb?)"
                   if limit > GZIP_MIN_LIMIT and limit == GZIP_MAX_RATIO * size else
                   "the limit for one .gz file of this size" if limit == GZIP_MIN_LIMIT else
                   "as much as tracedoc reads into memory as one file on this machine")
            raise LogError(path, f"inflates to more than {_size_text(limit)} from {_size_text(size)} of gzip, {why}",
                           None, f"if it is a real {what}, decompress it yourself (gunzip) and pass a shorter "
                           "excerpt if it is still too large")
        if piece:
            pieces.append(piece)
    return b"".join(pieces)
