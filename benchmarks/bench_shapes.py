#!/usr/bin/env python3
"""tracedoc against HTA on every real trace shape and size, and every other speed target, PASS/FAIL with
the spread of --reps runs.

    python benchmarks/bench_shapes.py                    # 10, 50, 200 MB x 4 shapes, 3 runs each
    python benchmarks/bench_shapes.py --sizes 10 --reps 1 --skip-hta --no-extras   # a quick look

Shapes (each generated from a shared real trace by make_big_trace.py, whole copies then the first
stretch of time of one more copy, so every size keeps its source's mix of events):

- ``kernel``: kernel-heavy. dlrm_128rank_rank0 as torch.profiler records it with
  ``activities=[ProfilerActivity.CUDA]``: kernels are 47% of the events and 77% of the bytes.
- ``cpu_ops``: CPU-op-heavy with shapes and args. v100_2rank_rank1 (recorded shapes on every op, NCCL
  args; the largest share of its bytes is CPU ops).
- ``flows``: many flow and instant events. v100_resnet_ns_rank0 (a third of its events are flows).
- ``h100``: a modern H100 trace. h100/gpt_small_fp32 (torch 2.11, CUDA 13, CPU far ahead of the GPU).

Per shape and size, ``tracedoc analyze`` (``tracedoc.api.analyze``) and HTA's load + temporal breakdown +
comm/comp overlap each run ``--reps`` times in fresh processes, interleaved; the table gives the median
wall time and its spread (min-max), the CPU time (user + system, worker processes included), and the
HTA/tracedoc ratio of wall times and of CPU times. HTA failing on a trace (crash, timeout, out of memory)
is HTA's failure: the row says so and that shape leaves the minimum. In the same interleaved runs, a
``tracedoc load`` alone and a pysimdjson parse of the same bytes (the JSON-parse limit; measured when
pysimdjson is installed): from 50 MB the load is checked to be within 2x that parse. Then the other targets:

- nsys: exports of 2 MB or more analyse within 2x a plain sqlite3 read of the tables used; smaller ones
  finish within 0.3 s per whole ``tracedoc analyze`` process;
- 1 MB: a whole ``tracedoc analyze`` process within 2x a whole process that only imports orjson and parses;
- the job step over 1,024 ranks (``bench_job.py``) within 1.5 s;
- with ``--sizes ...,1024``: 1 GiB (the cpu_ops shape) at least 25x HTA (or HTA's failure);
- from 200 MB, peak memory (the process tree's) at most 0.6x the JSON.

The machine should be quiet: wall times on a shared machine are not comparable, CPU times mostly are.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import bench_load as BL  # noqa: E402
import bench_targets as BT  # noqa: E402
import make_big_trace as gen  # noqa: E402

MIB = 1 << 20
SHAPES = {  # name: (source under <shared>/traces, activities, what it stands for)
    "kernel": ("kineto/dlrm_128rank_rank0.json.gz", "cuda", "kernel-heavy (CUDA activity only)"),
    "cpu_ops": ("kineto/v100_2rank_rank1.json.gz", "all", "CPU ops with shapes and args"),
    "flows": ("kineto/v100_resnet_ns_rank0.pt.trace.json.gz", "all", "many flow events"),
    "h100": ("h100/gpt_small_fp32.pt.trace.json.gz", "all", "modern H100 (torch 2.11)"),
}
TARGET_X = 10.0  # from 50 MB
TARGET_10MB_X = 6.0
TARGET_1G_X = 25.0  # or HTA's failure
TARGET_RSS_X = 0.6  # peak memory / JSON from 200 MB (gzip included)


@dataclass
class Runs:
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    failed: str = ""

    def med(self, which: str) -> float | None:
        v = getattr(self, which)
        return statistics.median(v) if v else None

    def spread(self, which: str) -> str:
        v = getattr(self, which)
        return f"{min(v):.2f}-{max(v):.2f}" if v else "-"


def shape_trace(shape: str, size_mb: float, shared: Path, out_dir: Path, python: str) -> Path:
    src_rel, activities, _ = SHAPES[shape]
    out = out_dir / "shapes" / f"{shape}_{size_mb:g}MB.json"
    if out.exists() and gen.read_meta(out) is not None:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    print(f"[setup] generating {out.name} from {src_rel} ...", file=sys.stderr, flush=True)
    subprocess.run(
        [
            python,
            str(HERE / "make_big_trace.py"),
            "--source",
            str(shared / src_rel),
            "--size-mb",
            f"{size_mb:g}",
            "--exact",
            "--activities",
            activities,
            "-o",
            str(out),
            "-q",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return out


def has_simdjson(python: str) -> bool:
    return subprocess.run([python, "-c", "import simdjson"], capture_output=True).returncode == 0


def measure(path: Path, reps: int, args, hta_py: str | None) -> dict[str, Runs]:
    BL.warm_page_cache(path)
    out = {"tracedoc": Runs(), "hta": Runs(), "load": Runs(), "simdjson": Runs()}
    simd_py = args.python if args.simdjson else None
    for i in range(reps):
        for who, tool, py, timeout in (
            ("tracedoc", "tracedoc analyze", args.python, args.timeout),
            ("hta", "HTA load+analysis", hta_py, args.hta_timeout),
            ("load", "tracedoc load", args.python, args.timeout),
            ("simdjson", "simdjson parse", simd_py, args.timeout),
        ):
            runs = out[who]
            if py is None or runs.failed:
                continue
            print(f"[run] {tool} on {path.name} ({i + 1}/{reps}) ...", file=sys.stderr, flush=True)
            r = BL.run_child(py, tool, path, timeout, args.mem_limit_kb, args.out_dir / "logs")
            if not r.ok:
                runs.failed = r.note or "failed"
                continue
            runs.wall.append(r.wall_s)
            runs.cpu.append(r.extra.get("cpu_s") or float("nan"))
            runs.rss_mb.append(r.rss_mb or 0.0)
    return out


def _ratios(a: list[float], b: list[float]) -> list[float]:
    return [x / y for x, y in zip(a, b) if y]


class Table:
    def __init__(self) -> None:
        self.rows: list[dict] = []

    def add(self, shape: str, size_mb: float, path: Path, runs: dict[str, Runs]) -> None:
        td, hta = runs["tracedoc"], runs["hta"]
        # ratios per run pair (run i of HTA against run i of tracedoc), so the spread is of the ratio itself
        wall_x = _ratios(hta.wall, td.wall)
        cpu_x = _ratios(hta.cpu, td.cpu)
        self.rows.append(
            {
                "shape": shape,
                "size_mb": size_mb,
                "file": path.name,
                "json_mb": path.stat().st_size / MIB,
                "events": (gen.read_meta(path) or {}).get("events"),
                "td": td,
                "hta": hta,
                "wall_x": wall_x,
                "cpu_x": cpu_x,
                "load": runs["load"],
                "simdjson": runs["simdjson"],
                "load_x": _ratios(runs["load"].wall, runs["simdjson"].wall),
            }
        )

    def markdown(self) -> str:
        out = [
            "| shape | JSON MiB | events | tracedoc wall s (spread) | tracedoc CPU s | HTA wall s (spread) "
            "| HTA CPU s | HTA/tracedoc wall x (spread) | CPU x | peak memory / JSON | load s (spread) "
            "| simdjson parse s (spread) | load / simdjson x |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in self.rows:
            td, hta = r["td"], r["hta"]
            ev = f"{r['events']:,}" if r["events"] else "-"
            td_wall = f"{td.med('wall'):.3f} ({td.spread('wall')})" if td.wall else f"failed: {td.failed}"
            if hta.failed:
                hta_wall, hx = f"HTA failed: {hta.failed}", "HTA's failure"
            elif hta.wall:
                hta_wall = f"{hta.med('wall'):.2f} ({hta.spread('wall')})"
                hx = f"{statistics.median(r['wall_x']):.1f} ({min(r['wall_x']):.1f}-{max(r['wall_x']):.1f})"
            else:
                hta_wall, hx = "not measured", "-"
            cx = f"{statistics.median(r['cpu_x']):.1f}" if r["cpu_x"] else "-"
            rss = f"{max(td.rss_mb) / r['json_mb']:.2f}" if td.rss_mb else "-"
            ld, sj = r["load"], r["simdjson"]
            ld_wall = f"{ld.med('wall'):.3f} ({ld.spread('wall')})" if ld.wall else "-"
            sj_wall = f"{sj.med('wall'):.3f} ({sj.spread('wall')})" if sj.wall else "-"
            lx = f"{statistics.median(r['load_x']):.1f}" if r["load_x"] else "-"
            out.append(
                f"| {r['shape']} | {r['json_mb']:.1f} | {ev} | {td_wall} | "
                f"{td.med('cpu') or 0:.3f} | {hta_wall} | {hta.med('cpu') or 0:.2f} | {hx} | {cx} | {rss} | "
                f"{ld_wall} | {sj_wall} | {lx} |"
            )
        return "\n".join(out)


def shape_checks(table: Table, checks: BT.Checks) -> None:
    for size in sorted({r["size_mb"] for r in table.rows}):
        rows = [r for r in table.rows if r["size_mb"] == size]
        measured = [r for r in rows if r["wall_x"]]
        hta_failed = [r["shape"] for r in rows if r["hta"].failed]
        target = TARGET_1G_X if size >= 1024 else TARGET_X if size >= 50 else TARGET_10MB_X
        if not measured:
            checks.add(
                f"{size:g} MB: min over shapes of HTA / tracedoc (x)",
                None,
                ">=",
                target,
                "(HTA failed on: " + ", ".join(hta_failed) + ")" if hta_failed else "(HTA not measured)",
            )
            continue
        worst = min(measured, key=lambda r: statistics.median(r["wall_x"]))
        runs = min(len(r["wall_x"]) for r in measured)
        per_run = [min(r["wall_x"][i] for r in measured) for i in range(runs)]  # run i's minimum over shapes
        lo, hi = min(per_run), max(per_run)
        note = (
            f"(worst shape {worst['shape']}; the minimum over shapes ranged {lo:.1f}-{hi:.1f} over runs; "
            f"CPU-time ratio {statistics.median(worst['cpu_x']):.1f}"
            + (f"; HTA failed on {', '.join(hta_failed)}: HTA's failure" if hta_failed else "")
            + ")"
        )
        checks.add(
            f"{size:g} MB: min over shapes of HTA / tracedoc (x)",
            statistics.median(worst["wall_x"]),
            ">=",
            target,
            note,
        )
        loads = [r for r in rows if r["load_x"]]
        if size >= 50 and loads:
            worst = max(loads, key=lambda r: statistics.median(r["load_x"]))
            checks.add(
                f"{size:g} MB: max over shapes of tracedoc load / simdjson parse (x)",
                statistics.median(worst["load_x"]),
                "<=",
                2.0,
                f"(worst shape {worst['shape']})",
            )
        if size >= 200:
            rows = [r for r in rows if r["td"].rss_mb]
            if not rows:
                continue
            worst = max(rows, key=lambda r: max(r["td"].rss_mb) / r["json_mb"])
            checks.add(
                f"{size:g} MB: max over shapes of tracedoc peak memory / JSON",
                max(worst["td"].rss_mb) / worst["json_mb"],
                "<=",
                TARGET_RSS_X,
                f"(worst shape {worst['shape']}; the process tree's PSS, worker processes and children included)",
            )


def _process(cmd: list[str]) -> tuple[float, float]:
    """Wall and CPU time (user + system, its children included) of a whole process."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = BT._wall(cmd)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def nsys_checks(checks: BT.Checks, reps: int, shared: Path) -> None:
    """Large exports against a plain read of their tables; small ones as whole processes."""
    files = sorted((shared / "nsys").glob("*.sqlite"))
    print(f"\nnsys exports (median and spread of {reps})")
    for f in files:
        size = f.stat().st_size
        if size >= 2 * MIB:
            td, sq, tables = [], [], []
            for _ in range(reps):
                r = BT._child_json([sys.executable, "-c", BT.NSYS_CHILD, "tracedoc", str(f)])
                td.append(r["wall_s"])
                tables = r["tables"]
                sq.append(
                    BT._child_json([sys.executable, "-c", BT.NSYS_CHILD, "sqlite", str(f), json.dumps(tables)])[
                        "wall_s"
                    ]
                )
            x = [a / max(1e-9, b) for a, b in zip(td, sq)]
            print(
                f"  {f.name:<34} {size / MIB:5.1f} MiB  tracedoc {statistics.median(td):.3f} s  sqlite3 read "
                f"{statistics.median(sq):.3f} s  ({len(tables)} tables)  {statistics.median(x):.2f}x "
                f"(spread {min(x):.2f}-{max(x):.2f})"
            )
            checks.add(
                f"nsys {f.name}: analyze / sqlite3 read of its tables",
                statistics.median(x),
                "<=",
                2.0,
                f"(spread {min(x):.2f}-{max(x):.2f})",
            )
        else:
            cmd = [sys.executable, "-m", "tracedoc", "analyze", str(f)]
            BT._wall(cmd)
            runs = [_process(cmd) for _ in range(reps)]
            w, c = [r[0] for r in runs], [r[1] for r in runs]
            print(
                f"  {f.name:<34} {size / MIB:5.1f} MiB  whole process {statistics.median(w):.3f} s "
                f"(spread {min(w):.3f}-{max(w):.3f}), CPU {statistics.median(c):.3f} s"
            )
            checks.add(
                f"nsys {f.name}: whole process (s)",
                statistics.median(w),
                "<=",
                0.3,
                f"(spread {min(w):.3f}-{max(w):.3f}; CPU {statistics.median(c):.3f} s)",
            )


def small_check(checks: BT.Checks, reps: int, shared: Path) -> None:
    path = shared / "kineto" / BT.SMALL_TRACE
    py = sys.executable
    cmds = {
        "python -c pass": [py, "-c", "pass"],
        "orjson.loads": [py, "-c", BT.ORJSON_SNIPPET, str(path)],
        "tracedoc analyze": [py, "-m", "tracedoc", "analyze", str(path)],
    }
    for cmd in cmds.values():
        BT._wall(cmd)
    times: dict[str, list[float]] = {k: [] for k in cmds}
    cpu: dict[str, list[float]] = {k: [] for k in cmds}
    for _ in range(reps):
        for k, cmd in cmds.items():
            w, c = _process(cmd)
            times[k].append(w)
            cpu[k].append(c)
    x = [a / b for a, b in zip(times["tracedoc analyze"], times["orjson.loads"])]
    cx = [a / b for a, b in zip(cpu["tracedoc analyze"], cpu["orjson.loads"])]
    print(f"\n1 MB shared trace ({BT.SMALL_TRACE}), whole processes, median and spread of {reps}")
    for k, v in times.items():
        print(
            f"  {k:<22} {statistics.median(v):.3f} s ({min(v):.3f}-{max(v):.3f}), CPU {statistics.median(cpu[k]):.3f} s"
        )
    checks.add(
        "1 MB: whole tracedoc analyze process / orjson process",
        statistics.median(x),
        "<=",
        2.0,
        f"(spread {min(x):.2f}-{max(x):.2f}; CPU-time ratio {statistics.median(cx):.2f})",
    )


def job_check(checks: BT.Checks, reps: int) -> None:
    times = []
    for _ in range(reps):
        out = subprocess.run(
            [sys.executable, str(HERE / "bench_job.py")], capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout
        rec = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        times.append(next(r["build_job_s"] for r in rec if "build_job_s" in r))
    print(f"\nJob step over 1,024 ranks: {statistics.median(times):.2f} s ({min(times):.2f}-{max(times):.2f})")
    checks.add(
        "job step over 1,024 ranks (s)",
        statistics.median(times),
        "<=",
        1.5,
        f"(spread {min(times):.2f}-{max(times):.2f})",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="10,50,200", help="MB sizes (add 1024 for the 1 GiB row, cpu_ops shape)")
    ap.add_argument("--shapes", default=",".join(SHAPES), help=f"comma-separated, of {', '.join(SHAPES)}")
    ap.add_argument("--reps", type=int, default=3, help="runs of each measurement (median and spread)")
    ap.add_argument("--skip-hta", action="store_true")
    ap.add_argument("--no-extras", action="store_true", help="only the shapes table (no nsys, 1 MB, job step)")
    ap.add_argument("--shared", default=str(gen.DEFAULT_SHARED))
    ap.add_argument("--out-dir", default=str(BL.DATA_DIR))
    ap.add_argument("--timeout", type=float, default=1800, help="seconds each tracedoc run may take")
    ap.add_argument("--hta-timeout", type=float, default=1800, help="seconds each HTA run may take")
    ap.add_argument("--json-out", default=None)
    a = ap.parse_args(argv)
    shared = Path(a.shared) / "traces"
    a.out_dir = Path(a.out_dir)
    a.python = sys.executable
    a.mem_limit_kb = int(BL.mem_available_kb() * 0.9)
    a.simdjson = has_simdjson(a.python)
    BL.compile_bytecode()
    hta_py, why = (None, "--skip-hta") if a.skip_hta else BL.hta_python(a.out_dir / "hta-venv", install=True)
    sizes = [float(s) for s in a.sizes.split(",") if s.strip()]
    shapes = [s.strip() for s in a.shapes.split(",") if s.strip()]
    for s in shapes:
        if s not in SHAPES:
            ap.error(f"unknown shape {s!r}; known: {', '.join(SHAPES)}")
    load0, t0 = os.getloadavg()[0], time.time()
    print(
        f"tracedoc shapes benchmark | {os.cpu_count()} CPUs | load average {load0:.2f} at start | HTA: "
        f"{BL.hta_version(hta_py) if hta_py else 'not measured (' + why + ')'} | simdjson parse: "
        f"{'measured' if a.simdjson else 'not measured (pip install pysimdjson)'} | {a.reps} runs each"
    )
    table = Table()
    for size in sizes:
        for shape in shapes if size < 1024 else ["cpu_ops"]:
            path = shape_trace(shape, size, shared, a.out_dir, a.python)
            table.add(shape, size, path, measure(path, a.reps, a, hta_py))
    print(
        f"\nShapes x sizes (seconds of work in fresh processes, imports excluded; median and spread of {a.reps} runs)\n"
    )
    print(table.markdown())
    checks = BT.Checks()
    shape_checks(table, checks)
    if not a.no_extras:
        nsys_checks(checks, a.reps, shared)
        small_check(checks, max(a.reps, 5), shared)
        job_check(checks, a.reps)
    failed = checks.print()
    load1 = os.getloadavg()[0]
    print(f"\nload average {load0:.2f} at start, {load1:.2f} at the end; {time.time() - t0:.0f} s in all")
    if a.json_out:
        Path(a.json_out).write_text(
            json.dumps(
                [{k: (v.__dict__ if isinstance(v, Runs) else v) for k, v in r.items()} for r in table.rows],
                indent=2,
                default=str,
            )
            + "\n"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
