"""The documentation in docs/: its reference pages are generated from the metric table, the rule files,
the labels and the evidence tables (``python -m tracedoc.docsgen``) and must not drift from them; every
relative link of the README files resolves; no file of the repository cites a file outside it; and the
site's nav takes pages as they come (docs/hooks.py).

``python -m tracedoc.docsgen`` (or ``pytest --update-gold``) writes the reference pages again. CI also
builds the site with ``mkdocs build --strict``, which checks every link and anchor of the pages.
"""

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tracedoc import docsgen
from tracedoc.engine.rulefile import load_rules
from tracedoc.labels import LABELS, VERDICT_LABELS
from tracedoc.model.metrics import TABLE

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# A citation of a file outside the repository: the design notes and research kept beside the checkout.
# Reading the shared real traces (../shared/traces) is what tests and benchmarks do, not a citation.
OUTSIDE = re.compile(
    "|".join([r"DESIGN\.md", r"\.\./shared/(?!traces)", r"shared/research", r"STYLE\.md", r"research/[A-Z]+\.md"])
)
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


@pytest.mark.parametrize("name", sorted(docsgen.PAGES))
def test_reference_pages_are_generated_from_their_sources(request, name):
    """The drift test: each page is exactly what its source generates."""
    path = DOCS / name
    want = docsgen.render(name)
    if request.config.getoption("--update-gold"):
        path.write_text(want, encoding="utf-8")
    assert path.is_file(), f"{name} is missing: run `python -m tracedoc.docsgen`"
    assert path.read_text(encoding="utf-8") == want, (
        f"docs/{name} is stale: run `python -m tracedoc.docsgen` to generate it from its source again"
    )


def test_the_metric_page_has_every_metric_of_the_table():
    page = docsgen.metrics_page()
    for m in TABLE:
        row = next((line for line in page.splitlines() if f'<a id="{m.name}"></a>' in line), None)
        assert row is not None, m.name
        assert m.unit in row and docsgen.prose(m.meaning) in row, m.name


def test_the_rule_and_label_pages_have_every_rule_and_label():
    rules = load_rules()
    page, labels = docsgen.rules_page(rules), docsgen.labels_page(rules)
    for rule in rules:
        assert f'<a id="{rule.id}"></a>' in page and f"### {rule.id} {rule.name}" in page
        assert docsgen.prose(rule.docs["why_it_matters"]) in page
        for p in rule.params.values():
            assert f"`{p.name}` = `{p.default!r}`" in page, (rule.id, p.name)
        assert f"[{rule.id}](rules.md#{rule.id})" in labels
    for label in LABELS:
        assert f'<a id="{label}"></a>' in labels


def test_markdown_escaping_shows_text_as_it_is():
    assert docsgen.esc("a_b *c* [d](e) | <f>") == r"a\_b \*c\* \[d\](e) \| &lt;f&gt;"
    assert docsgen.prose("x `a_b|c` y") == "x <code>a&#95;b&#124;c</code> y"
    assert docsgen.prose("one ` backtick") == "one \\` backtick"
    assert docsgen.reference("https://example.org/x (y_z)") == "<https://example.org/x> (y\\_z)"


def test_the_user_guide_explains_every_verdict_label():
    guide = (DOCS / "guide.md").read_text(encoding="utf-8")
    section = guide[guide.index("\n## Labels") :]
    missing = [label for label in VERDICT_LABELS if f"| `{label}` |" not in section]
    assert not missing, f"docs/guide.md's Labels table lacks {missing}"


def test_readme_gives_the_two_set_up_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "pip install . && tracedoc analyze --example" in readme
    assert 'pip install -e ".[dev,capture]" "torch==2.13.0" && python -m pytest -q' in readme


@pytest.mark.parametrize("readme", ["README.md", "rules/README.md", "benchmarks/README.md"])
def test_readme_links_resolve(readme):
    path = ROOT / readme
    broken = []
    for target in LINK.findall(path.read_text(encoding="utf-8")):
        if "://" in target or target.startswith(("#", "mailto:")):
            continue
        if not (path.parent / target.split("#", 1)[0]).exists():
            broken.append(target)
    assert not broken, f"{readme}: links to missing files {broken}"


def repository_files() -> list[Path]:
    """The repository's files: git's list where there is one, else the tree less what is ignored."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60).stdout
        files = [ROOT / name for name in out.decode().split("\0") if name]
    except (OSError, subprocess.SubprocessError):
        files = [
            p
            for p in ROOT.rglob("*")
            if p.is_file()
            and not any(part.startswith(".") or part in ("__pycache__", "site") for part in p.relative_to(ROOT).parts)
        ]
    return [p for p in files if p.is_file()]


def test_no_file_cites_a_file_outside_the_repository():
    """Users and contributors have only the repository: definitions are cited from docs/, not from notes
    beside the checkout."""
    here = Path(__file__).resolve()
    found = []
    for path in repository_files():
        if path.resolve() == here or path.suffix in (".gz", ".sqlite", ".png", ".whl"):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:100]}")
    assert not found, "cite the docs/ page instead:\n" + "\n".join(found)


def load_hook():
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_nav_drops_missing_pages_and_takes_new_ones(tmp_path):
    """A page named in mkdocs.yml but not written yet is left out; a page nobody listed joins the guide."""
    for name in ("index.md", "guide.md", "new-page.md", "reference/metrics.md"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("# x\n")
    nav = [
        {"Home": "index.md"},
        {"Guide": [{"Analysing": "guide.md"}, {"Later": "later.md"}]},
        {"Reference": [{"Metrics": "reference/metrics.md"}, {"Gone": "gone/x.md"}]},
        {"Empty": [{"None": "none.md"}]},
        {"Site": "https://example.org/"},
    ]
    config = load_hook().on_config({"docs_dir": str(tmp_path), "nav": nav})
    assert config["nav"] == [
        {"Home": "index.md"},
        {"Guide": [{"Analysing": "guide.md"}, "new-page.md"]},
        {"Reference": [{"Metrics": "reference/metrics.md"}]},
        {"Site": "https://example.org/"},
    ]


def test_the_site_builds_strictly(tmp_path):
    """Every page renders and every link and anchor between them resolves (what CI's docs build checks)."""
    pytest.importorskip("mkdocs", reason="mkdocs is in the dev extra")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--quiet",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "reference" / "metrics" / "index.html").is_file()
