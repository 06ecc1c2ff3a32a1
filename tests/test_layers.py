"""The package's imports follow the data flow: a module imports only from its own layer or lower ones.

The layers are the import-linter contract in pyproject.toml (``lint-imports``, run by CI before the
tests, and here): cli > capture > api/output/stages > render > diff > result/checks > engine > job/logs >
analyses > ingest/estimate > model > the leaf modules (errors, exits, version, labels, display, ...).
Imports inside functions count too: a lazy import is still a dependency. This file adds what the
contract cannot say: no import circle across files (benchmarks/import_graph.py measures the graph), the
contract ignores nothing but the capture entry point's import of the CLI (the results' notebook
conveniences reach the renderers through the output façade, ``tracedoc.output``), the package imports
itself relatively, and no module grows past ~500 lines.
"""

import ast
import importlib.util
import sys
import tomllib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tracedoc"
ROOT = PACKAGE.parent


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import in ``path``, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    here = module_name(path).split(".")
    package = here[:-1]  # the package a relative import starts from (for __init__ too: its own package)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not node.module:  # from . import a, b: submodules (or attributes of the package)
                out.extend((node.lineno, submodule_or_package(target, alias.name)) for alias in node.names)
            else:
                out.append((node.lineno, target))
    return out


def submodule_or_package(package: str, name: str) -> str:
    rel = Path(*package.split(".")[1:], name)
    exists = (PACKAGE / rel).is_dir() or (PACKAGE / rel).with_suffix(".py").is_file()
    return f"{package}.{name}" if exists else package


def all_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "_data" not in p.parts)


def test_resolves_relative_imports():
    path = PACKAGE / "render" / "html.py"
    mods = {m for _, m in imported_modules(path)}
    assert {"tracedoc.render.templating", "tracedoc.render.viewmodel", "tracedoc.result"} <= mods


def test_import_contracts_hold():
    """The layers contract of pyproject.toml (what ``lint-imports`` checks in CI)."""
    importlinter = pytest.importorskip("importlinter.cli", reason="import-linter is in the dev extra")
    import os

    here = os.getcwd()
    os.chdir(ROOT)  # the contract is read from the checkout's pyproject.toml
    try:
        assert importlinter.lint_imports(no_cache=True) == 0, "run `lint-imports` to see the broken contract"
    finally:
        os.chdir(here)


def _import_graph():
    spec = importlib.util.spec_from_file_location("import_graph", ROOT / "benchmarks" / "import_graph.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("import_graph", mod)
    spec.loader.exec_module(mod)
    return mod


def test_no_import_circle_across_files():
    """No two modules import each other, directly or through others (lazy and TYPE_CHECKING imports
    included): each module can be read, tested and moved with what is below it alone."""
    graph = _import_graph()
    found = graph.circles(graph.build_graph(PACKAGE))
    assert not found, "import circles (strongly connected modules): " + "; ".join(" <-> ".join(c) for c in found)


def test_the_circle_finder_finds_circles():
    graph = _import_graph()
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e", "d"}, "f": {"g"}, "g": {"f"}}
    assert graph.circles(edges) == [["a", "b", "c"], ["f", "g"]]
    assert graph.circles({"a": {"b"}, "b": set()}) == []


def test_the_graph_resolves_lazy_and_relative_imports():
    graph = _import_graph().build_graph(PACKAGE)
    assert "tracedoc.render.perfetto_job" in graph["tracedoc.render.perfetto"]  # lazy, inside write_perfetto
    assert {"tracedoc.display", "tracedoc.checks", "tracedoc.analyses.core.rank"} <= graph["tracedoc.result"]
    assert "tracedoc.output" in graph["tracedoc"]


def test_the_contract_ignores_only_the_capture_entry_point():
    """The results import no renderer: the contract's one exception is ``python -m tracedoc.capture``,
    an entry point that runs the CLI (like ``tracedoc.__main__``)."""
    contract = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    ignored = contract["contracts"][0].get("ignore_imports", [])
    assert ignored and all(rule.startswith("tracedoc.capture.__main__ -> tracedoc.cli") for rule in ignored), ignored


def test_results_reach_the_renderers_only_through_the_output_facade():
    """The modules below the renderers never name ``tracedoc.render``; their output methods go through
    ``tracedoc.display``, which importing ``tracedoc`` fills."""
    for module in ("tracedoc/result.py", "tracedoc/diff/model.py", "tracedoc/diff/trend.py", "tracedoc/logs/report.py"):
        mods = {m for _, m in imported_modules(ROOT / module)}
        assert "tracedoc.display" in mods and not any(m.startswith("tracedoc.render") for m in mods), module


def test_importing_the_results_loads_no_renderer():
    """Loading, comparing and saving results needs no renderer: importing the results, the diff, the logs
    and the API loads none, yet the output façade is installed for their methods."""
    import subprocess

    code = (
        "import sys\nimport tracedoc.result, tracedoc.diff, tracedoc.diff.trend, tracedoc.logs.report, tracedoc.api\n"
        "from tracedoc import display\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('tracedoc.render'))\n"
        "assert not loaded, loaded\n"
        "assert display._render is not None and display._save is not None\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("path", all_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_package_imports_itself_relatively(path):
    """One import style: ``from ..model import trace``, never ``from tracedoc.model import trace``, so
    a module reads the same wherever the package is installed or vendored."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    absolute = [
        node.lineno
        for node in ast.walk(tree)
        if (isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "tracedoc")
        or (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "tracedoc" for a in node.names))
    ]
    assert not absolute, f"{path.relative_to(ROOT)}: absolute imports of tracedoc at lines {absolute}"


@pytest.mark.parametrize("path", all_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_import_guard_around_the_package_itself(path):
    """``try: import ... except ImportError`` only for optional dependencies, never for tracedoc's own
    modules: a guard there turns a real import bug into "not available"."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    here = module_name(path).split(".")[:-1]
    for node in ast.walk(tree):
        if not isinstance(node, ast.Try):
            continue
        catches = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
        if not catches & {"ImportError", "ModuleNotFoundError", "(ImportError, ValueError)"}:
            continue
        for stmt in node.body:
            for sub in ast.walk(stmt):
                if isinstance(sub, ast.ImportFrom) and (sub.level or (sub.module or "").startswith("tracedoc")):
                    pytest.fail(
                        f"{path.relative_to(PACKAGE.parent)}:{sub.lineno}: tracedoc's own module imported "
                        f"under an ImportError guard ({here})"
                    )
                if isinstance(sub, ast.Import) and any(a.name.startswith("tracedoc") for a in sub.names):
                    pytest.fail(
                        f"{path.relative_to(PACKAGE.parent)}:{sub.lineno}: tracedoc module under an ImportError guard"
                    )


def test_every_module_is_small():
    big = {
        str(p.relative_to(PACKAGE.parent)): n
        for p in all_modules()
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500
    }
    assert not big, big


def test_importing_the_api_loads_no_heavy_library():
    """pandas, networkx and jinja2 are imported inside the functions that use them, so importing the
    API, every analysis and the job view (what ``tracedoc analyze`` imports) loads none of them."""
    import subprocess
    import sys

    code = (
        "import sys, pkgutil, importlib\nimport tracedoc.api, tracedoc.job.view, tracedoc.analyses as A\n"
        "for m in pkgutil.walk_packages(A.__path__, 'tracedoc.analyses.'):\n"
        "    importlib.import_module(m.name)\n"
        "heavy = {'pandas', 'networkx', 'jinja2'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(
    "name",
    [
        "kineto/v100_resnet_ns_rank0.pt.trace.json.gz",
        "kineto/v100_2rank_rank1.json.gz",
        "kineto/dlrm_128rank_rank0.json.gz",
        "nsys/nsys2022_con_kernel.sqlite",
        "nsys/nsys2026_h100_2gpu_1s.sqlite",
        "dir:dlrm_128rank",
    ],
)
def test_analysing_one_trace_loads_no_pandas(name, tmp_path):
    """``tracedoc analyze`` of one trace (kernels, gaps, syncs, collectives, FLOPs, flow-linked
    launches) or of a job (a 2-GPU nsys export, a directory of rank files: collectives matched
    across ranks) runs on numpy alone: pandas cannot be imported during the command, in this process
    nor in the processes it forks (rank workers, the critical path's child), which inherit the block."""
    import subprocess
    import sys

    from conftest import shared_traces

    if name.startswith("dir:"):
        path = tmp_path / "ranks"
        path.mkdir()
        for rank in (0, 1):
            (path / f"rank{rank}.json.gz").symlink_to(shared_traces() / f"kineto/{name[4:]}_rank{rank}.json.gz")
    else:
        path = shared_traces() / name
    code = (
        "import runpy, sys\n"
        "sys.modules['pandas'] = None  # any import of pandas raises\n"
        f"sys.argv = ['tracedoc', 'analyze', {str(path)!r}, '-q']\n"
        "try:\n    runpy.run_module('tracedoc', run_name='__main__')\nexcept SystemExit as e:\n"
        "    assert not e.code, e.code\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=PACKAGE.parent)
    assert proc.returncode == 0, proc.stderr
