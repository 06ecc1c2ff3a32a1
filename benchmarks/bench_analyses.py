"""Where the analysis time goes: every analysis stage on one loaded trace, timed on its own.

Usage: python benchmarks/bench_analyses.py TRACE [--repeat N] [--top K]

Loads the trace once, then runs the analyses ``tracedoc analyze`` runs (the default request and the
values a rank result carries), in the pipeline's order, ``--repeat`` times on fresh copies of the
trace. Prints per stage the best CPU time of the calling thread (steadier than wall time on a shared
machine) and the wall time of that run, largest first, and the totals; the load is timed once.
"""

from __future__ import annotations

import argparse
import copy
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def stage_times(trace, repeat: int) -> tuple[dict[str, tuple[float, float]], tuple[float, float]]:
    """Per stage (cpu_s, wall_s) of the run with the least CPU time, and the best totals."""
    from tracedoc.analyses import RANK_VALUES
    from tracedoc.analyses.core.pipeline import default_request, plan
    from tracedoc.gcpause import paused_gc

    asked = default_request()
    asked["values"] = RANK_VALUES  # what analyze_trace asks for
    order = plan(**asked)
    best: dict[str, tuple[float, float]] = {}
    totals = (float("inf"), float("inf"))
    for _ in range(repeat):
        fresh = copy.deepcopy(trace)
        gc.collect()
        with paused_gc():  # as analyze and analyze_file run them
            totals = min(totals, _run(order, fresh, best))
    return best, totals


def _run(order, trace, best: dict) -> tuple[float, float]:
    """One pass over the stages, each timed; keeps each stage's least-CPU run in ``best``. Returns the
    pass's total (cpu_s, wall_s)."""
    from tracedoc.analyses.core.pipeline import inputs_for
    from tracedoc.analyses.core.registry import Produced

    out = Produced()
    cpu_total = wall_total = 0.0
    for entry in order:
        inputs = inputs_for(entry, out)
        c, w = time.thread_time(), time.perf_counter()
        produced = entry.run(trace, inputs)
        cpu, wall = time.thread_time() - c, time.perf_counter() - w
        cpu_total, wall_total = cpu_total + cpu, wall_total + wall
        if cpu < best.get(entry.name, (float("inf"),))[0]:
            best[entry.name] = (cpu, wall)
        out.metrics.update(produced.metrics)
        out.evidence.update(produced.evidence)
        out.values.update(produced.values)
    return cpu_total, wall_total


def main(argv: list[str] | None = None) -> int:
    from tracedoc.api import load

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--top", type=int, default=25, help="stages to list (largest first)")
    args = ap.parse_args(argv)
    t = time.perf_counter()
    trace = load(args.trace)
    print(f"load: {time.perf_counter() - t:.3f} s wall ({args.trace})")
    best, (cpu_total, wall_total) = stage_times(trace, max(1, args.repeat))
    print(f"{'stage':44s} {'cpu ms':>8s} {'wall ms':>8s}")
    for name, (cpu, wall) in sorted(best.items(), key=lambda kv: -kv[1][0])[: args.top]:
        print(f"{name:44s} {cpu * 1e3:8.1f} {wall * 1e3:8.1f}")
    print(f"{'analyses in all (best run)':44s} {cpu_total * 1e3:8.1f} {wall_total * 1e3:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
