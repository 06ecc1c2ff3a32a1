"""Reading an input file safely, for every reader: regular files only, bounded inflation, linear buffers.

- Only regular files are read. A named pipe, a device or a socket is refused at once, before a byte is
  read (opening a FIFO can wait forever for a writer; ``/dev/zero`` never ends). The file is opened
  without blocking and checked on the open descriptor, so a path swapped after the check is still caught.
- gzip is inflated in blocks, never more than a read asks for, and never past :func:`inflate_limit`:
  a limit derived from the compressed size (real traces and logs compress 10-50 times; deflate allows
  1,032) and the machine's memory. A "zip bomb" fails with a clear error after a bounded amount of work
  and memory, instead of filling the machine.
- A stream cut off mid-write keeps every byte before the cut and records why (``truncated_reason``);
  ``gzip.GzipFile`` would drop the last block and raise.
- Errors quote what they read only as a short, escaped excerpt (:func:`excerpt`), and never the content
  of a file reached through a symbolic link that leaves the link's own directory (``rank4.json ->
  /proc/self/environ``): such a file may hold anything, and its content would land in reports.

:class:`InputStream` is the streaming reader (traces are read a chunk at a time); :func:`read_input`
reads a whole file through it.
"""

from __future__ import annotations

import hashlib
import os
import queue
import stat
import threading
import zlib
from typing import Callable

from .errors import TraceError, TracedocError

try:  # ISA-L's inflate, zlib's interface: about 3x faster on trace JSON (14 -> 4.5 ms for 15 MB)
    from isal import isal_zlib as _inflate
except ImportError:  # a platform without its wheels
    _inflate = zlib  # type: ignore[assignment]
_INFLATE_ERRORS = (zlib.error, _inflate.error)

DEFLATE_MAX_RATIO = 1032  # deflate never inflates a byte to more than this many
# Real profiler traces and training logs inflate 10-20 times, JSON of long repeated stacks a few times
# more; 128 leaves a wide margin above any of them and stays far below what a crafted file reaches.
MAX_REAL_RATIO = 128
# Whatever its ratio, inflating this much costs little time or memory: small files are never refused.
INFLATE_FLOOR_BYTES = 64 << 20
EXCERPT_CHARS = 40

_SPECIAL_KINDS = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)


def kind_of_mode(mode: int) -> str | None:
    """None for a regular file, else what it is ("a named pipe (FIFO)", "a directory", ...)."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _SPECIAL_KINDS if test(mode)), "not a regular file")


def not_regular(path: str) -> str | None:
    """Why ``path`` cannot be read as a file (without opening it), or None for a regular file: "a named
    pipe (FIFO)", "a directory", "a symbolic link loop", "a broken symbolic link", "unreadable (...)"."""
    try:
        return kind_of_mode(os.stat(path).st_mode)
    except OSError as exc:
        if exc.errno == 40:  # ELOOP
            return "a symbolic link loop"
        if os.path.islink(path):
            return "a broken symbolic link"
        return f"unreadable ({exc.strerror})"


def leaves_directory(path: str) -> bool:
    """Whether ``path`` is, or passes through, a symbolic link to a file outside the link's directory."""
    try:
        if not os.path.islink(path):
            return False
        here = os.path.realpath(os.path.dirname(os.path.abspath(path)))
        target = os.path.realpath(path)
    except (OSError, ValueError):
        return True
    return os.path.commonpath([here, target]) != here


def excerpt(data: bytes | str, hidden: bool = False, chars: int = EXCERPT_CHARS) -> str:
    """What an error may show of the content it read: at most ``chars`` characters, escaped as a Python
    literal (control and bidirectional characters become escapes); nothing of a hidden file."""
    if hidden:
        return "content not shown: the file is a link to a file outside its directory"
    text = data[: chars * 4].decode("utf-8", "replace") if isinstance(data, (bytes, bytearray, memoryview)) else data
    short = text[:chars]
    return repr(short) + ("..." if len(text) > chars else "")


def memory_bytes() -> int | None:
    """The machine's physical memory, when the platform says."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None


def inflate_limit(compressed_bytes: int, memory: int | None = None) -> int:
    """The most bytes a gzip file of ``compressed_bytes`` may inflate to: ``MAX_REAL_RATIO`` times its
    size, at most the machine's memory (a reader keeps columns of about the JSON's size), and never less
    than ``INFLATE_FLOOR_BYTES``."""
    memory = memory_bytes() if memory is None else memory
    limit = compressed_bytes * MAX_REAL_RATIO
    if memory:
        limit = min(limit, memory)
    return max(INFLATE_FLOOR_BYTES, limit)


def open_regular(path: str, error: type[TracedocError] = TraceError, what: str = "file"):
    """Open ``path`` for binary reading (unbuffered), refusing anything but a regular file at once."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        why = not_regular(path)
        if why and why.startswith("a "):
            raise _refused(path, why, error, what) from None
        raise error(path, "cannot be opened", exc.strerror, "check the path and its permissions") from None
    try:
        kind = kind_of_mode(os.fstat(fd).st_mode)
        if kind is not None:
            raise _refused(path, kind, error, what)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb", buffering=0)
    except BaseException:
        os.close(fd)
        raise


def _refused(path: str, kind: str, error: type[TracedocError], what: str) -> TracedocError:
    if kind == "a directory":
        return error(path, f"is a directory, not a {what}", None, "pass the file itself")
    return error(
        path,
        f"is {kind}, not a {what}",
        None,
        "copy what it holds to a regular file first (e.g. `cat PIPE > copy.json`) and pass that file",
    )


# From this size on disk a reader that decodes in threads hashes the file in a thread of its own too. SHA-256
# runs at about 0.7 GB/s in hashlib, most of the reading thread's own time on a large trace (1 GiB: 1.4 s);
# hashlib lets other threads run while it hashes a block. Below ~50 MB measured no gain.
HASH_THREAD_MIN_BYTES = 64 << 20


class _Hasher:
    """Blocks handed over in order, hashed in a thread; at most ``MAX_QUEUED`` wait, so a slow hash
    holds the reader back rather than hold the file's bytes."""

    MAX_QUEUED = 8

    def __init__(self, sha) -> None:
        self.sha = sha
        self.queue: queue.Queue = queue.Queue(self.MAX_QUEUED)
        self.failed: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="tracedoc-hash", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while (data := self.queue.get()) is not None:
            if self.failed is None:
                try:
                    self.sha.update(data)
                except BaseException as exc:  # noqa: BLE001 - raised again in the reading thread
                    self.failed = exc

    def update(self, data: bytes) -> None:
        self.queue.put(data)

    def finish(self) -> None:
        """Wait until every block handed over is hashed; the thread ends."""
        self.queue.put(None)
        self.thread.join()
        if self.failed is not None:
            raise self.failed


class InputStream:
    """A byte stream over a plain or gzip file that records truncation instead of raising.

    gzip is inflated in blocks so that a stream cut off mid-write still yields every byte before the
    cut, several members are read one after the other (``member_starts`` says where each began), zero
    padding after the last is skipped, and inflating past ``limit`` (default :func:`inflate_limit`)
    raises ``error``. The SHA-256 of the bytes on disk is computed as they stream past.
    """

    _BLOCK = 1 << 20

    def __init__(
        self, path: str, error: type[TracedocError] = TraceError, what: str = "file", limit: int | None = None
    ):
        self.path = path
        self.error = error
        self.what = what
        self.truncated_reason: str | None = None
        self.offset = 0  # bytes handed out so far (inflated bytes of a gzip file)
        self._f = open_regular(path, error, what)
        self.size = os.fstat(self._f.fileno()).st_size
        self.hides_content = leaves_directory(path)
        self.gzipped = self._f.read(2) == b"\x1f\x8b"
        self.limit = (inflate_limit(self.size) if limit is None else limit) if self.gzipped else None
        self._ratio_rule = limit is None  # a limit the caller gives replaces the ratio rule
        # A gzip member ends with its data's length mod 4 GiB: the inflated size of a file of one member,
        # read as a hint for choosing how to decode (a file of several members shows its last one's).
        self.trailer_size = 0
        if self.gzipped and self.size >= 18:
            self._f.seek(self.size - 4)
            size = int.from_bytes(self._f.read(4), "little")
            if size <= self.size * DEFLATE_MAX_RATIO:  # else not a trailer (a file cut off while written)
                self.trailer_size = size
        # A trailer above the limit is no evidence of a bomb: a file cut off mid-write ends in compressed
        # data whose last four bytes read as any number. Only inflating past the limit is (``_check_ratio``).
        self._f.seek(0)
        self._z = _inflate.decompressobj(16 + zlib.MAX_WBITS) if self.gzipped else None
        self._zin = b""  # compressed bytes read but not yet inflated
        self._zfull = False  # the last inflate stopped at its output limit
        self._eof = False
        self.forced_workers: int | None = None
        self.member_starts: list[int] = []  # decompressed offsets where a second, third... gzip member begins
        self._sha = hashlib.sha256()
        self._hasher: _Hasher | None = None
        self._update = self._sha.update

    def excerpt(self, data: bytes | str, chars: int = EXCERPT_CHARS) -> str:
        """:func:`excerpt` of what this file holds (nothing, when it is a link that leaves its directory)."""
        return excerpt(data, self.hides_content, chars)

    def hash_in_thread(self) -> None:
        """From here on, hash the bytes read in a thread of its own while this one goes on (a file of
        ``HASH_THREAD_MIN_BYTES`` or more; smaller ones are hashed as they are read). For readers that
        already run threads, never before a fork: ``sha256()`` and ``close()`` end the thread."""
        if self._hasher is None and self.size >= HASH_THREAD_MIN_BYTES:
            self._hasher = _Hasher(self._sha)
            self._update = self._hasher.update

    def sha256(self) -> str | None:
        """SHA-256 of the file, once every byte of it has been read (None before)."""
        if not self._eof:
            return None
        while True:  # whatever follows a corrupt gzip member
            rest = self._f.read(self._BLOCK)
            if not rest:
                break
            self._update(rest)
        self._end_hasher()
        return self._sha.hexdigest()

    def _end_hasher(self) -> None:
        if self._hasher is not None:
            hasher, self._hasher, self._update = self._hasher, None, self._sha.update
            hasher.finish()

    def read(self, n: int) -> bytes:
        """Up to ``n`` bytes (fewer only at the end of the data); b"" at the end."""
        if not self.gzipped:
            data = self._f.read(n)
            self.offset += len(data)
            self._update(data)
            if not data:
                self._eof = True
            return data
        out: list[bytes] = []
        have = 0
        while have < n and not self._eof:
            if not self._zin and not self._zfull:
                block = self._f.read(self._BLOCK)
                self._update(block)
                if not block:
                    self._eof = True
                    if not self._z.eof:
                        self.truncated_reason = "the gzip stream ends early (the file was cut off while being written)"
                    break
                self._zin = block
            try:
                if self._z.eof:  # a member ended: what follows is zero padding or another member
                    if not self._zin.strip(b"\0"):  # padding after the last member (tape/block devices)
                        self._zin = b""
                        continue
                    self.member_starts.append(self.offset + have)
                    self._z = _inflate.decompressobj(16 + zlib.MAX_WBITS)
                # At most the bytes asked for: a 1 MB block of a highly compressed trace inflates to 10-20
                # MB, which would otherwise be produced at once and copied again on every later read.
                piece = self._z.decompress(self._zin, n - have)
                self._zin = self._z.unused_data if self._z.eof else self._z.unconsumed_tail
                # Output stopped at the limit: zlib may still hold some of it even with no input left.
                self._zfull = len(piece) == n - have and not self._z.eof
            except _INFLATE_ERRORS as exc:
                self._eof = True
                if self.offset == 0 and have == 0:
                    raise self.error(
                        self.path,
                        "is not a readable gzip file",
                        str(exc),
                        "re-copy the file, or check it with `gzip -t`",
                    ) from None
                self.truncated_reason = f"the gzip data is corrupt after {self.offset + have:,} bytes ({exc})"
                break
            if piece:
                out.append(piece)
                have += len(piece)
                self._check_ratio(self.offset + have)
        data = out[0] if len(out) == 1 else b"".join(out)
        self.offset += len(data)
        return data

    def _check_ratio(self, inflated: int) -> None:
        """Past the floor, the bytes inflated so far may be at most ``MAX_REAL_RATIO`` times the compressed
        bytes consumed so far (and never past ``limit``): a bomb fails after the floor, not at the limit."""
        if inflated > self.limit:
            raise self._bomb()
        if not self._ratio_rule or inflated <= INFLATE_FLOOR_BYTES:
            return
        if inflated > MAX_REAL_RATIO * (self._f.tell() - len(self._zin)):
            raise self._bomb()

    def _bomb(self) -> TracedocError:
        return self.error(
            self.path,
            f"inflates past {self.limit:,} bytes, more than a real {self.what} of {self.size:,} compressed bytes does",
            f"over {self.limit // max(1, self.size):,} times "
            "its compressed size: a gzip bomb, or not the file its name says",
            "if the file is genuine, decompress it yourself (`gunzip -k FILE`) and pass the result",
        )

    def fraction(self) -> float:
        """How far through the file on disk we are (compressed bytes for gzip)."""
        try:
            return min(1.0, self._f.tell() / max(1, self.size))
        except (OSError, ValueError):
            return 0.0

    @property
    def closed(self) -> bool:
        return self._f.closed

    def close(self) -> None:
        try:
            self._end_hasher()
        finally:
            self._f.close()

    def __enter__(self) -> "InputStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_input(
    path: str,
    error: type[TracedocError] = TraceError,
    what: str = "file",
    *,
    limit: int | None = None,
    max_bytes: int | None = None,
    on_truncated: Callable[[str], None] | None = None,
) -> bytes:
    """The whole content of a regular file, inflated when it is gzip (bounded as :class:`InputStream`
    says), read in blocks joined once (linear in its size). ``max_bytes`` also bounds a plain file.
    A gzip stream cut off or corrupt part way raises ``error``, unless ``on_truncated`` takes the reason
    (the bytes before the damage are returned)."""
    with InputStream(path, error, what, limit) as src:
        parts: list[bytes] = []
        have = 0
        while True:
            block = src.read(1 << 22)
            if not block:
                break
            parts.append(block)
            have += len(block)
            if max_bytes is not None and have > max_bytes:
                raise error(
                    path,
                    f"is larger than {max_bytes:,} bytes, more than a {what} holds",
                    None,
                    "check that this is the right file",
                )
        if src.truncated_reason:
            if on_truncated is None:
                raise error(path, f"is a damaged {what}", src.truncated_reason, "copy the file again")
            on_truncated(src.truncated_reason)
        return b"".join(parts)
