"""Long fuzz run over the surfaces a local attacker reaches with small files: nsys export schemas and
values, Perfetto inputs (``--perfetto``'s overlay and the merged timeline's ranks) and JSON Lines log keys.
A table of outcomes by surface and mutation class, the slowest case, and peak memory.

    PYTHONPATH=$PWD python benchmarks/fuzz_hostile_campaign.py --cases 5000 --seed 1

``tests/fuzz_hostile.py`` defines the mutations and the outcome classes; every case runs in this process.
Needs the shared traces' nsys mock export (``TRACEDOC_SHARED``, else ``../shared``). Exit status 1 when any
case ended in a traceback, a hang, a violation or over the memory bound.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import fuzz_hostile  # noqa: E402

BAD = ("traceback", "hang", "violation", "memory")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=5_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=30, help="seconds before a case counts as a hang")
    args = ap.parse_args(argv)
    shared = Path(os.environ.get("TRACEDOC_SHARED") or Path(__file__).resolve().parents[2] / "shared")
    export = shared / "traces" / "nsys" / "nsys2026_mock.sqlite"
    if not export.is_file():
        print(f"needs {export} (the shared traces)", file=sys.stderr)
        return 2
    table: dict[tuple[str, str], collections.Counter] = collections.defaultdict(collections.Counter)
    bad: list[tuple[int, str, str, str, str]] = []
    cpu0, wall0 = time.process_time(), time.perf_counter()
    slowest = (0.0, "")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bases = fuzz_hostile.make_bases(root / "base", export)
        for i, case in enumerate(fuzz_hostile.generate(args.seed, args.cases, bases)):
            t0 = time.perf_counter()
            outcome, message = fuzz_hostile.run_case(case, root / f"c{i}", bases, timeout_s=args.timeout)
            dt = time.perf_counter() - t0
            if dt > slowest[0]:
                slowest = (dt, f"{case.surface}/{case.cls}: {case.detail}")
            table[(case.surface, case.cls)][outcome] += 1
            if outcome in BAD:
                bad.append((i, f"{case.surface}/{case.cls}", outcome, case.detail, message))
            shutil.rmtree(root / f"c{i}", ignore_errors=True)
    print(f"{'surface/class':<22}" + "".join(f"{o:>11}" for o in fuzz_hostile.OUTCOMES))
    total: collections.Counter = collections.Counter()
    for key in sorted(table):
        total.update(table[key])
        print(f"{'/'.join(key):<22}" + "".join(f"{table[key][o]:>11}" for o in fuzz_hostile.OUTCOMES))
    print(f"{'all':<22}" + "".join(f"{total[o]:>11}" for o in fuzz_hostile.OUTCOMES))
    print(
        f"{args.cases} cases in {time.perf_counter() - wall0:.0f} s wall, {time.process_time() - cpu0:.0f} s CPU; "
        f"peak RSS {fuzz_hostile._peak_mb():.0f} MB (bound {fuzz_hostile.MEMORY_BOUND_MB} MB); slowest "
        f"{slowest[0]:.1f} s ({slowest[1][:90]})"
    )
    for i, cls, outcome, detail, message in bad[:60]:
        print(f"#{i} {cls} [{outcome}] {detail[:80]}: {message}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
