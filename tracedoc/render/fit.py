"""Text that fits a width: lines wrapped at words with their indent kept, and table columns sized so a
row stays on one line (numbers whole, names cut to distinct forms by ``names.fit_names``).

A word longer than the width (a path, a URL) is never broken: it stands whole on its own line.
"""

from __future__ import annotations

import textwrap
from typing import Sequence

COLUMN_GAP = 2  # rich's default padding of one space either side, none at the table's edges
MIN_NAME_WIDTH = 12  # a name column narrower than this says too little to be worth the row


def wrap_line(text: str, width: int) -> str:
    """``text`` wrapped at spaces to ``width``: continuation lines keep its leading indent (and a numbered
    item's ``1. `` hangs), and no word is broken, so a path longer than the width stays whole."""
    if len(text) <= width or "\n" in text:
        return text
    body = text.lstrip(" ")
    indent = " " * (len(text) - len(body))
    hang = indent + " " * (
        len(body.split(" ", 1)[0]) + 1 if body[:1].isdigit() and body.split(" ", 1)[0].endswith(".") else 0
    )
    if len(hang) > width // 2:
        hang = indent if len(indent) <= width // 2 else ""
    return (
        "\n".join(
            textwrap.wrap(
                text,
                width=width,
                initial_indent="",
                subsequent_indent=hang,
                break_long_words=False,
                break_on_hyphens=False,
                drop_whitespace=True,
            )
        )
        or text
    )


def column_widths(natural: Sequence[int], flexible: Sequence[bool], width: int) -> list[int]:
    """Column widths for a table ``width`` characters wide: fixed columns keep their natural width; the
    flexible ones (names) share what is left: a name column that needs no more than an equal share of
    what is left is given all it needs (a short name is never cut while a longer one could give way),
    and the rest share the remainder equally, none narrower than ``MIN_NAME_WIDTH`` (the table is then
    wider than ``width``, which only a width too small for its numbers does)."""
    fixed = sum(n for n, f in zip(natural, flexible) if not f)
    room = width - fixed - COLUMN_GAP * max(0, len(natural) - 1)
    want = [n for n, f in zip(natural, flexible) if f]
    if not want:
        return list(natural)
    shares = list(want)
    if sum(want) > room:
        left, todo = max(0, room), sorted(range(len(want)), key=lambda k: want[k])
        for done, i in enumerate(todo):  # narrowest first: each takes its need, or an equal share of what is left
            fair = left // (len(todo) - done)
            shares[i] = max(min(want[i], fair), min(want[i], MIN_NAME_WIDTH))
            left = max(0, left - shares[i])
    it = iter(shares)
    return [next(it) if f else n for n, f in zip(natural, flexible)]
