"""The package's module import graph, measured: circles across files, back-arrows, the largest room.

Every import of every module of ``tracedoc`` counts, lazy ones inside functions and ``TYPE_CHECKING``
ones included (what ``lint-imports`` counts too), relative ones resolved; a package's ``__init__`` is a
node of its own (importing ``tracedoc.render.card`` is not counted as importing ``tracedoc.render``).

- circles: the strongly connected components of more than one module (a module that cannot be
  understood, tested or moved without the others of its component);
- back-arrows: imports from a lower layer of ``[tool.importlinter]`` in pyproject.toml to a higher one,
  or between independent siblings (``a | b``), whether the contract ignores them or not;
- room: the share of the package's lines held by its largest sub-package.

``python benchmarks/import_graph.py [--json]``; ``tests/test_layers.py`` uses ``build_graph`` and
``circles`` to keep the package free of circles.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "tracedoc"


def module_files(package: Path = PACKAGE) -> dict[str, Path]:
    """Module name -> file, for every ``.py`` file of the package (``_data`` left out)."""
    out = {}
    for p in sorted(package.rglob("*.py")):
        rel = p.relative_to(package.parent)
        if "_data" in rel.parts:
            continue
        parts = list(rel.with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def _resolve(target: str, modules: dict[str, Path]) -> str | None:
    """The longest module of the package that ``target`` names (``pkg.mod.attr`` -> ``pkg.mod``)."""
    parts = target.split(".")
    while parts:
        name = ".".join(parts)
        if name in modules:
            return name
        parts.pop()
    return None


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[int, str]]:
    """(line, module of the package) for every import in the file, at any depth."""
    root = next(iter(modules)).split(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            # from pkg import a, b: submodules where they are files, else attributes of pkg
            targets = [f"{mod}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            if t.split(".")[0] != root:
                continue
            hit = _resolve(t, modules)
            if hit is not None and hit != name:
                out.append((node.lineno, hit))
    return out


def build_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports."""
    modules = module_files(package)
    return {name: {t for _, t in imports_of(name, path, modules)} for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, largest first (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return sorted(out, key=lambda c: (-len(c), c))


def layers(pyproject: Path = ROOT / "pyproject.toml") -> tuple[str, list[list[list[str]]]]:
    """The container and its layers, top first: each layer a list of independent groups (``|``), each
    group a list of siblings (``:``)."""
    contract = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"][0]
    out = [[[name.strip() for name in group.split(":")] for group in layer.split("|")] for layer in contract["layers"]]
    return contract["containers"][0], out


def _place(module: str, container: str, order: list[list[list[str]]]) -> tuple[int, int] | None:
    if not module.startswith(container + "."):
        return None
    child = module[len(container) + 1 :].split(".")[0]
    for i, layer in enumerate(order):
        for j, group in enumerate(layer):
            if child in group:
                return i, j
    return None


def back_arrows(graph: dict[str, set[str]], pyproject: Path = ROOT / "pyproject.toml") -> list[tuple[str, str]]:
    """Imports from a lower layer to a higher one (layers listed top first), or across ``|``."""
    container, order = layers(pyproject)
    out = []
    for src, targets in graph.items():
        a = _place(src, container, order)
        for dst in targets:
            b = _place(dst, container, order)
            if a is None or b is None:
                continue
            if b[0] < a[0] or (b[0] == a[0] and b[1] != a[1]):
                out.append((src, dst))
    return sorted(out)


def rooms(package: Path = PACKAGE) -> dict[str, int]:
    """Lines per sub-package (directory) and per top-level module of the package."""
    out: dict[str, int] = {}
    for name, path in module_files(package).items():
        parts = name.split(".")
        key = ".".join(parts[:2]) if len(parts) > 1 else name
        out[key] = out.get(key, 0) + len(path.read_text(encoding="utf-8").splitlines())
    return out


def folders(package: Path = PACKAGE) -> dict[str, int]:
    """Lines per folder of the package, of the modules directly in it (a folder's sub-folders are rooms of
    their own): what a reader finds side by side in one listing."""
    out: dict[str, int] = {}
    for path in module_files(package).values():
        key = ".".join(path.relative_to(package.parent).parent.parts)
        out[key] = out.get(key, 0) + len(path.read_text(encoding="utf-8").splitlines())
    return out


def measure(package: Path = PACKAGE) -> dict:
    graph = build_graph(package)
    lines = rooms(package)
    total = sum(lines.values())
    subpackages = {k: v for k, v in lines.items() if (package.parent / k.replace(".", "/")).is_dir()}
    largest = max(subpackages, key=subpackages.get)
    own = {k: v for k, v in folders(package).items() if k != package.name}  # the package's own top level aside
    folder = max(own, key=own.get)
    return {
        "modules": len(graph),
        "imports": sum(len(t) for t in graph.values()),
        "circles": circles(graph),
        "back_arrows": back_arrows(graph),
        "lines": total,
        "largest_room": largest,
        "largest_room_lines": subpackages[largest],
        "largest_room_share": round(subpackages[largest] / total, 4),
        "largest_folder": folder,
        "largest_folder_lines": own[folder],
        "largest_folder_share": round(own[folder] / total, 4),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="the measures as one JSON document")
    args = ap.parse_args(argv)
    m = measure()
    if args.json:
        print(json.dumps(m, indent=2))
        return 0
    print(f"{m['modules']} modules, {m['imports']} imports between them, {m['lines']} lines")
    print(f"circles across files: {len(m['circles'])}")
    for c in m["circles"]:
        print(f"  {len(c)} files: {', '.join(c)}")
    print(f"back-arrows (against the layer order): {len(m['back_arrows'])}")
    for src, dst in m["back_arrows"]:
        print(f"  {src} -> {dst}")
    print(
        f"largest stage (a sub-package with all under it): {m['largest_room']}, {m['largest_room_lines']} of "
        f"{m['lines']} lines ({m['largest_room_share']:.1%})"
    )
    print(
        f"largest room (one folder's own modules): {m['largest_folder']}, {m['largest_folder_lines']} lines "
        f"({m['largest_folder_share']:.1%})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
