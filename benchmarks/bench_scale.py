#!/usr/bin/env python3
"""Jobs at scale: many large rank traces, generated at run time, through ``tracedoc.analyze``.

    python benchmarks/bench_scale.py                          # 256 ranks x ~20 MB, the default process pool
    python benchmarks/bench_scale.py --cluster 2              # ... and on a local Dask cluster of 2 worker processes
    python benchmarks/bench_scale.py --ranks 16 --rank-mb 2   # a quick look

Each rank is an FSDP-like training profile of torch.profiler shape: per step, every layer's forward
gathers its parameters (``_allgather_base``), runs its kernels (GEMMs, elementwise, norms), and the
backward re-gathers, runs twice the kernels and reduce-scatters its gradients (``_reduce_scatter_base``);
then an optimizer's multi-tensor kernels. Every kernel has its CPU op, its launch and the flow between
them; the CPU runs ahead of the GPU. One rank (``--straggler``) computes longer (``--late-share`` of
the step) before the second collective of every step; the others wait for it. Layers are added until a rank's file
is about ``--rank-mb`` MB.

Before generating, the free disk space is checked: the files need ranks x rank-mb; ``--gzip`` writes
them compressed (about 12x smaller, slower to read) where that does not fit.

Each run of ``analyze`` happens in a fresh process, which reports: wall time, the peak memory (RSS)
of that client process, and the bytes moved: the packed size of every rank's result as a worker sends it to
the client (``wire.pack``: plain data, then deflated; the traces never travel), in all and per rank against the
rank file's size. Prints one JSON line per run.
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEP_KERNELS = {
    "fwd": (
        "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_tn",
        "vectorized_elementwise_kernel<4, GeluCUDAKernelImpl>",
        "vectorized_layer_norm_kernel<c10::BFloat16, float>",
        "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_nn",
        "elementwise_kernel<128, 2, add>",
        "flash_fwd_kernel<Flash_fwd_kernel_traits<128>>",
    ),
    "bwd": (
        "ampere_bf16_s16816gemm_bf16_128x256_ldg8_f2f_stages_64x3_nt",
        "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_64x3_tn",
        "vectorized_elementwise_kernel<4, GeluBackwardCUDAKernelImpl>",
        "layer_norm_grad_input_kernel<c10::BFloat16, float>",
        "flash_bwd_dq_dk_dv_loop_kernel<Flash_bwd_kernel_traits<128>>",
        "elementwise_kernel<128, 2, mul>",
    ),
}
KERNEL_US = {"fwd": 60.0, "bwd": 110.0, "optim": 25.0}
BYTES_PER_KERNEL = 800  # about: CPU op, launch, kernel and two flow events (measured: 14 MB at 1,150)
TRANSFER_US_PER_MB = 8.0
JITTER_US = 20.0  # per compute stretch, uniform


def _plan(layers: int, nelems: int = 1 << 22) -> list[tuple[str, str, int]]:
    """One step's ops: ("k", phase, count) compute stretches and ("c", type, nelems) collectives."""
    ops: list[tuple[str, str, int]] = []
    for i in range(layers):
        ops += [("c", "all_gather", nelems * (1 + i % 3)), ("k", "fwd", 6)]
    for i in reversed(range(layers)):
        ops += [
            ("c", "all_gather", nelems * (1 + i % 3)),
            ("k", "bwd", 12),
            ("c", "reduce_scatter", nelems * (1 + i % 3)),
        ]
    ops.append(("k", "optim", 40))
    return ops


def write_rank(
    path: str,
    rank: int,
    world: int,
    steps: int,
    layers: int,
    straggler: int,
    late_us: float,
    compress: bool,
    seed: int = 0,
) -> int:
    """One rank's trace; returns its size in bytes."""
    import gzip
    import random

    import orjson

    rng = random.Random(seed * 100_003 + rank)
    plan = _plan(layers)
    runahead = 8_000.0 + 500.0 * (rank % 8)
    ev: list[dict] = [{"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "python"}}]
    ext, corr, seq = 1, 1, 0
    t_end = 1_000_000.0  # when every rank left the last collective (all ranks agree)
    for s in range(1, steps + 1):
        step_cpu0 = None
        cursor = t_end
        since = 0.0  # the longest any rank can compute since the last collective ended (all ranks agree)
        for j, (kind, what, n) in enumerate(plan):
            if kind == "k":
                per = KERNEL_US[what] * (1.0 + 0.05 * rng.random())
                names = STEP_KERNELS.get(what, ("multi_tensor_apply_kernel<AdamFunctor>",))
                stretch = per * n + (late_us if (rank == straggler and j == 1) else 0.0)
                since += KERNEL_US[what] * 1.05 * n + (late_us if j == 1 else 0.0)
                g = cursor
                for i in range(n):
                    dur = stretch / n
                    cpu = g - runahead
                    if step_cpu0 is None:
                        step_cpu0 = cpu
                    op = "aten::mm" if "gemm" in names[i % len(names)] else "aten::add_"
                    ev.append(
                        {
                            "ph": "X",
                            "cat": "cpu_op",
                            "name": op,
                            "pid": 1,
                            "tid": 1,
                            "ts": round(cpu - 3, 3),
                            "dur": 9.0,
                            "args": {"External id": ext, "Sequence number": ext, "Fwd thread id": 0},
                        }
                    )
                    ev.append(
                        {
                            "ph": "X",
                            "cat": "cuda_runtime",
                            "name": "cudaLaunchKernel",
                            "pid": 1,
                            "tid": 1,
                            "ts": round(cpu, 3),
                            "dur": 4.0,
                            "args": {"External id": ext, "correlation": corr, "cbid": 211},
                        }
                    )
                    ev.append(
                        {
                            "ph": "X",
                            "cat": "kernel",
                            "name": names[i % len(names)],
                            "pid": 0,
                            "tid": 7,
                            "ts": round(g, 3),
                            "dur": round(dur, 3),
                            "args": {
                                "External id": ext,
                                "correlation": corr,
                                "device": 0,
                                "stream": 7,
                                "grid": [132, 1, 1],
                                "block": [256, 1, 1],
                                "registers per thread": 128,
                            },
                        }
                    )
                    ev.append(
                        {"ph": "s", "id": corr, "pid": 1, "tid": 1, "ts": round(cpu, 3), "cat": "ac2g", "name": "ac2g"}
                    )
                    ev.append(
                        {
                            "ph": "f",
                            "id": corr,
                            "pid": 0,
                            "tid": 7,
                            "ts": round(g, 3),
                            "cat": "ac2g",
                            "name": "ac2g",
                            "bp": "e",
                        }
                    )
                    ext += 1
                    corr += 1
                    g += dur
                cursor = g
            else:
                seq += 1
                arrival = cursor + rng.uniform(0, JITTER_US)
                # all ranks leave together: the transfer after the latest possible arrival (the last
                # collective's end, the longest compute since, the straggler's lateness where it is late)
                nominal = t_end + since + JITTER_US
                end = max(nominal, arrival) + n * 2 / 1e6 * TRANSFER_US_PER_MB * (1 if what == "all_gather" else 1.2)
                since = 0.0
                cpu = arrival - runahead
                name = "_allgather_base" if what == "all_gather" else "_reduce_scatter_base"
                args = {
                    "Collective name": name,
                    "In msg nelems": n // world if what == "all_gather" else n,
                    "Out msg nelems": n if what == "all_gather" else n // world,
                    "Group size": world,
                    "dtype": "BFloat16",
                    "Process Group Name": "0",
                    "Process Group Description": "default_pg",
                }
                ev.append(
                    {
                        "ph": "X",
                        "cat": "cpu_op",
                        "name": "record_param_comms",
                        "pid": 1,
                        "tid": 1,
                        "ts": round(cpu - 3, 3),
                        "dur": 12.0,
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
                        "ts": round(cpu, 3),
                        "dur": 5.0,
                        "args": {"External id": ext, "correlation": corr},
                    }
                )
                kname = (
                    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
                    if what == "all_gather"
                    else "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
                )
                ev.append(
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": kname,
                        "pid": 0,
                        "tid": 20,
                        "ts": round(arrival, 3),
                        "dur": round(end - arrival, 3),
                        "args": {"External id": ext, "correlation": corr, "device": 0, "stream": 20, **args},
                    }
                )
                ev.append(
                    {"ph": "s", "id": corr, "pid": 1, "tid": 1, "ts": round(cpu, 3), "cat": "ac2g", "name": "ac2g"}
                )
                ev.append(
                    {
                        "ph": "f",
                        "id": corr,
                        "pid": 0,
                        "tid": 20,
                        "ts": round(arrival, 3),
                        "cat": "ac2g",
                        "name": "ac2g",
                        "bp": "e",
                    }
                )
                ext += 1
                corr += 1
                cursor = t_end = end
        t_end += since  # the step ends when the slowest rank's optimizer would (all ranks agree)
        ev.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{s}",
                "pid": 1,
                "tid": 1,
                "ts": round(step_cpu0 - 20, 3),
                "dur": round(cursor - runahead - step_cpu0 + 30, 3),
                "args": {"External id": ext},
            }
        )
        ext += 1
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
                "numSms": 132,
            }
        ],
        "hostname": f"node{rank // 8}",
        "traceEvents": ev,
    }
    data = orjson.dumps(doc)
    if compress:
        data = gzip.compress(data, compresslevel=1)
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def step_us(layers: int) -> float:
    """A balanced rank's step: its compute (mean jitter) and the transfers."""
    plan = _plan(layers)
    return sum(KERNEL_US[w] * 1.025 * c for k, w, c in plan if k == "k") + sum(
        n * 2 / 1e6 * TRANSFER_US_PER_MB * (1 if w == "all_gather" else 1.2) for k, w, n in plan if k == "c"
    )


def layers_for(rank_mb: float, steps: int) -> int:
    per_layer = 6 + 12 + 3  # forward and backward kernels, and three collectives, per layer
    return max(1, int(rank_mb * 1e6 / (BYTES_PER_KERNEL * steps * per_layer)))


def generate(d: Path, args) -> dict:
    layers = layers_for(args.rank_mb, args.steps)
    suffix = ".pt.trace.json.gz" if args.gzip else ".pt.trace.json"
    t0 = time.perf_counter()
    late_us = args.late_share * step_us(layers)
    with cf.ProcessPoolExecutor(max_workers=args.gen_jobs) as pool:
        sizes = list(
            pool.map(
                _write_one,
                [
                    (str(d / f"rank{r}{suffix}"), r, args.ranks, args.steps, layers, args.straggler, late_us, args.gzip)
                    for r in range(args.ranks)
                ],
            )
        )
    return {
        "generate_s": round(time.perf_counter() - t0, 1),
        "layers": layers,
        "step_ms": round(step_us(layers) / 1e3, 1),
        "straggler": args.straggler,
        "late_ms": round(late_us / 1e3, 1),
        "files_mb": round(sum(sizes) / 1e6, 1),
        "rank_file_mb": round(sizes[0] / 1e6, 2),
        "compressed": args.gzip,
    }


def _write_one(a) -> int:
    return write_rank(*a)


def run_child(d: str, cluster: int) -> dict:
    """In a fresh process: analyze ``d`` and report time, this process's peak RSS and the bytes moved."""
    import resource

    sys.path.insert(0, str(ROOT))
    from tracedoc.api import analyze
    from tracedoc.fanout import cluster as dask_path
    from tracedoc.fanout import pool as fanout

    moved = []
    collect = fanout.collect

    def counting(done, path, blob):
        moved.append(len(blob))  # what a worker sent for this file: its ranks' results, packed
        collect(done, path, blob)

    fanout.collect = dask_path.collect = counting  # the process pool's and the Dask path's
    scheduler, cluster_obj = None, None
    if cluster:
        from distributed import Client, LocalCluster

        cluster_obj = LocalCluster(n_workers=cluster, threads_per_worker=1, processes=True, dashboard_address=None)
        scheduler = Client(cluster_obj)
    t0 = time.perf_counter()
    result = analyze(d, scheduler=scheduler)
    seconds = time.perf_counter() - t0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # before any report is rendered
    if cluster_obj is not None:
        scheduler.close()
        cluster_obj.close()
    files = sorted(Path(d).iterdir())
    file_bytes = sum(p.stat().st_size for p in files)
    job = result.job
    reports = {}
    if not cluster:  # the reports of the job, and the merged timeline (once)
        from tracedoc.render import render_html, render_md, render_text
        from tracedoc.render.perfetto import write_perfetto

        t1 = time.perf_counter()
        text, md, html = render_text(result, width=140), render_md(result), render_html(result)
        with tempfile.TemporaryDirectory() as tmp:
            merged = write_perfetto(result, os.path.join(tmp, "job.json.gz"))
            reports = {
                "render_s": round(time.perf_counter() - t1, 1),
                "text_lines": text.count("\n"),
                "md_chars": len(md),
                "html_kb": round(len(html.encode()) / 1e3),
                "perfetto_mb": round(os.path.getsize(merged) / 1e6, 1),
            }
    return {
        "engine": f"local cluster, {cluster} worker processes" if cluster else f"process pool ({os.cpu_count()})",
        "ranks": len(result.ranks),
        "wall_s": round(seconds, 1),
        "client_peak_rss_mb": round(peak_mb, 1),
        "bytes_moved_mb": round(sum(moved) / 1e6, 2),
        "per_rank_kb": round(sum(moved) / max(len(moved), 1) / 1e3, 1),
        "per_rank_of_file": f"{sum(moved) / file_bytes:.2%}",
        "straggler_ranks": job.straggler_ranks,
        "confidence": [s["confidence"] for s in job.stragglers],
        "collectives_matched": job.collectives_matched,
        **reports,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ranks", type=int, default=256)
    p.add_argument("--rank-mb", type=float, default=20.0)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--straggler", type=int, default=37)
    p.add_argument("--late-share", type=float, default=0.1, help="the straggler's lateness, a share of the step")
    p.add_argument("--gzip", action="store_true", help="write the rank files compressed")
    p.add_argument("--gen-jobs", type=int, default=os.cpu_count())
    p.add_argument("--cluster", type=int, default=0, help="also run on a local Dask cluster of this many workers")
    p.add_argument("--dir", help="generate into (and keep) this directory instead of a temporary one")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        print(json.dumps(run_child(args.child, args.cluster)))
        return
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="tracedoc-scale-"))
    base.mkdir(parents=True, exist_ok=True)
    need = args.ranks * args.rank_mb * 1e6 / (12 if args.gzip else 1)
    free = shutil.disk_usage(base).free
    if free < 1.5 * need:
        sys.exit(
            f"bench_scale: {base} has {free / 1e9:.1f} GB free; {args.ranks} ranks of {args.rank_mb} MB need "
            f"{need / 1e9:.1f} GB: add --gzip, fewer --ranks or a smaller --rank-mb"
        )
    try:
        if not any(base.iterdir()):
            print(json.dumps({"generated": generate(base, args), "dir": str(base)}), flush=True)
        runs = [0] + ([args.cluster] if args.cluster else [])
        for cluster in runs:
            out = subprocess.run(
                [sys.executable, __file__, "--child", str(base), "--cluster", str(cluster)],
                capture_output=True,
                text=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            if out.returncode:
                sys.exit(out.stderr[-3000:])
            print(out.stdout.strip().splitlines()[-1], flush=True)
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
