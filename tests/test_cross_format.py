"""The same scenario written as a Kineto trace and as an nsys export gives the same metrics and labels."""

import pytest

import tracedoc
from nsys_builder import SCHEMA_2026_2, NsysDb
from trace_builder import TraceBuilder

T0 = 1_000_000_000  # ns; the nsys capture starts here
GEMM = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32"
NCCL = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
PID = TID = 100


class Scenario:
    """Records a scenario once (times in us after T0) and writes it in both formats."""

    def __init__(self):
        self.ops = []

    def step(self, n, s, e):
        self.ops.append(("range", f"ProfilerStep#{n}", s, e))

    def dataloader(self, s, e):
        self.ops.append(("range", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", s, e))

    def kernel(self, name, s, dur, launch_at, stream=7):
        self.ops.append(("kernel", name, s, dur, launch_at, stream))

    def h2d_pageable(self, s, dur, launch_at):
        self.ops.append(("memcpy", s, dur, launch_at))

    def sync(self, s, e):
        self.ops.append(("sync", s, e))

    def kineto(self, path):
        b = TraceBuilder(gpu="A100")
        base = T0 / 1000
        for op in self.ops:
            if op[0] == "range":
                b.annotation(op[1], base + op[2], base + op[3])
            elif op[0] == "kernel":
                _, name, s, dur, launch_at, stream = op
                b.kernel(
                    name,
                    base + s,
                    dur,
                    launch_at=base + launch_at,
                    launch_dur=4.0,
                    stream=stream,
                    grid=[432, 1, 1],
                    block=[256, 1, 1],
                    blocks_per_sm=432 / 108,
                )
            elif op[0] == "memcpy":
                _, s, dur, launch_at = op
                b.memcpy(
                    base + s,
                    dur,
                    "HtoD",
                    "Pageable",
                    "Device",
                    nbytes=1 << 28,
                    launch_at=base + launch_at,
                    launch_dur=4.0,
                )
            elif op[0] == "sync":
                b.runtime("cudaStreamSynchronize", base + op[1], base + op[2])
        return tracedoc.analyze(b.write(path))

    def nsys(self, path):
        db = NsysDb(path, SCHEMA_2026_2)
        end = T0 + 10**9
        db.session(T0, end, 1_763_700_000_000_000_000)
        db.export_meta(EXPORT_SCHEMA_VERSION="3.25.0")
        db.process(PID, "python3")
        db.thread(PID, TID, "python3")
        db.gpu(0, "NVIDIA A100-SXM4-80GB", 85899345920, 108, 8, 0)
        ns = lambda us: T0 + int(round(us * 1000))  # noqa: E731
        corr = 1
        for op in self.ops:
            if op[0] == "range":
                db.nvtx(PID, TID, ns(op[2]), ns(op[3]), text=op[1])
            elif op[0] == "kernel":
                _, name, s, dur, launch_at, stream = op
                db.runtime(PID, TID, ns(launch_at), ns(launch_at + 4.0), corr, "cudaLaunchKernel_v7000")
                db.kernel(PID, ns(s), ns(s + dur), corr, name, stream=stream, grid=(432, 1, 1), block=(256, 1, 1))
                corr += 1
            elif op[0] == "memcpy":
                _, s, dur, launch_at = op
                db.runtime(PID, TID, ns(launch_at), ns(launch_at + 4.0), corr, "cudaMemcpyAsync_v3020")
                db.memcpy(PID, ns(s), ns(s + dur), corr, 1 << 28, copy_kind=1, src_kind=0, dst_kind=2)
                corr += 1
            elif op[0] == "sync":
                db.runtime(PID, TID, ns(op[1]), ns(op[2]), corr, "cudaStreamSynchronize_v3020")
                corr += 1
        return tracedoc.analyze(db.close())


def busy(sc, t0, t1, dur=200.0, lead=2000.0):
    t = t0
    while t + dur <= t1:
        sc.kernel(GEMM, t, dur, launch_at=max(t - lead, t0 - 50.0))
        t += dur
    return t


def dataloader_starved():
    sc = Scenario()
    for i in range(4):
        s = 1000.0 + i * 10_000
        sc.step(i + 1, s, s + 10_000)
        sc.dataloader(s + 1, s + 4_000)
        busy(sc, s + 4_100, s + 9_950, lead=50.0)
    return sc


def exposed_allreduce():
    """DDP without overlap: each step's compute (6 ms of GEMMs) and then its all-reduce (3.8 ms) on the same
    stream, so the next step's compute queues behind it. The CPU launches a step in 0.3 ms and runs ahead:
    the GPU sets the step time (9.8 ms), and the all-reduce lies on its critical path."""
    sc = Scenario()
    gpu = 1050.0
    for i in range(4):
        s = 1000.0 + i * 2_000
        sc.step(i + 1, s, s + 1_500)
        t, k = gpu, 0
        while t + 200.0 <= gpu + 6_000:
            sc.kernel(GEMM, t, 200.0, launch_at=s + 10 + 10 * k)
            t, k = t + 200.0, k + 1
        sc.kernel(NCCL, t, 3_800.0, launch_at=s + 10 + 10 * k)
        gpu = t + 3_800.0
    return sc


def sync_and_pageable_copy():
    sc = Scenario()
    for i in range(4):
        s = 1000.0 + i * 10_000
        sc.step(i + 1, s, s + 10_000)
        sc.h2d_pageable(s + 20, 1_500.0, launch_at=s + 10)
        t = busy(sc, s + 1_600, s + 5_000)
        sc.sync(s + 300, t + 5)
        busy(sc, t + 3_000, s + 9_980, lead=10.0)
    return sc


COMPARED = [
    "steps",
    "window_ns",
    "gpu_busy_fraction",
    "compute_fraction",
    "comm_fraction",
    "exposed_comm_fraction",
    "comm_overlap_fraction",
    "memcpy_fraction",
    "h2d_fraction",
    "exposed_h2d_fraction",
    "pageable_memcpy_count",
    "idle_fraction",
    "idle_dataloader_fraction",
    "idle_host_launch_fraction",
    "idle_sync_fraction",
    "idle_launch_latency_fraction",
    "idle_other_fraction",
    "dataloader_fraction",
    "dataloader_stall_fraction",
    "kernel_count",
    "kernel_median_ns",
    "kernels_under_10us_fraction",
    "launch_delay_p50_ns",
    "sync_calls",
    "tensor_core_fraction",
    "launch_link_fraction",
    "idle_gap_max_ns",
    "blocks_per_sm_mean",
    "compute_capability",
    "tensor_core_capable",
]


@pytest.mark.parametrize(
    "build", [dataloader_starved, exposed_allreduce, sync_and_pageable_copy], ids=lambda f: f.__name__
)
def test_same_metrics_and_labels_from_both_formats(build, tmp_path):
    sc = build()
    kin = sc.kineto(tmp_path / "scenario.pt.trace.json")
    nsy = sc.nsys(tmp_path / "scenario.sqlite")
    km, nm = kin.ranks[0].metrics, nsy.ranks[0].metrics
    for key in COMPARED:
        a, b = km[key], nm[key]
        if isinstance(a, float) and b is not None:
            assert b == pytest.approx(a, abs=1e-9, rel=1e-9), key
        else:
            assert a == b, key
    assert kin.verdicts[0].labels == nsy.verdicts[0].labels
    assert kin.verdicts[0].labels  # every scenario here has a finding


def test_expected_labels():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        assert exposed_allreduce().nsys(Path(d) / "a.sqlite").verdicts[0].labels[0] == "comm_bound"
        assert dataloader_starved().nsys(Path(d) / "b.sqlite").verdicts[0].labels[0] == "io_bound"


@pytest.mark.parametrize(
    "build", [dataloader_starved, exposed_allreduce, sync_and_pageable_copy], ids=lambda f: f.__name__
)
def test_same_critical_path_and_what_ifs_from_both_formats(build, tmp_path):
    sc = build()
    kin = sc.kineto(tmp_path / "scenario.pt.trace.json").ranks[0].critical_path.to_dict()
    nsy = sc.nsys(tmp_path / "scenario.sqlite").ranks[0].critical_path.to_dict()
    assert kin["available"] and nsy["available"]
    for a, b in zip(kin["steps"], nsy["steps"]):
        assert {k: v for k, v in a.items() if k.endswith("_ns")} == {k: v for k, v in b.items() if k.endswith("_ns")}
    assert kin["what_if"] == nsy["what_if"] and kin["what_if"]
