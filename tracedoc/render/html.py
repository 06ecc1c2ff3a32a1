"""Self-contained HTML report: ``AnalysisResult`` -> one HTML file.

``render_html`` renders ``reports/templates/report.html.j2`` with the CSS and JS of the same
directory inlined and the timeline data embedded as a ``<script type="application/json">`` block,
so that the file opens from disk with no network access at all.

Safety: every trace string (kernel names, annotations, stacks, paths) reaches the page either
through Jinja autoescaping or through the JSON block, whose ``<``, ``>``, ``&`` and U+2028/2029 are
escaped, and which the page reads with ``JSON.parse`` and shows with ``textContent`` only.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from .templating import asset, jinja_environment, script_json
from .viewmodel import build_report
from .views import Caps, ReportView

if TYPE_CHECKING:  # pragma: no cover
    from ..result import AnalysisResult

MAX_HTML_BYTES = 5 * 1024 * 1024
_TARGET_HTML_BYTES = 4_500_000  # leave room under the 5 MB promise


_HASH_SLOT = "sha256-SCRIPT-HASH"  # in the template's Content-Security-Policy: the page's one script's hash


def render_page(view: ReportView, job_timeline: str = "") -> str:
    """The page for ``view``; ``job_timeline``: the job's cross-rank timeline section body (render/jobtimeline.py)."""
    import markupsafe

    env = jinja_environment("html")
    data = {"timeline": view.ranks[0].timeline if view.ranks and view.ranks[0].timeline else None}
    page = env.get_template("report.html.j2").render(
        report=view,
        css=markupsafe.Markup(asset("report.css")),
        js=markupsafe.Markup(asset("report.js")),
        data_json=markupsafe.Markup(script_json(data)),
        job_timeline=markupsafe.Markup(job_timeline),
    )
    return with_script_hash(page)


def with_script_hash(page: str) -> str:
    """The page with its Content-Security-Policy allowing exactly its own inline script, by the script's
    SHA-256 (no 'unsafe-inline': a ``javascript:`` link or an injected script or handler does not run)."""
    import base64
    import hashlib
    import re

    scripts = re.findall(r"<script>(.*?)</script>", page, flags=re.S)
    digest = hashlib.sha256(scripts[0].encode("utf-8")).digest() if len(scripts) == 1 else b""
    allowed = "sha256-" + base64.b64encode(digest).decode("ascii") if digest else "none"
    return page.replace(_HASH_SLOT, allowed, 1)


_SHRINK = (
    {},
    {"table_rows": 25, "steps": 100, "ranks": 128, "name_chars": 200},
    {"table_rows": 10, "steps": 50, "ranks": 64, "name_chars": 120, "slowest_excerpt": False},
    {
        "table_rows": 5,
        "evidence_rows": 5,
        "steps": 20,
        "ranks": 32,
        "name_chars": 80,
        "curve_points": 200,
        "slowest_excerpt": False,
    },
    {
        "table_rows": 3,
        "evidence_rows": 3,
        "steps": 10,
        "ranks": 16,
        "name_chars": 60,
        "curve_points": 100,
        "timeline": False,
    },
)


def render_html(result: "AnalysisResult", caps: Caps = Caps(), overlay_href: str | None = None) -> str:
    """One self-contained HTML page for ``result``; shrinks its tables until it is under 5 MB.
    ``overlay_href``: a Perfetto overlay written beside the page, which it links to."""
    from .jobtimeline import job_timeline_html

    page = ""
    timeline = job_timeline_html(result)
    for shrink in _SHRINK:
        page = render_page(build_report(result, replace(caps, **shrink), overlay_href), timeline)
        if len(page.encode("utf-8")) <= _TARGET_HTML_BYTES:
            return page
    return page
