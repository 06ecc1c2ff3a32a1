"""GitHub-flavoured Markdown report: ``AnalysisResult`` -> a ticket comment under 65,000 characters.

Uses the same view model as the HTML report (``tracedoc.render.viewmodel.build_report``) and renders
``reports/templates/report.md.j2``. Trace strings are escaped for Markdown (``|``, backticks, ``<``
and the characters that start emphasis or links), so a kernel name cannot break a table, open a code
span or inject HTML. When the comment would be too long, tables are cut further and each says how
many rows were left out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..neutral import md_code_block as md_code, md_escape  # noqa: F401 - the Markdown escapes live in neutral
from .templating import jinja_environment
from .text_many import cut_rank_table
from .viewmodel import build_report
from .views import Caps

if TYPE_CHECKING:  # pragma: no cover
    from ..result import AnalysisResult

MAX_MD_CHARS = 65_000
_TARGET_MD_CHARS = 60_000

_SHRINK = (
    {"table_rows": 10, "evidence_rows": 5, "steps": 20, "ranks": 64, "name_chars": 160, "timeline": False},
    {"table_rows": 5, "evidence_rows": 3, "steps": 10, "ranks": 32, "name_chars": 120, "timeline": False},
    {"table_rows": 3, "evidence_rows": 2, "steps": 5, "ranks": 16, "name_chars": 80, "timeline": False},
    {"table_rows": 1, "evidence_rows": 1, "steps": 2, "ranks": 8, "name_chars": 60, "timeline": False},
)


def render_md(result: "AnalysisResult", caps: Caps = Caps()) -> str:
    """A Markdown comment for ``result``, always under 65,000 characters."""
    env = jinja_environment("md")
    env.filters["md"] = md_escape
    env.filters["code"] = md_code
    template = env.get_template("report.md.j2")
    text = ""
    for shrink in _SHRINK:
        view = build_report(result, replace(caps, **shrink))
        if view.job is not None and view.job.digest is not None and view.rank_table is not None:
            view = replace(view, rank_table=cut_rank_table(view.rank_table, view.job.digest))  # many ranks
        text = template.render(report=view)
        if len(text) <= _TARGET_MD_CHARS:
            return text
    # Still too long (thousands of findings or huge messages): cut at a line and say so.
    note = "\n\n_(report cut at 60,000 characters; run `tracedoc analyze --format json` for everything)_\n"
    cut = text.rfind("\n", 0, _TARGET_MD_CHARS - len(note))
    return text[: max(cut, 0)] + note
