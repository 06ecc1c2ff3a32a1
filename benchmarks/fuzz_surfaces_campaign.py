"""Long fuzz run over saved reports (given to diff), configs (--config, --model) and --fail-if expressions:
a table of outcomes by surface and mutation class, hangs, and peak memory.

    PYTHONPATH=$PWD python benchmarks/fuzz_surfaces_campaign.py --cases 5000 --seed 1

``tests/fuzz_surfaces.py`` defines the mutations and the outcome classes; every case runs in this process
(every 20th also renders Markdown or text). Two large cases follow: a saved report of 240,000 steps a
side (the diff's bootstrap), and a gzip bomb given as a saved report; the peak RSS after each is printed.
Exit status 1 when a config or expression case ended in a traceback, a hang or a violation, or any case
hung or printed a raw control character; tracebacks and impossible numbers from hand-edited reports and
model configs are counted and listed (``--strict`` makes them fail the run too).
"""

from __future__ import annotations

import argparse
import collections
import gzip
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import fuzz_surfaces  # noqa: E402

BAD = ("traceback", "hang", "violation")


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _large_cases(root: Path, base: Path) -> list[str]:
    """The 240k-step report and a gzip bomb as a report: outcome, seconds and peak RSS of each."""
    from tracedoc.cli import main
    import contextlib
    import io

    lines = []
    doc = json.loads(base.read_text())
    rank = doc["ranks"][0]
    steps = rank.get("per_step") or []
    if steps:
        n = 240_000
        proto = steps[0]
        span = int(proto.get("end_ns", 0)) - int(proto.get("start_ns", 0)) or 1_000_000
        big = [dict(proto, step=i, start_ns=i * span, end_ns=(i + 1) * span - (i % 7)) for i in range(n)]
        rank["per_step"] = big
        path = root / "big.report.json"
        path.write_text(json.dumps(doc))
        del big, doc
        t0 = time.process_time()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            rc = main(["diff", str(base), str(path), "-f", "json"])
        lines.append(
            f"240,000-step report: exit {rc}, {time.process_time() - t0:.1f} s CPU, peak RSS so far "
            f"{_peak_mb():.0f} MB{(' ' + err.getvalue().strip()[:200]) if rc else ''}"
        )
    bomb = root / "bomb.report.json"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        f.write(b'{"schema": "tracedoc.analysis", "schema_version": 1, "ranks": [], "pad": "')
        block = b" " * (1 << 20)
        for _ in range(2048):  # 2 GiB of spaces, about 2 MB compressed
            f.write(block)
        f.write(b'"}')
    t0 = time.process_time()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        rc = main(["diff", str(base), str(bomb), "-f", "json"])
    lines.append(
        f"gzip bomb as a report ({bomb.stat().st_size / 1e6:.1f} MB -> 2 GiB): exit {rc}, "
        f"{time.process_time() - t0:.1f} s CPU, peak RSS so far {_peak_mb():.0f} MB; "
        f"{err.getvalue().strip()[:160]}"
    )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", type=int, default=5_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=30, help="seconds before a case counts as a hang")
    ap.add_argument("--strict", action="store_true", help="report and model tracebacks fail the run too")
    ap.add_argument("--no-large", action="store_true", help="skip the 240k-step report and the gzip bomb")
    args = ap.parse_args(argv)
    table: dict[tuple[str, str], collections.Counter] = collections.defaultdict(collections.Counter)
    bad: list[tuple[int, str, str, str, str]] = []
    sites: collections.Counter = collections.Counter()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    slowest = (0.0, "")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        base = fuzz_surfaces.make_base(root / "base")
        doc = json.loads(base.read_text())
        for i, case in enumerate(fuzz_surfaces.generate(args.seed, args.cases, doc)):
            fmt = ("md", "text")[i // 20 % 2] if i % 20 == 0 else "json"
            t0 = time.perf_counter()
            outcome, message = fuzz_surfaces.run_case(case, root / f"c{i}", base, timeout_s=args.timeout, fmt=fmt)
            dt = time.perf_counter() - t0
            if dt > slowest[0]:
                slowest = (dt, f"{case.surface}/{case.cls}: {case.detail}")
            table[(case.surface, case.cls)][outcome] += 1
            if outcome in BAD:
                bad.append((i, f"{case.surface}/{case.cls}", outcome, case.detail, message))
                if outcome == "traceback":
                    sites[
                        (
                            case.surface,
                            message.split(":")[0] + ":" + message.split(":")[1][:50] if ":" in message else message,
                        )
                    ] += 1
            shutil.rmtree(root / f"c{i}", ignore_errors=True)
        peak_cases = _peak_mb()
        large = [] if args.no_large else _large_cases(root, base)
    print(f"{'surface/class':<18}" + "".join(f"{o:>11}" for o in fuzz_surfaces.OUTCOMES))
    total = collections.Counter()
    for key in sorted(table):
        total.update(table[key])
        print(f"{'/'.join(key):<18}" + "".join(f"{table[key][o]:>11}" for o in fuzz_surfaces.OUTCOMES))
    print(f"{'all':<18}" + "".join(f"{total[o]:>11}" for o in fuzz_surfaces.OUTCOMES))
    print(
        f"{args.cases} cases in {time.perf_counter() - wall0:.0f} s wall, {time.process_time() - cpu0:.0f} s CPU; "
        f"peak RSS over the cases {peak_cases:.0f} MB; slowest {slowest[0]:.1f} s ({slowest[1][:90]})"
    )
    for line in large:
        print(line)
    if sites:
        print(f"{len(sites)} distinct traceback messages (surface: exception: start of message):")
        for (surface, msg), n in sites.most_common(60):
            print(f"  {n:>5}  {surface}: {msg}")
    failing = [
        b
        for b in bad
        if b[2] == "hang"
        or b[1].split("/")[0] in ("config", "expr")
        or args.strict
        or (b[2] == "violation" and not b[4].startswith("metric "))
    ]
    for i, cls, outcome, detail, message in failing[:50]:
        print(f"#{i} {cls} [{outcome}] {detail[:80]}: {message}")
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
