"""Time ``tracedoc logs`` on a generated 1M-line JSON Lines training log (target: <= 3 s end to end).

The log is written at run time to ``benchmarks/_data/`` (git-ignored): one object per step with step,
loss (with NaNs, spikes), lr, grad_norm, tokens_per_sec (with dips and a periodic stall), step_time_s
and a per-GPU gpu_util list, like a real per-step log. Each timing runs in a fresh process (imports
included), reading, analysing, evaluating the rules and rendering JSON; the fastest of ``--repeat``
runs is compared with the target. CPU seconds (the process and its workers) and the load average are
printed too, since other work on the machine inflates wall time.

    python benchmarks/bench_logs.py [--lines 1000000] [--repeat 3] [--target-s 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def write_log(path: str, lines: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    step = np.arange(1, lines + 1)
    loss = 2.0 + 3.0 * np.exp(-step / (lines / 20)) + rng.normal(0, 0.02, lines)
    loss[rng.choice(lines, 20, replace=False)] += 3.0
    tps = 50_000 + rng.normal(0, 500, lines)
    tps[step % 1000 == 0] *= 0.2
    dip = slice(lines // 2, lines // 2 + 300)
    tps[dip] *= 0.6
    grad = 1.0 + rng.normal(0, 0.05, lines)
    nan_at = set(rng.choice(lines, 5, replace=False).tolist())
    gpu = np.clip(95 + rng.normal(0, 2, (lines, 2)), 0, 100)
    with open(path, "w") as fh:
        for i in range(lines):
            lv = "NaN" if i in nan_at else f"{loss[i]:.5f}"
            fh.write(
                f'{{"step": {step[i]}, "loss": {lv}, "lr": 0.0003, "grad_norm": {grad[i]:.4f}, '
                f'"tokens_per_sec": {tps[i]:.1f}, "step_time_s": {4096 / tps[i]:.5f}, '
                f'"gpu_util": [{gpu[i, 0]:.0f}, {gpu[i, 1]:.0f}]}}\n'
            )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--target-s", type=float, default=3.0)
    ap.add_argument("--jobs", type=int, default=None, help="passed to tracedoc logs --jobs (default: its own)")
    args = ap.parse_args()
    data = os.path.join(HERE, "_data")
    os.makedirs(data, exist_ok=True)
    path = os.path.join(data, f"train_{args.lines}.jsonl")
    if not os.path.exists(path):
        t = time.perf_counter()
        write_log(path, args.lines)
        print(f"generated {path} ({os.path.getsize(path) / 2**20:.0f} MiB) in {time.perf_counter() - t:.1f} s")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    report = os.path.join(data, "logs_report.json")  # -o writes only regular files (not /dev/null)
    times, cpus = [], []
    for _ in range(args.repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = time.perf_counter()
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "tracedoc",
                "logs",
                path,
                "--format",
                "json",
                "-o",
                report,
                *(["--jobs", str(args.jobs)] if args.jobs else []),
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        times.append(time.perf_counter() - t)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if proc.returncode not in (0, 3):
            print(proc.stderr, file=sys.stderr)
            return 1
    best = min(times)
    verdict = "OK" if best <= args.target_s else "MISSED"
    load = os.getloadavg()[0]
    print(
        f"tracedoc logs, {args.lines:,} lines, {os.path.getsize(path) / 2**20:.0f} MiB, {os.cpu_count()} CPUs, "
        f"load average {load:.1f}: best {best:.2f} s wall of {len(times)} "
        f"(all: {', '.join(f'{t:.2f}' for t in times)}), "
        f"CPU {min(cpus):.2f} s; target <= {args.target_s:.1f} s: {verdict}"
    )
    if load > (os.cpu_count() or 1):
        print("  the machine is busy (load above its CPU count): wall times are inflated; rerun when it is idle")
    return 0 if best <= args.target_s else 2


if __name__ == "__main__":
    sys.exit(main())
