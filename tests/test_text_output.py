"""The terminal summary off a terminal (pipes, CI logs): it fits its width (100 columns by default),
names in short distinct forms, no colour; its width, full-names, quiet, verbose and top options; and the
layout of ``tracedoc rules``."""

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


def table_rows(out: str, title: str) -> list[str]:
    """The lines of a table of the summary under its title: header first, up to the next blank or title."""
    lines = out.splitlines()
    i = lines.index(title)
    rows = []
    for line in lines[i + 1 :]:
        if not line.strip() or not line.startswith(" ") and rows and not line[0].isdigit():
            break
        rows.append(line)
    return rows


def assert_fits(out: str, width: int) -> None:
    """No line is longer than ``width``, except one that holds a word longer than the width can hold
    (a path or URL, kept whole); no colour."""
    assert not ANSI.search(out)
    for line in out.splitlines():
        if len(line) > width:
            words = line.split()
            assert max(map(len, words)) > width - 3 - len(line) + len(line.lstrip()), line


def shared_inputs() -> list[str]:

    return (
        [f"kineto/{n}" for n in shared_names("kineto", "*.json*")]
        + [f"nsys/{n}" for n in shared_names("nsys", "*.sqlite")]
        + [f"h100/{n}" for n in shared_names("h100", "*.gz")]
        + [f"h100/{n}" for n in shared_names("h100", "job3_*")]
    )


@pytest.mark.parametrize("name", shared_inputs())
def test_piped_output_of_every_shared_trace_fits_its_width(capsys, name):
    from conftest import shared_traces

    path = str(shared_traces() / name)
    for width, argv in ((100, []), (80, ["--width", "80"]), (120, ["--width", "120"])):
        code, out = run_cli(capsys, "analyze", path, "--top", "20", *argv)
        assert code == 0
        assert_fits(out, width)
        if "Top kernels" in out:
            rows = table_rows(out, "Top kernels")[1:]
            assert all(re.match(r"^\s*[\d,]+\s", r) for r in rows), rows  # one line per kernel: no wrapped cell
            names = [r.split("%", 1)[1].strip() for r in rows]
            assert len(set(names)) == len(names), names  # two kernels never show the same text


def test_sentences_wrap_at_words_with_their_indent(capsys):
    code, out = run_cli(capsys, "analyze", example_path())
    assert code == 0
    lines = out.splitlines()
    assert max(map(len, lines)) <= 100
    messages = [i for i, line in enumerate(lines) if line.startswith("   fix: ")]
    assert messages
    # a fix longer than the width goes on in lines indented as it is, no word broken
    long = [
        i
        for i in messages
        if i + 1 < len(lines)
        and lines[i + 1].startswith("   ")
        and not lines[i + 1].lstrip().startswith(("fix:", "next profile", "minor", "+"))
    ]
    assert long, out
    joined = " ".join(line.strip() for line in lines[long[0] : long[0] + 2])
    assert joined.startswith("fix: ") and "  " not in joined


def test_a_path_longer_than_the_width_stays_whole():
    from tracedoc.render.fit import wrap_line

    path = "/data/" + "x" * 150 + "/trace.json.gz"
    text = wrap_line(f"   fix: open {path} in Perfetto and look at the first step", 60)
    assert path in text.splitlines()[1].strip().split()  # whole, on its own line
    assert all(len(line) <= 60 for line in text.splitlines() if path not in line)
    assert all(line.startswith("   ") for line in text.splitlines()[1:])


def test_width_sets_the_table_width_and_narrow_columns_keep_their_headers(capsys):
    code, out = run_cli(capsys, "analyze", example_path(), "--width", "60", "--top", "3")
    lines = out.splitlines()
    start = lines.index("Top kernels")
    table = lines[start + 1 : start + 8]
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
    from tracedoc.render.names import short_forms

    path = shared_traces() / "kineto" / "v100_resnet_ns_rank0.pt.trace.json.gz"
    every = [r.name for r in analyze(str(path)).focus.evidence["top_kernels"]][:50]  # the table's rows
    names = every[:4]
    code, out = run_cli(capsys, "analyze", str(path), "--top", "4")
    rows = table_rows(out, "Top kernels")[1:]
    assert len(rows) == 4
    for line, name, short in zip(rows, names, short_forms(every)):
        assert line.rstrip().endswith(short) and len(short) < len(name)  # the short form, on its row's line
    code, out = run_cli(capsys, "analyze", str(path), "--top", "4", "--full-names")
    rows = table_rows(out, "Top kernels")[1:]
    for line, name in zip(rows, names):
        assert line.rstrip().endswith(name)  # the whole kernel name, on its row's line
    assert all(line == line.rstrip() for line in out.splitlines())  # no padding at line ends
