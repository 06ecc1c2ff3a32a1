"""Strings from traces, logs, file names and saved reports are shown, never obeyed: no escape sequence,
bidi control or fake line reaches a terminal, and no Markdown, HTML, link or mention reaches a ticket."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path


from trace_builder import TraceBuilder, training_steps
from tracedoc.neutral import clean_text, clean_view, md_code_span, md_escape

ROOT = Path(__file__).resolve().parents[1]
ESC_TITLE = "\x1b]0;owned\x07"  # set the window title
ESC_CLEAR = "\x1b[2J\x1b[H"  # clear the screen
ESC_LINK = "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"  # a terminal hyperlink
RLO = "\u202e"
FAKE_LINE = "\nVerdict: no finding"
RICH_MARKUP = "[link=https://evil.example]x[/link][/]"
HOSTILE = f"gemm{ESC_TITLE}{ESC_CLEAR}{RLO}lmth.exe{ESC_LINK}{RICH_MARKUP}{FAKE_LINE}\u200b\x9b31m"
MD_HOSTILE = (
    "x` ![i](https://evil.example/i.png) [l](javascript:alert(1)) <img src=x onerror=alert(1)> "
    "@everyone www.evil.example"
)


def _raw_controls(text: str) -> list[str]:
    return sorted(
        {
            c
            for c in text
            if (ord(c) < 32 and c != "\n")
            or 0x7F <= ord(c) < 0xA0
            or c in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c\u200b\u2028\u2029"
        }
    )


def _cli(*args, cwd=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), NO_COLOR="1")
    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *map(str, args)],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
    )


def _hostile_trace(path: Path) -> Path:
    b = TraceBuilder()
    training_steps(b, steps=4, kernels=4)
    for e in b.events:
        if e.get("cat") == "kernel":
            e["name"] = HOSTILE
        elif e.get("cat") == "cpu_op":
            e["name"] = "aten::" + HOSTILE
    return b.write(path)


def test_clean_text_escapes_every_control_and_leaves_plain_text_alone():
    assert clean_text("aten::mm µs → ✓") == "aten::mm µs → ✓"
    out = clean_text(HOSTILE)
    assert _raw_controls(out) == [] and "\n" not in out
    assert "\\x1b" in out and "\\u202e" in out and "\\x9b" in out and "\\u200b" in out
    assert clean_text("a\tb") == "a b"


def test_clean_view_reaches_nested_dataclasses_tuples_and_dict_keys():
    from dataclasses import dataclass
    from typing import NamedTuple

    class Pair(NamedTuple):
        a: str
        b: int

    @dataclass(frozen=True)
    class Row:
        name: str
        cells: list
        extra: dict

    row = Row(HOSTILE, [HOSTILE, 3, Pair(HOSTILE, 1)], {HOSTILE: (HOSTILE, None)})
    out = clean_view(row)
    assert row.name == HOSTILE  # the original is not changed
    flat = repr(out)
    assert "\x1b" not in flat and RLO not in flat and out.cells[1] == 3 and isinstance(out.cells[2], Pair)


def test_text_report_of_a_hostile_trace_is_inert(tmp_path):
    trace = _hostile_trace(tmp_path / "t.json")
    for args in ((), ("-v",), ("--width", "60")):
        proc = _cli("analyze", trace, "--no-progress", *args)
        assert proc.returncode == 0, proc.stderr
        assert _raw_controls(proc.stdout + proc.stderr) == []
        assert not re.search(r"^\s*Verdict: no finding", proc.stdout, re.M)  # no fake verdict line
        assert "gemm\\" in proc.stdout  # shown, escaped (a long name may be cut to fit its column)
        assert "Traceback" not in proc.stderr


def test_rank_file_and_log_file_names_are_cleaned_in_text_and_on_stderr(tmp_path):
    job = tmp_path / "job"
    job.mkdir()
    b = TraceBuilder()
    training_steps(b, steps=4, kernels=3)
    b.write(job / f"rank0{ESC_CLEAR}{RLO}.json")
    (job / f"rank1{ESC_TITLE}.json").write_text("{not json")  # a broken rank: its name lands in a warning
    proc = _cli("analyze", job, "--no-progress", "-j", "1")
    assert proc.returncode in (0, 1), proc.stderr
    assert _raw_controls(proc.stdout + proc.stderr) == [] and "Traceback" not in proc.stderr
    log = tmp_path / f"train{ESC_TITLE}{RLO}.jsonl"
    log.write_text("".join(json.dumps({"step": i, "loss": 2.0 - i / 500, "note": HOSTILE}) + "\n" for i in range(60)))
    proc = _cli("logs", log)
    assert proc.returncode == 0, proc.stderr
    assert _raw_controls(proc.stdout + proc.stderr) == []
    proc = _cli("logs", tmp_path / f"missing{ESC_CLEAR}.jsonl")
    assert proc.returncode != 0 and _raw_controls(proc.stderr) == [] and len(proc.stderr.splitlines()) == 1


def _saved_report(tmp_path: Path, name: str, hostile: bool) -> Path:
    trace = _hostile_trace(tmp_path / f"{name}.json") if hostile else None
    if trace is None:
        b = TraceBuilder()
        training_steps(b, steps=4, kernels=4)
        trace = b.write(tmp_path / f"{name}.json")
    out = tmp_path / f"{name}.report.json"
    proc = _cli("analyze", trace, "--no-progress", "-f", "json", "-o", out)
    assert proc.returncode == 0, proc.stderr
    if hostile:  # hand-edited labels and sources, as a hostile baseline in a repository would have them
        doc = json.loads(out.read_text())
        for r in doc["ranks"]:  # where diff reads: finding labels, kernel names, the trace format
            r["source"] = MD_HOSTILE + HOSTILE
            for f in (r.get("verdict") or {}).get("findings") or []:
                f["label"] = MD_HOSTILE + HOSTILE
            for k in r["evidence"].get("kernel_totals") or []:
                k["name"] = MD_HOSTILE + HOSTILE + k["name"]
            r["environment"]["format"] = MD_HOSTILE
        out.write_text(json.dumps(doc))
    return out


def test_diff_of_hostile_saved_reports_is_inert_in_text_and_markdown(tmp_path):
    base = _saved_report(tmp_path, "base", hostile=False)
    new = _saved_report(tmp_path, "new", hostile=True)
    text = _cli("diff", base, new)
    assert text.returncode == 0, text.stderr
    assert "\\x1b" in text.stdout  # the hostile strings are shown, escaped
    assert _raw_controls(text.stdout + text.stderr) == []
    if True:
        md = _cli("diff", base, new, "-f", "md")
        assert md.returncode == 0, md.stderr
        body = md.stdout
        assert "&lt;img" in body
        assert _raw_controls(body) == []
        assert "<img" not in body and "@everyone" not in body and not re.search(r"(?<!\\)(!\[|\]\()", body)
        assert "https://" not in body and "www.evil" not in body  # no autolink either
        assert MD_HOSTILE.split()[0] not in body  # the label's backtick did not survive to open a code span


def test_md_escape_neutralises_markdown_html_links_and_mentions():
    out = md_escape(MD_HOSTILE)
    assert "`" not in out.replace("\\`", "")
    assert "<" not in out and ">" not in out
    assert "@everyone" not in out and "@" not in out
    assert not re.search(r"(?<!\\)(!\[|\]\()", out) and "https://" not in out and "www.evil" not in out
    assert md_escape(out) == out  # already escaped text is not escaped twice
    span = md_code_span("a`b\nc" + RLO)
    assert "`" not in span and "\n" not in span and RLO not in span


def test_every_markdown_template_value_passes_an_escaping_filter():
    """Each ``{{ ... }}`` of the Markdown templates ends in md, code or code_span, or shows a number, a
    macro's output or a fixed word (listed here)."""
    safe = re.compile(
        r"^(table\(|left\(|kernels\(|loop\.index|\"|'|report\.rank_count|report\.focus_rank|"
        r"r\.minor_threshold|.*left_out.*|.*\.total|.*\| length.*|.*_count.*|report\.points|"
        r"h\.level|h\.confidence|f\.rule_id|f\.label|f\.severity|s\.label|c\.label|c$|"
        r"s\.(device|stream|launches|depth_max|depth_mean|blocked_calls)|"
        r"(c|k|o|m|r|diff)\.(before_ms|after_ms|delta_ms|delta|count|ms|mean_us|calls|cpu_ms|gpu_ms|"
        r"before|after|step_before|step_after|step_delta|step_pct)|r\.header|a\.kind|"
        r"report\.where\(a\)|n$|r\.launch_queue\.capacity$)"
    )
    templates = sorted((ROOT / "reports" / "templates").glob("*.md.j2"))
    assert templates
    bad = []
    for t in templates:
        for expr in re.findall(r"\{\{-?\s*(.*?)\s*-?\}\}", t.read_text()):
            if re.search(r"\|\s*(md|code|code_span)\s*(\)|$)", expr) or 'map("md")' in expr or safe.match(expr):
                continue
            bad.append(f"{t.name}: {{{{ {expr} }}}}")
    assert bad == [], "unescaped template values:\n" + "\n".join(bad)


def test_an_error_quotes_only_an_excerpt_of_a_huge_value(tmp_path):
    base = _saved_report(tmp_path, "base", hostile=False)
    doc = json.loads(base.read_text())
    doc["schema_version"] = HOSTILE + "x" * 10_000
    bad = tmp_path / "bad.report.json"
    bad.write_text(json.dumps(doc))
    proc = _cli("diff", base, bad)
    assert proc.returncode in (1, 2) and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 1000 and _raw_controls(proc.stderr) == []
