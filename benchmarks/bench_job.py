#!/usr/bin/env python3
"""Job-view benchmark: the job step over many ranks' compact tables, and optionally the whole fan-out.

    python benchmarks/bench_job.py                          # 1,024 ranks x 20 steps x 24 collectives
    python benchmarks/bench_job.py --ranks 4096 --steps 10  # bigger
    python benchmarks/bench_job.py --trace-ranks 64         # also: 64 small rank traces through analyze()

Tables mode generates each rank's compact collective and step tables (what a per-rank worker returns)
with one straggler rank that arrives late at the first collective of every step, and ranks whose
profilers open 0, 1 or 2 steps late (``--shift``), then times ``build_job`` (wall and CPU time: on a
shared machine compare CPU time) and reports its peak Python memory (tracemalloc, in a second
untimed run) and the process's peak RSS. Trace mode
writes small Kineto rank traces to a temporary directory and times ``tracedoc.analyze`` on it (load,
per-rank analyses and tables in worker processes, then the job step).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tracedoc.job import build_job  # noqa: E402
from tracedoc.analyses.comm.instances import COLUMNS, LEAD_CATEGORIES, RankTables  # noqa: E402

STEP_NS = 100_000_000
STRAGGLER_LATE_NS = 8_000_000


def make_tables(
    n_ranks: int, steps: int, per_step: int, straggler: int, seed: int = 0, shift: int = 1
) -> list[RankTables]:
    """Compact tables of a data-parallel job: per step, ``per_step`` all-reduces of 25 MB (bf16) on one
    stream, in order. Rank r's profiler opens ``r % shift`` steps late: the ranks' windows differ, so
    the job step must align them."""
    rng = np.random.default_rng(seed)
    n = steps * per_step
    step_of = np.repeat(np.arange(steps), per_step)
    k = np.tile(np.arange(per_step), steps)
    # arrivals of an on-time rank; the first all-reduce of a step waits for the straggler, and the
    # others follow it on the stream
    base = 1_000_000_000 + step_of * STEP_NS + 40_000_000 + k * 2_000_000 + np.where(k > 0, STRAGGLER_LATE_NS, 0)
    transfer = 1_200_000
    out = []
    for r in range(n_ranks):
        jitter = rng.integers(0, 200_000, n)
        late = np.where((r == straggler) & (k == 0), STRAGGLER_LATE_NS, 0)
        arrival = base + jitter + late
        # everyone leaves together: transfer after the last arrival of the instance
        end = base + np.where(k == 0, STRAGGLER_LATE_NS, 0) + 200_000 + transfer
        cols = {c: np.full(n, -1, dtype=np.int64) for c in COLUMNS}
        cols.update(
            group=np.zeros(n, np.int64),
            type=np.zeros(n, np.int64),
            dtype=np.zeros(n, np.int64),
            group_size=np.full(n, n_ranks),
            in_nelems=np.full(n, 12_500_000),
            out_nelems=np.full(n, 12_500_000),
            bytes=np.full(n, 25_000_000),
            call_start_ns=arrival - 50_000,
            call_end_ns=arrival - 40_000,
            work_end_ns=arrival - 40_000,
            gpu_start_ns=arrival,
            gpu_end_ns=end,
            kernels=np.ones(n, np.int64),
            step=step_of + 1,
            lead_kernels=np.full(n, 40),
        )
        for cat in LEAD_CATEGORIES:
            cols[f"lead_{cat}_ns"] = np.zeros(n, dtype=np.int64)
        cols["lead_compute_ns"] = np.where(k == 0, 38_000_000, 1_800_000) + late
        start = 1_000_000_000 + np.arange(steps) * STEP_NS
        st = {
            "number": np.arange(1, steps + 1),
            "start_ns": start,
            "completion_ns": start + STEP_NS,
            "step_time_ns": np.full(steps, STEP_NS),
        }
        late_open = r % max(shift, 1)  # steps before this rank's window opened
        if late_open:
            keep = step_of >= late_open
            cols = {c: v[keep] for c, v in cols.items()}
            st = {c: v[late_open:] for c, v in st.items()}
        out.append(
            RankTables(
                rank=r,
                source=f"rank{r}.json",
                collectives=cols,
                groups=["0"],
                types=["all_reduce"],
                dtypes=["BFloat16"],
                steps=st,
                info={
                    "host": f"node{r // 8}",
                    "world_size": n_ranks,
                    "backend": "nccl",
                    "pg_config": None,
                    "has_gpu": True,
                    "span_ns": (int(st["start_ns"][0]), int(start[-1] + STEP_NS)),
                    "trace_id": None,
                    "gpu": "NVIDIA H100 80GB HBM3",
                    "group_ranks": {},
                },
            )
        )
    return out


def bench_tables(args) -> dict:
    tables = make_tables(args.ranks, args.steps, args.per_step, args.straggler, shift=args.shift)
    table_mb = sum(t.nbytes for t in tables) / 2**20
    c0, t0 = time.process_time(), time.perf_counter()
    view = build_job(tables)
    seconds, cpu_seconds = time.perf_counter() - t0, time.process_time() - c0
    tracemalloc.start()  # a second run for memory: tracing slows allocation, so it is not timed
    build_job(tables)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert view.straggler_ranks == [args.straggler], view.straggler_ranks
    offsets = sorted({r["offset_steps"] for g in view.alignment["groups"] for r in g["ranks"]})
    assert offsets == list(range(min(args.shift, args.ranks))), offsets  # the windows' offsets found
    return {
        "mode": "tables",
        "ranks": args.ranks,
        "collective_rows": sum(len(t) for t in tables),
        "rank_tables_mb": round(table_mb, 1),
        "build_job_s": round(seconds, 2),
        "build_job_cpu_s": round(cpu_seconds, 2),
        "window_offsets_steps": offsets,
        "build_job_peak_python_mb": round(peak / 2**20, 1),
        "process_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "collectives_matched": view.collectives_matched,
        "match_key": view.match_key,
        "straggler_ranks": view.straggler_ranks,
        "wait_fraction_of_comm": round(view.wait_fraction_of_comm, 3),
    }


def write_rank_trace(path: Path, rank: int, world: int, steps: int, per_step: int, straggler: int) -> None:
    """A small Kineto trace: per step, compute kernels then ``per_step`` NCCL all-reduces."""
    ev, ext, corr = [], 1, 1
    for s in range(steps):
        t = 1_000_000.0 + s * 100_000.0
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{s + 1}",
                "pid": 1,
                "tid": 1,
                "ts": t,
                "dur": 95_000.0,
                "args": {"External id": ext},
            }
        )
        ext += 1
        g = t + 100.0
        late = 8_000.0  # the straggler's first compute kernel of each step is this much longer
        for c in range(per_step):
            first = c == 0
            comp = 1_500.0 + (late if first and rank == straggler else 0.0)
            comm = 1_000.0 + (late if first and rank != straggler else 0.0)  # the others wait inside NCCL
            for name, dur, args in (
                ("ampere_bf16_s16816gemm_bf16_128x128", comp, {}),
                (
                    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                    comm,
                    {
                        "Collective name": "allreduce",
                        "In msg nelems": 1 << 22,
                        "Out msg nelems": 1 << 22,
                        "Group size": world,
                        "dtype": "BFloat16",
                        "Process Group Name": "0",
                    },
                ),
            ):
                op = "record_param_comms" if args else "aten::mm"
                ev.append(
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": op,
                        "pid": 1,
                        "tid": 1,
                        "ts": g - 20.0,
                        "dur": 8.0,
                        "args": {"External id": ext, **args},
                    }
                )
                ev.append(
                    {
                        "ph": "X",
                        "cat": "cuda_runtime",
                        "name": "cudaLaunchKernel",
                        "pid": 1,
                        "tid": 1,
                        "ts": g - 18.0,
                        "dur": 4.0,
                        "args": {"External id": ext, "correlation": corr},
                    }
                )
                ev.append(
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": name,
                        "pid": 0,
                        "tid": 7 + bool(args),
                        "ts": g,
                        "dur": dur,
                        "args": {
                            "External id": ext,
                            "correlation": corr,
                            "device": 0,
                            "stream": 7 + bool(args),
                            **args,
                        },
                    }
                )
                ext += 1
                corr += 1
                g += dur + 50.0
    doc = {
        "schemaVersion": 1,
        "distributedInfo": {"backend": "nccl", "rank": rank, "world_size": world},
        "deviceProperties": [
            {
                "id": 0,
                "name": "NVIDIA H100 80GB HBM3",
                "computeMajor": 9,
                "computeMinor": 0,
                "totalGlobalMem": 85_000_000_000,
            }
        ],
        "traceEvents": ev,
    }
    path.write_text(json.dumps(doc))


def bench_traces(args) -> dict:
    from tracedoc.api import analyze
    from tracedoc.fanout import pool as fanout

    received, unpack_s, collect = {}, [], fanout.collect

    def counting(done, path, blob):  # what each worker sent back, and the client's time to read it
        received[path] = len(blob)
        t = time.perf_counter()
        collect(done, path, blob)
        unpack_s.append(time.perf_counter() - t)

    fanout.collect = counting
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        t0 = time.perf_counter()
        for r in range(args.trace_ranks):
            write_rank_trace(d / f"rank{r}.pt.trace.json", r, args.trace_ranks, 5, 8, args.straggler % args.trace_ranks)
        gen_s = time.perf_counter() - t0
        mb = sum(p.stat().st_size for p in d.iterdir()) / 2**20
        t0 = time.perf_counter()
        result = analyze(d, jobs=args.jobs)
        seconds = time.perf_counter() - t0
    job = result.job
    return {
        "mode": "traces",
        "ranks": args.trace_ranks,
        "trace_mb": round(mb, 1),
        "generate_s": round(gen_s, 1),
        "analyze_s": round(seconds, 1),
        "jobs": args.jobs or os.cpu_count(),
        "parent_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "worker_peak_rss_mb": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
        "collectives_matched": job.collectives_matched,
        "straggler_ranks": job.straggler_ranks,
        "labels": job.verdict.labels if job.verdict else None,
        "packed_kb_per_rank": round(sum(received.values()) / 1024 / max(len(received), 1), 1),
        "unpack_ms_per_rank": round(1e3 * sum(unpack_s) / max(len(unpack_s), 1), 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--per-step", type=int, default=24, help="collectives per step and rank")
    p.add_argument("--straggler", type=int, default=37)
    p.add_argument("--shift", type=int, default=3, help="rank r's window opens r %% SHIFT steps late (1: all alike)")
    p.add_argument("--trace-ranks", type=int, default=0, help="also analyse this many generated rank traces")
    p.add_argument("--jobs", type=int, default=None)
    args = p.parse_args()
    print(json.dumps(bench_tables(args)))
    if args.trace_ranks:
        print(json.dumps(bench_traces(args)))


if __name__ == "__main__":
    main()
