"""Renderers: an ``AnalysisResult`` as terminal text, Markdown (a ticket comment) or one HTML file.

``render_md`` and ``render_html`` are imported on first use, so that the terminal summary does not
pay for Jinja2.
"""

from __future__ import annotations

from typing import Any

__all__ = ["render_html", "render_md"]


def __getattr__(name: str) -> Any:
    if name == "render_html":
        from .html import render_html

        return render_html
    if name == "render_md":
        from .markdown import render_md

        return render_md
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
