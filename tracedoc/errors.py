"""Errors and warnings that reach the user.

Every message says where (file, and event or byte when known), what was wrong, what was seen, and
what to do. The CLI prints ``TraceError`` as one line on stderr and exits non-zero; it never shows a
traceback for bad input.
"""

from __future__ import annotations

import warnings

from .exits import EXIT_ERROR, EXIT_USAGE


MAX_SEEN_CHARS = 240


class TracedocError(Exception):
    """Base class for errors tracedoc reports to the user."""

    exit_code = EXIT_ERROR

    def __init__(self, where: str, what: str, seen: str | None = None, todo: str | None = None):
        self.where = where
        self.what = what
        self.seen = seen
        self.todo = todo
        super().__init__(self.message())

    def message(self) -> str:
        parts = [f"{self.where}: {self.what}"]
        if self.seen:
            seen = str(self.seen)
            if len(seen) > MAX_SEEN_CHARS:  # what was seen is an excerpt, never a dump of the input
                seen = f"{seen[:MAX_SEEN_CHARS]}... ({len(seen):,} characters)"
            parts.append(f"(saw {seen})")
        msg = " ".join(parts)
        if self.todo:
            msg = f"{msg.rstrip('.')}; {self.todo}"
        return msg

    def __reduce__(self):
        # Rebuilt from its attributes, not its constructor: subclasses take other arguments, and an
        # error raised in a worker process must arrive intact in the parent.
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def _rebuild(cls: type, args: tuple, state: dict) -> TracedocError:
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


class TraceError(TracedocError):
    """The input is not a trace tracedoc can read."""


class UsageError(TracedocError):
    exit_code = EXIT_USAGE


class TraceWarning(UserWarning):
    """Something about the input the user should know; numbers are still computed."""


def warn(where: str, what: str, todo: str | None = None) -> str:
    msg = f"{where}: {what}"
    if todo:
        msg = f"{msg.rstrip('.')}; {todo}"
    warnings.warn(msg, TraceWarning, stacklevel=2)
    return msg
