"""Neutral strings: what a trace, log, config or saved report says is shown, never obeyed.

Every string tracedoc did not write itself (kernel, operator, file and label names, log messages, a
saved report's labels) may hold terminal escape sequences (clear the screen, set the window title,
print a link, paint a fake verdict), bidirectional controls (make ``sgemm`` read as ``mmegs``),
invisible format characters, line breaks that fake a line of the report, or Markdown and HTML that
would format, link, embed images or @-mention people in a ticket. The renderers pass such strings
through this module at the render boundary:

- :func:`clean_text`: terminal text and stderr messages. Control characters (C0 and C1, DEL, line and
  paragraph separators), bidirectional controls and other invisible format characters become visible
  escapes (``\\x1b``, ``\\u202e``); tabs become a space. What is left prints as itself.
- :func:`clean_view`: :func:`clean_text` over every string of a view model (dataclasses, lists,
  tuples, dicts), for renderers that lay a view out (the terminal summary).
- :func:`md_escape`, :func:`md_code_span`, :func:`md_code_block`: Markdown (ticket comments): cleaned
  as above, then escaped so nothing can format, link, embed, mention or open raw HTML.
"""

from __future__ import annotations

import copy
import dataclasses
import re
import unicodedata
from typing import Any

# Bidirectional controls: embeddings, overrides, isolates and marks (also in render/templating.py's HTML).
BIDI = "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
# C0 and C1 controls and DEL; line/paragraph separators; bidi controls; zero-width and other invisible
# format characters (U+200B-U+200D, U+2060-U+2064, U+FEFF, U+180E, interlinear annotations U+FFF9-U+FFFB).
_UNSAFE = re.compile(
    f"[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029{BIDI}\u200b-\u200d\u2060-\u2064\ufeff\u180e\ufff9-\ufffb]"
)
_MAX_VIEW_DEPTH = 64


def _escape(m: re.Match) -> str:
    c = m.group()
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean_text(value: Any) -> str:
    """``value`` as one line of plain text: control, bidirectional and invisible format characters as
    visible escapes, a tab as a space. Text without them is returned unchanged."""
    text = value if isinstance(value, str) else str(value)
    if text.isascii() and text.isprintable():
        return text
    text = text.replace("\t", " ")
    text = _UNSAFE.sub(_escape, text)
    if text.isprintable():
        return text
    # What the table above does not list but Python does not print either (other Cc/Cf/Cs/Co/Cn).
    return "".join(c if c.isprintable() or c == " " else _escape_char(c) for c in text)


def _escape_char(c: str) -> str:
    code = ord(c)
    if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"):
        return f"\\x{code:02x}" if code < 0x100 else (f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}")
    return c


def clean_lines(lines: list[str]) -> str:
    """Lines of a plain-text report joined with newlines, each cleaned: no string in a line can break it."""
    return "\n".join(clean_text(line) for line in lines)


def clean_view(obj: Any, _depth: int = 0) -> Any:
    """A copy of a view model with :func:`clean_text` applied to every string in it (field values, list
    items, dict keys and values); numbers and other values as they are. The original is not changed."""
    if isinstance(obj, str):
        return clean_text(obj)
    if _depth > _MAX_VIEW_DEPTH or obj is None or isinstance(obj, (bool, int, float)):
        return obj
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = copy.copy(obj)
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name, None)
            cleaned = clean_view(value, _depth + 1)
            if cleaned is not value:
                object.__setattr__(out, f.name, cleaned)
        return out
    if isinstance(obj, list):
        return [clean_view(v, _depth + 1) for v in obj]
    if isinstance(obj, tuple):
        items = [clean_view(v, _depth + 1) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
    if isinstance(obj, dict):
        return {clean_view(k, _depth + 1): clean_view(v, _depth + 1) for k, v in obj.items()}
    return obj


# -- Markdown ---------------------------------------------------------------------------------------


class MdSafe(str):
    """Markdown this module escaped (a filter's result); templates and callers may treat it as final."""


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#~!])")
_ZWSP = "&#8203;"  # a zero-width space: breaks a mention or an autolink, shows nothing


def md_escape(value: Any) -> MdSafe:
    """Text for a Markdown paragraph or table cell: nothing in it can format, link, embed an image,
    @-mention anyone or inject HTML, and it stays on its line."""
    if isinstance(value, MdSafe):
        return value
    text = clean_text(" ".join(str(value).splitlines()))  # \n, \r, U+2028, U+0085, ... then every control
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _MD_SPECIAL.sub(r"\\\1", text)
    # No @mention, @team or @everyone: GitHub links mentions after decoding entities, so "&#64;" alone is
    # still "@user"; the zero-width space after it breaks the name, and no raw "@" is left to look for.
    text = text.replace("@", f"&#64;{_ZWSP}")
    text = re.sub(r"(?i)(://|\bwww\.)", lambda m: m.group()[0] + _ZWSP + m.group()[1:], text)  # no autolinks
    return MdSafe(text)


def md_code_span(value: Any) -> MdSafe:
    """Text inside a one-backtick code span (the template writes the backticks): no backtick to close
    it early, on one line, cleaned. Inside a code span nothing formats, links or mentions."""
    text = clean_text(" ".join(str(value).splitlines())).replace("`", "'")
    return MdSafe(text if text.strip() else "?")


def md_code_block(value: Any) -> MdSafe:
    """Text for a fenced code block: a fence inside it cannot close the block; controls cleaned per line."""
    lines = str(value).splitlines() or [""]
    return MdSafe("\n".join(clean_text(line) for line in lines).replace("```", "`\u200b``"))
