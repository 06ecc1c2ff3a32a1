"""The training-log report's view model: what every log report shows, already
formatted, built by ``logview.build_log_view`` and read by the terminal, Markdown and HTML renderers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


_ANOMALY_PLACE = ("kind", "step", "start_step", "end_step", "rule", "criterion", "series")


@dataclass
class LogView:
    """What every log report shows, built once by ``logview.build_log_view``: the verdict, the summary
    lines, findings, config checks, anomalies (cut to ``anomalies``; ``anomaly_count`` is all of them),
    notes, warnings and, for HTML, the charts as SVG geometry (``size`` is their frame)."""

    source: str
    format: str
    labels: list[str]
    summary: list[str]
    findings: list[Any]  # tracedoc.model.verdict.Finding
    config_checks: list[dict[str, Any]]
    anomalies: list[dict[str, Any]]
    anomaly_count: int
    notes: list[str]
    warnings: list[str]
    points: int  # logged steps
    charts: list[dict[str, Any]] = field(default_factory=list)
    size: dict[str, int] = field(default_factory=dict)

    @staticmethod
    def where(a: dict[str, Any]) -> str:
        """An anomaly's step, or steps."""
        return f"step {a['step']}" if "step" in a else f"steps {a['start_step']}-{a['end_step']}"

    @staticmethod
    def details(a: dict[str, Any]) -> str:
        """An anomaly in a line: its series, the rule that reads it, then its values as ``name=value`` (its
        place, rule and criterion are shown apart)."""
        from .format import fmt_log_value

        where = f"[{a['series']}] " if a.get("series") else ""
        rule = f"{a['rule']}: " if a.get("rule") else ""
        return where + rule + ", ".join(f"{k}={fmt_log_value(v)}" for k, v in a.items() if k not in _ANOMALY_PLACE)

    @staticmethod
    def fmt(v: Any, spec: str | None = None) -> str:
        from .format import fmt_log_value

        return fmt_log_value(v, spec)
