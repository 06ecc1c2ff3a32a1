"""Build multi-rank jobs with known stragglers for tests: full Kineto traces (through the whole
pipeline) and, for hundreds of ranks, the compact per-rank tables the job step consumes.

The job is FSDP-like: per step, a group of the default process group runs ``all_gather`` before each
layer's forward and backward and ``reduce_scatter`` after each backward, alternating, with layers of
several sizes (two of the same size, so one signature recurs within a step). Every rank computes,
then enters the collective; a collective's members all leave together, ``transfer`` after the last
arrival. A slow rank computes longer before the first collective of every step, so it arrives late
there by ``lateness`` x the job's step and the others wait for it; after that the ranks run in
lockstep. The CPU runs ahead of the GPU; ranks may carry a pre-window backlog (kernels launched
before their profiler opened, with no launch record), as real NCCL jobs do.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from trace_builder import TraceBuilder

from tracedoc.analyses.comm.instances import COLUMNS, LEAD_CATEGORIES, RankTables

STEP_US = 40_000.0  # the step of a balanced rank: compute + transfers
LAYER_NELEMS = (4 << 20, 2 << 20, 2 << 20, 8 << 20)  # several sizes, one repeated
TRANSFER_US_PER_MELEM = 60.0  # transfer time per million elements
JITTER_US = 60.0  # compute jitter per kernel (uniform 0..JITTER_US)
RUNAHEAD_US = 15_000.0  # how far the CPU launches ahead of the GPU


def step_plan() -> list[tuple[str, str, int]]:
    """One step's ops in issue order: ("compute", name, 0) or ("coll", type, nelems)."""
    ops: list[tuple[str, str, int]] = [("compute", "lead", 0)]
    for n in LAYER_NELEMS:  # forward
        ops += [("coll", "all_gather", n), ("compute", "fwd", n)]
    for n in reversed(LAYER_NELEMS):  # backward: re-gather, compute, reduce-scatter (alternating)
        ops += [("coll", "all_gather", n), ("compute", "bwd", n), ("coll", "reduce_scatter", n)]
    ops.append(("compute", "optim", 0))
    return ops


def compute_us(kind: str, n: int) -> float:
    base = {"lead": 2_000.0, "fwd": 2_000.0, "bwd": 4_000.0, "optim": 1_000.0}[kind]
    return base + n / 1e6 * 100.0


def balanced_step_us() -> float:
    plan = step_plan()
    return sum(compute_us(k, n) for op, k, n in plan if op == "compute") + sum(
        n / 1e6 * TRANSFER_US_PER_MELEM for op, _, n in plan if op == "coll"
    )


def simulate(n_ranks: int, steps: int, slow: dict[int, float] | None = None, seed: int = 0, pre_steps: int = 1) -> dict:
    """GPU timelines of every rank: per rank and op, (step, op index, kind, name/type, nelems, start, end).

    ``slow``: rank -> lateness as a share of the job's (balanced) step; that rank's lead compute is
    longer by it. ``pre_steps`` unrecorded steps run first (the backlog comes from the last of them)."""
    slow = slow or {}
    rng = np.random.default_rng(seed)
    plan = step_plan()
    extra = {r: f * balanced_step_us() for r, f in slow.items()}
    cursor = np.full(n_ranks, 1_000_000.0)
    ops = []  # (step, index, kind, name, nelems, start[n], end[n])
    for s in range(-pre_steps + 1, steps + 1):
        for i, (op, name, n) in enumerate(plan):
            if op == "compute":
                dur = compute_us(name, n) + rng.uniform(0, JITTER_US, n_ranks)
                if name == "lead":
                    dur += np.array([extra.get(r, 0.0) for r in range(n_ranks)])
                start = cursor.copy()
                cursor = cursor + dur
                ops.append((s, i, "compute", name, n, start, cursor.copy()))
            else:
                arrival = cursor + rng.uniform(0, 5.0, n_ranks)
                end = arrival.max() + n / 1e6 * TRANSFER_US_PER_MELEM + rng.uniform(0, 3.0, n_ranks)
                ops.append((s, i, "coll", name, n, arrival, end))
                cursor = end.copy()
    return {"ops": ops, "n_ranks": n_ranks, "steps": steps}


def write_job(
    d: Path,
    n_ranks: int = 8,
    steps: int = 3,
    slow: dict[int, float] | None = None,
    seed: int = 0,
    seq: bool = False,
    open_early_us: dict[int, float] | None = None,
    runahead_us: dict[int, float] | None = None,
    tail_us: float = 4_000.0,
) -> Path:
    """Full Kineto traces of the simulated job, one file per rank, recorded as a profiler records them.

    Rank r launches every op ``runahead_us[r]`` before it runs on the GPU (default ``RUNAHEAD_US``).
    Its window opens ``open_early_us[r]`` before the launch of step 1 and closes at the last launch
    of the last step: CPU events inside the window are recorded; so is every GPU kernel that starts
    after it opens and ends by ``tail_us`` after it closes (kernels launched before the window are
    recorded without a launch: the pre-window backlog; calls launched near the close have no kernel).
    ``seq``: the collectives record a per-group sequence number."""
    sim = simulate(n_ranks, steps + 1, slow, seed, pre_steps=2)  # one step before and one after the window
    open_early_us = open_early_us or {}
    runahead_us = runahead_us or {}
    d.mkdir(parents=True, exist_ok=True)
    for r in range(n_ranks):
        b = TraceBuilder(rank=r, world_size=n_ranks, gpu="A100")
        b.extra_meta["host_name"] = "node0"
        ahead = runahead_us.get(r, RUNAHEAD_US)
        launches = {
            s: [float(start[r]) - ahead for s2, _, _, _, _, start, _ in sim["ops"] if s2 == s] for s in (1, steps)
        }
        w_open = launches[1][0] - open_early_us.get(r, 0.0)
        w_close = launches[steps][-1] + 20.0
        seqno = 0
        step_span: dict[int, list[float]] = {}
        for s, _, kind, name, n, start, end in sim["ops"]:
            a, e = float(start[r]), float(end[r])
            launch = a - ahead
            if kind == "coll":
                seqno += 1
            cpu = w_open <= launch <= w_close
            gpu = a >= w_open and e <= w_close + tail_us
            if cpu and 1 <= s <= steps:
                span = step_span.setdefault(s, [launch, launch])
                span[1] = max(span[1], launch + 20.0)
            kname = _kernel_name(name) if kind == "coll" else "sm90_xmma_gemm_bf16bf16_bf16f32"
            stream = 20 if kind == "coll" else 7
            args = _coll_args(name, n, n_ranks, seqno if seq else None) if kind == "coll" else None
            op = "record_param_comms" if kind == "coll" else "aten::mm"
            if cpu and gpu:
                b.kernel(kname, a, e - a, stream=stream, op=op, launch_at=launch, args=args)
            elif gpu:
                b.unlaunched(kname, a, e - a, stream=stream, correlation=10 + seqno)
                if args:  # newer torch: the NCCL kernel carries the collective's args itself
                    b.events[-1]["args"].update(args)
            elif cpu:  # launched, its kernel ran after the profiler stopped
                ext = b.cpu_op(op, launch - 1.0, launch + 5.0, args=args)
                b.runtime("cudaLaunchKernel", launch, launch + 4.0, ext=ext, corr=b._corr)
                b._corr += 1
        for s, (lo, hi) in step_span.items():
            b.step(s, lo - 50.0, hi + 50.0)
        b.write(d / f"rank{r}.pt.trace.json.gz")
    return d


def _kernel_name(ctype: str) -> str:
    return {
        "all_gather": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        "reduce_scatter": "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    }[ctype]


def _coll_args(ctype: str, n: int, world: int, seq: int | None) -> dict:
    name = {"all_gather": "_allgather_base", "reduce_scatter": "_reduce_scatter_base"}[ctype]
    inn, out = (n // world, n) if ctype == "all_gather" else (n, n // world)
    args = {
        "Collective name": name,
        "In msg nelems": inn,
        "Out msg nelems": out,
        "Group size": world,
        "dtype": "BFloat16",
        "Process Group Name": "0",
        "Process Group Description": "default_pg",
        "Process Group Ranks": list(range(world)),
    }
    if seq is not None:
        args["Seq"] = seq
    return args


def job_tables(n_ranks: int, steps: int, slow: dict[int, float] | None = None, seed: int = 0) -> list[RankTables]:
    """The compact per-rank tables of the simulated job (what each rank's worker returns), for jobs too
    large to write as traces in a test: every collective with its GPU span and step, each step's span."""
    sim = simulate(n_ranks, steps, slow, seed, pre_steps=1)
    colls = [o for o in sim["ops"] if o[2] == "coll" and o[0] >= 1]
    lead = {o[0]: o for o in sim["ops"] if o[2] == "compute" and o[3] == "lead" and o[0] >= 1}
    first = {}
    for o in sim["ops"]:
        if o[0] >= 1:
            first.setdefault(o[0], o)
    types = ["all_gather", "reduce_scatter"]
    n = len(colls)
    step_of = np.array([o[0] for o in colls])
    nel = np.array([o[4] for o in colls])
    tcode = np.array([types.index(o[3]) for o in colls])
    arrival = np.stack([o[5] for o in colls]).T  # ranks x calls (us)
    end = np.stack([o[6] for o in colls]).T
    starts = np.stack([first[s][5] for s in range(1, steps + 1)]).T * 1000  # ranks x steps (ns)
    completions = (
        np.stack([np.max([o[6] for o in sim["ops"] if o[0] == s], axis=0) for s in range(1, steps + 1)]).T * 1000
    )
    starts, completions = starts.astype(np.int64), completions.astype(np.int64)
    lead_ns = {s: ((o[6] - o[5]) * 1000).astype(np.int64) for s, o in lead.items()}
    out = []
    for r in range(n_ranks):
        cols = {c: np.full(n, -1, dtype=np.int64) for c in COLUMNS}
        a_ns = (arrival[r] * 1000).astype(np.int64)
        cols.update(
            group=np.zeros(n, np.int64),
            type=tcode,
            dtype=np.zeros(n, np.int64),
            group_size=np.full(n, n_ranks),
            in_nelems=np.where(tcode == 0, nel // n_ranks, nel),
            out_nelems=np.where(tcode == 0, nel, nel // n_ranks),
            bytes=nel * 2,
            call_start_ns=a_ns - int(RUNAHEAD_US * 1000),
            call_end_ns=a_ns - int(RUNAHEAD_US * 1000) + 10_000,
            work_end_ns=a_ns - int(RUNAHEAD_US * 1000) + 10_000,
            gpu_start_ns=a_ns,
            gpu_end_ns=(end[r] * 1000).astype(np.int64),
            kernels=np.ones(n, np.int64),
            step=step_of,
            lead_kernels=np.ones(n, np.int64),
        )
        for cat in LEAD_CATEGORIES:
            cols[f"lead_{cat}_ns"] = np.zeros(n, dtype=np.int64)
        own_lead = np.array([lead_ns[s][r] for s in range(1, steps + 1)])[step_of - 1]
        cols["lead_compute_ns"] = np.where(np.r_[True, step_of[1:] != step_of[:-1]], own_lead, 1_000_000)
        start = starts[r]
        completion = completions[r]
        st = {
            "number": np.arange(1, steps + 1),
            "start_ns": start,
            "completion_ns": completion,
            "step_time_ns": completion - np.r_[start[:1], completion[:-1]],
            "timed": np.ones(steps, np.int64),
        }
        out.append(
            RankTables(
                rank=r,
                source=f"rank{r}.json",
                collectives=cols,
                groups=["0"],
                types=types,
                dtypes=["BFloat16"],
                steps=st,
                info={
                    "host": "node0",
                    "world_size": n_ranks,
                    "backend": "nccl",
                    "pg_config": None,
                    "has_gpu": True,
                    "span_ns": (int(start[0]), int(completion[-1])),
                    "trace_id": None,
                    "gpu": "NVIDIA H100 80GB HBM3",
                    "group_ranks": {},
                },
            )
        )
    return out
