"""The terminal summary off a terminal (pipes, CI logs): nothing cut, no colour; its width, quiet,
verbose and top options; and the same layout for ``tracedoc rules``."""

import io
import re

import pytest

from conftest import shared_names
from tracedoc.cli import example_path, main
from tracedoc.render.console import TextOptions, color_allowed
from tracedoc.render.format import plural

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_cli(capsys, *argv):
    code = main(list(argv))
    out = capsys.readouterr().out
    return code, out


@pytest.mark.parametrize("name", shared_names("kineto", "*.json*") + shared_names("nsys", "*.sqlite"))
def test_piped_output_of_every_shared_trace_cuts_no_cell(capsys, name):
    from conftest import shared_traces

    folder = "nsys" if name.endswith(".sqlite") else "kineto"
    code, out = run_cli(capsys, "analyze", str(shared_traces() / folder / name), "--top", "20")
    assert code == 0
    assert "…" not in out  # every cell whole: long names wrap within their column
    assert not ANSI.search(out)  # no colour off a terminal


def test_findings_are_not_hard_wrapped_off_a_terminal(capsys):
    code, out = run_cli(capsys, "analyze", example_path())
    assert code == 0
    # each finding's message is one line: a sentence is never broken at the table width
    messages = [line for line in out.splitlines() if line.startswith("   ") and not line.startswith("   fix")]
    assert messages and all(len(line) > 20 for line in messages)
    assert any(len(line) > 100 for line in out.splitlines())  # wider than the table width, kept whole


def test_width_sets_the_table_width_and_narrow_columns_keep_their_headers(capsys):
    code, out = run_cli(capsys, "analyze", example_path(), "--width", "60", "--top", "3")
    lines = out.splitlines()
    start = lines.index("Top kernels")
    table = lines[start + 1: start + 8]
    assert all(len(line) <= 60 for line in table)
    assert "count" in table[0] and "share" in table[0] and "time" in table[0]
    with pytest.raises(SystemExit) as exc:
        main(["analyze", example_path(), "--width", "5"])
    assert exc.value.code == 2


def test_quiet_prints_only_the_verdict_line(capsys):
    code, out = run_cli(capsys, "analyze", example_path(), "--quiet")
    assert code == 0
    assert out.count("\n") == 1 and out.startswith("Verdict: io_bound")
    assert "ms/step" in out  # the top finding's impact on the same line


def test_top_sets_the_rows_of_each_table(capsys):
    _, out = run_cli(capsys, "analyze", example_path(), "--top", "1")
    lines = out.splitlines()
    i = lines.index("Top kernels")
    assert lines[i + 1].split() == ["count", "time", "share", "kernel"]  # numbers first, the long name last
    assert lines[i + 3] in ("Top gaps", "")  # header, one row, then the next table
    _, out0 = run_cli(capsys, "analyze", example_path(), "--top", "0")
    assert "Top kernels" not in out0


def test_verbose_shows_every_fix_of_every_finding(capsys):
    _, short = run_cli(capsys, "analyze", example_path())
    _, long = run_cli(capsys, "analyze", example_path(), "--verbose")
    assert long.count("fix: ") > short.count("fix: ")
    assert long.count("next profile should show") >= short.count("next profile should show")


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert TextOptions.for_stream(Tty()).color is True
    assert TextOptions.for_stream(io.StringIO()).color is False
    assert TextOptions.for_stream(Tty(), no_color=True).color is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert not color_allowed() and TextOptions.for_stream(Tty()).color is False

    from tracedoc import analyze
    from tracedoc.render.text import render_text

    result = analyze(example_path())
    coloured = render_text(result, options=TextOptions(width=100, terminal=True, color=True))
    plain = render_text(result, options=TextOptions(width=100, terminal=True, color=False))
    assert ANSI.search(coloured) and not ANSI.search(plain)


def test_rules_list_piped_cuts_nothing(capsys):
    code, out = run_cli(capsys, "rules")
    assert code == 0 and "…" not in out
    from tracedoc.engine.rulefile import load_rules

    code, out = run_cli(capsys, "rules", "--width", "80")  # narrower than the table: it widens, cutting nothing
    assert "…" not in out
    assert all(r.name in out and r.label in out for r in load_rules(()))
    code, out = run_cli(capsys, "rules", "--width", "140")
    assert max(map(len, out.splitlines())) <= 140


def test_plural():
    assert plural(1, "step") == "1 step"
    assert plural(0, "step") == "0 steps"
    assert plural(1024, "rank") == "1,024 ranks"


def test_off_a_terminal_each_table_row_is_one_line(capsys):
    from conftest import shared_traces

    from tracedoc import analyze

    path = shared_traces() / "kineto" / "v100_resnet_ns_rank0.pt.trace.json.gz"
    code, out = run_cli(capsys, "analyze", str(path), "--top", "4")
    lines = out.splitlines()
    i = lines.index("Top kernels")
    rows = lines[i + 2: i + 6]
    names = [r["name"] for r in analyze(str(path)).focus.evidence["top_kernels"][:4]]
    for line, name in zip(rows, names):
        assert line.rstrip().endswith(name)  # the whole kernel name, on its row's line
    assert all(line == line.rstrip() for line in lines)  # no padding at line ends
