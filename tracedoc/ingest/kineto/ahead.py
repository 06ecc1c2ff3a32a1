"""The events of a file cut into pieces ahead of their decoding, at boundaries not yet verified: what
the readers that decode in parallel (threads, ``threaded``; worker processes, ``stream``) share. A piece
whose cut was not an event boundary fails to decode, and its reader falls back to the verified path."""

from __future__ import annotations

from collections.abc import Callable

from .cuts import find_cut
from .source import _Source


def fill(src: _Source, rest: bytes, want: int, chunk_bytes: int, progress) -> tuple[bytes, bool]:
    """Read ``chunk_bytes`` at a time until ``rest`` holds ``want`` bytes; report whether the file is
    exhausted."""
    parts = [rest]
    have = len(rest)
    while have < want:
        more = src.read(chunk_bytes)
        if not more:
            return b"".join(parts), True
        parts.append(more)
        have += len(more)
        if progress:
            progress(src.fraction())
    return b"".join(parts), False


class CutAhead:
    """Pieces of about ``chunk_bytes`` from the start of ``rest`` on, each ending at the last event
    boundary in the bytes held; ``rest`` holds what follows the last cut."""

    def __init__(self, src: _Source, rest: bytes, chunk_bytes: int, progress: Callable[[float], None] | None):
        self.src, self.rest, self.chunk_bytes, self.progress = src, rest, chunk_bytes, progress
        self.want, self.eof = chunk_bytes, False

    def next(self) -> tuple[bytes, int, int] | None:
        """(the bytes held, the end of the piece in them, where the bytes after the cut start), or None
        once the file is exhausted (``rest`` then holds the end of the events and what follows them)."""
        while not self.eof:
            self.rest, self.eof = fill(self.src, self.rest, self.want, self.chunk_bytes, self.progress)
            if self.eof:
                break
            cut = find_cut(self.rest)
            if cut is None:  # no boundary yet (one long event): look again once the bytes held double
                self.want = 2 * len(self.rest)
                continue
            self.want = self.chunk_bytes
            held = self.rest
            self.rest = held[cut[1] :]
            return held, cut[0], cut[1]
        return None
