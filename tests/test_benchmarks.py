"""Guards for the benchmark scripts in benchmarks/ (no timing assertions: timings are benchmarks' job)."""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "benchmarks"
KINETO = REPO.parent / "shared" / "traces" / "kineto"


def _load_generator():
    spec = importlib.util.spec_from_file_location("make_big_trace", BENCH / "make_big_trace.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("make_big_trace", mod)
    spec.loader.exec_module(mod)
    return mod


gen = _load_generator()


def _synthetic_trace(path: Path) -> Path:
    """Two steps, a launch ↔ kernel pair per step linked by correlation and a flow, Kineto-style text."""
    ev = ['{"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "ts": 1000.000, "args": {"name": "python"}}']
    for i, (t, step) in enumerate([(1000.250, 41), (1500.500, 42)]):
        corr = 100 + i
        ev += [
            f'{{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#{step}", "pid": 7, "tid": 7, '
            f'"ts": {t:.3f}, "dur": 400.125, "args": {{"External id": {10 + 2 * i}}}}}',
            f'{{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7, '
            f'"ts": {t + 10:.3f}, "dur": 5.333, "args": {{"External id": {11 + 2 * i}, "correlation": {corr}}}}}',
            f'{{"ph": "s", "id": {corr}, "pid": 7, "tid": 7, "ts": {t + 10:.3f}, "cat": "ac2g", "name": "ac2g"}}',
            f'{{"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nn", "pid": 0, "tid": 7, '
            f'"ts": {t + 20:.3f}, "dur": 300.001, "args": {{"External id": {11 + 2 * i}, "correlation": {corr}, '
            f'"stream": 7, "device": 0, "est. achieved occupancy %": 0.5}}}}',
            f'{{"ph": "f", "id": {corr}, "pid": 0, "tid": 7, "ts": {t + 20:.3f}, '
            '"cat": "ac2g", "name": "ac2g", "bp": "e"}',
        ]
    path.write_text(
        '{"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4},\n'
        ' "traceEvents": [\n' + ",\n".join(" " + e for e in ev) + '\n ], "traceName": "synthetic"}\n'
    )
    return path


def _sources(tmp_path: Path) -> list[Path]:
    out = [_synthetic_trace(tmp_path / "synthetic.json")]
    for name in ("cuda_event_sync.json.gz", "triton_example.json.gz"):  # integer µs / 3-decimal µs styles
        if (KINETO / name).exists():
            out.append(KINETO / name)
    return out


def _read(path: Path) -> tuple[bytes, dict]:
    raw = gzip.open(path, "rb").read() if path.name.endswith(".gz") else path.read_bytes()
    return raw, json.loads(raw, parse_float=Decimal)


def _end(e: dict):
    return e["ts"] + (e.get("dur") or 0) if isinstance(e.get("dur"), (int, Decimal)) and e["dur"] > 0 else e["ts"]


@pytest.mark.parametrize("which", [0, 1, 2])
def test_generator_scales_a_trace_faithfully(tmp_path, which):
    sources = _sources(tmp_path)
    if which >= len(sources):
        pytest.skip("shared traces not present")
    src = sources[which]
    src_raw, src_doc = _read(src)
    src_ev = src_doc["traceEvents"]
    n = len(src_ev)

    out = tmp_path / "big.json"
    res = gen.generate(src, out, size_mb=2 if len(src_raw) < 300_000 else 4 * len(src_raw) / 2**20)
    raw, doc = _read(out)  # valid JSON
    ev = doc["traceEvents"]
    assert {k: v for k, v in doc.items() if k != "traceEvents"} == {
        k: v for k, v in src_doc.items() if k != "traceEvents"
    }
    assert len(ev) % n == 0
    copies = len(ev) // n
    assert copies >= 2 and copies == res.copies and len(ev) == res.events

    # timestamps keep the source's style: 3-decimal µs stay 3-decimal, integers stay integers
    src_styles = {len(t.split(b".")[1]) if b"." in t else 0 for t in re.findall(rb'"ts": ?(-?[0-9.]+)', src_raw)}
    out_styles = {len(t.split(b".")[1]) if b"." in t else 0 for t in re.findall(rb'"ts": ?(-?[0-9.]+)', raw)}
    assert out_styles == src_styles

    step_re = re.compile(r"ProfilerStep#(\d+)")
    src_steps = {e["name"] for e in src_ev if step_re.fullmatch(str(e.get("name")))}
    all_steps: set[str] = set()
    shift = Decimal(res.shift_us)
    prev_end = None
    for k in range(copies):
        chunk = ev[k * n : (k + 1) * n]
        for a, b in zip(src_ev, chunk):
            # ts shifted by exactly k * shift; every other field equal except ids and step names
            if "ts" in a:
                assert b["ts"] - a["ts"] == k * shift
            for key in a:
                if key in ("ts", "id", "name", "args"):
                    continue
                assert a[key] == b[key]
            if "id" in a and a.get("ph") in ("s", "f", "t"):
                assert b["id"] == a["id"] + k * res.id_offset
            if isinstance(a.get("args"), dict):
                for f, v in a["args"].items():
                    if f in gen.ID_ARG_FIELDS and isinstance(v, int):
                        assert b["args"][f] == v + k * res.id_offset
                    else:
                        assert b["args"][f] == v
            if a["name"] not in src_steps:
                assert b["name"] == a["name"]
        steps = {e["name"] for e in chunk if step_re.fullmatch(str(e.get("name")))}
        assert len(steps) == len(src_steps)
        assert not (steps & all_steps), "step names repeat across copies"
        all_steps |= steps
        timed = [e for e in chunk if "ts" in e]
        lo, hi = min(e["ts"] for e in timed), max(_end(e) for e in timed)
        if prev_end is not None:
            assert lo > prev_end, "copies overlap in time"
        prev_end = hi
        # links stay inside their copy: every flow start has its finish, every kernel its launch
        starts = {e["id"] for e in chunk if e.get("ph") == "s"}
        finishes = {e["id"] for e in chunk if e.get("ph") == "f"}
        src_starts = {e["id"] for e in src_ev if e.get("ph") == "s"}
        src_finishes = {e["id"] for e in src_ev if e.get("ph") == "f"}
        assert len(starts & finishes) == len(src_starts & src_finishes)
    if src_steps:
        nums = sorted(int(step_re.fullmatch(s).group(1)) for s in all_steps)
        assert len(nums) == len(set(nums)) == copies * len(src_steps)


def test_generator_cli_exact_copies_and_gzip(tmp_path):
    src = _synthetic_trace(tmp_path / "synthetic.json")
    out = tmp_path / "x.json"
    r = subprocess.run(
        [
            sys.executable,
            str(BENCH / "make_big_trace.py"),
            "--source",
            str(src),
            "--copies",
            "3",
            "-o",
            str(out),
            "--gzip",
            "-q",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 0, r.stderr
    _, doc = _read(out)
    _, doc_gz = _read(Path(str(out) + ".gz"))
    assert len(doc["traceEvents"]) == 3 * 11
    assert doc == doc_gz
    assert [e["name"] for e in doc["traceEvents"] if e["name"].startswith("ProfilerStep")] == [
        "ProfilerStep#41",
        "ProfilerStep#42",
        "ProfilerStep#43",
        "ProfilerStep#44",
        "ProfilerStep#45",
        "ProfilerStep#46",
    ]
    assert gen.read_meta(out)["copies"] == 3


def test_bench_load_runs_on_a_tiny_trace(tmp_path):
    """The runner itself: children start, report, and the table prints (HTA left out: it needs PyPI)."""
    src = _synthetic_trace(tmp_path / "synthetic.json")
    out = tmp_path / "tiny.json"
    gen.generate(src, out, copies=20)
    r = subprocess.run(
        [
            sys.executable,
            str(BENCH / "bench_load.py"),
            "--trace",
            str(out),
            "--skip-hta",
            "--timeout",
            "120",
            "--out-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.strip().startswith("orjson.loads"))
    assert re.search(r"orjson\.loads\s+\d+\.\d\d\s+[\d,]+\s+[\d,]+", row), r.stdout
    assert "220 events" in r.stdout
    assert "tracedoc load time / orjson.loads time" in r.stdout


def test_bench_critical_path_runs_on_a_small_trace(tmp_path):
    from trace_builder import TraceBuilder, training_steps

    b = TraceBuilder()
    training_steps(b, steps=3, kernels=6, dataloader_us=2000.0)
    out = b.write(tmp_path / "small.pt.trace.json.gz")
    r = subprocess.run(
        [sys.executable, str(BENCH / "bench_critical_path.py"), str(out), "--repeat", "1"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert re.search(r"added to analyze: -?\d+\.\d%", r.stdout), r.stdout


def test_bench_analyses_lists_the_stages_of_a_small_trace(tmp_path):
    from trace_builder import TraceBuilder, training_steps

    b = TraceBuilder()
    training_steps(b, steps=3, kernels=6, dataloader_us=2000.0)
    out = b.write(tmp_path / "small.pt.trace.json.gz")
    r = subprocess.run(
        [sys.executable, str(BENCH / "bench_analyses.py"), str(out), "--repeat", "1", "--top", "100"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    stages = [line.split()[0] for line in r.stdout.splitlines()[2:-1]]
    assert "gputime.idle.idle_time" in stages and "critical_path.step_critical_paths" in stages
    assert re.search(r"analyses in all \(best run\)\s+\d+\.\d\s+\d+\.\d", r.stdout), r.stdout


def test_generator_ends_on_part_of_a_copy_and_keeps_cuda_activity_only(tmp_path):
    src = _synthetic_trace(tmp_path / "synthetic.json")
    _, src_doc = _read(src)
    whole = gen.generate(src, tmp_path / "one.json", copies=1)
    out = tmp_path / "exact.json"
    res = gen.generate(src, out, size_mb=2.5 * whole.bytes / 2**20, exact=True)
    _, doc = _read(out)
    n = len(src_doc["traceEvents"])
    assert res.copies == 3 and n * 2 < len(doc["traceEvents"]) < n * 3 == 33
    assert abs(res.bytes - 2.5 * whole.bytes) < whole.bytes / 4  # lands near the size asked for
    last = doc["traceEvents"][2 * n :]  # the partial copy is the copy's first stretch of time
    assert last and max(e["ts"] for e in last) < max(e["ts"] for e in doc["traceEvents"][n : 2 * n]) + res.shift_us
    cuda = tmp_path / "cuda.json"
    gen.generate(src, cuda, copies=1, activities="cuda")
    _, doc = _read(cuda)
    assert {(e["ph"], e.get("cat")) for e in doc["traceEvents"]} == {
        ("M", None),
        ("X", "cuda_runtime"),
        ("X", "kernel"),
        ("s", "ac2g"),
        ("f", "ac2g"),
    }


def test_bench_shapes_prints_the_table_and_its_target(tmp_path):
    r = subprocess.run(
        [
            sys.executable,
            str(BENCH / "bench_shapes.py"),
            "--sizes",
            "0.2",
            "--shapes",
            "kernel",
            "--reps",
            "2",
            "--skip-hta",
            "--no-extras",
            "--out-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if not (KINETO / "dlrm_128rank_rank0.json.gz").exists():
        pytest.skip("shared traces not present")
    assert r.returncode == 0, r.stderr  # HTA not measured: the target reads n/a
    row = next(line for line in r.stdout.splitlines() if line.startswith("| kernel |"))
    assert re.search(
        r"\| kernel \| 0\.\d \| [\d,]+ \| \d+\.\d{3} \(\d+\.\d\d-\d+\.\d\d\) \| \d+\.\d{3} \| not measured", row
    ), row
    assert re.search(r"n/a\s+0\.2 MB: min over shapes of HTA / tracedoc", r.stdout), r.stdout


def test_bench_scale_runs_a_few_small_ranks(tmp_path):
    """The scale benchmark's runner: generated ranks of the asked size, analysed in a fresh process that
    reports wall time, its peak memory and the bytes moved, and names the planted straggler."""
    r = subprocess.run(
        [
            sys.executable,
            str(BENCH / "bench_scale.py"),
            "--ranks",
            "4",
            "--rank-mb",
            "0.5",
            "--steps",
            "3",
            "--straggler",
            "2",
            "--late-share",
            "0.1",
            "--gen-jobs",
            "1",
            "--dir",
            str(tmp_path / "run"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    gen_line, run = (json.loads(line) for line in r.stdout.strip().splitlines())
    assert 0.3 < gen_line["generated"]["rank_file_mb"] < 0.8
    assert run["ranks"] == 4 and run["straggler_ranks"] == [2]
    assert run["bytes_moved_mb"] > 0 and run["client_peak_rss_mb"] > 0 and run["wall_s"] > 0
