"""JSON report: the result's schema-versioned document (``tracedoc/schema/analysis.schema.json``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from ..result import AnalysisResult


def render_json(result: "AnalysisResult") -> str:
    return result.to_json()
