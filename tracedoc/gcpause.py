"""Pausing Python's cyclic garbage collector while a trace is read and analysed.

Reading a trace allocates millions of small container objects (decoded events, per-column lists) that
never form reference cycles, yet each allocation counts towards the collector's thresholds: on a 50 MB
trace the collector's repeated passes over those objects cost about as much as the decoding itself.
Reference counting still frees everything as it goes; only the search for cycles waits until the
work is done.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from functools import wraps
from typing import Callable, Iterator, TypeVar

F = TypeVar("F", bound=Callable)


@contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic collector off inside the block, back to how it was after (nesting is harmless)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def with_paused_gc(func: F) -> F:
    """``func`` run inside ``paused_gc()``."""

    @wraps(func)
    def run(*args, **kwargs):
        with paused_gc():
            return func(*args, **kwargs)

    return run  # type: ignore[return-value]


_libc: object | None = None
# Columns from which a trace's stages give freed memory back (below it the pages are few, and the first
# call's loading of the C library costs more than it saves)
RELEASE_MIN_BYTES = 16 << 20


def release_free_memory() -> None:
    """Give the memory freed so far back to the system (glibc's ``malloc_trim``; nothing elsewhere).

    Arrays below glibc's mmap threshold (raised up to 32 MB as large blocks are freed) live on the heap,
    and the heap keeps freed pages: after a trace's columns are built from their pieces, or after an
    analysis's working arrays are dropped, the process's RSS stays at its high-water mark, and a forked
    child shares those pages as well. Returning them lowers the ground every later stage starts from."""
    global _libc
    if _libc is None:
        _libc = False
        import sys

        if sys.platform.startswith("linux"):
            import ctypes

            try:  # glibc's name; another C library (musl) has no malloc_trim and its own name
                lib = ctypes.CDLL("libc.so.6")
                _libc = lib if hasattr(lib, "malloc_trim") else False
            except OSError:
                _libc = False
    if _libc:
        _libc.malloc_trim(0)
