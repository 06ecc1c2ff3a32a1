"""CPU of ``tracedoc logs --follow`` on a log growing at a steady rate (default 100 lines/s): a writer
process appends JSON Lines (or LLaMA-Factory lines) for ``--seconds``, the follower's CPU time (user +
system, from ``/proc``) is divided by the wall time it followed. The target is under 1% of one core at
100 lines/s.

    PYTHONPATH=$PWD python benchmarks/bench_follow.py --rate 100 --seconds 30
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, default=100.0, help="lines per second")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--poll", type=float, default=0.5)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "train.jsonl"
        path.write_text("")
        proc = subprocess.Popen(
            [sys.executable, "-m", "tracedoc", "logs", "--follow", str(path), "--poll", str(args.poll), "--idle", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        time.sleep(1.5)  # start-up (imports) is not the steady cost
        start_cpu, start = cpu_seconds(proc.pid), time.perf_counter()
        n = 0
        with open(path, "a") as fh:
            while time.perf_counter() - start < args.seconds:
                n += 1
                fh.write(
                    json.dumps(
                        {
                            "step": n,
                            "loss": 2.0 + 1.0 / n,
                            "lr": 3e-4,
                            "grad_norm": 1.0,
                            "elapsed_s": round(0.5 * n, 3),
                            "tokens_per_sec": 50_000.0,
                        }
                    )
                    + "\n"
                )
                fh.flush()
                time.sleep(max(0.0, start + n / args.rate - time.perf_counter()))
        time.sleep(2 * args.poll)
        used, wall = cpu_seconds(proc.pid) - start_cpu, time.perf_counter() - start
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    print(
        f"{n} lines in {wall:.1f} s ({n / wall:.0f} lines/s); follower CPU {used:.2f} s = "
        f"{100 * used / wall:.2f}% of one core (target < 1%)"
    )
    print(out.strip().splitlines()[-1] if out.strip() else "(no summary)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
