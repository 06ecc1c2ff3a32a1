"""Renderers of a diff: terminal text, Markdown (a ticket comment under 65,000 characters) and one
self-contained HTML page with side-by-side bars. All three format ``diffview.build_diff_view``;
the JSON form is the ``DiffResult`` record itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..neutral import clean_lines
from .diffview import DiffView, build_diff_view

if TYPE_CHECKING:  # pragma: no cover
    from ..diff.model import DiffResult

MAX_MD_CHARS = 65_000
_TARGET_MD_CHARS = 60_000
_MD_SHRINK = ((15, 160), (8, 100), (4, 80), (2, 60), (1, 40))
_TARGET_HTML_BYTES = 4_500_000


def render_diff_json(d: "DiffResult") -> str:
    import msgspec

    from ..model.record import to_json_bytes

    return msgspec.json.format(to_json_bytes(d), indent=2).decode()


def render_diff_text(d: "DiffResult", width: int = 100) -> str:
    """The diff as text ``width`` columns wide: sentences wrap at words, tables keep their numbers whole
    and wrap their names (``render.fittable``)."""
    from .fittable import fit_table, wrap_text

    v = build_diff_view(d, rows=10, name_chars=240)  # names whole: they wrap in their column
    out = [*wrap_text(f"tracedoc diff: {v.before_path} → {v.after_path}", width), "", *wrap_text(v.headline, width), ""]
    if v.warnings:
        out += [x for w in v.warnings for x in wrap_text(f"warning: {w}", width)] + [""]
    cats = [(c.category, c.before_ms, c.after_ms, c.delta_ms, "") for c in v.categories]
    cats.append(("step", v.step_before, v.step_after, v.step_delta, f"({v.step_pct})"))
    out += fit_table(
        ("category", "before ms", "after ms", "delta ms", ""), cats, ("text", "num", "num", "num", "num"), width
    )
    out += [""] + wrap_text(f"({v.basis})", width)
    if v.focus and v.ranks:
        out += wrap_text(f"tables below: {v.focus}, the rank pair with the largest change", width)
    if v.predictions:
        out += ["", "The base run's predictions, checked (step ms)"]
        out += [line for p in v.predictions for line in wrap_text(f"  {p.sentence}", width)]
    for title, rows in (
        ("New kernels", v.new_kernels),
        ("Vanished kernels", v.vanished_kernels),
        ("Kernels that changed most (per step)", v.kernels),
    ):
        if rows:
            out += ["", title]
            out += fit_table(
                ("Δ ms", "status", "count", "ms", "mean µs", "kernel"),
                [(k.delta_ms, k.status, k.count, k.ms, k.mean_us, k.name) for k in rows],
                ("num", "id", "num", "num", "num", "text"),
                width,
                indent=2,
            )
    if v.operators:
        out += ["", "CPU operators that changed most (per step, ms)"]
        out += fit_table(
            ("Δ", "status", "calls", "operator"),
            [(o.delta, o.status, o.calls, o.name) for o in v.operators],
            ("num", "id", "num", "text"),
            width,
            indent=2,
        )
    if v.labels_gone or v.labels_new:
        out += [""] + wrap_text(
            "Labels: "
            + "; ".join(
                filter(
                    None,
                    [
                        ("gone " + ", ".join(v.labels_gone)) if v.labels_gone else "",
                        ("new " + ", ".join(v.labels_new)) if v.labels_new else "",
                        ("kept " + ", ".join(v.labels_kept)) if v.labels_kept else "",
                    ],
                )
            ),
            width,
        )
    if v.metrics:
        out += ["", "Metrics that moved"]
        out += fit_table(
            ("change", "metric", "before", "after", "Δ"),
            [(m.change, m.name, m.before, m.after, m.delta) for m in v.metrics],
            ("id", "id", "num", "num", "num"),
            width,
            indent=2,
        )
    if v.ranks:
        out += [""] + fit_table(
            ("rank", "before ms", "after ms", "delta ms", "largest category"),
            [(r.rank, r.before_ms, r.after_ms, r.delta, r.top) for r in v.ranks],
            ("id", "num", "num", "num", "text"),
            width,
        )
    return clean_lines(out) + "\n"  # names and labels from traces and saved reports, cleaned (tracedoc.neutral)


def render_diff_md(d: "DiffResult") -> str:
    from .markdown import md_escape
    from .templating import jinja_environment

    env = jinja_environment("md")
    env.filters["md"] = md_escape
    template = env.get_template("diff.md.j2")
    text = ""
    for rows, chars in _MD_SHRINK:
        text = template.render(diff=build_diff_view(d, rows=rows, name_chars=chars))
        if len(text) <= _TARGET_MD_CHARS:
            return text
    note = "\n\n_(comment cut at 60,000 characters; run `tracedoc diff --format json` for everything)_\n"
    cut = text.rfind("\n", 0, _TARGET_MD_CHARS - len(note))
    return text[: max(cut, 0)] + note


def render_diff_html(d: "DiffResult") -> str:
    import markupsafe

    from .templating import asset, jinja_environment

    env = jinja_environment("html")
    template = env.get_template("diff.html.j2")
    page = ""
    for rows, chars in ((25, 240), (10, 120), (3, 60)):
        view: DiffView = build_diff_view(d, rows=rows, name_chars=chars)
        page = template.render(diff=view, css=markupsafe.Markup(asset("diff.css")))
        if len(page.encode("utf-8")) <= _TARGET_HTML_BYTES:
            break
    return page
