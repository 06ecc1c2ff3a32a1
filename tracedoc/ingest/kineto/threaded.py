"""A Kineto file decoded in this process, the compiled scan of the next chunks running in threads.

The compiled scan (``_kscan``) holds no Python object while it reads a chunk, so it runs without the
GIL: helper threads scan the chunks ahead while this thread reads the file, hashes it, cuts it and turns
each scanned chunk into columns, in file order. Compared with worker processes there is nothing to
fork, copy back or merge, and no second copy of the interpreter in memory; the tables are the ones the
sequential path gives, chunk for chunk, since the cuts are the same.

Cuts are taken ahead of the decoding, unverified (a ``, {`` could lie inside a string). A chunk that
does not decode is read again from its start on the verified sequential path, with the bytes already
read after it replayed in the same reads, so every cut from there on is the one that path makes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import msgspec

from .columns import _Reader
from .ahead import CutAhead
from .rows import decode_piece
from .source import _Source


class _Replay:
    """``src`` with ``data`` put back in front of it, handed out in reads of ``block`` bytes (the reads
    the bytes first came in), so a reader started on it cuts where it would have cut on ``src``."""

    def __init__(self, src: _Source, data: bytes, block: int):
        self.src, self.data, self.block, self.at = src, data, block, 0

    def read(self, n: int) -> bytes:
        if self.at < len(self.data):
            out = self.data[self.at : self.at + min(n, self.block)]
            self.at += len(out)
            return out
        return self.src.read(n)

    def fraction(self) -> float:
        return self.src.fraction()


def read_threaded(
    src: _Source,
    rest: bytes,
    chunk_bytes: int,
    reader: _Reader,
    threads: int,
    progress: Callable[[float], None] | None,
    sequential: Callable,
) -> bytes:
    """Decode the events from the start of ``rest`` with ``threads`` scanning threads; return what
    follows the last cut (the end of the events and the keys after them), as ``sequential`` does."""
    import concurrent.futures as cf

    pending: deque[_Piece] = deque()
    pieces = CutAhead(src, rest, chunk_bytes, progress)
    with cf.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tracedoc-scan") as pool:
        try:
            while True:
                while len(pending) <= threads + 1:  # every thread busy, and two pieces queued
                    piece = pieces.next()
                    if piece is None:
                        break
                    held, end, next_start = piece
                    pending.append(_Piece(pool.submit(decode_piece, held, end), held, end, next_start))
                    del held, piece
                rest = pieces.rest
                if not pending:
                    return rest
                head = pending[0]
                while not head.done():  # rather than wait, scan here a later piece no thread has started
                    if not any(p.steal() for p in pending):
                        break
                try:
                    rows = head.rows()
                except (msgspec.DecodeError, ValueError):  # not an event boundary, or damaged bytes
                    later = _later_bytes(pending, rest)
                    return sequential(_Replay(src, later, chunk_bytes), head.held, chunk_bytes, reader, progress)
                pending.popleft()
                reader.add(rows)
                del rows, head
        finally:
            for p in pending:
                p.future.cancel()


class _Piece:
    """A piece of the events cut ahead: ``held[:end]``, scanned by a thread, or here if none started it."""

    def __init__(self, future, held: bytes, end: int, next_start: int):
        self.future, self.held, self.end, self.next_start = future, held, end, next_start
        self.stolen: tuple | None = None  # (rows, None) or (None, the exception) when scanned here

    def done(self) -> bool:
        return self.stolen is not None or self.future.done()

    def steal(self) -> bool:
        """Scan the piece in this thread if no thread has started it; whether it did."""
        if self.stolen is not None or not self.future.cancel():
            return False
        try:
            self.stolen = (decode_piece(self.held, self.end), None)
        except (msgspec.DecodeError, ValueError) as exc:
            self.stolen = (None, exc)
        return True

    def rows(self):
        if self.stolen is None and not self.steal():
            return self.future.result()
        rows, exc = self.stolen
        if exc is not None:
            raise exc
        return rows


def _later_bytes(pending: deque, rest: bytes) -> bytes:
    """The bytes read after the first pending piece's buffer: each later buffer starts with what the
    one before it held past its cut, so the stream from the first buffer's start is the pieces up to
    their cuts, then ``rest``; what follows the first buffer is that stream past its length."""
    first = pending[0].held
    stream = b"".join([p.held[: p.next_start] for p in pending] + [rest])
    return stream[len(first) :]
