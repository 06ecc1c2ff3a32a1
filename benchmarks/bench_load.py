#!/usr/bin/env python3
"""Side-by-side load / analyze benchmark: tracedoc vs bare orjson.loads vs Meta's HTA, on the same file.

Every measurement runs in its own fresh subprocess, so each tool's peak RSS is its own: the child times
only the work (imports excluded, reported separately), reads ``ru_maxrss`` for itself (and for any
processes it spawned) just before it exits, and prints one JSON line. The parent enforces a timeout and a
memory ceiling (it polls the memory (PSS) of the child and its workers and kills it before the machine
would run out of memory: this machine has no swap, and an OOM kill could hit someone else's process).

    python benchmarks/bench_load.py --size-mb 50        # quick end-to-end check, HTA included
    python benchmarks/bench_load.py                     # the 1 GiB run the performance targets are about

HTA is installed from PyPI into its own virtual environment (benchmarks/_data/hta-venv) on first use.
See benchmarks/README.md for what each number means.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent
sys.path.insert(0, str(HERE))
import make_big_trace as gen  # noqa: E402

MIB = 1 << 20
DATA_DIR = HERE / "_data"
HTA_VENV = DATA_DIR / "hta-venv"
HTA_PACKAGE = "holistictraceanalysis"

TRACEDOC_TOOLS = ("orjson.loads", "tracedoc load", "tracedoc analyze")
HTA_TOOLS = ("HTA load", "HTA load+analysis")

# --- the children ------------------------------------------------------------------------------------
# Each child gets: <tool> <path>; prints {"ok": true, "wall_s": ..., "import_s": ..., "maxrss_kb": ...,
# ...} or {"ok": false, "skipped"/"error": ...} on its last stdout line. The code below runs in the
# child's own interpreter (tracedoc's for the first three, the HTA venv's for HTA).

CHILD = r"""
import json, os, resource, sys, time, traceback

def peak_kb():
    # VmHWM: this process's own RSS high-water mark. ru_maxrss of RUSAGE_SELF is not used: Linux carries
    # the parent's high-water mark into a child through fork + exec, so it would report the parent's peak.
    own = None
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    own = int(line.split()[1])
    except OSError:
        pass
    if own is None:
        own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    # processes the tool itself started (HTA can fork a pool), if any
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids)

def cpu_s():
    # user + system time of this process and of the children it has waited for (decode workers, a
    # forked analysis): the work's CPU time, steadier than wall time on a shared machine
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime

def finish(res):
    res.setdefault("ok", True)
    if "cpu0" in res:
        res["cpu_s"] = cpu_s() - res.pop("cpu0")
    res["maxrss_kb"] = peak_kb()
    sys.stdout.write("\n" + json.dumps(res) + "\n")
    sys.stdout.flush()
    os._exit(0)  # skip teardown of big object graphs: it is not part of any tool's work

tool, path = sys.argv[1], sys.argv[2]
res = {}
try:
    if tool == "orjson.loads":
        t0 = time.perf_counter()
        import orjson
        t1 = time.perf_counter()
        res["cpu0"] = cpu_s()
        with open(path, "rb") as f:
            raw = f.read()
        if path.endswith(".gz"):
            import gzip
            raw = gzip.decompress(raw)
        doc = orjson.loads(raw)
        t2 = time.perf_counter()
        res.update(import_s=t1 - t0, wall_s=t2 - t1, events=len(doc["traceEvents"]))
    elif tool == "simdjson parse":
        # the JSON-parse limit: pysimdjson's parse of the bytes (a DOM, no Python object per value)
        t0 = time.perf_counter()
        import simdjson
        t1 = time.perf_counter()
        res["cpu0"] = cpu_s()
        with open(path, "rb") as f:
            raw = f.read()
        if path.endswith(".gz"):
            import gzip
            raw = gzip.decompress(raw)
        t1 = time.perf_counter()
        doc = simdjson.Parser().parse(raw)
        t2 = time.perf_counter()
        res.update(import_s=t1 - t0, wall_s=t2 - t1)
    elif tool == "tracedoc load":
        t0 = time.perf_counter()
        import tracedoc.ingest
        t1 = time.perf_counter()
        res["cpu0"] = cpu_s()
        trace = tracedoc.ingest.load(path)
        t2 = time.perf_counter()
        res.update(import_s=t1 - t0, wall_s=t2 - t1)
    elif tool == "tracedoc analyze":
        t0 = time.perf_counter()
        try:
            import tracedoc.api as api
        except ModuleNotFoundError as exc:
            if exc.name not in ("tracedoc.api",):
                raise
            finish({"ok": False, "skipped": "tracedoc.api does not exist yet"})
        if not hasattr(api, "analyze"):
            finish({"ok": False, "skipped": "tracedoc.api has no analyze()"})
        t1 = time.perf_counter()
        res["cpu0"] = cpu_s()
        result = api.analyze(path)
        t2 = time.perf_counter()
        res.update(import_s=t1 - t0, wall_s=t2 - t1)
    elif tool in ("HTA load", "HTA load+analysis"):
        import logging, tempfile
        t0 = time.perf_counter()
        from hta.trace_analysis import TraceAnalysis
        t1 = time.perf_counter()
        logging.getLogger().setLevel(logging.ERROR)
        for name in ("hta", "hta.common", "hta.analyzers"):
            logging.getLogger(name).setLevel(logging.ERROR)
        # HTA reads a directory of per-rank files named *.json / *.gz; give it one link to our file
        d = tempfile.mkdtemp(prefix="hta-bench-")
        link = os.path.join(d, "rank_trace" + (".json.gz" if path.endswith(".gz") else ".json"))
        os.symlink(os.path.abspath(path), link)
        res["cpu0"] = cpu_s()
        t1 = time.perf_counter()
        try:
            analyzer = TraceAnalysis(trace_dir=d)
            t2 = time.perf_counter()
            res.update(import_s=t1 - t0, load_s=t2 - t1)  # import_s includes the logging set-up
            if tool == "HTA load+analysis":
                tb = analyzer.get_temporal_breakdown(visualize=False)
                t3 = time.perf_counter()
                ov = analyzer.get_comm_comp_overlap(visualize=False)
                t4 = time.perf_counter()
                res.update(breakdown_s=t3 - t2, overlap_s=t4 - t3,
                           breakdown=json.loads(tb.to_json(orient="records")),
                           overlap=json.loads(ov.to_json(orient="records")))
                t2 = t4
            res["wall_s"] = t2 - t1
            res["cpu_s"] = cpu_s() - res.pop("cpu0")
        finally:
            os.unlink(link)
            os.rmdir(d)
    else:
        finish({"ok": False, "error": f"unknown tool {tool!r}"})
except MemoryError:
    finish({"ok": False, "error": "MemoryError"})
except Exception as exc:
    finish({"ok": False, "error": f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc()[-3000:]})
finish(res)
"""


@dataclass
class Result:
    tool: str
    path: str
    json_bytes: int
    ok: bool = False
    wall_s: float | None = None
    import_s: float | None = None
    maxrss_kb: int | None = None
    events: int | None = None
    note: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def rss_mb(self) -> float | None:
        return self.maxrss_kb / 1024 if self.maxrss_kb else None


def mem_total_kb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    return 0


def mem_available_kb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1])
    return 0


SAMPLE_S = 0.05  # the shortest pause between two memory samples of a running tool


def _tree_memory_kb(pid: int) -> int:
    """Memory of pid plus its descendants (worker pools): the sum of their PSS.

    PSS (proportional set size) shares each page among the processes that map it, so pages a forked
    worker still shares with its parent count once, as they use memory once. Summing RSS would count
    them in every process (a fork copies the parent's page tables, so a fresh worker's RSS starts at
    its parent's). RSS is used where the kernel offers no ``smaps_rollup``.
    """
    total = 0
    todo = [pid]
    seen = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            total += _process_memory_kb(p)
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo.extend(int(c) for c in f.read().split())
        except (OSError, ValueError):
            pass
    return total


def _process_memory_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def run_child(python: str, tool: str, path: Path, timeout_s: float, mem_limit_kb: int, log_dir: Path) -> Result:
    json_bytes = path.stat().st_size
    res = Result(tool=tool, path=str(path), json_bytes=json_bytes)
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / f"{tool.replace(' ', '_').replace('+', '_')}-{path.stem}.log"
    env = dict(os.environ)
    env.setdefault("PYTHONHASHSEED", "0")
    with open(log, "wb") as err:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [python, "-c", CHILD, tool, str(path)],
            stdout=subprocess.PIPE,
            stderr=err,
            cwd=str(REPO_ROOT),
            env=env,
            start_new_session=True,
        )
        peak_seen = 0
        killed = ""
        pause = SAMPLE_S
        while True:
            try:
                proc.wait(timeout=pause)
                break
            except subprocess.TimeoutExpired:
                pass
            sampled = time.perf_counter()
            rss = _tree_memory_kb(proc.pid)
            # Reading smaps_rollup walks every mapped page (about 10 ms for 800 MB): sample no more
            # often than keeps that under a tenth of one core, so the sampling does not slow the tool.
            pause = max(SAMPLE_S, 10 * (time.perf_counter() - sampled))
            peak_seen = max(peak_seen, rss)
            if time.perf_counter() - t0 > timeout_s:
                killed = f"timed out after {timeout_s:g} s"
            elif mem_limit_kb and rss > mem_limit_kb:
                killed = f"out of memory: RSS passed the {mem_limit_kb / MIB:.1f} GiB limit"
            if killed:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # the child's own session: it and its workers
                except ProcessLookupError:
                    pass
                proc.wait()
                break
        out = proc.stdout.read().decode(errors="replace")
        proc.stdout.close()
        elapsed = time.perf_counter() - t0
    if killed:
        res.note = killed
        res.maxrss_kb = peak_seen or None
        res.extra["stopped"] = True
        return res
    payload = None
    for line in reversed(out.strip().splitlines()):
        if line.startswith("{"):
            try:
                payload = json.loads(line)
                break
            except ValueError:
                pass
    if payload is None:
        sig = -proc.returncode if proc.returncode < 0 else None
        if sig == signal.SIGKILL:
            res.note = "killed by SIGKILL (likely the kernel OOM killer)"
        else:
            res.note = f"exited with status {proc.returncode} and no result; see {log}"
        res.maxrss_kb = peak_seen or None
        res.extra["stopped"] = True
        return res
    # The tool's own high-water mark misses worker processes (tracedoc decodes large files in a pool):
    # report the larger of it and the sampled RSS sum over the whole process tree.
    own_peak = payload.pop("maxrss_kb", None)
    res.maxrss_kb = max(own_peak or 0, peak_seen) or None
    res.extra["own_peak_kb"] = own_peak
    res.extra["tree_peak_sampled_kb"] = peak_seen
    if payload.get("skipped"):
        res.note = "skipped: " + payload["skipped"]
        return res
    if not payload.get("ok", False):
        res.note = "failed: " + str(payload.get("error"))
        if payload.get("traceback"):
            with open(log, "a") as f:
                f.write(payload["traceback"])
            res.note += f" (traceback in {log})"
        return res
    res.ok = True
    res.wall_s = payload.pop("wall_s")
    res.import_s = payload.pop("import_s", None)
    res.events = payload.pop("events", None)
    payload.pop("ok", None)
    res.extra = payload
    res.extra["process_s"] = elapsed
    return res


# --- HTA's environment -------------------------------------------------------------------------------


def compile_bytecode(python: str = sys.executable) -> None:
    """Byte-compile tracedoc's modules, as an installed package has them (pip compiles a wheel's at
    install): in a checkout run with PYTHONDONTWRITEBYTECODE set, every module edited since its last
    compile would otherwise be compiled again in each child, inside the timed work where it is imported
    lazily (HTA's environment was installed by pip, so its bytecode exists)."""
    subprocess.run([python, "-m", "compileall", "-q", str(REPO_ROOT / "tracedoc")], check=False)


def hta_python(venv: Path, install: bool = True) -> tuple[str | None, str]:
    """The HTA venv's interpreter, creating the venv and installing HTA on first use."""
    py = venv / "bin" / "python"
    if py.exists():
        probe = subprocess.run([str(py), "-c", "import hta.trace_analysis"], capture_output=True)
        if probe.returncode == 0:
            return str(py), ""
    if not install:
        return None, f"no HTA environment at {venv} (run without --no-install to create it)"
    print(f"[setup] creating {venv} and installing {HTA_PACKAGE} from PyPI (once) ...", file=sys.stderr, flush=True)
    log = venv.parent / "hta-install.log"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as f:
        r = subprocess.run([sys.executable, "-m", "venv", str(venv)], stdout=f, stderr=subprocess.STDOUT)
        if r.returncode == 0:
            r = subprocess.run([str(py), "-m", "pip", "install", "-q", HTA_PACKAGE], stdout=f, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        return None, f"installing {HTA_PACKAGE} failed; see {log}"
    return str(py), ""


def hta_version(py: str) -> str:
    r = subprocess.run(
        [py, "-c", "import importlib.metadata as m; print(m.version('holistictraceanalysis'))"],
        capture_output=True,
        text=True,
    )
    return r.stdout.strip() or "?"


# --- reporting ---------------------------------------------------------------------------------------


def fmt(v: float | None, spec: str, missing: str = "-") -> str:
    return missing if v is None else format(v, spec)


def print_table(title: str, results: list[Result], events: int | None, json_bytes: int) -> None:
    print()
    print(title)
    print(f"  file: {results[0].path if results else '?'}")
    print(
        f"  size: {json_bytes / MIB:,.1f} MiB uncompressed JSON, {events:,} events (len(traceEvents))"
        if events
        else f"  size: {json_bytes / MIB:,.1f} MiB"
    )
    hdr = f"  {'tool':<20} {'wall s':>9} {'events/s':>12} {'peak RSS MB':>12} {'RSS/JSON':>9}  {'import s':>8}  note"
    print(hdr)
    print("  " + "-" * (len(hdr) - 2))
    for r in results:
        eps = events / r.wall_s if (r.ok and events and r.wall_s) else None
        note = r.note
        if r.ok and r.extra.get("breakdown_s") is not None:
            note = (
                f"load {r.extra['load_s']:.1f} s + temporal breakdown {r.extra['breakdown_s']:.1f} s"
                f" + comm/comp overlap {r.extra['overlap_s']:.1f} s"
            )
        rss_kb = r.maxrss_kb
        if not r.ok:
            if r.extra.get("stopped") and rss_kb:
                note += " (RSS shown: the peak seen before it stopped)"
            else:
                rss_kb = None
        rss_mb = rss_kb / 1024 if rss_kb else None
        print(
            f"  {r.tool:<20} {fmt(r.wall_s, '9.2f'):>9} {fmt(eps, ',.0f'):>12} {fmt(rss_mb, ',.0f'):>12} "
            f"{fmt(rss_kb * 1024 / json_bytes if rss_kb else None, '.2f'):>9}  {fmt(r.import_s, '8.2f'):>8}  {note}"
        )


def check(label: str, value: float | None, op: str, bound: float, unit: str = "", why_missing: str = "") -> str:
    if value is None:
        return f"  {label:<58} {'n/a':>9}   target {op} {bound:g}{unit}   ({why_missing or 'not measured'})"
    passed = {"<=": value <= bound, ">=": value >= bound, "<": value < bound}[op]
    return f"  {label:<58} {value:>9.2f}{unit:<1}  target {op} {bound:g}{unit}   {'PASS' if passed else 'FAIL'}"


def ratios(results: dict[str, Result], events: int | None, json_bytes: int, hta_note: str = "") -> list[str]:
    def ok(t):
        r = results.get(t)
        return r if (r and r.ok) else None

    def why(*tools):
        for t in tools:
            r = results.get(t)
            if r is None:
                return f"{t} not run"
            if not r.ok:
                return f"{t}: {'skipped' if r.note.startswith('skipped') else 'did not finish'}, see the table"
        return ""

    lines = []
    td, oj, an = ok("tracedoc load"), ok("orjson.loads"), ok("tracedoc analyze")
    hl, ha = ok("HTA load"), ok("HTA load+analysis")
    v = td.wall_s / oj.wall_s if (td and oj) else None
    lines.append(
        check("tracedoc load time / orjson.loads time", v, "<=", 1.0, "", why("tracedoc load", "orjson.loads"))
    )
    td_rss = results.get("tracedoc load")
    v = (td_rss.maxrss_kb * 1024 / json_bytes) if (td_rss and td_rss.ok and td_rss.maxrss_kb) else None
    lines.append(check("tracedoc load peak RSS / JSON size", v, "<=", 2.0, "", why("tracedoc load")))
    an_r = results.get("tracedoc analyze")
    v = (an_r.maxrss_kb * 1024 / json_bytes) if (an and an_r.maxrss_kb) else None
    lines.append(check("tracedoc analyze peak RSS / JSON size", v, "<=", 2.0, "", why("tracedoc analyze")))
    v = (an.wall_s - td.wall_s) / td.wall_s * 100 if (an and td) else None
    lines.append(
        check("analysis overhead (analyze - load) / load", v, "<", 25, "%", why("tracedoc analyze", "tracedoc load"))
    )
    v = hl.wall_s / td.wall_s if (hl and td) else None
    lines.append(
        check(
            "load throughput: tracedoc load / HTA load (x)",
            v,
            ">=",
            10,
            "",
            hta_note or why("tracedoc load", "HTA load"),
        )
    )
    v = ha.wall_s / an.wall_s if (ha and an) else None
    lines.append(
        check(
            "end to end: tracedoc analyze / HTA load+analysis (x)",
            v,
            ">=",
            10,
            "",
            hta_note or why("tracedoc analyze", "HTA load+analysis"),
        )
    )
    return lines


# --- driving -----------------------------------------------------------------------------------------


def ensure_trace(size_mb: float, args) -> Path:
    src = gen.resolve_source(args.source, args.shared)
    out = gen.default_output(src, size_mb, Path(args.out_dir))
    if out.exists() and gen.read_meta(out) is not None:
        return out
    print(f"[setup] generating {out.name} ({size_mb:g} MiB from {src.name}) ...", file=sys.stderr, flush=True)
    # in a subprocess: the generator's memory must not stay in this process next to the measured children
    r = subprocess.run(
        [
            args.python,
            str(HERE / "make_big_trace.py"),
            "--source",
            str(src),
            "--size-mb",
            f"{size_mb:g}",
            "-o",
            str(out),
            "-q",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    if r.returncode != 0:
        raise SystemExit(f"bench_load: generating {out} failed (status {r.returncode})")
    print("[setup] " + r.stdout.strip(), file=sys.stderr, flush=True)
    return out


def warm_page_cache(path: Path) -> None:
    with open(path, "rb") as f:
        while f.read(16 * MIB):
            pass


def count_events(path: Path, orjson_result: Result | None) -> int | None:
    if orjson_result and orjson_result.ok and orjson_result.events:
        return orjson_result.events
    meta = gen.read_meta(path)
    if meta and meta.get("path") and Path(meta["path"]).resolve() == path.resolve():
        return int(meta["events"])
    return None


def measure(tools: list[str], path: Path, args, hta_py: str | None) -> dict[str, Result]:
    warm_page_cache(path)
    out: dict[str, Result] = {}
    for tool in tools:
        if tool == "HTA load+analysis" and "HTA load" in out and not out["HTA load"].ok:
            # it would repeat the same load first: do not spend another timeout on it
            out[tool] = Result(
                tool=tool,
                path=str(path),
                json_bytes=path.stat().st_size,
                note="skipped: HTA load did not finish on this file",
            )
            continue
        is_hta = tool in HTA_TOOLS
        py = hta_py if is_hta else args.python
        timeout = args.hta_timeout if is_hta else args.timeout
        best: Result | None = None
        for i in range(args.repeat):
            print(
                f"[run] {tool} on {path.name}" + (f" ({i + 1}/{args.repeat})" if args.repeat > 1 else "") + " ...",
                file=sys.stderr,
                flush=True,
            )
            r = run_child(py, tool, path, timeout, args.mem_limit_kb, Path(args.out_dir) / "logs")
            print(
                f"[run]   {'%.2f s, peak RSS %.0f MB' % (r.wall_s, r.rss_mb) if r.ok else r.note}",
                file=sys.stderr,
                flush=True,
            )
            if not r.ok:
                best = r
                break
            if best is None:
                best = r
            else:  # best (lowest) time, highest peak memory over the repeats
                peak = max(best.maxrss_kb or 0, r.maxrss_kb or 0)
                if r.wall_s < best.wall_s:
                    best = r
                best.maxrss_kb = peak
        out[tool] = best
    return out


def parse_sizes(text: str) -> list[str]:
    return [s.strip() for s in text.split(",") if s.strip()]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trace", default=None, help="benchmark this file instead of a generated one")
    ap.add_argument("--size-mb", type=float, default=1024, help="size of the generated trace in MiB (default 1024)")
    ap.add_argument(
        "--source", default=gen.DEFAULT_SOURCE, help=f"source trace for the generator (default {gen.DEFAULT_SOURCE})"
    )
    ap.add_argument("--shared", default=None, help=f"the shared folder (default {gen.DEFAULT_SHARED})")
    ap.add_argument(
        "--out-dir",
        default=str(DATA_DIR),
        help=f"generated traces, logs and the HTA venv's parent (default {DATA_DIR})",
    )
    ap.add_argument("--timeout", type=float, default=1800, help="seconds each tool may run (default 1800)")
    ap.add_argument(
        "--hta-timeout", type=float, default=None, help="seconds each HTA run may take (default: --timeout)"
    )
    ap.add_argument(
        "--hta-size-mb",
        default="full,256,64",
        help="sizes to try HTA at, in order, until one finishes: 'full' is the main file (default full,256,64)",
    )
    ap.add_argument(
        "--mem-limit-gb",
        type=float,
        default=None,
        help="kill a child whose RSS passes this (default: 90%% of MemAvailable at start)",
    )
    ap.add_argument("--skip-hta", action="store_true", help="measure only tracedoc and orjson")
    ap.add_argument("--no-install", action="store_true", help="do not create the HTA venv; skip HTA if it is missing")
    ap.add_argument("--hta-venv", default=None, help="HTA virtual environment (default <out-dir>/hta-venv)")
    ap.add_argument("--python", default=sys.executable, help="interpreter with tracedoc and orjson (default: this one)")
    ap.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs per tool; the table shows the fastest time and the highest peak RSS (default 1)",
    )
    ap.add_argument("--json-out", default=None, help="also write all results to this JSON file")
    args = ap.parse_args(argv)
    args.hta_timeout = args.hta_timeout or args.timeout
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    args.mem_limit_kb = int(args.mem_limit_gb * MIB) if args.mem_limit_gb else int(mem_available_kb() * 0.9)

    if args.trace:
        main_path = Path(args.trace).resolve()
        if not main_path.exists():
            print(f"bench_load: {main_path} does not exist", file=sys.stderr)
            return 1
    else:
        main_path = ensure_trace(args.size_mb, args)

    compile_bytecode(args.python or sys.executable)
    hta_py, hta_why = (None, "--skip-hta")
    if not args.skip_hta:
        hta_py, hta_why = hta_python(
            Path(args.hta_venv) if args.hta_venv else Path(args.out_dir) / "hta-venv", install=not args.no_install
        )

    print(
        f"tracedoc benchmark  |  python {sys.version.split()[0]}  |  {os.cpu_count()} CPUs  |  "
        f"{mem_total_kb() / MIB:.1f} GiB RAM  |  child timeout {args.timeout:.0f} s (HTA {args.hta_timeout:.0f} s)"
        f"  |  memory limit {args.mem_limit_kb / MIB:.1f} GiB  |  load average {os.getloadavg()[0]:.2f} at start"
    )
    if hta_py:
        print(f"HTA: {HTA_PACKAGE} {hta_version(hta_py)} ({hta_py})")
    else:
        print(f"HTA: not measured ({hta_why})")

    report: dict = {"runs": []}
    main_tools = list(TRACEDOC_TOOLS) + (list(HTA_TOOLS) if hta_py else [])
    results = measure(main_tools, main_path, args, hta_py)
    events = count_events(main_path, results.get("orjson.loads"))
    json_bytes = main_path.stat().st_size
    report["runs"].append(
        {
            "path": str(main_path),
            "events": events,
            "json_bytes": json_bytes,
            "results": [r.__dict__ for r in results.values()],
        }
    )

    hta_fallback_note = ""
    fallback: tuple[Path, dict[str, Result], int | None] | None = None
    if hta_py:
        hta_done = results["HTA load"].ok and results["HTA load+analysis"].ok
        if not hta_done:
            reason = next(r.note for r in (results["HTA load"], results["HTA load+analysis"]) if not r.ok)
            reason = reason.replace("skipped: ", "")
            hta_fallback_note = f"HTA did not finish on this file: {reason}"
            sizes = parse_sizes(args.hta_size_mb)
            for s in sizes:
                if s == "full":
                    continue
                size = float(s)
                if size * MIB >= json_bytes:
                    continue
                path = ensure_trace(size, args)
                fb = measure(list(TRACEDOC_TOOLS) + list(HTA_TOOLS), path, args, hta_py)
                fb_events = count_events(path, fb.get("orjson.loads"))
                report["runs"].append(
                    {
                        "path": str(path),
                        "events": fb_events,
                        "json_bytes": path.stat().st_size,
                        "results": [r.__dict__ for r in fb.values()],
                    }
                )
                fallback = (path, fb, fb_events)
                if fb["HTA load"].ok and fb["HTA load+analysis"].ok:
                    break

    if fallback:
        hta_fallback_note += f"; see the {fallback[0].stat().st_size / MIB:,.0f} MiB comparison below"
    print_table("Results", list(results.values()), events, json_bytes)
    print()
    print("Targets (docs/performance.md) on this file:")
    for line in ratios(results, events, json_bytes, hta_fallback_note if hta_py else "HTA not measured"):
        print(line)
    if fallback:
        path, fb, fb_events = fallback
        fb_bytes = path.stat().st_size
        done = fb["HTA load"].ok and fb["HTA load+analysis"].ok
        print_table(
            f"Fallback comparison at {fb_bytes / MIB:,.0f} MiB "
            f"({'the largest tried size HTA finished' if done else 'HTA did not finish this either'})",
            list(fb.values()),
            fb_events,
            fb_bytes,
        )
        print()
        print(f"Targets on the {fb_bytes / MIB:,.0f} MiB file:")
        for line in ratios(fb, fb_events, fb_bytes):
            print(line)
    hta_ok = [
        (run["path"], r)
        for run in report["runs"]
        for r in run["results"]
        if r["tool"] == "HTA load+analysis" and r["ok"]
    ]
    if hta_ok:
        r = hta_ok[-1][1]
        print()
        print(f"HTA's answers ({Path(hta_ok[-1][0]).name}), for reference:")
        print(f"  temporal breakdown: {json.dumps(r['extra'].get('breakdown'))}")
        print(f"  comm/comp overlap:  {json.dumps(r['extra'].get('overlap'))}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(report, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
