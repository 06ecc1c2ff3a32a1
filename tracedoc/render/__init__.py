"""Renderers: an ``AnalysisResult`` as terminal text, JSON, Markdown (a ticket comment) or one HTML file.

``RENDERERS`` is the one table of output formats: a name (``--format``), the file extensions that
select it from ``-o PATH``, whether it writes bytes, and the function that renders a result. Each
renderer's module is imported on first use, so that the terminal summary does not pay for Jinja2.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:  # pragma: no cover
    from ..result import AnalysisResult


class Renderer(NamedTuple):  # a NamedTuple, not a dataclass: the CLI reads this table at start-up
    name: str
    extensions: tuple[str, ...]
    binary: bool
    module: str
    function: str
    description: str

    @property
    def extension(self) -> str:
        return self.extensions[0]

    def render(self, result: "AnalysisResult", **options: Any) -> str | bytes:
        return getattr(importlib.import_module(f"{__name__}.{self.module}"), self.function)(result, **options)


RENDERERS: tuple[Renderer, ...] = (
    Renderer("text", (".txt",), False, "text", "render_text", "terminal summary (default)"),
    Renderer("json", (".json",), False, "jsonfile", "render_json", "every metric and finding, schema-versioned"),
    Renderer("md", (".md", ".markdown"), False, "markdown", "render_md", "a ticket comment under 65,000 characters"),
    Renderer("html", (".html", ".htm"), False, "html", "render_html", "one self-contained page"),
)
FORMATS: tuple[str, ...] = tuple(r.name for r in RENDERERS)


def renderer(name: str) -> Renderer:
    for r in RENDERERS:
        if r.name == name:
            return r
    raise KeyError(name)


def output_extension(path: str) -> str:
    """An output file's extension, ``.gz`` kept with the one before it (``r.json.gz`` -> ``.json.gz``)."""
    name = os.path.basename(path).lower()
    gz = name.endswith(".gz")
    ext = os.path.splitext(name[:-3] if gz else name)[1]
    return ext + ".gz" if gz else ext


def output_extensions_text() -> str:
    """The extensions ``-o`` knows, in words: each renderer's, each also with ``.gz`` (gzip-compressed)."""
    main = [r.extension for r in RENDERERS]
    more = [e for r in RENDERERS for e in r.extensions[1:]]
    return (f"{', '.join(main[:-1])} or {main[-1]}" + (f" ({' and '.join(more)} too)" if more else "")
            + "; add .gz for a gzip-compressed file")


def renderer_for_path(path: str) -> Renderer | None:
    """The renderer an output file's extension asks for (``report.html`` -> html, ``r.json.gz`` -> json),
    or None."""
    ext = output_extension(path).removesuffix(".gz")
    return next((r for r in RENDERERS if ext in r.extensions), None)


def render_html(result: "AnalysisResult", **options: Any) -> str:
    return renderer("html").render(result, **options)  # type: ignore[return-value]


def render_md(result: "AnalysisResult", **options: Any) -> str:
    return renderer("md").render(result, **options)  # type: ignore[return-value]


def render_text(result: "AnalysisResult", **options: Any) -> str:
    return renderer("text").render(result, **options)  # type: ignore[return-value]


def render_json(result: "AnalysisResult", **options: Any) -> str:
    return renderer("json").render(result, **options)  # type: ignore[return-value]


__all__ = ["FORMATS", "RENDERERS", "Renderer", "render_html", "render_json", "render_md", "render_text",
           "renderer", "renderer_for_path"]
