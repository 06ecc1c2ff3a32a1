"""One place that decides how text output is laid out: width, colour, and whether cells may be cut.

The summary fits a width: the terminal's, or 100 columns off a terminal (a pipe, a CI log, a file),
or ``--width N``. Sentences wrap at words (a path or URL longer than the width stays whole on its own
line); a table keeps each row on one line, its numbers whole and its names in short, distinct forms
cut to the column (``--full-names``: names whole, and the table as wide as they need). Colour only on
a terminal; ``NO_COLOR`` (https://no-color.org) and ``--no-color`` turn it off everywhere.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import IO, Any

PIPE_WIDTH = 100  # default width off a terminal


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
    full_names: bool = False  # kernel and op names whole, never shortened or cut

    @classmethod
    def for_stream(
        cls, stream: IO[str] | None = None, *, width: int | None = None, no_color: bool = False, **kwargs: Any
    ) -> "TextOptions":
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


def make_console(options: TextOptions, file: IO[str] | None = None, markup: bool = True) -> Any:
    """A rich console for ``options`` writing to ``file`` (a StringIO for rendering to a string).
    ``markup=False`` for consoles that print strings from traces: ``[link=...]`` or ``[/]`` in a name is
    then text, neither a link nor a markup error (nor an emoji code)."""
    from rich.console import Console

    width = options.width or (None if options.terminal else PIPE_WIDTH)
    return Console(
        file=file,
        width=width,
        color_system="auto" if options.color else None,
        force_terminal=options.color or None,
        no_color=not options.color,
        highlight=False,
        soft_wrap=not options.terminal,
        markup=markup,
        emoji=markup,
    )


def print_item(console: Any, item: Any, options: TextOptions, widen: bool | None = None) -> None:
    """Print one renderable: a plain line wrapped to the console's width at words; off a terminal, a
    table wider than the console widens it when ``widen`` (by default: when no ``--width`` was given)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    from .fit import wrap_line

    def wrapped(x: Any) -> Any:
        if isinstance(x, Text) and not x.spans and "\n" not in x.plain:
            return Text(wrap_line(x.plain, console.width), style=x.style, no_wrap=True, overflow="ignore")
        return x

    item = Group(*map(wrapped, item.renderables)) if isinstance(item, Group) else wrapped(item)
    if options.terminal:
        console.print(item, crop=False)
        return
    base = console.width
    if (options.width is None if widen is None else widen) and isinstance(item, (Table, Group)):
        console.width = max(base, console.measure(item, options=console.options.update_width(100_000)).maximum)
    try:
        with console.capture() as captured:
            console.print(item)
    finally:
        console.width = base
    text = captured.get()
    console.file.write("".join(line.rstrip() + "\n" for line in text.splitlines()))  # no padding at line ends
