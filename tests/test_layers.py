"""The package's imports follow the data flow: a module imports only from its own layer or lower ones.

The layers are the import-linter contract in pyproject.toml (``lint-imports``, run by CI before the
tests, and here): cli > capture > api > render > result/checks > engine > job/diff/logs/estimate >
analyses > ingest > model > the leaf modules (errors, exits, version, labels, resources, ...).
Imports inside functions count too: a lazy import is still a dependency. This file adds what the
contract cannot say: the notebook conveniences import the renderers only inside themselves, the
package imports itself relatively, and no module grows past ~500 lines.
"""

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "tracedoc"
ROOT = PACKAGE.parent
# The one exception to the layers, by name: notebook conveniences on a result that hand it to a renderer
# when called (``result.to_html()``). They import lazily inside these methods only, so loading, saving and
# comparing results never loads a renderer; no other function of the module may import upwards.
_OUTPUTS = {"to_text", "to_markdown", "to_html", "to_json", "_repr_html_", "save"}
CONVENIENCES = {("tracedoc.result", "tracedoc.render"): _OUTPUTS, ("tracedoc.diff.model", "tracedoc.render"): _OUTPUTS,
                ("tracedoc.diff.trend", "tracedoc.render"): _OUTPUTS, ("tracedoc.logs.report", "tracedoc.render"): _OUTPUTS}


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


def convenience_import(path: Path, module: str, line: int, target: str) -> bool:
    """True for an import listed in CONVENIENCES, made inside one of the functions named there."""
    allowed = next((names for (mod, up), names in CONVENIENCES.items()
                    if module == mod and (target == up or target.startswith(up + "."))), None)
    if not allowed:
        return False
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return any(isinstance(node, ast.FunctionDef) and node.name in allowed and node.lineno < line <= node.end_lineno
               for node in ast.walk(tree))


@pytest.mark.parametrize("module", sorted({m for m, _ in CONVENIENCES}))
def test_convenience_imports_only_inside_their_functions(module):
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    ups = [(line, t) for line, t in imported_modules(path) if t.startswith("tracedoc.render")]
    assert ups, f"{module}'s notebook conveniences import the renderers lazily"
    assert all(convenience_import(path, module, line, t) for line, t in ups)
    assert not convenience_import(path, module, 1, "tracedoc.render")  # at module level: never


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


@pytest.mark.parametrize("path", all_modules(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_the_package_imports_itself_relatively(path):
    """One import style: ``from ..model import trace``, never ``from tracedoc.model import trace``, so
    a module reads the same wherever the package is installed or vendored."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    absolute = [node.lineno for node in ast.walk(tree)
                if (isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "tracedoc")
                or (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "tracedoc" for a in node.names))]
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
                    pytest.fail(f"{path.relative_to(PACKAGE.parent)}:{sub.lineno}: tracedoc's own module imported "
                                f"under an ImportError guard ({here})")
                if isinstance(sub, ast.Import) and any(a.name.startswith("tracedoc") for a in sub.names):
                    pytest.fail(f"{path.relative_to(PACKAGE.parent)}:{sub.lineno}: tracedoc module under an ImportError guard")


def test_every_module_is_small():
    big = {str(p.relative_to(PACKAGE.parent)): n for p in all_modules()
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > 500}
    assert not big, big


def test_importing_the_api_loads_no_heavy_library():
    """pandas, networkx and jinja2 are imported inside the functions that use them, so importing the
    API, every analysis and the job view (what ``tracedoc analyze`` imports) loads none of them."""
    import subprocess
    import sys
    code = ("import sys, pkgutil, importlib\nimport tracedoc.api, tracedoc.job.view, tracedoc.analyses as A\n"
            "for m in pkgutil.walk_packages(A.__path__, 'tracedoc.analyses.'):\n"
            "    importlib.import_module(m.name)\n"
            "heavy = {'pandas', 'networkx', 'jinja2'} & set(sys.modules)\n"
            "assert not heavy, heavy\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("name", ["kineto/v100_resnet_ns_rank0.pt.trace.json.gz", "kineto/v100_2rank_rank1.json.gz",
                                  "kineto/dlrm_128rank_rank0.json.gz", "nsys/nsys2022_con_kernel.sqlite",
                                  "nsys/nsys2026_h100_2gpu_1s.sqlite", "dir:dlrm_128rank"])
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
    code = ("import runpy, sys\n"
            "sys.modules['pandas'] = None  # any import of pandas raises\n"
            f"sys.argv = ['tracedoc', 'analyze', {str(path)!r}, '-q']\n"
            "try:\n    runpy.run_module('tracedoc', run_name='__main__')\nexcept SystemExit as e:\n"
            "    assert not e.code, e.code\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=PACKAGE.parent)
    assert proc.returncode == 0, proc.stderr
