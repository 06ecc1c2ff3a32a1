"""Renderers of a diff: terminal text, Markdown (a ticket comment under 65,000 characters) and one
self-contained HTML page with side-by-side bars. All three format ``diffview.build_diff_view``;
the JSON form is the typed ``DiffResult.report()``.
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

    return msgspec.json.format(to_json_bytes(d.report()), indent=2).decode()


def render_diff_text(d: "DiffResult", width: int = 100) -> str:
    from .fit import wrap_line

    v = build_diff_view(d, rows=10, name_chars=max(40, width - 50))
    out = [f"tracedoc diff: {v.before_path} → {v.after_path}", "", v.headline, ""]
    if v.warnings:
        out += [f"warning: {w}" for w in v.warnings] + [""]
    out.append(f"{'category':<16}{'before ms':>12}{'after ms':>12}{'delta ms':>12}")
    for c in v.categories:
        out.append(f"{c.category:<16}{c.before_ms:>12}{c.after_ms:>12}{c.delta_ms:>12}")
    out.append(f"{'step':<16}{v.step_before:>12}{v.step_after:>12}{v.step_delta:>12}  ({v.step_pct})")
    out += ["", f"({v.basis})"]
    if v.focus and v.ranks:
        out.append(f"tables below: {v.focus}, the rank pair with the largest change")
    if v.predictions:
        out += ["", "The base run's predictions, checked (step ms)"]
        out += [line for p in v.predictions for line in wrap_line(f"  {p.sentence}", width).split("\n")]
    for title, rows in (("New kernels", v.new_kernels), ("Vanished kernels", v.vanished_kernels),
                        ("Kernels that changed most (per step)", v.kernels)):
        if rows:
            out += ["", title]
            for k in rows:
                out.append(f"  {k.delta_ms:>9} ms  {k.status:<8} n {k.count:<14} ms {k.ms:<18} mean µs {k.mean_us:<16} {k.name}")
    if v.operators:
        out += ["", "CPU operators that changed most (per step, ms)"]
        for o in v.operators:
            out.append(f"  {o.delta:<28} {o.status:<8} calls {o.calls:<12} {o.name}")
    if v.labels_gone or v.labels_new:
        out += ["", "Labels: " + "; ".join(filter(None, [
            ("gone " + ", ".join(v.labels_gone)) if v.labels_gone else "",
            ("new " + ", ".join(v.labels_new)) if v.labels_new else "",
            ("kept " + ", ".join(v.labels_kept)) if v.labels_kept else ""]))]
    if v.metrics:
        out += ["", "Metrics that moved"]
        for m in v.metrics:
            out.append(f"  {m.change:<8} {m.name:<34} {m.before:>12} → {m.after:<12} ({m.delta})")
    if v.ranks:
        out += ["", f"{'rank':<10}{'before ms':>12}{'after ms':>12}{'delta ms':>12}  largest category"]
        for r in v.ranks:
            out.append(f"{r.rank:<10}{r.before_ms:>12}{r.after_ms:>12}{r.delta:>12}  {r.top}")
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

