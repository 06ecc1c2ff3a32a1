"""Long fuzz run over training logs and configs: thousands of mutated logs of every format (and hostile
configs beside them), a table of outcomes by mutation class.

    PYTHONPATH=$PWD python benchmarks/fuzz_logs_campaign.py --cases 5000 --seed 1

Every case is written to a scratch directory and run through ``tracedoc logs --format json`` in this
process (``tests/fuzz_logs.py`` defines the mutations and the outcome classes; every 20th case also
renders HTML, Markdown or text). Exit status 1 when any case ended in a traceback, a hang or an
impossible number; each is listed with its class, detail and message, and ``--keep DIR`` keeps their
inputs. The peak memory of the process is printed (a gzip bomb among the cases must stay bounded).
"""

from __future__ import annotations

import argparse
import collections
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import fuzz_logs  # noqa: E402

BAD = ("traceback", "hang", "violation")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=5_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=30, help="seconds before a case counts as a hang")
    ap.add_argument("--keep", type=Path, help="copy the inputs of bad cases here")
    args = ap.parse_args(argv)
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    bad: list[tuple[int, str, str, str, str]] = []
    started = time.perf_counter()
    cpu0 = time.process_time()
    slowest = (0.0, "")
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(fuzz_logs.generate(args.seed, args.cases)):
            root = Path(tmp) / f"c{i}"
            t0 = time.perf_counter()
            formats = ("json", ("html", "md", "text")[i // 20 % 3]) if i % 20 == 0 else ("json",)
            outcome, message = fuzz_logs.run_case(case, root, timeout_s=args.timeout, formats=formats)
            dt = time.perf_counter() - t0
            if dt > slowest[0]:
                slowest = (dt, f"{case.cls}: {case.detail}")
            table[case.cls][outcome] += 1
            if outcome in BAD:
                bad.append((i, case.cls, outcome, case.detail, message))
                if args.keep:
                    shutil.copytree(root, args.keep / f"c{i}", dirs_exist_ok=True)
            shutil.rmtree(root, ignore_errors=True)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{'class':<12}" + "".join(f"{o:>11}" for o in fuzz_logs.OUTCOMES))
    for cls in sorted(table):
        print(f"{cls:<12}" + "".join(f"{table[cls][o]:>11}" for o in fuzz_logs.OUTCOMES))
    total = collections.Counter()
    for c in table.values():
        total.update(c)
    print(f"{'all':<12}" + "".join(f"{total[o]:>11}" for o in fuzz_logs.OUTCOMES))
    print(
        f"{args.cases} cases in {wall:.0f} s wall, {cpu:.0f} s CPU; peak RSS {peak_mb:.0f} MB; "
        f"slowest {slowest[0]:.1f} s ({slowest[1][:100]})"
    )
    for i, cls, outcome, detail, message in bad[:50]:
        print(f"#{i} {cls} [{outcome}] {detail}: {message}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
