"""How a result shows itself (``to_text``, ``to_markdown``, ``to_html``, ``to_json``, ``_repr_html_``,
``save``) without knowing a renderer: the results hand themselves to the two functions here, which call
the output façade that the top of the package installs (``tracedoc.output``, installed when ``tracedoc``
is imported, so before any result exists).

The results stay plain data: nothing below ``tracedoc.render`` imports it, and the renderers remain the
one place that formats a result for people.
"""

from __future__ import annotations

import os
from typing import Any, Callable

# (result, report, format, options) -> text; format: text, json, md, html, or "card" (the notebook card)
_render: Callable[..., str] | None = None
# (result, path, report, format) -> None
_save: Callable[..., Any] | None = None


def install(render: Callable[..., str], save: Callable[..., Any]) -> None:
    """Make ``render`` and ``save`` the functions every result's output methods call."""
    global _render, _save
    _render, _save = render, save


def show(result: Any, report: str, fmt: str, **options: Any) -> str:
    """``result`` (of ``report``: analysis, diff, trend or log) as ``fmt``: text, json, md, html or card."""
    if _render is None:
        raise RuntimeError("tracedoc's output façade is not installed: import tracedoc first")
    return _render(result, report, fmt, **options)


def save(result: Any, path: str | os.PathLike, report: str, fmt: str | None = None) -> None:
    """Write ``result`` to ``path`` in ``fmt``, else in the format its extension names, else JSON."""
    if _save is None:
        raise RuntimeError("tracedoc's output façade is not installed: import tracedoc first")
    _save(result, path, report, fmt)
