"""What the critical path (graph + paths + what-ifs) adds to ``tracedoc analyze``.

Usage: python benchmarks/bench_critical_path.py [TRACE] [--repeat N]

Default trace: ../shared/traces/kineto/v100_2rank_rank1.json.gz. Prints the end-to-end ``analyze``
time (load, analyses, rules), the critical-path stages on the same loaded trace, and the added
share: critical path / (analyze without it). The target (docs/performance.md) is at most 30%.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT = ROOT.parent / "shared" / "traces" / "kineto" / "v100_2rank_rank1.json.gz"


def _best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    from tracedoc.analyses.kernels import classify as C
    from tracedoc.analyses.host import links
    from tracedoc.analyses.critical_path import critical_path
    from tracedoc.analyses.critical_path import graph as G
    from tracedoc.analyses.critical_path import solve as S
    from tracedoc.analyses.critical_path import whatif as W
    from tracedoc.analyses.gputime.window import find_steps
    from tracedoc.api import analyze, load

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("trace", nargs="?", default=str(DEFAULT))
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args(argv)
    if not Path(a.trace).exists():
        print(f"bench_critical_path: {a.trace} not found; pass a trace path", file=sys.stderr)
        return 2

    end_to_end = _best(lambda: analyze(a.trace), a.repeat)
    trace = load(a.trace)
    steps = find_steps(trace)
    comm = C.comm_kernel_mask(trace, links.gpu_external_ids(trace))
    graph = G.build_graph(trace, steps, comm)
    t_graph = _best(lambda: G.build_graph(trace, steps, comm), a.repeat)
    t_paths = _best(lambda: S.critical_paths(graph), a.repeat)
    t_whatif = _best(lambda: W.predict_all(graph), a.repeat)
    t_all = _best(lambda: critical_path(trace, steps, comm), a.repeat)
    without = end_to_end - t_all
    print(
        f"trace: {a.trace} ({sum(trace.summary().values())} rows, {len(steps)} steps, {len(graph)} points, "
        f"{graph.src.size} cross edges)"
    )
    print(f"analyze end to end (best of {a.repeat}): {end_to_end * 1e3:8.1f} ms")
    print(f"  graph build:                      {t_graph * 1e3:8.1f} ms")
    print(f"  critical paths + breakdown input: {t_paths * 1e3:8.1f} ms")
    print(f"  what-ifs ({len(W.TRANSFORMS)} transforms):          {t_whatif * 1e3:8.1f} ms")
    print(f"  critical path stage in all:       {t_all * 1e3:8.1f} ms")
    print(f"added to analyze: {100 * t_all / without:.1f}% (target <= 30%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
