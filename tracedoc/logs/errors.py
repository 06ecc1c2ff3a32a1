"""The error a training log or config that tracedoc cannot read raises."""

from __future__ import annotations

from ..errors import TracedocError


class LogError(TracedocError):
    """The input is not a training log or config tracedoc can read: says where, what, what was seen, what to do."""


def excerpt(text: str | bytes, limit: int = 80) -> str:
    """A short, printable excerpt of some input for an error message."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    text = text.strip().replace("\r", "")
    first = text.split("\n", 1)[0]
    shown = first[:limit] + ("..." if len(first) > limit else "")
    return repr(shown)
