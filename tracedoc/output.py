"""The output façade: every result's ``to_text``, ``to_markdown``, ``to_html``, ``to_json``, ``save`` and
notebook card (``_repr_html_``), done by the renderers.

The results are plain data below the renderers (``tracedoc.result``, ``tracedoc.diff``, ``tracedoc.logs``)
and never import them; their output methods call ``tracedoc.display``, which this module fills when
``tracedoc`` is imported. It sits above ``tracedoc.render`` (the layer of ``tracedoc.api``) and imports
each renderer on first use, so ``import tracedoc`` loads none.
"""

from __future__ import annotations

import os
from typing import Any

from . import display


def render(result: Any, report: str, fmt: str, **options: Any) -> str:
    """``result`` of ``report`` (analysis, diff, trend or log) as ``fmt`` (text, json, md, html) or as its
    notebook ``card``."""
    if fmt == "card":
        return card(result, report)
    from .render.notebook import render_as

    return render_as(result, report, fmt, **options)


def card(result: Any, report: str) -> str:
    """The compact HTML card a notebook shows for a result."""
    from .render import card as cards

    show = {
        "analysis": cards.render_card,
        "diff": cards.render_diff_card,
        "trend": cards.render_trend_card,
        "log": cards.render_log_card,
    }[report]
    return show(result)


def save(result: Any, path: str | os.PathLike, report: str, fmt: str | None = None) -> None:
    from .render.notebook import save_as

    save_as(result, path, report, fmt)


display.install(render, save)
