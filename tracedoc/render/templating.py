"""Jinja environment and template assets shared by the HTML and Markdown reports.

The environment autoescapes HTML and fails on undefined variables; templates and their CSS/JS live
in the top-level ``reports/templates/`` (``tracedoc/_data/templates`` in the wheel).
"""

from __future__ import annotations

import json
import re
from typing import Any

# Bidirectional controls (embeddings, overrides, isolates, marks): in a trace string they could
# reorder the report text around it, e.g. make "sgemm" read as "mmegs".
_BIDI_RE = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
FSI, PDI = "\u2068", "\u2069"  # first-strong isolate ... pop directional isolate: Unicode's <bdi>


def isolate_bidi(value: Any) -> Any:
    """A string holding bidirectional controls, wrapped in an isolate (FSI ... PDI) so its direction
    changes end with it; every other value unchanged (works in element text and in attributes)."""
    if type(value) is str and _BIDI_RE.search(value):
        return f"{FSI}{value}{PDI}"
    return value


def script_json(data: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&`` or U+2028/2029 left."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = (
        text.replace("&", "\\u0026")
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )
    return _BIDI_RE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)  # no raw direction controls in the page


def jinja_environment(kind: str = "html"):
    import jinja2

    from ..resources import data_dir

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(data_dir("templates"))),
        autoescape=kind == "html",
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=isolate_bidi,
    )
    if kind == "md":  # every string a Markdown template shows passes one of these (tracedoc.neutral)
        from ..neutral import md_code_block, md_code_span, md_escape

        env.filters.update(md=md_escape, code=md_code_block, code_span=md_code_span)
    return env


def asset(name: str) -> str:
    from ..resources import data_dir

    text = (data_dir("templates") / name).read_text(encoding="utf-8")
    if "</" in text and ("</script" in text.lower() or "</style" in text.lower()):
        raise ValueError(f"reports/templates/{name} must not contain a closing script or style tag")
    return text
