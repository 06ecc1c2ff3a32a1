"""Start-up time of `tracedoc --version` and `tracedoc --help` against the 0.1 s target (docs/performance.md).

Runs each command (and a bare `python -c pass` for the interpreter's own share) several times in
fresh processes, alternating, and prints the median wall time; then the import time of the
`tracedoc` modules from `python -X importtime`, and checks that none of the heavy libraries
(numpy, pandas, jinja2, networkx, rich, torch, msgspec, orjson) is imported.

    python benchmarks/bench_startup.py [--reps 15] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 0.1
HEAVY = ("numpy", "pandas", "jinja2", "networkx", "rich", "torch", "msgspec", "orjson")
COMMANDS = {
    "python -c pass": ["-c", "pass"],
    "tracedoc --version": ["-m", "tracedoc", "--version"],
    "tracedoc --help": ["-m", "tracedoc", "--help"],
}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def wall_s(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(), cwd=ROOT
    )
    return time.perf_counter() - t0


def import_profile(args: list[str]) -> tuple[float, list[str]]:
    """(cumulative µs of importing tracedoc's modules, the heavy top-level modules imported)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *args], capture_output=True, text=True, env=_env(), cwd=ROOT, check=True
    )
    tracedoc_us = 0.0
    heavy = set()
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line.split("|"))
        if cumulative.isdigit() and name == "tracedoc":
            tracedoc_us = max(tracedoc_us, float(cumulative))
        if name.split(".")[0] in HEAVY:
            heavy.add(name.split(".")[0])
        if cumulative.isdigit() and name == "tracedoc.cli":
            tracedoc_us = max(tracedoc_us, float(cumulative))
    return tracedoc_us, sorted(heavy)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--json", action="store_true", help="print the numbers as JSON")
    a = p.parse_args()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for args in COMMANDS.values():  # warm the file cache and the bytecode
        wall_s(args)
    for _ in range(a.reps):
        for name, args in COMMANDS.items():
            times[name].append(wall_s(args))
    rows = {}
    for name, args in COMMANDS.items():
        import_us, heavy = import_profile(args) if name != "python -c pass" else (0.0, [])
        rows[name] = {
            "median_s": statistics.median(times[name]),
            "min_s": min(times[name]),
            "tracedoc_import_ms": import_us / 1000,
            "heavy_imports": heavy,
        }
    if a.json:
        print(json.dumps({"target_s": TARGET_S, "reps": a.reps, "commands": rows}, indent=2))
        return 0
    bare = rows["python -c pass"]["median_s"]
    print(f"start-up over {a.reps} runs each (median / min wall), target {TARGET_S:.2f} s; CPU count {os.cpu_count()}")
    for name, row in rows.items():
        verdict = (
            ""
            if name == "python -c pass"
            else (
                "  meets the target"
                if row["median_s"] <= TARGET_S
                else f"  over the target; {row['median_s'] - bare:.3f} s above a bare interpreter"
            )
        )
        extra = (
            ""
            if name == "python -c pass"
            else (
                f"; tracedoc imports {row['tracedoc_import_ms']:.1f} ms; heavy imports: "
                f"{', '.join(row['heavy_imports']) or 'none'}"
            )
        )
        print(f"  {name:<20} {row['median_s']:.3f} s / {row['min_s']:.3f} s{extra}{verdict}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
