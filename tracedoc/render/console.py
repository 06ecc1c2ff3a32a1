"""One place that decides how text output is laid out: width, colour, and whether cells may be cut.

On a terminal the summary fits the terminal's width (long names end in "…") and is coloured.
Off a terminal (a pipe, a CI log, a file) nothing is cut: sentences stay on one line, a table widens
to keep each row on one line, and there is no colour; with ``--width N`` long cells wrap within their
column instead. ``NO_COLOR`` (https://no-color.org) and
``--no-color`` turn colour off everywhere; ``--width N`` sets the width in both cases.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import IO, Any

PIPE_WIDTH = 100  # default width of tables off a terminal; text lines are never wrapped there


@dataclass(frozen=True)
class TextOptions:
    """How the terminal summary is laid out and how much it shows."""

    width: int | None = None  # None: the terminal's width, or PIPE_WIDTH off a terminal
    terminal: bool = False  # a person reads it on a terminal: cells may be cut to fit, colour allowed
    color: bool = False
    quiet: bool = False  # the verdict line only
    verbose: bool = False  # every finding with every fix, every warning, longer tables
    top: int | None = None  # rows of each table (None: a few, more with verbose)
    warnings_shown: bool = False  # the reader's warnings were already printed (on stderr): not again

    @classmethod
    def for_stream(cls, stream: IO[str] | None = None, *, width: int | None = None, no_color: bool = False,
                   **kwargs: Any) -> "TextOptions":
        """Options for writing to ``stream`` (stdout by default): a terminal or not, colour or not."""
        stream = sys.stdout if stream is None else stream
        terminal = bool(getattr(stream, "isatty", lambda: False)())
        return cls(width=width, terminal=terminal, color=terminal and color_allowed(no_color), **kwargs)

    @property
    def overflow(self) -> str:
        """How a table cell too long for its column ends: cut on a terminal, wrapped elsewhere."""
        return "ellipsis" if self.terminal else "fold"


def color_allowed(no_color: bool = False) -> bool:
    """False when ``--no-color`` is given or ``NO_COLOR`` is set to anything non-empty."""
    return not no_color and not os.environ.get("NO_COLOR")


def make_console(options: TextOptions, file: IO[str] | None = None) -> Any:
    """A rich console for ``options`` writing to ``file`` (a StringIO for rendering to a string)."""
    from rich.console import Console

    width = options.width or (None if options.terminal else PIPE_WIDTH)
    return Console(file=file, width=width, color_system="auto" if options.color else None,
                   force_terminal=options.color or None, no_color=not options.color, highlight=False,
                   soft_wrap=not options.terminal)


def print_item(console: Any, item: Any, options: TextOptions) -> None:
    """Print one renderable; off a terminal with no ``--width``, a table wider than the console widens it."""
    from rich.console import Group
    from rich.table import Table

    if options.terminal:
        console.print(item)
        return
    base = console.width
    if options.width is None and isinstance(item, (Table, Group)):
        console.width = max(base, console.measure(item, options=console.options.update_width(100_000)).maximum)
    try:
        with console.capture() as captured:
            console.print(item)
    finally:
        console.width = base
    text = captured.get()
    console.file.write("".join(line.rstrip() + "\n" for line in text.splitlines()))  # no padding at line ends
