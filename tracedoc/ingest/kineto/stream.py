"""Streaming a Kineto file in chunks: cut at event boundaries, decode here or in worker processes."""

from __future__ import annotations

import os
import re
import threading
from typing import Any, Callable

import msgspec

from ...errors import TraceError, UsageError
from ...model.trace import Trace
from .columns import _Reader
from .ahead import CutAhead
from .ahead import fill as _fill
from .cuts import DAMAGED, cut_and_decode, cuts_backward, find_cut
from .decode import _decode_top, decode_metadata
from .metadata import _finish
from .rows import _load_scan, decode_piece
from .threaded import read_threaded
from .salvage import _decode_tail, _read_whole
from .source import _Source, concatenated_members
from .window import Steps, Window, find_window, parse_steps
from ..memory import check_fits, json_bytes

# Events are decoded a chunk at a time: small chunks keep the decoded objects of one chunk in cache
# and let the memory they take be reused by the next (16 MB chunks were a third slower than 2 MB ones
# on a 50 MB trace, and held several times the memory).
CHUNK_BYTES = 2 * 1024 * 1024
# A file of less JSON than this is read in chunks of SMALL_CHUNK_BYTES: the scanning threads start on
# the first chunk as soon as it is read, and with twice the pieces the reading, scanning and column
# building overlap for more of the file. Measured on 2 cores (whole analyses, fresh processes, the
# reader imported): 3-15 MB of JSON 6-16% faster (10 MB: 0.106-0.114 -> 0.096-0.107 s), 20 MB the same,
# 30 and 50 MB 4% slower, where each piece's fixed cost outweighs the shorter start.
SMALL_FILE_BYTES = 16 * 1024 * 1024
SMALL_CHUNK_BYTES = 1024 * 1024
# With the pure-Python decoder (which holds the GIL: no scanning threads), files from this size on are
# decoded by worker processes (fork): below it, starting them costs more
# than they save. The main process inflates a gzip file alone, which leaves the workers less to share:
# one pays from 12 MB of JSON (its gzip trailer's size) or 2 MB compressed. Measured on 2 cores, two
# workers broke even at 9.8 MB of JSON (0.75 MB gzip) and took 15 MB (1.15 MB gzip) from 0.194 to 0.165 s.
PARALLEL_MIN_BYTES = 8 * 1024 * 1024
PARALLEL_MIN_GZIP_BYTES = 2 * 1024 * 1024
PARALLEL_MIN_GZIP_JSON_BYTES = 12 * 1024 * 1024
# Below this much JSON a trace is read without asking what memory is free (it needs at most a few
# tens of MB); the check reads /proc/meminfo and the cgroup's files.
MEMORY_CHECK_MIN_BYTES = 16 * 1024 * 1024
_HEAD_LIMIT = 64 * 1024 * 1024
_UTF8_BOM = b"\xef\xbb\xbf"


_EVENTS_KEY_RE = re.compile(rb'"traceEvents"\s*:\s*\[')


def read_kineto(
    path: str,
    chunk_bytes: int | None = None,
    progress: Callable[[float], None] | None = None,
    workers: int | None = None,
    steps: Steps | str | None = None,
) -> Trace:
    """Read one Kineto Chrome-trace JSON file (plain or gzip) into a ``Trace``.

    With the compiled decoder, ``workers - 1`` threads (default: CPU count, at most 4) scan chunks ahead
    of this one (``threaded``); with the pure-Python decoder, files larger than a few chunks are decoded
    by ``workers`` processes. ``workers=1`` decodes in this thread alone. ``steps`` (``"A:B"`` or
    ``Steps``) keeps only the events of ``ProfilerStep#A`` to ``#B`` (``window``). A trace that will
    not fit in the memory free is refused before its events are decoded (``memory``). ``chunk_bytes``:
    the bytes decoded at a time (default ``chunk_bytes_for`` the file's JSON); the tables do not
    depend on it.
    """
    window = None
    if steps is not None:
        window = find_window(path, parse_steps(steps) if isinstance(steps, str) else steps)
    return _read_file(path, chunk_bytes, progress, workers, window)


def chunk_bytes_for(json_size: int) -> int:
    """The chunk a file of ``json_size`` bytes of JSON is decoded in."""
    return SMALL_CHUNK_BYTES if json_size < SMALL_FILE_BYTES else CHUNK_BYTES


def _read_file(path: str, chunk_bytes: int | None, progress, workers: int | None, window: Window | None) -> Trace:
    src = _Source(path)
    src.forced_workers = workers
    try:
        size = json_bytes(src.size, src.gzipped, src.trailer_size)
        chunk_bytes = chunk_bytes or chunk_bytes_for(size)
        if size >= MEMORY_CHECK_MIN_BYTES:
            # scanning threads hold a few chunks each, within the estimate; worker processes hold more
            processes = 1 if _scan_threads(src) else _worker_count(src, chunk_bytes)
            check_fits(path, size, processes, sliced=window is not None)
        trace = _read(src, chunk_bytes, progress, window)
        if trace.meta.sha256 is None and not src.closed:
            trace.meta.sha256 = src.sha256()
        return trace
    except RecursionError:  # from the decoder, here or in a worker
        raise TraceError(
            path,
            "nests arrays or objects more deeply than any trace does",
            "JSON nested past the decoder's limit of about 1,000 levels",
            "this is not a file a profiler wrote; check where it came from",
        ) from None
    finally:
        src.close()


def _read(src: _Source, chunk_bytes: int, progress, window: Window | None = None) -> Trace:
    path = src.path
    reader = _Reader(path)
    if window is not None:
        reader.window, reader.slice = (window.start_ns, window.end_ns), window
    reader.hides_content = src.hides_content
    buf = src.read(min(chunk_bytes, _HEAD_LIMIT))
    while buf and buf.isspace():  # leading white space is dropped as it is read, never accumulated
        more = src.read(chunk_bytes)
        if not more:
            break
        buf = more
    buf = buf.lstrip()
    while buf.startswith(_UTF8_BOM):  # allowed before JSON text (RFC 8259 lets a reader skip it)
        buf = buf[len(_UTF8_BOM) :].lstrip()
    if buf.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise TraceError(
            path,
            "is UTF-16 text; JSON traces are UTF-8",
            "a UTF-16 byte-order mark",
            "convert it, e.g. `iconv -f UTF-16 -t UTF-8 in.json > out.json`",
        )
    stripped = buf
    if not stripped:
        if src.truncated_reason:
            raise TraceError(
                path,
                "holds no data before its gzip stream breaks off",
                None,
                "the profiler was probably killed before writing; capture the trace again",
            )
        raise TraceError(path, "is empty", "0 bytes of JSON", "capture the trace again")
    first = stripped[:1]
    if first not in (b"{", b"["):
        raise TraceError(
            path,
            "is not JSON",
            src.excerpt(stripped),
            "pass a torch.profiler trace (.json / .json.gz) or an nsys SQLite export",
        )
    head_meta: dict[str, Any] = {}
    bare_array = first == b"["
    if bare_array:
        start = buf.index(b"[") + 1
    else:
        # Read on until the key shows; the text is searched again only each time it has doubled, so a
        # long head (or a file without the key) costs time linear in its size.
        m = _EVENTS_KEY_RE.search(buf)
        parts, have, searched = [buf], len(buf), len(buf)
        while m is None and have < _HEAD_LIMIT and not src.truncated_reason:
            more = src.read(chunk_bytes)
            if more:
                parts.append(more)
                have += len(more)
                if have < 2 * searched and have < _HEAD_LIMIT and not src.truncated_reason:
                    continue
            buf = b"".join(parts)
            parts, searched = [buf], have
            m = _EVENTS_KEY_RE.search(buf)
            if not more:
                break
        buf = b"".join(parts)
        if m is None:
            return _read_whole(path, buf + _drain(src, chunk_bytes), src, reader)
        try:
            head_meta = decode_metadata(_decode_top(buf[: m.start()] + b'"_": null}', reader), reader)
        except msgspec.DecodeError:
            return _read_whole(path, buf + _drain(src, chunk_bytes), src, reader)
        start = m.end()
    rest = buf[start:]
    threads = _scan_threads(src)
    workers = 1 if threads else _worker_count(src, chunk_bytes)
    if threads:
        src.hash_in_thread()
        rest = read_threaded(src, rest, chunk_bytes, reader, threads, progress, _read_sequential)
    elif workers > 1:
        done = _read_parallel(src, rest, chunk_bytes, reader, workers, progress)
        if done is None:  # a cut the workers could not decode: start over, verifying every cut
            src.close()
            return _read_file(path, chunk_bytes, progress, 1, window)
        rest = done
    else:
        rest = _read_sequential(src, rest, chunk_bytes, reader, progress)
    tail_meta, trunc = _decode_tail(rest, bare_array, reader, path)
    if trunc and src.member_starts:
        raise concatenated_members(src)
    if src.truncated_reason and not trunc:
        trunc = src.truncated_reason
    meta = {**head_meta, **tail_meta}
    return _finish(reader, meta, path, trunc)


def _worker_count(src: _Source, chunk_bytes: int) -> int:
    if src.forced_workers is not None:
        return src.forced_workers
    fork = "fork" in _start_methods()
    if fork and threading.active_count() > 1:
        # A fork copies only the calling thread, so a lock another thread holds (a progress bar's, a
        # notebook's) would stay held in the workers; fresh interpreters instead would import the
        # caller's main script again, which reruns it unless guarded. So the file is decoded here.
        return 1
    scale = 1 if fork else 8  # without fork each worker starts a fresh interpreter: only big files pay
    if src.gzipped:
        small = src.size < PARALLEL_MIN_GZIP_BYTES * scale and src.trailer_size < PARALLEL_MIN_GZIP_JSON_BYTES * scale
    else:
        small = src.size < PARALLEL_MIN_BYTES * scale
    if small:
        return 1
    return _cores()


def _cores(cap: int | None = None) -> int:
    """Decoding threads or processes, this one included: one per core, at most 4 and at most ``cap``
    (else ``TRACEDOC_DECODE_WORKERS``)."""
    return max(1, min(4, os.cpu_count() or 1, cap or _env_workers() or 4))


def _scan_threads(src: _Source) -> int:
    """Threads that scan chunks ahead while this one turns them into columns (``threaded``): one per
    core but this one's, at most 3, where the compiled decoder is built (the pure-Python decoder holds
    the GIL, and forks workers instead: ``_worker_count``); 0 with ``workers=1``."""
    if _load_scan() is None:
        return 0
    return 0 if src.forced_workers is not None and src.forced_workers <= 1 else _cores(src.forced_workers) - 1


def _env_workers() -> int | None:
    """``TRACEDOC_DECODE_WORKERS``: at most this many decoding threads or processes, this one included
    (1: decode in this thread alone)."""
    text = os.environ.get("TRACEDOC_DECODE_WORKERS", "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise UsageError(
            "TRACEDOC_DECODE_WORKERS",
            f"{text[:20]!r} is not a number of processes",
            None,
            "set it to 1 (decode in the analysing process) or more, or unset it",
        )
    return int(text)


def _start_methods() -> list[str]:
    import multiprocessing as mp

    return mp.get_all_start_methods()


def _read_sequential(src: _Source, rest: bytes, chunk_bytes: int, reader: "_Reader", progress) -> bytes:
    """Decode chunk by chunk in this process, verifying each cut; return what follows the last cut.

    Where no boundary decodes yet (one event longer than a chunk: a long string, deep nesting), the
    search is tried again once the bytes held have doubled, so such an event costs time linear in its
    length."""
    want = chunk_bytes
    while True:
        rest, eof = _fill(src, rest, want, chunk_bytes, progress)
        if eof:
            return rest
        cut = cut_and_decode(rest)
        if cut is DAMAGED:  # malformed before every boundary: the tail salvages what precedes it
            return rest + _drain(src, chunk_bytes)
        if cut is None:  # no event boundary in what we hold yet: read on
            want = 2 * len(rest)
            continue
        want = chunk_bytes
        evs, next_start = cut
        reader.add(evs)
        del evs
        rest = rest[next_start:]


def _decode_span(path: str, start: int, length: int, window: tuple[int, int] | None = None):
    """Worker: ``_decode_piece`` of ``length`` bytes of a plain file from ``start``, read here rather than
    sent through a pipe."""
    fd = os.open(path, os.O_RDONLY)
    try:
        piece = os.pread(fd, length, start)
    finally:
        os.close(fd)
    return _decode_piece(piece, window) if len(piece) == length else None


def _decode_piece(piece: bytes, window: tuple[int, int] | None = None):
    """Worker: decode one piece of events into columns. None when the cut was not an event boundary."""
    try:
        evs = decode_piece(piece, len(piece))
    except msgspec.DecodeError:
        return None
    r = _Reader("")
    r.window = window
    r.add(evs)
    return r.export()


def _read_parallel(
    src: _Source, rest: bytes, chunk_bytes: int, reader: "_Reader", workers: int, progress
) -> bytes | None:
    """Cut chunks here, decode them in worker processes, merge the columns in file order.

    Returns what follows the last cut, or None if a worker could not decode its piece (then the
    caller falls back to the verified sequential path).
    """
    import concurrent.futures as cf
    import multiprocessing as mp
    from collections import deque

    ctx = mp.get_context("fork") if "fork" in _start_methods() else None
    pending: deque = deque()

    def submit(buf: bytes, piece_start: int, piece_end: int):
        """A worker's future for ``buf[piece_start:piece_end]``, ``buf`` the bytes read last."""
        if src.gzipped:
            return pool.submit(_decode_piece, buf[piece_start:piece_end], reader.window)
        # the worker reads the bytes itself: offset of buf[0] in the file
        return pool.submit(
            _decode_span, src.path, src.offset - len(buf) + piece_start, piece_end - piece_start, reader.window
        )

    with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
        try:
            pieces = CutAhead(src, rest, chunk_bytes, progress)
            while (piece := pieces.next()) is not None:
                held, end, _ = piece
                pending.append(submit(held, 0, end))
                del held, piece
                while len(pending) > workers + 1:
                    chunk = pending.popleft().result()
                    if chunk is None:
                        return None
                    reader.merge(chunk)
            rest = pieces.rest
            # The end of the file (up to two chunks) goes to the workers too, in pieces, instead of being
            # decoded here while they wait. Its boundaries are not verified, and the keys after the events
            # could hold one: a piece a worker cannot decode, and all after it, are left to the tail.
            tail_pieces, after = _tail_pieces(rest, chunk_bytes, workers)
            tail = [(start, submit(rest, start, end)) for start, end in tail_pieces]
            while pending:
                chunk = pending.popleft().result()
                if chunk is None:
                    return None
                reader.merge(chunk)
            for start, fut in tail:
                chunk = fut.result()
                if chunk is None:
                    return rest[start:]
                reader.merge(chunk)
            rest = rest[after:]
        finally:
            for f in pending:
                f.cancel()
    return rest


def _tail_pieces(rest: bytes, chunk_bytes: int, workers: int) -> tuple[list[tuple[int, int]], int]:
    """``rest`` up to its last event boundary, cut at boundaries into about one piece per worker (none
    below a quarter chunk): (start, end) of each, and where the rest after them starts."""
    last = find_cut(rest) if len(rest) >= chunk_bytes // 4 else None
    if last is None:
        return [], 0
    pieces = []
    start, end = 0, last[0]
    size = max(chunk_bytes // 4, -(-end // max(1, workers)))
    while end - start > size + chunk_bytes // 4:
        cut = next(cuts_backward(rest, start + size), None)
        if cut is None or cut[0] <= start:
            break
        pieces.append((start, cut[0]))
        start = cut[1]
    pieces.append((start, end))
    return pieces, last[1]


def _drain(src: _Source, chunk_bytes: int) -> bytes:
    parts = []
    while True:
        d = src.read(chunk_bytes)
        if not d:
            return b"".join(parts)
        parts.append(d)
