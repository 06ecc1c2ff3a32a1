"""The last line of the terminal summary: the verdict, the top finding and its predicted gain, so that the
verdict of a long report is on screen at its end."""

from __future__ import annotations

from rich.text import Text

from .views import ReportView


def _gain(what_if: str | None) -> str:
    """A what-if as a predicted gain in a few words: "step 14 ms → ~9 ms, −36%", or "not predicted"."""
    if not what_if or "not predicted" in what_if:
        return "not predicted"
    return what_if.split(" (", 1)[0]


SUMMARY_TITLE_MIN = 20  # the top finding's title is cut to keep the summary on one line, never below this


def summary_line(view: ReportView, width: int | None = None) -> Text:
    """The last line of the summary: the verdict, the top finding and its predicted gain, on one line of
    ``width`` where cutting the finding's title (shown whole above) to ``SUMMARY_TITLE_MIN`` makes it fit."""
    if view.job is not None:
        job = view.job
        verdict = ", ".join(job.labels) or "no job-level finding"
        conf = f" ({job.confidence})" if job.confidence and job.labels else ""
        top = job.findings[0] if job.findings else None
        if top is None:
            return Text(f"Summary: job verdict {verdict}{conf} · no finding to fix", style="bold")
        tag = "" if top.label in job.labels else f"[{top.label}] "
        return _summary(
            f"Summary: job verdict {verdict}{conf} · top finding: {tag}",
            top.title,
            f", {top.impact}" if top.impact else "",
            _gain(top.what_if),
            width,
        )
    r = view.ranks[0]
    v = r.verdict
    where = f"rank {view.focus_rank}: " if view.multi_rank else ""
    if v.status == "withheld":
        verdict = "withheld (see trace health)"
    elif v.status == "none":
        verdict = "none (no rules were evaluated)"
    else:
        verdict = (", ".join(v.labels) or "no finding") + (f" ({v.confidence})" if v.confidence and v.labels else "")
    top = next((f for f in r.findings if f.is_verdict), r.findings[0] if r.findings else None)
    if top is None:
        return Text(f"Summary: {where}{verdict} · no finding to fix", style="bold")
    share = f", {top.impact_pct} of {top.impact_of}" if top.impact_pct else ""
    tag = "" if top.label in v.labels else f"[{top.label}] "
    return _summary(f"Summary: {where}{verdict} · top finding: {tag}", top.title, share, _gain(top.what_if), width)


def _summary(head: str, title: str, impact: str, gain: str, width: int | None) -> Text:
    """One line where it can be: the finding's impact (shown above) left out first, then its title cut."""
    tail = f"{impact} · predicted gain: {gain}"
    if width and len(head) + len(title) + len(tail) > width:
        tail = f" · predicted gain: {gain}"
        room = width - len(head) - len(tail)
        if len(title) > room >= SUMMARY_TITLE_MIN:
            title = title[: room - 1].rstrip() + "…"
        elif room < SUMMARY_TITLE_MIN:  # it wraps anyway: the whole of it, impact included
            tail = f"{impact} · predicted gain: {gain}"
    return Text(head + title + tail, style="bold")
