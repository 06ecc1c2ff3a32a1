"""One table of renderers; ``-o`` picks the format from the file's extension; every renderer takes a result."""

import json
import subprocess
import sys

import pytest

from tracedoc.cli.common import output_format
from tracedoc.render import FORMATS, RENDERERS, REPORTS, renderer, renderer_for_path


def test_the_table_names_each_format_of_each_report_once_with_its_extensions():
    """One table for the three reports (analyze, diff, logs), every format of each, one dispatch."""
    assert FORMATS == ("text", "json", "md", "html")
    for report in REPORTS:
        mine = [r for r in RENDERERS if r.report == report]
        assert [r.name for r in mine] == list(FORMATS)
        exts = [e for r in mine for e in r.extensions]
        assert len(exts) == len(set(exts))
        assert renderer_for_path("x.md", report).name == "md" and renderer("html", report).report == report
    assert renderer("html").extension == ".html" and not renderer("html").binary
    with pytest.raises(KeyError):
        renderer("pdf")
    with pytest.raises(KeyError):
        renderer("html", "trace")


@pytest.mark.parametrize(
    "path,fmt",
    [
        ("report.html", "html"),
        ("r.HTM", "html"),
        ("out/r.md", "md"),
        ("r.markdown", "md"),
        ("r.json", "json"),
        ("r.txt", "text"),
    ],
)
def test_format_from_the_output_extension(path, fmt):
    assert renderer_for_path(path).name == fmt
    assert output_format(None, path) == fmt


def test_explicit_format_wins_and_unknown_extensions_are_refused():
    from tracedoc.errors import UsageError

    assert output_format("json", "report.html") == "json"
    assert output_format("md", "report.log") == "md"
    assert renderer_for_path("report.log") is None
    assert renderer_for_path("report.json.gz").name == "json" and renderer_for_path("R.MD").name == "md"
    with pytest.raises(UsageError, match=r"report\.log: has no extension that names a report format \(saw '\.log'\)"):
        output_format(None, "report.log")
    assert output_format(None, None) == "text"


def test_cli_writes_the_format_its_output_name_asks_for(tmp_path):
    outputs = {"r.html": "<!DOCTYPE html>", "r.md": "## tracedoc verdict", "r.txt": "Verdict: io_bound"}
    for name, needle in outputs.items():
        proc = subprocess.run(
            [sys.executable, "-m", "tracedoc", "analyze", "--example", "-o", str(tmp_path / name)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        assert needle in (tmp_path / name).read_text(), name
    proc = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", "--example", "-o", str(tmp_path / "r.json")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert json.loads((tmp_path / "r.json").read_text())["schema"] == "tracedoc.analysis"
    assert "wrote json report" in proc.stderr


def test_version_and_help_load_no_heavy_library():
    code = (
        "import sys\nfrom tracedoc.cli import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
        "heavy = {'numpy', 'pandas', 'jinja2', 'networkx', 'rich', 'torch', 'msgspec'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
