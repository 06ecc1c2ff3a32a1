"""Renderers of a trend (``tracedoc diff BASE RUN2 RUN3 ...``): a table of the runs against the base,
with the step change attributed by category per run, then the base's predictions checked against each
run. Text, Markdown and HTML format ``build_trend_view``; JSON is the ``TrendResult`` record itself.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..neutral import clean_lines
from .diffview import VERDICT_WORDS, PredictionRow, prediction_row
from .format import ms_figure

if TYPE_CHECKING:  # pragma: no cover
    from ..diff.trend import TrendResult


@dataclass
class TrendRow:
    """One run of a trend against the base, its numbers formatted."""

    run: str  # "base", "2", "3" ...
    name: str  # the run's file name (its path where two names agree)
    step_ms: str
    delta_ms: str
    pct: str
    verdict: str
    categories: list[str]  # each shown category's part of the change, in ``TrendView.categories`` order
    led_by: str
    labels: str  # "gone io_bound; new compute_bound"
    predictions: list[PredictionRow] = field(default_factory=list)


@dataclass
class TrendView:
    """What every renderer of a trend shows, built once by ``build_trend_view``."""

    base: str
    categories: list[str]  # the categories that moved in some run (the others are zero throughout)
    rows: list[TrendRow]
    noise_pct: float
    warnings: list[str]

    @property
    def checks(self) -> list[tuple[str, PredictionRow]]:
        """(run, check) for every run's checks of the base's predictions."""
        return [(r.run, p) for r in self.rows for p in r.predictions]


def _names(paths: list[str]) -> list[str]:
    base = [os.path.basename(os.path.normpath(p)) or p for p in paths]
    return [b if base.count(b) == 1 else p for b, p in zip(base, paths)]


def build_trend_view(t: "TrendResult") -> TrendView:
    doc = t
    names = _names([doc.base.path] + [r.path for r in doc.runs])
    moved = [
        c
        for c in doc.categories
        if any(abs(a.delta_ns) >= 500 for r in doc.runs for a in r.attribution if a.category == c)
    ]
    rows = [
        TrendRow(
            run="base",
            name=names[0],
            step_ms=ms_figure(doc.base.step_ns),
            delta_ms="",
            pct="",
            verdict="",
            categories=["" for _ in moved],
            led_by="",
            labels="",
        )
    ]
    warnings = []
    for i, r in enumerate(doc.runs):
        att = {a.category: a.delta_ns for a in r.attribution}
        labels = "; ".join(
            filter(
                None,
                [
                    "gone " + ", ".join(r.labels.gone) if r.labels.gone else "",
                    "new " + ", ".join(r.labels.new) if r.labels.new else "",
                ],
            )
        )
        rows.append(
            TrendRow(
                run=str(i + 2),
                name=names[i + 1],
                step_ms=ms_figure(r.step_ns),
                delta_ms=ms_figure(r.delta_ns, signed=True),
                pct=f"{r.step_pct:+.1f}%" if r.step_pct is not None else "n/a",
                verdict=VERDICT_WORDS.get(r.verdict, r.verdict),
                categories=[ms_figure(att[c], signed=True) for c in moved],
                led_by=", ".join(r.led_by) if r.verdict in ("regression", "improvement") else "",
                labels=labels,
                predictions=[prediction_row(p) for p in r.predictions],
            )
        )
        warnings += [f"run {i + 2}: {w}" for w in r.warnings]
    return TrendView(base=doc.base.path, categories=moved, rows=rows, noise_pct=doc.noise_floor_pct, warnings=warnings)


def render_trend_json(t: "TrendResult") -> str:
    import msgspec

    from ..model.record import to_json_bytes

    return msgspec.json.format(to_json_bytes(t), indent=2).decode()


NAME_MIN = 12  # the name column's least width before the category columns move to tables of their own


def render_trend_text(t: "TrendResult", width: int = 100) -> str:
    """The trend as text ``width`` columns wide: the runs' table (names wrap in their column, numbers stay
    whole), then each category's part of the change in columns that fit (as many tables as it takes),
    then the labels and sentences, wrapped at words."""
    from .fittable import GAP, fit_table, wrap_text

    v = build_trend_view(t)

    def wrapped(text: str) -> list[str]:
        return wrap_text(text, width)

    out = [
        *wrapped(f"tracedoc diff: {len(v.rows)} runs, each against the first ({v.base})"),
        "",
        *wrapped(
            "step: median step time; category columns: each category's part of the change from the base "
            "(ms, summing to Δ ms)"
        ),
        "",
    ]
    head = ["run", "name", "step ms", "Δ ms", "Δ %", "verdict", *v.categories]
    rows = [[r.run, r.name, r.step_ms, r.delta_ms, r.pct, r.verdict, *r.categories] for r in v.rows]
    kinds = ["id", "text", "num", "num", "num", "id", *("num" for _ in v.categories)]
    fixed = sum(max(len(row[i]) for row in [head, *rows]) for i in range(len(head)) if i != 1)
    if fixed + GAP * (len(head) - 1) + min(NAME_MIN, max(len(row[1]) for row in [head, *rows])) <= width:
        return _trend_tail(v, out + fit_table(head, rows, kinds, width, min_text=NAME_MIN), width)
    # too many numbers for one line: the runs first, then the categories in as many tables as it takes
    out += fit_table(head[:6], [row[:6] for row in rows], kinds[:6], width, min_text=NAME_MIN)
    if v.categories:
        out += ["", *wrapped("Each category's part of the change from the base (ms per step, summing to Δ ms)")]
        runs = v.rows[1:]
        first = max(len("run"), *(len(r.run) for r in runs))
        chunk: list[int] = []
        used = first
        chunks = []
        for i, c in enumerate(v.categories):
            need = GAP + max(len(c), *(len(r.categories[i]) for r in runs))
            if chunk and used + need > width:
                chunks.append(chunk)
                chunk, used = [], first
            chunk.append(i)
            used += need
        chunks.append(chunk)
        for k, chunk in enumerate(chunks):
            out += ([""] if k else []) + fit_table(
                ("run", *(v.categories[i] for i in chunk)),
                [(r.run, *(r.categories[i] for i in chunk)) for r in runs],
                ("id", *("num" for _ in chunk)),
                width,
            )
    return _trend_tail(v, out, width)


def _trend_tail(v: TrendView, out: list[str], width: int) -> str:
    from .fittable import wrap_text

    def wrapped(text: str) -> list[str]:
        return wrap_text(text, width)

    labelled = [r for r in v.rows if r.labels]
    if labelled:
        out += ["", "Labels against the base"] + [x for r in labelled for x in wrapped(f"  run {r.run}: {r.labels}")]
    if v.checks:
        out += ["", "The base run's predictions, checked against each run (step ms)"]
        out += [x for run, p in v.checks for x in wrapped(f"  run {run}: {p.sentence}")]
    if v.warnings:
        out += [""] + [x for w in v.warnings for x in wrapped(f"warning: {w}")]
    return clean_lines(out) + "\n"  # paths and labels from traces and saved reports, cleaned (tracedoc.neutral)


def render_trend_md(t: "TrendResult") -> str:
    from .markdown import md_escape

    v = build_trend_view(t)
    head = ["run", "name", "step ms", "Δ ms", "Δ %", "verdict", *v.categories, "led by", "labels"]
    out = [
        f"## tracedoc diff: {len(v.rows)} runs, each against the first",
        "",
        f"Base: {md_escape(v.base)}. Category columns: each category's part of the change from the base "
        "(ms, summing to Δ ms).",
        "",
        "| " + " | ".join(head) + " |",
        "|"
        + "|".join("---:" if 2 <= i <= 4 or 6 <= i < 6 + len(v.categories) else "---" for i in range(len(head)))
        + "|",
    ]
    for r in v.rows:
        cells = [
            r.run,
            md_escape(r.name),
            r.step_ms,
            r.delta_ms,
            r.pct,
            md_escape(r.verdict),
            *r.categories,
            md_escape(r.led_by),
            md_escape(r.labels),
        ]
        out.append("| " + " | ".join(cells) + " |")
    if v.checks:
        out += ["", "### The base run's predictions, checked against each run", ""]
        out += [f"- run {run}: {md_escape(p.sentence)}" for run, p in v.checks]
    if v.warnings:
        out += [""] + [f"- **warning**: {md_escape(w)}" for w in v.warnings]
    return "\n".join(out) + "\n"


def render_trend_html(t: "TrendResult") -> str:
    import markupsafe

    from .templating import asset, jinja_environment

    from .trendchart import trend_chart

    env = jinja_environment("html")
    return env.get_template("trend.html.j2").render(
        trend=build_trend_view(t), css=markupsafe.Markup(asset("diff.css")), chart=markupsafe.Markup(trend_chart(t))
    )
