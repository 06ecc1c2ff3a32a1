"""JSON report: the result's schema-versioned document (``tracedoc/schema/analysis.schema.json``).

The timeline excerpts (op-level data for the HTML report's timeline, most of the document's size)
are left out unless asked for (``tracedoc analyze -f json --timeline``); the schema marks them optional.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..result import AnalysisResult


def render_json(result: "AnalysisResult", timeline: bool = False) -> str:
    return result.to_json(timeline=timeline)
