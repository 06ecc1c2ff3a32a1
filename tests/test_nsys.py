"""The Nsight Systems SQLite reader: real exports against EXPECTED.json, and built fixtures whose
expected answers come from how each fixture was built."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from tracedoc.errors import TraceError
from tracedoc.ingest import load
from tracedoc.ingest.nsys import read_nsys, read_nsys_ranks
from tracedoc.model import intervals as I
from tracedoc.model import trace as M

from conftest import TRACES
from nsys_builder import SCHEMA_2021, SCHEMA_2022, SCHEMA_2026_1, SCHEMA_2026_2, Latin1, NsysDb, global_tid

NSYS = TRACES / "nsys"  # tests that read it are marked `shared` (skipped without the traces)
REAL = ["nsys2022_con_kernel.sqlite", "nsys2026_h100_2gpu_1s.sqlite", "nsys2026_mock.sqlite"]

T0 = 1_000_000_000  # capture start on the target clock
T1 = 9_000_000_000  # capture stop
UTC = 1_760_000_000_000_000_000


def _expected() -> dict:
    data = json.loads((TRACES / "EXPECTED.json").read_text())
    return {d["trace"]: d for d in data["traces"] if d["trace"] in REAL}


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------
# Real exports
# ---------------------------------------------------------------------------------------------


@pytest.mark.shared
@pytest.mark.parametrize("name", REAL)
def test_real_exports_load_and_are_not_modified(name):
    path = NSYS / name
    before = _digest(path)
    trace = load(path)
    assert trace.meta.format == "nsys"
    assert len(trace.gpu_ops) > 0
    assert _digest(path) == before


@pytest.mark.shared
@pytest.mark.parametrize("name", REAL)
def test_real_exports_match_expected_per_device(name):
    exp = _expected()[name]["devices"]
    trace = read_nsys(NSYS / name, pid="all")
    g = trace.gpu_ops
    for dev, row in exp.items():
        on = (g["device"] == int(dev)) & (g["start_ns"] > 0)
        kern = on & (g["kind"] == M.KERNEL)
        assert int(kern.sum()) == row["kernels"]
        assert len(np.unique(g["stream"][on])) == row["streams"]
        lo, hi = int(g["start_ns"][on].min()), int(g["end_ns"][on].max())
        assert abs((hi - lo) / 1e6 - row["window_ms"]) < 0.01
        busy = I.total(I.union(g["start_ns"][on], g["end_ns"][on]))
        assert abs(100 * busy / (hi - lo) - row["gpu_busy_pct"]) <= 0.5
        compute = I.total(I.union(g["start_ns"][kern], g["end_ns"][kern]))
        assert abs(100 * compute / (hi - lo) - row["compute_pct"]) <= 0.5
        durs = np.sort(g["end_ns"][kern] - g["start_ns"][kern])
        # EXPECTED takes the element at n // 2 of the sorted durations (the upper median when n is even).
        assert abs(durs[durs.size // 2] / 1e3 - row["kernel_median_us"]) <= 0.01


@pytest.mark.shared
def test_h100_export_is_two_ranks_one_gpu_each():
    path = NSYS / "nsys2026_h100_2gpu_1s.sqlite"
    exp = _expected()["nsys2026_h100_2gpu_1s.sqlite"]["devices"]
    ranks = read_nsys_ranks(path)
    assert [t.meta.rank for t in ranks] == [0, 1]
    assert [t.meta.pid for t in ranks] == [111, 112]
    for t in ranks:
        g = t.gpu_ops
        (dev,) = np.unique(g["device"]).tolist()
        assert int((g["kind"] == M.KERNEL).sum()) == exp[str(dev)]["kernels"]
        assert set(np.unique(t.runtime["pid"]).tolist()) == {t.meta.pid}
        assert t.meta.world_size == 2
    # read_nsys picks one process and says which ones it left out.
    one = read_nsys(path)
    assert one.meta.pid == 111 and one.meta.rank == 0
    assert any("pid 112" in w for w in one.warnings)


@pytest.mark.shared
def test_h100_launch_join_is_pid_qualified():
    """Every linked GPU op points at a runtime call of its own process with its correlation id."""
    t = read_nsys(NSYS / "nsys2026_h100_2gpu_1s.sqlite", pid="all")
    g, r = t.gpu_ops, t.runtime
    linked = np.flatnonzero(g["launch"] >= 0)
    assert linked.size > 1000
    rows = g["launch"][linked]
    assert np.array_equal(r["correlation"][rows], g["correlation"][linked])
    assert np.array_equal(r["pid"][rows], g["pid"][linked])
    assert np.all(r["start_ns"][rows] <= g["start_ns"][linked])


@pytest.mark.shared
def test_h100_nvtx_and_syncs():
    t = read_nsys(NSYS / "nsys2026_h100_2gpu_1s.sqlite", pid=111)
    c = t.cpu_ops
    assert len(c) == 8391  # push/pop ranges of pid 111 in the file
    assert np.all(c["kind"] == M.USER_ANNOTATION)
    assert c["depth"].max() > 0
    names = set(t.df("syncs")["name"].astype(str))
    assert names == {"Stream Wait Event", "Stream Sync"}
    assert t.meta.thread_names["111/111"] == "python3"
    assert t.meta.process_names["111"] == "python3"


@pytest.mark.shared
def test_mock_export_devices_time_and_sync():
    t = read_nsys(NSYS / "nsys2026_mock.sqlite")
    assert [d.properties for d in t.meta.devices] == [
        {
            "id": 0,
            "name": "NVIDIA GeForce RTX 3080",
            "totalGlobalMem": 10736893952,
            "computeMajor": 8,
            "computeMinor": 6,
            "numSms": 68,
        }
    ]
    # Zero-based export: its events lie below ANALYSIS_DETAILS.startTime and are all kept.
    assert t.meta.clock == "zero-based"
    assert t.meta.time_origin_ns == 1776781226557295056
    assert len(t.runtime) == 9
    assert t.meta.versions.nsys_export_schema == "3.24.14"
    (sync_name,) = t.df("syncs")["name"].astype(str).tolist()
    assert sync_name == "Stream Sync"  # from its cudaStreamSynchronize call
    kern = t.kernels_df
    assert kern["blocks_per_sm"].tolist() == pytest.approx([1 / 68] * 2)


@pytest.mark.shared
def test_2022_export_latin1_metadata_and_links():
    t = read_nsys(NSYS / "nsys2022_con_kernel.sqlite")
    assert t.meta.versions.nsys_export_schema == "2.9.1"
    # The user name holds byte 0xE1 (ß in the Windows OEM code page), which is not UTF-8: it is
    # read as Latin-1 instead of failing the whole export.
    assert t.meta.extra["EXPORT_USER"] == "Alexander Gei\xe1"
    assert t.meta.devices[0].name.startswith("GeForce GTX 1060")
    assert len(t.meta.devices) == 1  # the Intel and Microsoft adapters are not CUDA devices
    kern = t.kernels_df
    # Two kernels of this file carry correlation ids no API call has; all others must link.
    conn = sqlite3.connect(f"file:{NSYS / 'nsys2022_con_kernel.sqlite'}?mode=ro", uri=True)
    api_corr = {r[0] for r in conn.execute("SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME")}
    conn.close()
    has_call = kern["correlation"].isin(api_corr).to_numpy()
    assert has_call.sum() == 7
    assert np.array_equal(kern["launch"].to_numpy() >= 0, has_call)
    launched_by = t.runtime_df["name"].astype(str).to_numpy()[kern["launch"].to_numpy()[has_call]]
    assert set(launched_by) == {"cudaLaunchKernel_v7000"}


# ---------------------------------------------------------------------------------------------
# Built fixtures
# ---------------------------------------------------------------------------------------------


def _base(path: Path, schema: str = SCHEMA_2026_2, pid: int = 100) -> NsysDb:
    db = NsysDb(path, schema)
    db.session(T0, T1, UTC)
    db.export_meta(EXPORT_SCHEMA_VERSION="3.25.0", EXPORT_PRODUCT_VERSION="2026.2.1.210")
    db.process(pid, "python3")
    db.thread(pid, pid, "python3")
    return db


def test_nccl_kernels_overlap_compute_on_second_stream(tmp_path):
    db = _base(tmp_path / "nccl.sqlite")
    db.gpu(0, "NVIDIA H100 80GB HBM3", 85_000_000_000, 132, 9, 0)
    compute, comm = [], []
    corr = 1
    for i in range(4):
        s = T0 + 1_000_000 + i * 100_000
        db.runtime(100, 100, s - 20_000, s - 15_000, corr, "cudaLaunchKernel_v7000")
        db.kernel(
            100,
            s,
            s + 60_000,
            corr,
            "sm90_xmma_gemm_bf16bf16_bf16f32",
            stream=7,
            grid=(264, 1, 1),
            block=(256, 1, 1),
            static_smem=1024,
            dynamic_smem=4096,
        )
        compute.append((s, s + 60_000))
        corr += 1
        c0 = s + 40_000  # overlaps the last 20 us of the compute kernel, then runs alone for 30 us
        db.runtime(100, 100, s - 10_000, s - 5_000, corr, "cudaLaunchKernelExC_v11060")
        db.kernel(100, c0, c0 + 50_000, corr, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", stream=13)
        comm.append((c0, c0 + 50_000))
        corr += 1
    t = read_nsys(db.close())

    g = t.gpu_ops
    assert len(g) == 8 and np.all(g["kind"] == M.KERNEL)
    names = t.df("gpu_ops")["name"].astype(str)
    is_comm = names.str.contains("nccl", case=False).to_numpy()
    assert sorted(np.unique(g["stream"][is_comm]).tolist()) == [13]
    assert sorted(np.unique(g["stream"][~is_comm]).tolist()) == [7]
    comp_set = I.union(g["start_ns"][~is_comm], g["end_ns"][~is_comm])
    comm_set = I.union(g["start_ns"][is_comm], g["end_ns"][is_comm])
    exp_overlap = sum(max(0, min(ce, ke) - max(cs, ks)) for (ks, ke), (cs, ce) in zip(compute, comm))
    assert I.total(I.intersect(comp_set, comm_set)) == exp_overlap == 4 * 20_000
    # Kernel attributes: shared memory is static + dynamic; blocks per SM from the device's SM count.
    gemm = np.flatnonzero(~is_comm)
    assert np.all(g["shared_mem"][gemm] == 1024 + 4096)
    assert np.allclose(g["blocks_per_sm"][gemm], 264 / 132)
    assert np.allclose(g["warps_per_sm"][gemm], 2 * 8)
    # Every kernel links to its own launch call.
    r = t.runtime
    assert np.all(g["launch"] >= 0)
    assert np.array_equal(r["correlation"][g["launch"]], g["correlation"])
    assert t.meta.devices[0].name == "NVIDIA H100 80GB HBM3"


def test_pageable_async_memcpy_and_memset(tmp_path):
    db = _base(tmp_path / "copy.sqlite")
    s = T0 + 5_000_000
    db.runtime(100, 100, s - 50_000, s + 900_000, 1, "cudaMemcpyAsync_v3020")
    db.memcpy(100, s, s + 800_000, 1, 64 << 20, copy_kind=1, src_kind=0, dst_kind=2)  # HtoD pageable
    db.runtime(100, 100, s + 1_000_000, s + 1_010_000, 2, "cudaMemcpyAsync_v3020")
    db.memcpy(100, s + 1_020_000, s + 1_100_000, 2, 8 << 20, copy_kind=2, src_kind=2, dst_kind=1)  # DtoH pinned
    db.runtime(100, 100, s + 1_200_000, s + 1_205_000, 3, "cudaMemsetAsync_v3020")
    db.memset(100, s + 1_210_000, s + 1_220_000, 3, 4096, mem_kind=2)
    t = read_nsys(db.close())

    df = t.gpu_ops_df.sort_values("start_ns").reset_index(drop=True)
    assert df["kind"].tolist() == ["memcpy", "memcpy", "memset"]
    assert df["copy_kind"].tolist()[:2] == ["HtoD", "DtoH"]
    assert df["src_kind"].tolist()[:2] == ["Pageable", "Device"]
    assert df["dst_kind"].tolist() == ["Device", "Pinned", "Device"]
    assert df["bytes"].tolist() == [64 << 20, 8 << 20, 4096]
    assert df["name"].astype(str).tolist() == [
        "Memcpy HtoD (Pageable -> Device)",
        "Memcpy DtoH (Device -> Pinned)",
        "Memset (Device)",
    ]
    assert (df["launch"] >= 0).all()


def test_device_synchronize_stall(tmp_path):
    db = _base(tmp_path / "sync.sqlite")
    s = T0 + 2_000_000
    db.runtime(100, 100, s, s + 5_000, 1, "cudaLaunchKernel_v7000")
    db.kernel(100, s + 10_000, s + 3_010_000, 1, "long_kernel")
    db.runtime(100, 100, s + 6_000, s + 3_020_000, 2, "cudaDeviceSynchronize_v3020")
    db.sync(100, s + 6_500, s + 3_015_000, 2, sync_type=4)
    db.runtime(100, 100, s + 3_100_000, s + 3_105_000, 3, "cuCtxSynchronize", driver=True)
    db.sync(100, s + 3_100_500, s + 3_104_000, 3, sync_type=1)  # numbering differs by version; the call decides
    t = read_nsys(db.close())

    sy = t.df("syncs")
    assert sy["name"].astype(str).tolist() == ["Context Sync", "Context Sync"]
    assert sy["stream"].tolist() == [-1, -1]
    assert sy["dur_ns"].tolist() == [3_015_000 - 6_500, 3_104_000 - 3_100_500]
    rt = t.runtime_df
    stall = rt[rt["name"].astype(str) == "cudaDeviceSynchronize_v3020"]
    assert stall["dur_ns"].tolist() == [3_014_000]
    assert rt["kind"].tolist() == ["runtime", "runtime", "driver"]


def _steps_fixture(path: Path, profiler_step: bool = False) -> tuple[str, dict]:
    db = _base(path)
    main, worker = 100, 101
    db.thread(100, worker, "pt_autograd_0")
    db.nvtx_domain(100, main, T0 + 1, 1, "NCCL")
    built = {"train_step": [], "iteration": [], "forward": [], "dataloader": []}
    corr = 1
    for i in range(3):
        s = T0 + 10_000_000 * (i + 1)
        db.nvtx(100, main, s, s + 8_000_000, text=f"train_step {i}", event_type=59)
        built["train_step"].append((s, s + 8_000_000))
        dl = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
        db.nvtx(100, main, s + 100_000, s + 2_000_000, text=dl, event_type=59)
        built["dataloader"].append((s + 100_000, s + 2_000_000))
        db.nvtx(100, main, s + 2_100_000, s + 5_000_000, text="forward", event_type=59)
        built["forward"].append((s + 2_100_000, s + 5_000_000))
        db.nvtx(100, main, s + 3_000_000, None, text="a mark", event_type=34)  # marks are not ranges
        db.runtime(100, main, s + 2_200_000, s + 2_210_000, corr, "cudaLaunchKernel_v7000")
        db.kernel(100, s + 2_300_000, s + 4_000_000, corr, "fwd_kernel")
        corr += 1
    for i in range(2):
        s = T0 + 10_000_000 * (i + 1) + 500_000
        # start/end ranges may end on another thread
        db.nvtx(100, main, s, s + 15_000_000, text=f"iteration {i}", event_type=60, end_tid=worker)
        built["iteration"].append((s, s + 15_000_000))
    # NCCL ranges carry their text only through textId
    db.nvtx(100, worker, T0 + 40_000_000, T0 + 40_500_000, text_id="ncclAllReduce", domain=1)
    if profiler_step:
        db.nvtx(100, main, T0 + 60_000_000, T0 + 61_000_000, text="ProfilerStep#7")
    return db.close(), built


def test_nvtx_ranges_steps_dataloader_and_depth(tmp_path):
    path, built = _steps_fixture(tmp_path / "steps.sqlite")
    t = read_nsys(path)
    c = t.cpu_ops_df
    assert (c["kind"] == "user_annotation").all()
    names = c["name"].astype(str)
    n_ranges = sum(len(v) for v in built.values()) + 1  # + the NCCL range
    assert len(c) == n_ranges  # the domain-create row and the marks are not ranges
    assert "a mark" not in set(names)
    assert (names == "ncclAllReduce").sum() == 1
    # detection by name: train_step (3) wins over iteration (2); nothing is renamed
    assert t.meta.step_range == "train_step"
    assert t.meta.step_names == ["train_step 0", "train_step 1", "train_step 2"]
    steps = c[names.str.startswith("train_step")].sort_values("start_ns")
    assert list(zip(steps["start_ns"], steps["end_ns"])) == built["train_step"]
    assert (steps["depth"] == 0).all()
    fwd = c[names == "forward"]
    assert (fwd["depth"] == 1).all()  # nested in its step on the same thread
    # start/end ranges overlap push/pop ranges without nesting; they get depths among themselves
    it = c[names.str.startswith("iteration")].sort_values("start_ns")
    assert it["depth"].tolist() == [0, 1]
    dl = c[names.str.contains("DataLoader")]
    assert list(zip(dl["start_ns"], dl["end_ns"])) == built["dataloader"]
    assert t.meta.dataloader_ranges == len(built["dataloader"])
    assert t.meta.nvtx_domains == {"100/1": "NCCL"}
    assert t.meta.thread_names["100/101"] == "pt_autograd_0"


def test_step_range_option_and_profiler_step_preference(tmp_path):
    path, built = _steps_fixture(tmp_path / "steps.sqlite")
    t = read_nsys(path, step_range="iteration")
    assert t.meta.step_range == "iteration"
    assert t.meta.step_names == ["iteration 0", "iteration 1"]
    none = read_nsys(path, step_range="no_such_range")
    assert none.meta.step_names == []
    assert any("no_such_range" in w for w in none.warnings)

    path2, _ = _steps_fixture(tmp_path / "steps_ps.sqlite", profiler_step=True)
    t2 = read_nsys(path2)
    assert t2.meta.step_range == "ProfilerStep"
    assert t2.meta.step_names == ["ProfilerStep#7"]


def test_two_processes_with_colliding_correlation_ids(tmp_path):
    db = NsysDb(tmp_path / "two.sqlite")
    db.session(T0, T1, UTC)
    launches = {}
    for pid, n_kernels, base in ((300, 2, T0 + 1_000_000), (200, 3, T0 + 5_000_000)):
        db.process(pid, f"rank-{pid}")
        for corr in range(1, n_kernels + 1):  # the same correlation ids in both processes
            s = base + corr * 100_000
            db.runtime(pid, pid, s, s + 10_000, corr, "cudaLaunchKernel_v7000")
            db.kernel(pid, s + 20_000, s + 50_000, corr, f"k{corr}", device=0)
            launches[(pid, corr)] = s
    path = db.close()

    ranks = read_nsys_ranks(path)
    assert [t.meta.pid for t in ranks] == [200, 300]  # ordered by pid
    assert [t.meta.rank for t in ranks] == [0, 1]
    for t in ranks:
        g, r = t.gpu_ops, t.runtime
        assert np.all(g["launch"] >= 0)
        for corr, row in zip(g["correlation"].tolist(), g["launch"].tolist()):
            assert int(r["start_ns"][row]) == launches[(t.meta.pid, corr)]

    both = read_nsys(path, pid="all")
    g, r = both.gpu_ops, both.runtime
    assert len(g) == 5 and len(r) == 5
    got = {(int(p), int(c)): int(r["start_ns"][row]) for p, c, row in zip(g["pid"], g["correlation"], g["launch"])}
    assert got == launches

    busiest = read_nsys(path)
    assert busiest.meta.pid == 200  # 3 GPU ops against 2
    assert len(busiest.gpu_ops) == 3
    assert any("pid 300" in w for w in busiest.warnings)
    with pytest.raises(TraceError, match="pid 4242"):
        read_nsys(path, pid=4242)
    with pytest.raises(TraceError, match="not a process id"):
        read_nsys(path, pid="rank0")
    assert read_nsys(path, pid="300").meta.pid == 300  # as a CLI would pass it


def test_two_gpus_in_one_process_stay_in_one_trace(tmp_path):
    db = _base(tmp_path / "twogpu.sqlite")
    db.gpu(0, "GPU A", 1 << 34, 100, 8, 0)
    db.gpu(1, "GPU B", 1 << 34, 100, 8, 0)
    for corr, dev in ((1, 0), (2, 1), (3, 1)):
        s = T0 + corr * 1_000_000
        db.runtime(100, 100, s, s + 1_000, corr, "cudaLaunchKernel_v7000")
        db.kernel(100, s + 2_000, s + 9_000, corr, "k", device=dev)
    t = read_nsys(db.close())
    assert np.bincount(t.gpu_ops["device"]).tolist() == [1, 2]
    assert [d.id for d in t.meta.devices] == [0, 1]
    assert [d.name for d in t.meta.devices] == ["GPU A", "GPU B"]
    assert t.meta.rank is None and not any("processes with GPU work" in w for w in t.warnings)


def test_latin1_bytes_are_decoded(tmp_path):
    db = _base(tmp_path / "latin1.sqlite")
    db.process(101, Latin1.of("Prozeß"))
    db.runtime(101, 101, T0 + 100, T0 + 200, 1, "cudaLaunchKernel_v7000")
    db.kernel(101, T0 + 300, T0 + 400, 1, Latin1.of("kern_für"))
    db.nvtx(101, 101, T0 + 50, T0 + 500, text=Latin1.of("Schritt für Schritt"))
    db.export_meta(EXPORT_USER=Latin1.of("Jürgen"))
    t = read_nsys(db.close(), pid=101)
    assert t.df("gpu_ops")["name"].astype(str).tolist() == ["kern_für"]
    assert t.df("cpu_ops")["name"].astype(str).tolist() == ["Schritt für Schritt"]
    assert t.meta.process_names["101"] == "Prozeß"
    assert t.meta.extra["EXPORT_USER"] == "Jürgen"


@pytest.mark.parametrize("schema", [SCHEMA_2021, SCHEMA_2022, SCHEMA_2026_1, SCHEMA_2026_2])
def test_every_generation_with_missing_optional_tables(tmp_path, schema):
    """Only kernels, runtime calls and strings: no NVTX, memcpy, sync, process or session tables."""
    db = NsysDb(tmp_path / "min.sqlite", schema, fallback=None)
    for corr in range(1, 4):
        s = T0 + corr * 10_000
        db.runtime(100, 100, s, s + 1_000, corr, "cudaLaunchKernel_v7000")
        db.kernel(100, s + 2_000, s + 5_000, corr, f"kernel_{corr}", stream=corr)
    if schema == SCHEMA_2021:
        db.cuda_gpu_2021(0, "Tesla V100-SXM2-16GB", 16 << 30, 80, 7, 0)
    path = db.close()
    t = read_nsys(path)
    assert len(t.gpu_ops) == 3 and len(t.runtime) == 3
    assert sorted(t.gpu_ops["stream"].tolist()) == [1, 2, 3]
    assert np.all(t.gpu_ops["launch"] >= 0)
    assert len(t.cpu_ops) == 0 and len(t.syncs) == 0
    assert t.meta.clock == "unknown" and t.meta.time_origin_ns == 0
    assert t.meta.versions.nsys_export_schema is None
    if schema == SCHEMA_2021:
        assert t.meta.devices[0].name == "Tesla V100-SXM2-16GB"
        assert t.meta.devices[0].sm_count == 80


def test_time_rules_drop_nonpositive_and_precapture_events(tmp_path):
    db = _base(tmp_path / "time.sqlite")
    db.nvtx(100, 100, -5_000, 20_000, text="ncclCommInit")  # negative start: dropped
    db.nvtx(100, 100, T0 - 500_000, T0 - 100_000, text="early")  # ends before capture start: dropped
    db.nvtx(100, 100, T0 - 100_000, T0 + 100_000, text="straddles")  # kept (raw times)
    db.runtime(100, 100, T0 + 10, T0 + 20, 1, "cudaLaunchKernel_v7000")
    db.kernel(100, T0 + 30, T0 + 40, 1, "k")
    db.osrt(100, 100, T0 + 1_000, T0 + 9_000, "pthread_cond_wait")
    t = read_nsys(db.close())
    names = t.df("cpu_ops")["name"].astype(str).tolist()
    assert sorted(names) == ["pthread_cond_wait", "straddles"]
    straddle = t.cpu_ops_df[t.cpu_ops_df["name"].astype(str) == "straddles"]
    assert straddle["start_ns"].tolist() == [T0 - 100_000]
    assert t.meta.dropped_events == {"start_not_positive": 1, "before_capture": 1, "impossible_time": 0}
    assert t.meta.clock == "target"
    assert t.meta.time_origin_ns == UTC - T0
    assert t.meta.capture_start_ns == T0
    osrt = t.cpu_ops_df[t.cpu_ops_df["kind"] == "other"]
    assert osrt["name"].astype(str).tolist() == ["pthread_cond_wait"]
    assert osrt["depth"].tolist() == [1]  # inside "straddles" on the same thread
    no_osrt = read_nsys(Path(tmp_path / "time.sqlite"), osrt=False)
    assert (no_osrt.cpu_ops["kind"] == M.USER_ANNOTATION).all()


def test_thread_ids_are_decoded_from_global_tid(tmp_path):
    db = _base(tmp_path / "tid.sqlite")
    db.runtime(100, 4242, T0 + 10, T0 + 20, 1, "cudaLaunchKernel_v7000")
    db.kernel(100, T0 + 30, T0 + 40, 1, "k")
    t = read_nsys(db.close())
    assert t.runtime["pid"].tolist() == [100] and t.runtime["tid"].tolist() == [4242]
    assert t.gpu_ops["pid"].tolist() == [100]
    assert global_tid(100, 4242) & 0xFFFFFF == 4242  # sanity of the builder's encoding


# ---------------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------------


def test_nvprof_database_is_rejected(tmp_path):
    path = tmp_path / "nvprof.sqlite"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE StringTable(_id_ INTEGER PRIMARY KEY AUTOINCREMENT, value TEXT NOT NULL UNIQUE)")
    conn.execute(
        "CREATE TABLE CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL(_id_ INTEGER PRIMARY KEY AUTOINCREMENT, "
        "start INT NOT NULL, end INT NOT NULL, name INT NOT NULL)"
    )
    conn.commit()
    conn.close()
    with pytest.raises(TraceError, match="nvprof") as err:
        load(path)
    assert "nsys profile" in str(err.value)


def test_sqlite_that_is_not_an_nsys_export_is_rejected(tmp_path):
    path = tmp_path / "app.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE users(id INTEGER, name TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(TraceError, match="not an Nsight Systems export") as err:
        load(path)
    assert "users" in str(err.value)


def test_corrupt_database_is_reported(tmp_path):
    good, _ = _steps_fixture(tmp_path / "good.sqlite")
    data = Path(good).read_bytes()
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(data[:100] + b"\x00garbage" * 64 + data[612:2048])  # valid magic, broken pages
    with pytest.raises(TraceError, match="corrupt or incomplete") as err:
        load(bad)
    assert "nsys export" in str(err.value)


@pytest.mark.shared
def test_unknown_option_is_an_error():
    with pytest.raises(TraceError, match="unknown nsys reader option"):
        read_nsys(NSYS / "nsys2026_mock.sqlite", step_rnage="x")


@pytest.mark.shared
def test_truncated_export_is_reported(tmp_path):
    data = (NSYS / "nsys2026_h100_2gpu_1s.sqlite").read_bytes()
    cut = tmp_path / "cut.sqlite"
    cut.write_bytes(data[: len(data) // 2])  # a copy that stopped half way
    with pytest.raises(TraceError, match="corrupt or incomplete"):
        load(cut)


def test_reading_writes_nothing_next_to_the_export(tmp_path):
    path, _ = _steps_fixture(tmp_path / "ro.sqlite")
    before = {p.name: _digest(p) for p in tmp_path.iterdir()}
    read_nsys(path)
    read_nsys_ranks(path)
    assert {p.name: _digest(p) for p in tmp_path.iterdir()} == before  # no -journal/-wal/-shm, same bytes


@pytest.mark.shared
def test_progress_reports_rising_fractions_up_to_one():
    seen: list[float] = []
    read_nsys(NSYS / "nsys2026_mock.sqlite", progress=seen.append)
    assert seen == sorted(seen) and seen[-1] == 1.0 and all(0 < f <= 1 for f in seen)


@pytest.mark.parametrize(
    "name,is_step",
    [
        ("ProfilerStep#3", True),
        ("ProfilerStep#3, op_id = 17", True),
        ("step 5", True),
        ("Step_12", True),
        ("train_step", True),
        ("training_step 3", True),
        ("iteration 7", True),
        ("iter:2", True),
        ("optimizer.step", False),
        ("Optimizer.step#SGD.step", False),
        ("stepper", False),
        ("train_step_fn", False),
        ("aten::add, op_id = 3", False),
        ("enumerate(DataLoader)#_Iter.__next__", False),
    ],
)
def test_step_names_are_whole_words(name, is_step):
    from tracedoc.model.vocab import STEP_FAMILY_RE

    assert (STEP_FAMILY_RE.match(name) is not None) == is_step
