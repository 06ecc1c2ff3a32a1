"""Long fuzz run: thousands of mutated real traces, a table of outcomes by mutation class.

    PYTHONPATH=$PWD python benchmarks/fuzz_campaign.py --cases 10000 --seed 1

Every case is written to a scratch directory and analysed in this process (``tests/fuzzing.py``
defines the mutations and the outcome classes). Exit status 1 when any case ended in a traceback,
a hang or an invariant violation; each of those is listed with its class, detail and message, and
``--keep DIR`` keeps their inputs for reproduction.
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import fuzzing  # noqa: E402

BAD = ("traceback", "hang", "violation")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=30, help="seconds before a case counts as a hang")
    ap.add_argument("--html-every", type=int, default=25, help="also render HTML/Markdown for every Nth case")
    ap.add_argument(
        "--cli-every",
        type=int,
        default=0,
        help="run every Nth case through `tracedoc analyze` (in this process) instead of the API; 0: never",
    )
    ap.add_argument("--keep", type=Path, help="copy the inputs of bad cases here")
    args = ap.parse_args(argv)
    if not fuzzing.have_sources():
        print(f"the shared traces are not at {fuzzing.TRACES}; nothing to mutate", file=sys.stderr)
        return 2
    table: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    bad: list[tuple[int, str, str, str, str]] = []
    errors_seen: collections.Counter = collections.Counter()
    started = time.perf_counter()
    slowest = (0.0, "")
    with tempfile.TemporaryDirectory() as tmp:
        for i, case in enumerate(fuzzing.generate(args.seed, args.cases)):
            root = Path(tmp) / f"c{i}"
            t0 = time.perf_counter()
            via_cli = bool(args.cli_every) and i % args.cli_every == 0
            outcome, message = fuzzing.run_case(
                case, root, args.timeout, render_html=i % args.html_every == 0, via_cli=via_cli
            )
            dt = time.perf_counter() - t0
            slowest = max(slowest, (dt, f"{case.cls}: {case.detail}"))
            table[case.cls + (" (cli)" if via_cli else "")][outcome] += 1
            if outcome == "error":
                errors_seen[message.split(":", 1)[-1].strip()[:60]] += 1
            if outcome in BAD:
                bad.append((i, case.cls, case.detail, outcome, message))
                if args.keep:
                    shutil.copytree(root, args.keep / f"case{i}", dirs_exist_ok=True)
            shutil.rmtree(root, ignore_errors=True)
            if (i + 1) % 500 == 0:
                print(f"  {i + 1:,} cases, {time.perf_counter() - started:.0f} s, {len(bad)} bad", file=sys.stderr)
    elapsed = time.perf_counter() - started
    print(
        f"fuzz campaign: {args.cases:,} cases, seed {args.seed}, {elapsed:.0f} s "
        f"(slowest case {slowest[0]:.1f} s: {slowest[1][:80]})\n"
    )
    print(f"| {'class':<22} | " + " | ".join(f"{o:>9}" for o in fuzzing.OUTCOMES) + " | total |")
    print(f"|{'-' * 24}|" + "|".join("-" * 11 for _ in fuzzing.OUTCOMES) + "|-------|")
    totals: collections.Counter = collections.Counter()
    for cls in sorted(table):
        row = table[cls]
        totals.update(row)
        print(
            f"| {cls:<22} | " + " | ".join(f"{row[o]:>9,}" for o in fuzzing.OUTCOMES) + f" | {sum(row.values()):>5,} |"
        )
    print(
        f"| {'all':<22} | "
        + " | ".join(f"{totals[o]:>9,}" for o in fuzzing.OUTCOMES)
        + f" | {sum(totals.values()):>5,} |"
    )
    print("\nmost frequent clean errors:")
    for msg, n in errors_seen.most_common(8):
        print(f"  {n:>6,}  {msg}")
    if bad:
        print(f"\n{len(bad)} bad cases:")
        for i, cls, detail, outcome, message in bad[:200]:
            print(f"  #{i} [{outcome}] {cls}: {detail[:90]} -> {message[:200]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
