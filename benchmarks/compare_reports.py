#!/usr/bin/env python3
"""Every number of every report identical between two checkouts of tracedoc, compared value by value.

    python benchmarks/compare_reports.py --base /path/to/other/checkout [--new .] [--shared DIR]

Runs ``tracedoc analyze INPUT -f json --timeline`` on every shared trace (the Kineto and H100 files,
the H100 job directories, the nsys exports) once with each checkout on ``PYTHONPATH``, and compares
the exit codes, the warnings on stderr and the JSON documents value by value (floats exactly). Only
the ``command`` line may differ. Prints each difference with its JSON path; exit 1 on any.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_big_trace as gen  # noqa: E402

IGNORED = {("command",)}


def inputs(shared: Path) -> list[Path]:
    t = shared / "traces"
    files = sorted(p for p in (t / "kineto").iterdir() if p.name.endswith((".json", ".json.gz")))
    files += sorted((t / "h100").glob("*.json.gz"))
    files += sorted(p for p in (t / "h100").iterdir() if p.is_dir())
    files += sorted((t / "nsys").glob("*.sqlite"))
    return files


def in_checkout(checkout: str, args: list[str]) -> subprocess.CompletedProcess:
    """``python ARGS`` with ``checkout``'s code: run inside the checkout, since ``python -m`` and ``-c`` put
    the working directory first on the path, so run from another checkout they would import that one's
    tracedoc whatever PYTHONPATH says (both sides would then be the same code)."""
    env = {**os.environ, "PYTHONPATH": checkout}
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=checkout, timeout=900)


def run(checkout: str, path: Path) -> tuple[int, list[str], object]:
    """``tracedoc analyze`` of ``path`` by ``checkout``'s code."""
    p = in_checkout(
        checkout, ["-m", "tracedoc", "analyze", str(path.resolve()), "-f", "json", "--timeline", "--no-progress"]
    )
    try:
        doc = json.loads(p.stdout) if p.stdout.strip() else None
    except json.JSONDecodeError:
        doc = p.stdout
    return p.returncode, p.stderr.splitlines(), doc


def imported_from(checkout: str) -> str:
    """Where the tracedoc a run in ``checkout`` imports lives."""
    p = in_checkout(checkout, ["-c", "import tracedoc; print(tracedoc.__file__)"])
    return str(Path(p.stdout.strip()).resolve()) if p.returncode == 0 else f"nothing ({p.stderr.strip()[-200:]})"


def differences(a, b, path=()) -> list[str]:
    if path in IGNORED:
        return []
    where = "/".join(map(str, path)) or "(document)"
    if type(a) is not type(b):
        return [f"{where}: {a!r:.80} ({type(a).__name__}) != {b!r:.80} ({type(b).__name__})"]
    if isinstance(a, dict):
        out = [f"{where}: key {k!r} only in {'base' if k in a else 'new'}" for k in sorted(set(a) ^ set(b))]
        for k in a:
            if k in b:
                out += differences(a[k], b[k], path + (k,))
        return out
    if isinstance(a, list):
        out = [f"{where}: {len(a)} items != {len(b)}"] if len(a) != len(b) else []
        for i, (x, y) in enumerate(zip(a, b)):
            out += differences(x, y, path + (i,))
        return out
    return [] if a == b or (a != a and b != b) else [f"{where}: {a!r:.80} != {b!r:.80}"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True, help="the checkout to compare against (its root, put on PYTHONPATH)")
    ap.add_argument("--new", default=str(HERE.parent), help="the checkout under test (default: this one)")
    ap.add_argument("--shared", default=str(gen.DEFAULT_SHARED))
    a = ap.parse_args(argv)
    base, new = str(Path(a.base).resolve()), str(Path(a.new).resolve())
    for checkout in (base, new):  # each side must run its own code, or the comparison proves nothing
        where = imported_from(checkout)
        if not where.startswith(checkout + os.sep):
            print(f"{checkout}: 'python -m tracedoc' there imports {where}, not its own tracedoc", file=sys.stderr)
            return 2
    bad = 0
    files = inputs(Path(a.shared))
    for f in files:
        (rc0, err0, doc0), (rc1, err1, doc1) = run(base, f), run(new, f)
        diffs = [f"exit code {rc0} != {rc1}"] if rc0 != rc1 else []
        diffs += [f"stderr: {x!r:.160} != {y!r:.160}" for x, y in zip(err0, err1) if x != y]
        if len(err0) != len(err1):
            diffs.append(f"stderr: {len(err0)} lines != {len(err1)}")
        diffs += differences(doc0, doc1)
        print(
            f"{'same' if not diffs else 'DIFFERENT':<9} {f.relative_to(Path(a.shared))}"
            + (f" ({len(diffs)} differences)" if diffs else ""),
            flush=True,
        )
        for d in diffs[:20]:
            print("    " + d)
        bad += bool(diffs)
    print(f"\n{len(files) - bad} of {len(files)} inputs give identical reports")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
