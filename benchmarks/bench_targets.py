#!/usr/bin/env python3
"""Every performance target of docs/performance.md in one run, PASS/FAIL side by side, and the table of sizes × tools
written into benchmarks/README.md.

    python benchmarks/bench_targets.py                      # sizes 1, 10, 50, 200 MB (about 10-20 minutes)
    python benchmarks/bench_targets.py --sizes 1,10,50,200,1024
    python benchmarks/bench_targets.py --sizes 1,50 --skip-hta --no-readme   # a quick look

Parts, each in fresh processes started here (see README.md, "bench_targets.py"):

- start-up: ``tracedoc --version`` / ``--help`` (``bench_startup.py``);
- the 1 MB shared trace: ``tracedoc analyze FILE`` against a bare ``orjson.loads`` of the same file, both
  as whole processes (the interpreter's start counts for both; the ratio without it is printed too);
- sizes: ``bench_load.py``'s children (orjson.loads, tracedoc load, tracedoc analyze, HTA load+analysis)
  on the shared 1 MB trace and on generated traces of 10, 50, 200 (and 1024) MiB;
- nsys: ``tracedoc.api.analyze`` of every shared nsys export against a plain ``sqlite3`` read
  (``SELECT *``, every row fetched) of the tables tracedoc reads from it;
- ranks: a directory of generated ranks analysed with one process and with the process pool.

Times are medians over ``--reps`` runs (the size table keeps bench_load's fastest of ``--repeat``). The
machine should be idle: the load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import bench_load as BL  # noqa: E402
import bench_startup as BS  # noqa: E402
import make_big_trace as gen  # noqa: E402

MIB = 1 << 20
SMALL_TRACE = "v100_resnet_ns_rank0.pt.trace.json.gz"
README = HERE / "README.md"
TABLE_BEGIN = "<!-- sizes table: written by bench_targets.py -->"
TABLE_END = "<!-- end of sizes table -->"

ORJSON_SNIPPET = (
    "import gzip, sys, orjson\n"
    "raw = open(sys.argv[1], 'rb').read()\n"
    "orjson.loads(gzip.decompress(raw) if sys.argv[1].endswith('.gz') else raw)\n"
)

NSYS_CHILD = r"""
import json, re, sqlite3, sys, time
mode, path = sys.argv[1], sys.argv[2]
if mode == "tracedoc":
    import tracedoc.api as api
    from tracedoc.ingest.nsys import db as nsys_db
    statements = []
    connect = nsys_db._connect
    def recording_connect(p):
        conn = connect(p)
        conn.set_trace_callback(statements.append)
        return conn
    nsys_db._connect = recording_connect
    t0 = time.perf_counter()
    api.analyze(path)
    wall = time.perf_counter() - t0
    tables = set()
    for s in statements:
        for m in re.finditer(r'\bFROM\s+"?([A-Za-z_][A-Za-z0-9_]*)"?', s, re.I):
            tables.add(m.group(1))
    tables.discard("sqlite_master")
    print(json.dumps({"wall_s": wall, "tables": sorted(tables)}))
else:
    tables = json.loads(sys.argv[3])
    t0 = time.perf_counter()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    present = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
    conn.text_factory = bytes  # some exports hold text that is not UTF-8
    rows = 0
    for t in (t for t in tables if t in present):
        rows += len(conn.execute(f'SELECT * FROM "{t}"').fetchall())
    conn.close()
    print(json.dumps({"wall_s": time.perf_counter() - t0, "rows": rows}))
"""


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=_env(), cwd=ROOT)
    return time.perf_counter() - t0


def _child_json(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=_env(), cwd=ROOT).stdout
    return json.loads(out.strip().splitlines()[-1])


class Checks:
    """Target lines, printed together at the end."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, float | None, str, float, str]] = []

    def add(self, label: str, value: float | None, op: str, bound: float, note: str = "") -> None:
        self.lines.append((label, value, op, bound, note))

    def print(self) -> int:
        failed = 0
        print("\nTargets (docs/performance.md)")
        for label, value, op, bound, note in self.lines:
            if value is None:
                verdict, shown = "n/a ", "-"
            else:
                ok = {"<=": value <= bound, ">=": value >= bound}[op]
                verdict, shown = ("PASS" if ok else "FAIL"), f"{value:.2f}"
                failed += not ok
            print(f"  {verdict}  {label:<62} {shown:>8}  target {op} {bound:g}  {note}")
        return failed


# --- parts -------------------------------------------------------------------------------------------


def startup(checks: Checks, reps: int) -> None:
    times: dict[str, list[float]] = {name: [] for name in BS.COMMANDS}
    for args in BS.COMMANDS.values():
        BS.wall_s(args)
    for _ in range(reps):
        for name, args in BS.COMMANDS.items():
            times[name].append(BS.wall_s(args))
    print("\nStart-up (median of %d fresh processes)" % reps)
    for name, ts in times.items():
        print(f"  {name:<22} {statistics.median(ts):.3f} s")
    for name in ("tracedoc --version", "tracedoc --help"):
        checks.add(f"{name} (s)", statistics.median(times[name]), "<=", BS.TARGET_S)


def small_trace(checks: Checks, reps: int, shared: Path) -> None:
    path = shared / "kineto" / SMALL_TRACE
    if not path.exists():
        checks.add("analyze 1 MB / orjson.loads", None, "<=", 1.5, f"({path} not found)")
        return
    py = sys.executable
    cmds = {
        "python -c pass": [py, "-c", "pass"],
        "orjson.loads": [py, "-c", ORJSON_SNIPPET, str(path)],
        "tracedoc analyze": [py, "-m", "tracedoc", "analyze", str(path)],
    }
    times: dict[str, list[float]] = {k: [] for k in cmds}
    for cmd in cmds.values():
        _wall(cmd)
    for _ in range(reps):
        for k, cmd in cmds.items():
            times[k].append(_wall(cmd))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"\n1 MB shared trace ({SMALL_TRACE}, {path.stat().st_size / MIB:.1f} MiB gzip), whole processes, "
        f"median of {reps}"
    )
    for k, v in med.items():
        print(f"  {k:<22} {v:.3f} s")
    bare = med["python -c pass"]
    without = (med["tracedoc analyze"] - bare) / max(1e-9, med["orjson.loads"] - bare)
    checks.add(
        "tracedoc analyze 1 MB / orjson.loads (processes, start included)",
        med["tracedoc analyze"] / med["orjson.loads"],
        "<=",
        1.5,
        f"(without the interpreter's start: {without:.2f})",
    )


def nsys(checks: Checks, reps: int, shared: Path) -> None:
    files = sorted((shared / "nsys").glob("*.sqlite"))
    print(f"\nnsys exports: tracedoc.api.analyze vs a plain sqlite3 read of the tables it reads, median of {reps}")
    worst = None
    for f in files:
        td, sq, tables = [], [], []
        for _ in range(reps):
            r = _child_json([sys.executable, "-c", NSYS_CHILD, "tracedoc", str(f)])
            td.append(r["wall_s"])
            tables = r["tables"]
            sq.append(_child_json([sys.executable, "-c", NSYS_CHILD, "sqlite", str(f), json.dumps(tables)])["wall_s"])
        ratio = statistics.median(td) / max(1e-9, statistics.median(sq))
        worst = ratio if worst is None else max(worst, ratio)
        print(
            f"  {f.name:<34} tracedoc {statistics.median(td):.3f} s   sqlite3 {statistics.median(sq):.3f} s   "
            f"{ratio:.2f}x   ({len(tables)} tables)"
        )
    checks.add("nsys analyze / sqlite3 read of its tables (worst export)", worst, "<=", 2.0)


def sizes(checks: Checks, size_list: list[float], args, hta_py: str | None, shared: Path) -> list[dict]:
    rows = []
    tools = list(BL.TRACEDOC_TOOLS) + (["HTA load+analysis"] if hta_py else [])
    for size in size_list:
        path = (shared / "kineto" / SMALL_TRACE) if size <= 1 else BL.ensure_trace(size, args)
        res = BL.measure(tools, path, args, hta_py)
        oj, ld, an = res.get("orjson.loads"), res.get("tracedoc load"), res.get("tracedoc analyze")
        hta = res.get("HTA load+analysis")
        json_bytes = (oj.extra.get("json_bytes") if oj else None) or _json_bytes(path)
        row = {
            "size_mb": size,
            "file": path.name,
            "json_mb": json_bytes / MIB,
            "events": BL.count_events(path, oj),
            "orjson_s": oj.wall_s if oj and oj.ok else None,
            "load_s": ld.wall_s if ld and ld.ok else None,
            "analyze_s": an.wall_s if an and an.ok else None,
            "analyze_rss_mb": an.rss_mb if an and an.ok else None,
            "hta_s": hta.wall_s if hta and hta.ok else None,
            "hta_note": (hta.note if hta and not hta.ok else "") if hta_py else "not measured",
        }
        rows.append(row)
    print_sizes(rows)
    for row in rows:
        label = f"{row['json_mb']:.0f} MiB"
        if row["size_mb"] == 50:
            checks.add(f"{label}: tracedoc load / orjson.loads", _ratio(row["load_s"], row["orjson_s"]), "<=", 1.0)
            checks.add(
                f"{label}: HTA load+analysis / tracedoc analyze (x)",
                _ratio(row["hta_s"], row["analyze_s"]),
                ">=",
                10,
                row["hta_note"],
            )
            checks.add(f"{label}: tracedoc analyze peak RSS / JSON", _rss_ratio(row), "<=", 3.0)
        elif row["size_mb"] >= 1024:
            checks.add(
                f"{label}: HTA load+analysis / tracedoc analyze (x)",
                _ratio(row["hta_s"], row["analyze_s"]),
                ">=",
                20,
                row["hta_note"],
            )
            checks.add(f"{label}: tracedoc analyze peak RSS / JSON", _rss_ratio(row), "<=", 1.5)
        elif row["size_mb"] > 1:
            checks.add(
                f"{label}: HTA load+analysis / tracedoc analyze (x)",
                _ratio(row["hta_s"], row["analyze_s"]),
                ">=",
                10,
                row["hta_note"],
            )
    return rows


def _json_bytes(path: Path) -> int:
    if path.name.endswith(".gz"):
        import gzip

        with gzip.open(path, "rb") as f:
            return len(f.read())
    return path.stat().st_size


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if (a is not None and b) else None


def _rss_ratio(row: dict) -> float | None:
    return row["analyze_rss_mb"] / row["json_mb"] if row["analyze_rss_mb"] else None


def _cell(v: float | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def sizes_table(rows: list[dict]) -> str:
    out = [
        "| trace | JSON MiB | events | orjson.loads s | tracedoc load s | load / orjson | tracedoc analyze s "
        "| HTA load+analysis s | HTA / analyze | analyze peak RSS MB | RSS / JSON |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        out.append(
            f"| {r['file']} | {r['json_mb']:.1f} | {_cell(r['events'], ',d')} | {_cell(r['orjson_s'], '.2f')} "
            f"| {_cell(r['load_s'], '.2f')} | {_cell(_ratio(r['load_s'], r['orjson_s']), '.2f')} "
            f"| {_cell(r['analyze_s'], '.2f')} | {_cell(r['hta_s'], '.2f')}"
            f"{' (' + r['hta_note'] + ')' if r['hta_note'] and r['hta_s'] is None else ''} "
            f"| {_cell(_ratio(r['hta_s'], r['analyze_s']), '.1f')} | {_cell(r['analyze_rss_mb'], ',.0f')} "
            f"| {_cell(_rss_ratio(r), '.2f')} |"
        )
    return "\n".join(out)


def print_sizes(rows: list[dict]) -> None:
    print("\nSizes × tools (seconds of work in each tool's own process, imports excluded)")
    print(sizes_table(rows))


def write_readme(rows: list[dict], header: str) -> None:
    text = README.read_text()
    block = f"{TABLE_BEGIN}\n{header}\n\n{sizes_table(rows)}\n{TABLE_END}"
    if TABLE_BEGIN in text and TABLE_END in text:
        text = re.sub(re.escape(TABLE_BEGIN) + r".*?" + re.escape(TABLE_END), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip() + "\n\n## Sizes × tools (latest run of bench_targets.py)\n\n" + block + "\n"
    README.write_text(text)


def ranks(checks: Checks, n_ranks: int, args, reps: int) -> None:
    src = BL.ensure_trace(args.rank_size_mb, args)
    d = Path(args.out_dir) / f"ranks_{n_ranks}x{args.rank_size_mb:g}MB"
    d.mkdir(parents=True, exist_ok=True)
    for i in range(n_ranks):
        link = d / f"rank{i}.json"
        if not link.exists():
            link.symlink_to(src)
    # The job step (matching collectives across ranks, waits, stragglers, the job verdict) is timed by
    # wrapping the two functions the pipeline's stages call for it.
    code = (
        "import sys, time, tracedoc.api as api, tracedoc.stages as st\n"
        "spent = [0.0]\n"
        "def timed(f):\n"
        "    def run(*a, **k):\n"
        "        t = time.perf_counter()\n"
        "        try:\n"
        "            return f(*a, **k)\n"
        "        finally:\n"
        "            spent[0] += time.perf_counter() - t\n"
        "    return run\n"
        "st._join, st._judge_job = timed(st._join), timed(st._judge_job)\n"
        "t0 = time.perf_counter(); api.analyze(sys.argv[1], jobs=int(sys.argv[2]))\n"
        'print(\'{"wall_s": %f, "job_s": %f}\' % (time.perf_counter() - t0, spent[0]))\n'
    )
    times: dict[int, list[float]] = {1: [], os.cpu_count() or 1: []}
    job_s: list[float] = []
    for _ in range(reps):
        for jobs in times:
            out = _child_json([sys.executable, "-c", code, str(d), str(jobs)])
            times[jobs].append(out["wall_s"])
            if jobs == max(times):
                job_s.append(out["job_s"])
    one, pool = statistics.median(times[1]), statistics.median(times[max(times)])
    job = statistics.median(job_s)
    print(
        f"\nDirectory of {n_ranks} ranks × {src.stat().st_size / MIB:.0f} MiB: jobs=1 {one:.2f} s, "
        f"jobs={max(times)} {pool:.2f} s (median of {reps}); speed-up {one / pool:.2f}x on {max(times)} cores; "
        f"job step {job:.3f} s"
    )
    checks.add(
        f"ranks: speed-up per core ({n_ranks} ranks, {max(times)} processes)",
        one / pool / max(times),
        ">=",
        0.8,
        "(near-linear: 1.0 is linear)",
    )
    checks.add(
        f"ranks: job step / the ranks' analysis ({n_ranks} ranks, {max(times)} processes)",
        job / max(pool - job, 1e-9),
        "<=",
        0.10,
        "(the job view adds at most 10%)",
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1,10,50,200", help="MiB sizes for the table (1 = the shared 1 MB trace)")
    ap.add_argument("--reps", type=int, default=5, help="runs per process-level measurement (median)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per tool in the size table (fastest kept)")
    ap.add_argument("--ranks", type=int, default=4, help="ranks in the directory measurement (0 skips it)")
    ap.add_argument("--rank-size-mb", type=float, default=25)
    ap.add_argument("--skip-hta", action="store_true")
    ap.add_argument("--no-readme", action="store_true", help="do not write the table into README.md")
    ap.add_argument("--shared", default=str(gen.DEFAULT_SHARED))
    ap.add_argument("--out-dir", default=str(BL.DATA_DIR))
    ap.add_argument("--timeout", type=float, default=1800)
    a = ap.parse_args(argv)
    shared = Path(a.shared) / "traces"
    a.python, a.source, a.hta_timeout = sys.executable, gen.DEFAULT_SOURCE, a.timeout
    a.mem_limit_kb = int(BL.mem_available_kb() * 0.9)
    BL.compile_bytecode()
    hta_py, why = (None, "--skip-hta") if a.skip_hta else BL.hta_python(Path(a.out_dir) / "hta-venv", install=True)
    load0 = os.getloadavg()[0]
    print(
        f"tracedoc targets | {os.cpu_count()} CPUs | load average {load0:.2f} at start | "
        f"HTA: {BL.hta_version(hta_py) if hta_py else 'not measured (' + why + ')'}"
    )
    checks = Checks()
    startup(checks, a.reps)
    small_trace(checks, a.reps, shared)
    nsys(checks, a.reps, shared)
    rows = sizes(checks, [float(s) for s in a.sizes.split(",") if s.strip()], a, hta_py, shared)
    if a.ranks:
        ranks(checks, a.ranks, a, max(1, a.reps // 2))
    failed = checks.print()
    load1 = os.getloadavg()[0]
    print(f"\nload average {load0:.2f} at start, {load1:.2f} at the end (2 cores: anything above ~0.5 is other work)")
    if not a.no_readme:
        write_readme(
            rows,
            f"Measured {time.strftime('%Y-%m-%d')} on {os.cpu_count()} CPUs, load average "
            f"{load0:.1f}-{load1:.1f} (other work running); HTA "
            f"{BL.hta_version(hta_py) if hta_py else 'not measured'}. Seconds of work, imports excluded; "
            f"fastest of {a.repeat} runs.",
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
