"""The log fuzz cases (``tests/fuzz_logs.py``) through ``tracedoc logs --follow``'s reader and watchdog, in
this process and without sleeping: each mutated log is followed to its end. Prints outcomes (result,
clean error, traceback, hang) and the slowest case; exit 1 on a traceback or a hang.

    PYTHONPATH=$PWD python benchmarks/fuzz_follow_campaign.py --cases 1000 --seed 7
"""

from __future__ import annotations

import argparse
import collections
import signal
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import fuzz_logs  # noqa: E402

from tracedoc.errors import TracedocError  # noqa: E402
from tracedoc.logs.follow import Follower  # noqa: E402
from tracedoc.logs.watch import Watch  # noqa: E402


class Hang(Exception):
    pass


def _alarm(*_):
    raise Hang()


def follow_to_end(path: Path) -> int:
    """Follow ``path`` until a poll reads nothing new; the number of findings."""
    found = []
    f = Follower(str(path), None, Watch(), lambda x: found.append(x) and False, lambda s: None, idle_s=None)
    try:
        while True:
            before = f.tail.fh.tell() if f.tail.fh else -1
            f.poll()
            if f.tail.fh is None or f.tail.fh.tell() == before:
                return len(found)
    finally:
        f.tail.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--timeout", type=int, default=30, help="seconds before a case counts as a hang")
    args = ap.parse_args(argv)
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    bad, slowest = [], (0.0, "")
    signal.signal(signal.SIGALRM, _alarm)
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(fuzz_logs.generate(args.seed, args.cases)):
            if case.config is not None:
                continue  # configs are not followed
            log, _ = case.write(Path(tmp) / f"c{i}")
            t0 = time.perf_counter()
            signal.alarm(args.timeout)
            try:
                follow_to_end(log)
                outcome = "result"
            except TracedocError:
                outcome = "error"
            except Hang:
                outcome = "hang"
                bad.append((i, case.cls, case.detail, "hang"))
            except Exception as exc:  # noqa: BLE001 - what the campaign counts
                outcome = "traceback"
                bad.append((i, case.cls, case.detail, repr(exc)[:200]))
            finally:
                signal.alarm(0)
            table[case.cls][outcome] += 1
            dt = time.perf_counter() - t0
            if dt > slowest[0]:
                slowest = (dt, f"{case.cls}: {case.detail}")
    outcomes = ("result", "error", "traceback", "hang")
    print(f"{'class':<12}" + "".join(f"{o:>11}" for o in outcomes))
    for cls, counts in sorted(table.items()):
        print(f"{cls:<12}" + "".join(f"{counts[o]:>11}" for o in outcomes))
    print(f"slowest {slowest[0]:.1f} s ({slowest[1][:100]})")
    for row in bad[:50]:
        print("BAD", *row)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
