"""A rule's finding and the verdict, as the reports show them: impact in the step's (or window's) terms,
the predicted gain, the evidence tables, and which findings are minor.
"""

from __future__ import annotations

from ..engine.evaluate import MIN_GAIN_FRACTION, Finding, Verdict
from ..labels import label_meaning
from .cells import build_table
from .format import fmt_ns, fmt_pct, fmt_what_if
from .views import Caps, FindingView, VerdictView

# A finding whose predicted gain (else its share of the step; of the window without steps) is under this
# is "minor" (the engine marks it, ``evaluate.MIN_GAIN_FRACTION``): reports list it apart, and the verdict
# names only the labels of findings above it. Findings whose gain cannot be predicted are never minor.
MIN_IMPACT_FRACTION = MIN_GAIN_FRACTION


def build_finding(f: Finding, caps: Caps, origin: int, per: str = "step") -> FindingView:
    frac = f.impact_fraction
    ms = f.impact_ms_per_step
    if ms is None:
        impact_ms = None
    elif per in ("step", "iteration"):
        impact_ms = f"{ms:.1f} ms/{per}" if ms >= 0.05 else f"{fmt_ns(ms * 1e6)}/{per}"
    else:
        impact_ms = f"{fmt_ns(ms * 1e6)} of the window"
    return FindingView(
        rule_id=f.rule_id,
        name=f.name,
        label=f.label,
        severity=f.severity,
        title=f.title,
        message=f.message,
        confidence=f.confidence,
        is_verdict=f.is_verdict,
        label_meaning=label_meaning(f.label),
        impact_ms=impact_ms,
        impact_of=f"the {per}",
        impact_pct=None if frac is None else fmt_pct(frac),
        impact_width=0.0 if frac is None else round(max(0.0, min(1.0, frac)) * 100, 2),
        fixes=list(f.fixes),
        expect=f.expect,
        minor=is_minor(f),
        what_if=fmt_what_if(f.what_if, per if per in ("step", "iteration") else "window"),
        what_if_method=(f.what_if or {}).get("method"),
        evidence=[
            build_table(
                table.replace("_", " "),
                rows,
                None,
                caps.evidence_rows,
                origin,
                caps.name_chars,
                key=table,
                short_names=not caps.full_names,
            )
            for table, rows in f.evidence.items()
            if rows
        ],
    )


def is_minor(f: Finding) -> bool:
    """Minor as the engine decided (``evaluate.MIN_GAIN_FRACTION``): the predicted gain, else the share of
    the step, under 2%. Findings of reports saved before the engine marked them are judged here alike."""
    if f.minor:
        return True
    w = f.what_if or {}
    gain, before = w.get("gain_ms"), w.get("step_ms_before")
    if isinstance(gain, (int, float)) and before:
        return gain < MIN_IMPACT_FRACTION * before
    if w or f.impact_fraction is None:
        return False
    return f.impact_fraction < MIN_IMPACT_FRACTION


def build_verdict(
    v: Verdict | None, findings: list[FindingView], every: list[FindingView] | None = None
) -> VerdictView:
    if v is None:
        return VerdictView(
            status="none",
            labels=[],
            confidence=None,
            headline="The rules engine did not run.",
            impact=None,
            withheld=None,
        )
    major = {f.label for f in findings}
    # the verdict names the labels that matter: those with a finding above the minimum impact
    labels = [lb for lb in v.labels if lb in major or not any(f.label == lb for f in (every or []))]
    top = next((f for f in findings if f.is_verdict), findings[0] if findings else None)
    if v.withheld:
        status, headline = "withheld", "Verdict withheld: " + v.withheld
    elif labels:
        status, headline = "findings", top.title if top else ""
    elif findings:
        status, headline = (
            "advice",
            f"No bottleneck label. Top advice: {findings[0].title}"
            + (f" ({findings[0].impact_pct} of {findings[0].impact_of})" if findings[0].impact_pct else ""),
        )
    elif every:
        status, headline = (
            "advice",
            (f"Only minor findings: none explains {fmt_pct(MIN_IMPACT_FRACTION, 0)} or more of the step time."),
        )
    else:
        status, headline = "clean", "No rule fired: nothing in this trace explains lost step time."
    impact = None
    if top and status == "findings":
        impact = " · ".join(x for x in (top.impact_ms, top.impact_pct and f"{top.impact_pct} of {top.impact_of}") if x)
    # The box headlines the top finding, so it shows that finding's confidence (the trace-wide one,
    # the lowest any health check allows, is in the trace health list).
    confidence = top.confidence if status == "findings" and top else v.confidence
    return VerdictView(
        status=status,
        labels=labels,
        confidence=confidence,
        headline=headline,
        impact=impact or None,
        withheld=v.withheld,
        label_meanings=[{"label": lb, "meaning": label_meaning(lb)} for lb in labels],
    )
