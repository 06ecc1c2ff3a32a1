"""The output methods every result offers in a notebook (``to_text``, ``to_markdown``, ``to_html``,
``to_json``, ``save``): one report's renderer, chosen by format name or by the file's extension.

The results never import it: their methods call ``tracedoc.display``, which the output façade
(``tracedoc.output``, above this package) fills with these two functions; so loading, saving and
comparing results never loads a renderer.
"""

from __future__ import annotations

import os
from typing import Any

from . import FORMATS, renderer, renderer_for_path
from ..errors import UsageError
from ..outfiles import write_atomic


def render_as(result: Any, report: str, fmt: str, **options: Any) -> str:
    """``result`` (of ``report``: analysis, diff, trend or log) rendered as ``fmt`` (text, json, md, html)."""
    return renderer(fmt, report).render(result, **options)


def save_as(
    result: Any, path: str | os.PathLike, report: str, fmt: str | None = None, default: str = "json", **options: Any
) -> str:
    """Write ``result`` to ``path`` whole or not at all (``.gz``: gzip-compressed) in ``fmt``, or else in
    the format the path's extension names, or else ``default``; returns the format written."""
    path = os.fspath(path)
    if fmt is not None and fmt not in FORMATS:
        raise UsageError("format", f"is not one of {', '.join(FORMATS)}", repr(fmt), "e.g. format='html'")
    chosen = fmt or getattr(renderer_for_path(path, report), "name", None) or default
    if report == "analysis" and chosen == "json":  # a saved report keeps its timeline: load() gives it back whole
        options = {"timeline": True, **options}
    text = render_as(result, report, chosen, **options)
    write_atomic(path, text if text.endswith("\n") or chosen == "json" else text + "\n", option=None)
    return chosen
