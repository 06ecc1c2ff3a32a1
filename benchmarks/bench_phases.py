"""Where one ``tracedoc analyze`` spends its CPU, phase by phase, in one fresh process.

Usage: python benchmarks/bench_phases.py TRACE [--workers N] [--render text|json|none] [--json]

Phases, as ``tracedoc analyze`` runs them for one file (the stages of ``tracedoc.api.analyze``, then the
text report): interpreter start and imports, the rule files, the load (read, inflate, decode, event
tables), the analyses with the compact job tables (``analyses.read_rank``), the rules (``stages.judge``),
and rendering. Each phase is CPU time (user + system) of this
process and of the worker processes it waited for (``RUSAGE_CHILDREN``), so the numbers hold on a
shared machine where wall times do not. ``--workers 1`` keeps everything in this process.
"""

from __future__ import annotations

import resource
import sys
import time

_T0 = time.process_time()  # CPU of the interpreter start until here is in the "start" phase


def _cpu() -> tuple[float, float]:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json

    start = _cpu()
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--render", default="text", choices=("text", "json", "none"))
    ap.add_argument("--json", action="store_true", help="one JSON line instead of the table")
    a = ap.parse_args(argv)
    phases: dict[str, tuple[float, float]] = {"start (interpreter)": start}
    last = start

    def mark(name: str) -> None:
        nonlocal last
        now = _cpu()
        phases[name] = (now[0] - last[0], now[1] - last[1])
        last = now

    from tracedoc.analyses import read_rank
    from tracedoc.engine.ruleset import load_ruleset
    from tracedoc.gcpause import paused_gc
    from tracedoc.ingest import load, sniff
    from tracedoc.stages import Ranks, judge

    mark("imports")
    with paused_gc():
        ruleset = load_ruleset(None, ())
        mark("rule files")
        trace = load(a.trace, workers=a.workers)
        mark("load")
        read = read_rank(trace, job=False, workers=a.workers)
        mark("analyses + job tables")
        result = judge(Ranks(a.trace, sniff(a.trace), [a.trace], [read]), ruleset)
        mark("rules")
        if a.render == "text":
            from tracedoc.render.text import render_text

            render_text(result)
        elif a.render == "json":
            result.to_json()
        mark("render")
    total = tuple(sum(v[i] for v in phases.values()) for i in (0, 1))
    if a.json:
        print(json.dumps({"trace": a.trace, "phases": phases, "total": total}))
        return 0
    print(f"{'phase':22s} {'main s':>8s} {'workers s':>9s}")
    for k, (m, w) in phases.items():
        print(f"{k:22s} {m:8.3f} {w:9.3f}")
    print(f"{'total':22s} {total[0]:8.3f} {total[1]:9.3f}   = {sum(total):.3f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
