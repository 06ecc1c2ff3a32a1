"""Cost of recording shapes (and torch's FLOP estimates) while profiling.

Profiles the tiny CPU training loop of tests/capture_scripts/train_tiny.py (Linear 16->W->4, SGD)
under torch.profiler three ways: plain, ``record_shapes=True`` (what ``tracedoc run`` and
``tracedoc.profile`` do by default) and ``record_shapes=True, with_flops=True``, in rotating order,
several repetitions after one unmeasured warm-up run. A step's cost is the CPU time of the thread
running it (``time.thread_time``): on a shared machine wall time mostly measures the other
processes. Reports the median per-step cost of each (the step that exports the trace left out), the
size of the trace files, and tracedoc's analyse time (wall) for each trace.

    python benchmarks/bench_shapes_overhead.py [--reps 5] [--steps 40] [--width 2048] [--batch 64]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


CONFIGS = {"plain": (False, False), "shapes": (True, False), "shapes+flops": (True, True)}


def profiled_loop(config: str, args, out: str) -> float:
    """Median seconds per profiled step of the tiny loop (the last step, which writes the trace, left out)."""
    import torch
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, args.width), torch.nn.ReLU(), torch.nn.Linear(args.width, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(args.batch, 16), torch.randint(0, 4, (args.batch,))
    times: list[float] = []
    shapes, flops = CONFIGS[config]
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=shapes,
        with_flops=flops,
        schedule=schedule(wait=0, warmup=2, active=args.steps, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(out),
    ) as prof:
        for i in range(args.steps + 2):
            t0 = time.thread_time()
            loss = torch.nn.functional.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            prof.step()
            if 2 <= i < args.steps + 1:
                times.append(time.thread_time() - t0)
    return statistics.median(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--width", type=int, default=2048)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()
    sys.path.insert(0, str(ROOT))
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1")))
    import tracedoc

    step: dict[str, list[float]] = {c: [] for c in CONFIGS}
    analyse: dict[str, list[float]] = {c: [] for c in CONFIGS}
    size: dict[str, int] = {}
    names = list(CONFIGS)
    with tempfile.TemporaryDirectory() as tmp:
        profiled_loop("shapes", args, os.path.join(tmp, "warmup.json"))
        for rep in range(args.reps):
            for config in names[rep % 3 :] + names[: rep % 3]:
                out = os.path.join(tmp, f"{config}{rep}.json")
                step[config].append(profiled_loop(config, args, out))
                size[config] = os.path.getsize(out)
                t0 = time.perf_counter()
                tracedoc.analyze(out)
                analyse[config].append(time.perf_counter() - t0)
    print(
        f"tiny loop, width {args.width}, batch {args.batch}, {args.steps} profiled steps x {args.reps} reps, "
        f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); CPU time per step, median of reps"
    )
    base = statistics.median(step["plain"])
    for config in names:
        v = statistics.median(step[config])
        print(
            f"  {config:13s} {v * 1e3:7.3f} ms/step (x{v / base:.2f}, +{(v - base) * 1e6:5.0f} us)  "
            f"trace {size[config] / 1e3:6.0f} kB  tracedoc analyze {statistics.median(analyse[config]) * 1e3:5.0f} ms"
        )


if __name__ == "__main__":
    main()
