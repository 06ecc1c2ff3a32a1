"""Trace strings with bidirectional controls cannot reorder the report text around them."""

from __future__ import annotations

import re

from trace_builder import TraceBuilder, training_steps
from tracedoc.api import analyze
from tracedoc.render import render_html, render_md
from tracedoc.render.templating import FSI, PDI, isolate_bidi

RLO, LRE, PDF = "\u202e", "\u202a", "\u202c"


def hostile_result(tmp_path):
    b = TraceBuilder()
    training_steps(b, steps=3, kernels=4)
    for e in b.events:
        if e.get("cat") == "kernel":
            e["name"] = f"gemm_{RLO}exe.txt_kernel"
            break
    for e in b.events:
        if e.get("cat") == "cpu_op":
            e["name"] = f"aten::{LRE}mm"
    return analyze(b.write(tmp_path / "t.json"))


def _outside_isolates(text: str) -> str:
    """The text with every FSI ... PDI span removed (isolates do not nest in what we write)."""
    return re.sub(f"{FSI}[^{PDI}]*{PDI}", "", text)


def test_every_bidi_control_in_the_html_report_sits_inside_an_isolate(tmp_path):
    result = hostile_result(tmp_path)
    out = render_html(result)
    assert RLO in out and LRE in out  # the names are shown as they are
    rest = _outside_isolates(out)
    assert RLO not in rest and LRE not in rest
    assert out.count(FSI) == out.count(PDI)


def test_markdown_and_text_show_bidi_controls_as_visible_escapes(tmp_path):
    from tracedoc.render import render_text

    result = hostile_result(tmp_path)
    for out in (render_md(result), render_text(result)):
        assert RLO not in out and LRE not in out
        assert "\\u202e" in out or "\\\\u202e" in out  # shown, escaped (Markdown escapes the backslash too)


def test_plain_strings_are_left_alone():
    assert isolate_bidi("aten::mm") == "aten::mm"
    assert isolate_bidi(3) == 3
    assert isolate_bidi(f"a{PDF}b") == f"{FSI}a{PDF}b{PDI}"
