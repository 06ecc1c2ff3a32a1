"""Overhead of `tracedoc run` with no trigger pending.

Runs tests/capture_scripts/train_tiny.py bare and under `tracedoc run --wait-for-trigger` (hooks, step
monitor, trigger polling all on; no profiler active), alternating, several repetitions. Each run reports
its own mean step time (the script measures it, skipping 2 warm-up steps). Prints the mean of each and
the ratio, plus the cost of one step boundary measured in-process.

    .venv/bin/python benchmarks/bench_capture_overhead.py [--reps 5] [--steps 400] [--width 2048] [--batch 64]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "tests" / "capture_scripts" / "train_tiny.py"


def one_run(wrapped: bool, args, tmp: str, i: int) -> float:
    out = os.path.join(tmp, f"{'w' if wrapped else 'b'}{i}.json")
    script = [
        str(TRAIN),
        "--steps",
        str(args.steps),
        "--batch",
        str(args.batch),
        "--width",
        str(args.width),
        "--out",
        out,
    ]
    if wrapped:
        cmd = [
            sys.executable,
            "-m",
            "tracedoc.capture",
            "run",
            "-o",
            os.path.join(tmp, f"cap{i}"),
            "--wait-for-trigger",
            "--no-report",
            "--",
            "python",
            *script,
        ]
    else:
        cmd = [sys.executable, *script]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    subprocess.run(cmd, check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)["mean_step_s"]


def per_step_cost_us(n: int = 200_000) -> tuple[float, float]:
    """(step boundary, DataLoader batch accounting) cost in µs, no trigger pending, monitor on."""
    sys.path.insert(0, str(ROOT))
    import torch

    from tracedoc.capture.session import CaptureConfig, CaptureSession

    batch = (torch.randn(64, 16), torch.zeros(64, dtype=torch.long))
    with tempfile.TemporaryDirectory() as d:
        s = CaptureSession(CaptureConfig(outdir=d, initial=False, report=False, signal=False)).install()
        try:
            t0 = time.perf_counter()
            for _ in range(n):
                s._boundary()
            boundary = (time.perf_counter() - t0) / n * 1e6
            t0 = time.perf_counter()
            for _ in range(n):
                s._count_batch(batch)
            count = (time.perf_counter() - t0) / n * 1e6
            return boundary, count
        finally:
            s.monitor = None  # no summary line for this synthetic loop
            s.close()


def in_process_ab(args, blocks: int = 10) -> tuple[list[float], list[float]]:
    """The same training loop in one process, alternating blocks without and with a session installed."""
    sys.path.insert(0, str(ROOT))
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from tracedoc.capture.session import CaptureConfig, CaptureSession

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, args.width), torch.nn.ReLU(), torch.nn.Linear(args.width, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    n = args.steps // 2
    data = TensorDataset(torch.randn(n * args.batch, 16), torch.randint(0, 4, (n * args.batch,)))

    def block() -> float:
        loader = DataLoader(data, batch_size=args.batch)
        t0 = time.perf_counter()
        for x, y in loader:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
        return (time.perf_counter() - t0) / n

    block()  # warm-up
    bare, wrapped = [], []
    with tempfile.TemporaryDirectory() as d:
        for _ in range(blocks):
            bare.append(block())
            s = CaptureSession(CaptureConfig(outdir=d, initial=False, report=False, signal=False)).install()
            try:
                wrapped.append(block())
            finally:
                s.monitor = None
                s.close()
    return bare, wrapped


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--width", type=int, default=2048)
    a = p.parse_args()
    bare, wrapped = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(a.reps):
            bare.append(one_run(False, a, tmp, i))
            wrapped.append(one_run(True, a, tmp, i))
            print(
                f"rep {i}: bare {bare[-1] * 1e3:.3f} ms/step, tracedoc run {wrapped[-1] * 1e3:.3f} ms/step", flush=True
            )
    mb, mw = statistics.mean(bare), statistics.mean(wrapped)
    print(
        f"bare:         mean step {mb * 1e3:.3f} ms (median {statistics.median(bare) * 1e3:.3f}, "
        f"stdev {statistics.stdev(bare) * 1e3 if len(bare) > 1 else 0:.3f})"
    )
    print(
        f"tracedoc run: mean step {mw * 1e3:.3f} ms (median {statistics.median(wrapped) * 1e3:.3f}, "
        f"stdev {statistics.stdev(wrapped) * 1e3 if len(wrapped) > 1 else 0:.3f})"
    )
    print(f"ratio (tracedoc run / bare): {mw / mb:.4f}  ({(mw / mb - 1) * 100:+.2f}%)")
    ib, iw = in_process_ab(a)
    r = statistics.median(iw) / statistics.median(ib)
    print(
        f"in-process A/B (same loop, alternating blocks): bare median {statistics.median(ib) * 1e3:.3f} ms/step, "
        f"hooked median {statistics.median(iw) * 1e3:.3f} ms/step, ratio {r:.4f} ({(r - 1) * 100:+.2f}%)"
    )
    b_us, c_us = per_step_cost_us()
    print(
        f"in-process: one step boundary (monitor + trigger poll, no capture pending) {b_us:.2f} us, "
        f"DataLoader batch accounting {c_us:.2f} us; together {(b_us + c_us) / (mb * 1e6) * 100:.3f}% "
        "of the bare step"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
