"""Plain-text tables and paragraphs that fit a width, for every command's text output.

A table's columns are of three kinds: ``num`` (numbers, right-aligned) and ``id`` (rule IDs, metric
and label names: what a user types back) keep their whole width and never break; ``text`` columns
(titles, meanings, kernel names, details) share what is left and wrap inside their column, at spaces
where they can. Where the whole columns leave a text column less than ``MIN_TEXT`` characters, the
text columns give way entirely: each goes on its own indented lines under its row. Only a single
whole cell wider than the width itself (a number or an ID longer than the line) can make a line longer.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from .fit import wrap_line

GAP = 2
MIN_TEXT = 16  # a text column narrower than this reads worse than the same text under its row
UNDER_INDENT = 4


def wrap_cell(text: str, width: int) -> list[str]:
    """``text`` in lines of at most ``width``: at spaces where possible, else inside a word (a name or
    a sentence's long word, never a table's number column)."""
    if len(text) <= width:
        return [text]
    lines = textwrap.wrap(text, width=max(1, width), break_long_words=True, break_on_hyphens=False)
    return lines or [""]


def wrap_text(text: str, width: int) -> list[str]:
    """A paragraph or line wrapped at words to ``width`` (its indent kept; a word longer than the width
    stands alone on its line)."""
    return wrap_line(text, width).split("\n") if text else [""]


def fit_table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    kinds: Sequence[str],
    width: int,
    indent: int = 0,
    min_text: int = MIN_TEXT,
) -> list[str]:
    """The table as lines at most ``width`` wide (see the module's docstring); header first."""
    n = len(headers)
    table = [list(headers)] + [[str(c) for c in r] for r in rows]
    natural = [max(len(row[i]) for row in table) for i in range(n)]
    text_cols = [i for i in range(n) if kinds[i] == "text"]
    fixed = [i for i in range(n) if kinds[i] != "text"]
    room = width - indent - sum(natural[i] for i in fixed) - GAP * (n - 1)
    want = sum(natural[i] for i in text_cols)
    if not text_cols or want <= room:
        widths = list(natural)
        under: list[int] = []
    elif room >= min_text * len(text_cols):
        widths = list(natural)
        left = room
        # shares in proportion to what each wants, each at least MIN_TEXT
        for k, i in enumerate(text_cols):
            rest = text_cols[k:]
            share = max(min_text, left * natural[i] // max(1, sum(natural[j] for j in rest)))
            widths[i] = min(natural[i], share, left - min_text * (len(rest) - 1))
            left -= widths[i]
        under = []
    else:  # the text columns go under their rows
        widths = list(natural)
        under = text_cols
    shown = [i for i in range(n) if i not in under]
    pad = " " * indent
    out = []
    for r, row in enumerate(table):
        cells = [wrap_cell(row[i], widths[i]) if kinds[i] == "text" else [row[i]] for i in shown]
        height = max(len(c) for c in cells)
        for k in range(height):
            parts = []
            for i, c in zip(shown, cells):
                piece = c[k] if k < len(c) else ""
                parts.append(piece.rjust(widths[i]) if kinds[i] == "num" else piece.ljust(widths[i]))
            out.append((pad + (" " * GAP).join(parts)).rstrip())
        if r == 0:
            hint = f"  ({', '.join(headers[i] for i in under)} below each row)" if under else ""
            if hint and len(out[-1]) + len(hint) <= width:
                out[-1] += hint
            continue
        for i in under:
            if row[i]:
                sub = pad + " " * UNDER_INDENT
                out += [sub + line for line in wrap_cell(row[i], max(8, width - len(sub)))]
    return out
