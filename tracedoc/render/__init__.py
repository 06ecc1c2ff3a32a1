"""Renderers: a report as terminal text, JSON, Markdown (a ticket comment) or one HTML file.

The renderer contract: each renderer of a report formats that report's typed view model, built from
its result by one function (``viewmodel.build_report`` -> ``ReportView`` for ``tracedoc analyze``,
``diffview.build_diff_view`` -> ``DiffView`` for ``tracedoc diff``, ``trend.build_trend_view`` ->
``TrendView`` for ``tracedoc diff`` of three runs or more, ``logview.build_log_view`` ->
``logviews.LogView`` for ``tracedoc logs``), except JSON, which is the saved value itself. Every renderer is
called the same way: ``renderer(format, report).render(result, **options) -> str``.

``RENDERERS`` is the one table of them: the report it renders, a name (``--format``), the file
extensions that select it from ``-o PATH``, and the function. Each renderer's module is imported on
first use, so that the terminal summary does not pay for Jinja2.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from ..result import AnalysisResult

REPORTS = ("analysis", "diff", "trend", "log")  # tracedoc analyze, diff (two runs, or a series), logs
FORMATS: tuple[str, ...] = ("text", "json", "md", "html")
_EXTENSIONS = {"text": (".txt",), "json": (".json",), "md": (".md", ".markdown"), "html": (".html", ".htm")}


class RenderFunction(Protocol):
    """A renderer's function: a report's result (its view model built inside) as text."""

    def __call__(self, result: Any, **options: Any) -> str: ...


class Renderer(NamedTuple):  # a NamedTuple, not a dataclass: the CLI reads this table at start-up
    report: str  # "analysis", "diff", "trend" or "log": the result it takes
    name: str  # the --format value
    module: str
    function: str
    description: str
    binary: bool = False

    @property
    def extensions(self) -> tuple[str, ...]:
        return _EXTENSIONS[self.name]

    @property
    def extension(self) -> str:
        return self.extensions[0]

    def render(self, result: Any, **options: Any) -> str:
        fn: RenderFunction = getattr(importlib.import_module(f"{__name__}.{self.module}"), self.function)
        return fn(result, **options)


RENDERERS: tuple[Renderer, ...] = (
    Renderer("analysis", "text", "text", "render_text", "terminal summary (default)"),
    Renderer("analysis", "json", "jsonfile", "render_json", "every metric and finding, schema-versioned"),
    Renderer("analysis", "md", "markdown", "render_md", "a ticket comment under 65,000 characters"),
    Renderer("analysis", "html", "html", "render_html", "one self-contained page"),
    Renderer("diff", "text", "diff", "render_diff_text", "the change and its causes"),
    Renderer("diff", "json", "diff", "render_diff_json", "every number of the comparison"),
    Renderer("diff", "md", "diff", "render_diff_md", "a ticket comment under 65,000 characters"),
    Renderer("diff", "html", "diff", "render_diff_html", "one self-contained page with side-by-side bars"),
    Renderer("trend", "text", "trend", "render_trend_text", "the runs against the first, with attribution"),
    Renderer("trend", "json", "trend", "render_trend_json", "every run's comparison with the first"),
    Renderer("trend", "md", "trend", "render_trend_md", "a ticket comment"),
    Renderer("trend", "html", "trend", "render_trend_html", "one self-contained page"),
    Renderer("log", "text", "logview", "render_log_text", "summary, anomalies and findings"),
    Renderer("log", "json", "logview", "render_log_json", "every metric, anomaly and finding, schema-versioned"),
    Renderer("log", "md", "logview", "render_log_md", "a ticket comment"),
    Renderer("log", "html", "logview", "render_log_html", "one self-contained page with charts"),
)


def renderer(name: str, report: str = "analysis") -> Renderer:
    for r in RENDERERS:
        if r.name == name and r.report == report:
            return r
    raise KeyError(name if report == "analysis" else f"{report} {name}")


def output_extension(path: str) -> str:
    """An output file's extension, ``.gz`` kept with the one before it (``r.json.gz`` -> ``.json.gz``)."""
    name = os.path.basename(path).lower()
    gz = name.endswith(".gz")
    ext = os.path.splitext(name[:-3] if gz else name)[1]
    return ext + ".gz" if gz else ext


def output_extensions_text(report: str = "analysis") -> str:
    """The extensions ``-o`` knows, in words: each renderer's, each also with ``.gz`` (gzip-compressed)."""
    mine = [r for r in RENDERERS if r.report == report]
    main = [r.extension for r in mine]
    more = [e for r in mine for e in r.extensions[1:]]
    return (
        f"{', '.join(main[:-1])} or {main[-1]}"
        + (f" ({' and '.join(more)} too)" if more else "")
        + "; add .gz for a gzip-compressed file"
    )


def renderer_for_path(path: str, report: str = "analysis") -> Renderer | None:
    """The renderer an output file's extension asks for (``report.html`` -> html, ``r.json.gz`` -> json),
    or None."""
    ext = output_extension(path).removesuffix(".gz")
    return next((r for r in RENDERERS if r.report == report and ext in r.extensions), None)


def render_html(result: "AnalysisResult", **options: Any) -> str:
    return renderer("html").render(result, **options)


def render_md(result: "AnalysisResult", **options: Any) -> str:
    return renderer("md").render(result, **options)


def render_text(result: "AnalysisResult", **options: Any) -> str:
    return renderer("text").render(result, **options)


def render_json(result: "AnalysisResult", **options: Any) -> str:
    return renderer("json").render(result, **options)


__all__ = [
    "FORMATS",
    "REPORTS",
    "RENDERERS",
    "RenderFunction",
    "Renderer",
    "render_html",
    "render_json",
    "render_md",
    "render_text",
    "renderer",
    "renderer_for_path",
    "output_extension",
    "output_extensions_text",
]
