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
