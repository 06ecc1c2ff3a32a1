#!/usr/bin/env python3
"""Peak memory of one ``tracedoc analyze``, whole and stage by stage.

    python benchmarks/bench_memory.py TRACE              # the command, sampled from outside
    python benchmarks/bench_memory.py TRACE --stages     # ... and each stage's own peak, in a second run
    python benchmarks/bench_memory.py TRACE --in-process # the command with no forked child

The command (``python -m tracedoc analyze TRACE -f json``, its output discarded) runs in a fresh process; this
one samples it every 0.1 s: the main process's RSS and the process tree's PSS (pages a forked child
shares with its parent counted once; ``bench_load._tree_memory_kb``), and prints their peaks against
the trace's uncompressed JSON size. The peak RSS is also the kernel's own (``VmHWM``), read as the
process ends, so a peak shorter than a sample is not missed.

``--stages``: a second fresh process runs the same work in steps (imports, load, each analysis in the
pipeline's order, the rules) and, around each, resets the kernel's peak-RSS mark (``/proc/self/clear_refs``)
and reads it after: the peak of each stage alone, and the RSS it leaves behind. The forked critical-path
child is counted in the tree PSS of the first run, not here (in ``--stages`` the analyses all run in
this process, as they do when no spare core or memory is free).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
MIB = 1 << 20


def _status_kb(pid: int | str, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def json_bytes(path: str) -> int:
    """The uncompressed JSON size (gzip read through)."""
    if path.endswith(".gz"):
        import gzip

        n = 0
        with gzip.open(path, "rb") as f:
            while chunk := f.read(1 << 24):
                n += len(chunk)
        return n
    return os.path.getsize(path)


def whole(path: str, size: int, in_process: bool = False) -> dict:
    """The command in a fresh process, sampled from here."""
    import bench_load as BL

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    code = (
        "import runpy, sys; sys.argv = ['tracedoc', 'analyze', sys.argv[1], '-f', 'json']\n"
        + ("import tracedoc.analyses.core.offload as o; o.worth_offloading = lambda *a: False\n" if in_process else "")
        + "try:\n    runpy.run_module('tracedoc', run_name='__main__')\n"
        "finally:\n    print('VmHWM', [l for l in open('/proc/self/status') if l.startswith('VmHWM')][0].split()[1],"
        " file=sys.stderr)"
    )
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        [sys.executable, "-c", code, path], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    peak_rss = peak_pss = 0
    err: list[str] = []
    reader = threading.Thread(target=lambda: err.extend(proc.stderr), daemon=True)
    reader.start()
    while proc.poll() is None:
        peak_rss = max(peak_rss, _status_kb(proc.pid, "VmRSS"))
        peak_pss = max(peak_pss, BL._tree_memory_kb(proc.pid))
        time.sleep(0.1)
    reader.join()
    hwm = [int(line.split()[1]) for line in err if line.startswith("VmHWM")]
    mib = size / MIB
    rss = max(peak_rss, *hwm) / 1024 if hwm else peak_rss / 1024
    return {
        "json_mib": round(mib, 1),
        "exit": proc.returncode,
        "wall_s": round(time.perf_counter() - t0, 1),
        "main_peak_rss_mib": round(rss, 1),
        "main_x": round(rss / mib, 2),
        "tree_peak_pss_mib": round(peak_pss / 1024, 1),
        "tree_x": round(peak_pss / 1024 / mib, 2),
        "errors": [line.rstrip() for line in err if not line.startswith("VmHWM")][-3:],
    }


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def stages(path: str, size: int) -> None:
    """In this (fresh) process: each stage's own peak RSS and what it leaves."""
    rows = []
    mib = size / MIB

    def mark(name: str, t0: float) -> None:
        rows.append(
            (name, _status_kb("self", "VmHWM") / 1024, _status_kb("self", "VmRSS") / 1024, time.perf_counter() - t0)
        )
        _reset_peak()

    _reset_peak()
    t0 = time.perf_counter()
    sys.path.insert(0, str(ROOT))
    from tracedoc.analyses.core import pipeline
    from tracedoc.ingest import load

    mark("start + imports", t0)
    t0 = time.perf_counter()
    trace = load(path)
    cols = sum(t.nbytes for t in trace.tables.values()) / MIB
    mark(f"load (columns {cols:.0f} MiB)", t0)
    pipeline.register_all()
    for entry in list(pipeline.ANALYSES.values()):
        run = entry.run

        def timed(tr, inputs, _run=run, _name=entry.name):
            t = time.perf_counter()
            out = _run(tr, inputs)
            mark(f"  {_name}", t)
            return out

        object.__setattr__(entry, "run", timed)
    from tracedoc.analyses import read_rank

    t0 = time.perf_counter()
    read = read_rank(trace, workers=1)
    mark("analyses (rest of read_rank)", t0)
    del read
    print(f"{'stage':<44} {'peak RSS MiB':>12} {'x JSON':>7} {'RSS after':>10} {'s':>6}")
    for name, hwm, rss, s in rows:
        print(f"{name:<44} {hwm:12.0f} {hwm / mib:7.2f} {rss:10.0f} {s:6.1f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--stages", action="store_true", help="also each stage's own peak (a second run)")
    ap.add_argument(
        "--in-process",
        action="store_true",
        help="no forked critical-path child: every analysis "
        "in the main process (as without a spare core, or memory free for a child)",
    )
    ap.add_argument("--child-stages", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    size = json_bytes(args.trace)
    if args.child_stages:
        stages(args.trace, size)
        return 0
    print(json.dumps(whole(args.trace, size, args.in_process)), flush=True)
    if args.stages:
        return subprocess.run([sys.executable, __file__, args.trace, "--child-stages"]).returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
