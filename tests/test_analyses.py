"""Hand-worked fixtures for every analysis; expected answers are derived here from the fixture."""

import numpy as np
import pytest

import tracedoc
from trace_builder import TraceBuilder
from tracedoc.analyses import analyze_trace
from tracedoc.render.text import render_text

US = 1000  # ns per microsecond


def analyse(b: TraceBuilder, tmp_path, name="t.json"):
    return analyze_trace(tracedoc.load(b.write(tmp_path / name)))


def test_overlapping_compute_and_nccl_on_two_streams(tmp_path):
    b = TraceBuilder(world_size=2)
    b.kernel("ampere_sgemm_128x64_tn", 0.0, 100.0, stream=7, launch_at=-20.0)
    b.nccl(50.0, 100.0, stream=20, launch_at=-15.0)
    r = analyse(b, tmp_path)
    m = r.metrics
    assert r.window.kind == "gpu" and m["window_ns"] == 150 * US
    assert m["gpu_busy_fraction"] == pytest.approx(150 / 150)
    assert m["compute_fraction"] == pytest.approx(100 / 150)
    assert m["comm_fraction"] == pytest.approx(100 / 150)
    assert m["exposed_comm_fraction"] == pytest.approx(50 / 150)
    assert m["comm_overlap_fraction"] == pytest.approx(50 / 100)
    coll = r.evidence["collectives"]
    assert [c.collective for c in coll] == ["all_reduce"]
    assert coll[0].count == 1 and coll[0].message_bytes_max == (1 << 20) * 4
    # 4 MiB in 100 us = 41.94 GB/s algorithm bandwidth; bus bandwidth x 2(n-1)/n = x1 for n = 2.
    assert coll[0].algbw_gbps == pytest.approx((1 << 22) / (100 * US))
    assert coll[0].busbw_gbps == pytest.approx(coll[0].algbw_gbps)


def test_comm_kernel_found_through_collective_op_not_name(tmp_path):
    b = TraceBuilder()
    b.kernel("void custom_allreduce_kernel<float>()", 0.0, 10.0, op="c10d::allreduce_")
    b.kernel("void at::native::vectorized_elementwise_kernel<4>()", 10.0, 10.0, op="aten::add")
    m = analyse(b, tmp_path).metrics
    assert m["comm_fraction"] == pytest.approx(0.5) and m["compute_fraction"] == pytest.approx(0.5)


def test_comm_only_stream_overlap_is_zero_not_undefined(tmp_path):
    b = TraceBuilder()
    b.nccl(0.0, 100.0)
    b.nccl(200.0, 100.0)
    r = analyse(b, tmp_path)
    m = r.metrics
    assert m["comm_overlap_fraction"] == 0.0
    assert m["exposed_comm_fraction"] == pytest.approx(200 / 300)
    # The gap's cause is the idle cause the canonical split gave its time (the stream is named a
    # communication stream in stream_gaps)
    (gap,) = r.evidence["top_gaps"]
    assert gap.device_idle_ns == gap.gap_ns == 100 * US
    idle_cause = max((c for c in r.evidence["idle_causes"]), key=lambda c: c.ns).cause
    assert gap.cause == idle_cause
    assert r.evidence["stream_gaps"][0].comm_stream is True


def test_no_communication_overlap_is_undefined(tmp_path):
    b = TraceBuilder()
    b.kernel("k", 0.0, 10.0)
    assert analyse(b, tmp_path).metrics["comm_overlap_fraction"] is None


def idle_fixture() -> TraceBuilder:
    """One 1000 us step; every idle cause appears once (see test_idle_causes for the arithmetic)."""
    b = TraceBuilder()
    b.step(1, 0.0, 1000.0)
    b.dataloader(0.0, 300.0)
    b.kernel("kA", 300.0, 100.0, launch_at=290.0)  # gap [0,300) is all DataLoader
    b.kernel("kB", 500.0, 100.0, launch_at=450.0)  # gap [400,500): launched after it began -> host_launch
    b.kernel("kC", 610.0, 90.0, launch_at=350.0)  # gap [600,610): launched before, < 30 us -> launch_latency
    b.kernel("kD", 800.0, 100.0, launch_at=360.0)  # gap [700,800): launched before, sync [720,760) -> sync + other
    b.sync(720.0, 760.0, op=None)
    return b  # gap [900,1000): no next op -> other


def test_idle_causes(tmp_path):
    r = analyse(idle_fixture(), tmp_path)
    m = r.metrics
    assert r.window.kind == "steps" and m["window_ns"] == 1000 * US
    busy = 100 + 100 + 90 + 100
    assert m["gpu_busy_fraction"] == pytest.approx(busy / 1000)
    causes = {c.cause: c.ns for c in r.evidence["idle_causes"]}
    assert causes == {
        "dataloader": 300 * US,
        "host_launch": 100 * US,
        "sync": 40 * US,
        "launch_latency": 10 * US,
        "other": (60 + 100) * US,
    }
    assert sum(causes.values()) == (1000 - busy) * US
    assert m["dataloader_stall_fraction"] == pytest.approx(0.3)
    assert m["dataloader_fraction"] == pytest.approx(0.3)
    assert m["dataloader_multiprocess"] is False
    assert m["sync_calls"] == 1 and m["sync_fraction"] == pytest.approx(0.04)
    step = r.per_step[0]
    assert step["idle_ns"] == (1000 - busy) * US and step["dataloader_ns"] == 300 * US


def test_step_extends_to_its_gpu_work_and_window_excludes_ops_outside(tmp_path):
    b = TraceBuilder()
    b.kernel("before", -500.0, 100.0, launch_at=-510.0)  # before the first step: outside the window
    b.step(1, 0.0, 1000.0)
    b.kernel("k1", 900.0, 300.0, launch_at=950.0 - 100.0)  # launched inside step 1, ends at 1200
    b.step(2, 1000.0, 1500.0)
    b.kernel("k2", 1250.0, 100.0, launch_at=1100.0)
    b.kernel("after", 3000.0, 100.0, launch_at=2000.0)  # launched after the last step: outside
    r = analyse(b, tmp_path)
    steps = r.per_step
    assert [s["step"] for s in steps] == ["ProfilerStep#1", "ProfilerStep#2"]
    assert steps[0]["end_ns"] == 1200 * US  # max(CPU end 1000, GPU end 1200)
    assert steps[1]["end_ns"] == 1500 * US
    assert r.window.start_ns == 0 and r.window.end_ns == 1500 * US
    assert r.metrics["gpu_busy_fraction"] == pytest.approx((300 + 100) / 1500)
    # Step time is the interval between completions: step 1 completes at 1200 (1200 - 0),
    # step 2 at 1500 (1500 - 1200 = 300).
    assert [s["step_time_ns"] for s in steps] == [1200 * US, 300 * US]
    assert r.metrics["step_time_p50_ns"] == pytest.approx((1200 * US + 300 * US) / 2)
    stats = {row.quantity: row for row in r.evidence["step_stats"]}
    # each step is measured over its step time, so the steps add up to the window without overlapping
    assert stats["window_ns"].total_ns == 1500 * US == r.window.length_ns
    assert stats["window_ns"].p50_ns == pytest.approx(750 * US)
    assert stats["window_ns"].p95_ns == pytest.approx((300 + 0.95 * 900) * US)
    assert stats["busy_ns"].max_ns == 300 * US  # step 1: k1 [900,1200); step 2: k2 [1250,1350)


def test_single_step(tmp_path):
    b = TraceBuilder()
    b.step(7, 0.0, 100.0)
    b.kernel("k", 10.0, 50.0, launch_at=5.0)
    r = analyse(b, tmp_path)
    assert r.metrics["steps"] == 1 and r.metrics["step_time_mean_ns"] == 100 * US


def test_no_gpu_ops_uses_cpu_span(tmp_path):
    b = TraceBuilder()
    b.cpu_op("aten::add", 10.0, 20.0)
    b.cpu_op("aten::mul", 30.0, 70.0)
    r = analyse(b, tmp_path)
    assert r.window.kind == "cpu" and r.window.length_ns == 60 * US
    assert r.metrics["has_gpu_ops"] is False and r.metrics["gpu_busy_fraction"] == 0.0


def test_kernel_statistics_and_launch_delay(tmp_path):
    b = TraceBuilder()
    durs = [2.0, 4.0, 8.0, 20.0, 40.0]
    t = 0.0
    for d in durs:
        b.kernel("k", t, d, launch_at=t - 7.0, launch_dur=4.0)  # delay = start - (launch end) = 3 us
        t += d + 1
    m = analyse(b, tmp_path).metrics
    assert m["kernel_count"] == 5
    assert m["kernel_median_ns"] == 8 * US
    assert m["kernels_under_10us_fraction"] == pytest.approx(3 / 5)
    assert m["launch_delay_p50_ns"] == 3 * US
    launch = analyse(b, tmp_path, "again.json").evidence["launch"][0]
    assert launch.launch_delay_p5_ns == launch.launch_delay_p99_ns == 3 * US
    assert launch.gpu_kernel_ns == sum(durs) * US
    assert launch.launch_calls == 3  # the first two launches precede the window (it starts at the first op)
    assert m["launch_link_fraction"] == 1.0


def test_tensor_core_share(tmp_path):
    b = TraceBuilder()
    b.kernel("sm80_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x128x32", 0.0, 100.0)  # Tensor Cores
    b.kernel("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_ffma", 100.0, 200.0)  # FFMA: not TC
    b.kernel("void at::native::vectorized_elementwise_kernel<4>()", 300.0, 300.0)  # not TC
    b.kernel("my_custom_fused_thing", 600.0, 400.0)  # unknown
    m = analyse(b, tmp_path).metrics
    assert m["tensor_core_fraction"] == pytest.approx(0.1)
    assert m["tensor_core_unknown_fraction"] == pytest.approx(0.4)
    assert m["tc_eligible_non_tc_fraction"] == pytest.approx(0.2)  # the ffma gemm could have used them


def test_overlapping_kernels_on_several_streams_count_once(tmp_path):
    b = TraceBuilder()
    b.kernel("a", 0.0, 100.0, stream=7)
    b.kernel("b", 50.0, 100.0, stream=8)
    b.kernel("c", 60.0, 10.0, stream=9)
    m = analyse(b, tmp_path).metrics
    assert m["window_ns"] == 150 * US and m["gpu_busy_fraction"] == 1.0 and m["compute_fraction"] == 1.0


def test_memory_peak_and_top_allocations(tmp_path):
    b = TraceBuilder()
    b.kernel("k", 0.0, 100.0)
    gib = 1 << 30
    b.cpu_op("aten::empty", 10.0, 20.0)
    b.memory(15.0, 40 * gib, 40 * gib, 42 * gib)
    b.cpu_op("aten::cat", 30.0, 40.0)
    b.memory(35.0, 20 * gib, 60 * gib, 64 * gib)
    b.memory(50.0, -20 * gib, 40 * gib, 64 * gib)
    r = analyse(b, tmp_path)
    m = r.metrics
    assert m["memory_peak_allocated_bytes"] == 60 * gib
    assert m["memory_peak_reserved_bytes"] == 64 * gib
    assert m["memory_peak_fraction"] == pytest.approx(64 * gib / 85899345920)
    top = r.evidence["memory_top_allocs"]
    assert [(t.op, t.total_bytes) for t in top] == [("aten::empty", 40 * gib), ("aten::cat", 20 * gib)]


def test_sync_calls_name_the_op_that_caused_them(tmp_path):
    b = TraceBuilder()
    b.step(1, 0.0, 300.0)
    b.kernel("k", 0.0, 100.0)
    b.sync(110.0, 150.0, name="cudaStreamSynchronize", op="aten::_local_scalar_dense")
    b.sync(210.0, 230.0, name="cudaMemcpy", op="aten::_local_scalar_dense")
    b.cpu_op("aten::item", 250.0, 260.0)  # an .item() whose runtime call was not recorded
    r = analyse(b, tmp_path)
    assert r.metrics["sync_calls"] == 3  # 2 runtime calls (their wrapping ops are the same syncs) + 1 op
    # CPU time blocked: [109,151) + [209,231) + [250,260) of a 300 us window
    assert r.metrics["sync_fraction"] == pytest.approx((42 + 22 + 10) / 300)
    assert r.metrics["sync_memcpy_count"] == 1
    ops = {(row.op, row.call) for row in r.evidence["sync_calls"]}
    assert ("aten::_local_scalar_dense", "cudaStreamSynchronize") in ops


def test_top_operators_attribute_gpu_time_through_external_id(tmp_path):
    b = TraceBuilder()
    b.kernel("gemm", 0.0, 300.0, op="aten::mm")
    b.kernel("gemm", 300.0, 100.0, op="aten::mm")
    b.kernel("add", 400.0, 100.0, op="aten::add")
    r = analyse(b, tmp_path)
    ops = {o.name: o.gpu_ns for o in r.evidence["top_operators"]}
    assert ops == {"aten::mm": 400 * US, "aten::add": 100 * US}
    assert r.evidence["top_kernels"][0].name == "gemm" and r.evidence["top_kernels"][0].count == 2


def test_multiprocess_dataloader_detected(tmp_path):
    b = TraceBuilder()
    b.step(1, 0.0, 100.0)
    b.dataloader(0.0, 10.0, multiprocess=True)
    b.kernel("k", 20.0, 50.0, launch_at=12.0)
    assert analyse(b, tmp_path).metrics["dataloader_multiprocess"] is True


def rank_dir(tmp_path, name="worker{}.pt.trace.json.gz"):
    """Two rank traces; rank r's GPU is busy 10 * (r + 1) us of a 100 us step."""
    d = tmp_path / "ranks"
    d.mkdir()
    for rank in (1, 0):
        b = TraceBuilder(rank=rank, world_size=2)
        b.step(1, 0.0, 100.0)
        b.kernel("k", 10.0, 10.0 * (rank + 1), launch_at=5.0)
        b.write(d / name.format(rank))
    return d


def test_directory_of_ranks(tmp_path):
    d = rank_dir(tmp_path)
    nameless = TraceBuilder(rank=None)
    nameless.step(1, 0.0, 100.0)
    nameless.kernel("k", 10.0, 40.0, launch_at=5.0)
    nameless.write(d / "job_rank5.json")
    result = tracedoc.analyze(d, jobs=2)
    assert [r.rank for r in result.ranks] == [0, 1, 5]
    assert [round(r.metrics["gpu_busy_fraction"], 3) for r in result.ranks] == [0.1, 0.2, 0.4]
    text = render_text(result)
    assert "3 ranks" in text


def test_graph_kernels_counted_through_their_graph_launch(tmp_path):
    b = TraceBuilder()
    b.step(1, -50.0, 100.0)
    b.kernel("fused_a", 0.0, 10.0, launch_name="cudaGraphLaunch")
    b.kernel("plain", 20.0, 10.0)
    b.kernel("fused_b", 40.0, 10.0, args={"graph id": 3})
    m = analyse(b, tmp_path).metrics
    assert m["graph_launches"] == 1
    assert m["graph_kernels"] == 2


def test_directory_of_ranks_on_a_dask_cluster(tmp_path):
    distributed = pytest.importorskip("distributed")
    d = rank_dir(tmp_path, "rank{}.json")
    local = tracedoc.analyze(d, jobs=1)
    with distributed.Client(processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None) as client:
        remote = tracedoc.analyze(d, scheduler=client)
    assert [r.rank for r in remote.ranks] == [0, 1]
    assert [r.metrics for r in remote.ranks] == [r.metrics for r in local.ranks]


def test_unreachable_dask_scheduler_is_a_clear_error(tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    monkeypatch.setattr("tracedoc.fanout.cluster.DASK_CONNECT_TIMEOUT_S", 2)
    d = rank_dir(tmp_path, "rank{}.json")
    from tracedoc.errors import TraceError

    with pytest.raises(TraceError, match="cannot reach the Dask scheduler"):
        tracedoc.analyze(d, scheduler="tcp://127.0.0.1:1")


def test_tensor_core_eligibility_skips_helpers_inside_conv_ops(tmp_path):
    b = TraceBuilder(gpu="V100")
    b.kernel("volta_scudnn_128x64_relu_interior_nn_v1", 0.0, 300.0, op="aten::cudnn_convolution")  # FP32 conv
    b.kernel(
        "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>()",
        300.0,
        100.0,
        op="aten::cudnn_convolution",
    )  # layout helper
    b.kernel("volta_h884cudnn_256x64_ldg8_relu_exp_small_nhwc_tn_v1", 400.0, 500.0, op="aten::cudnn_convolution")
    b.kernel(
        "void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>()",
        900.0,
        100.0,
        op="aten::convolution_backward",
    )  # FP32 math
    m = analyse(b, tmp_path).metrics
    assert m["tensor_core_fraction"] == pytest.approx(0.5)
    assert m["tensor_core_unknown_fraction"] == 0.0
    assert m["tc_eligible_non_tc_fraction"] == pytest.approx(0.4)  # the scudnn conv and dgrad, not the helper
    assert m["tensor_core_capable"] is True


def test_sync_owns_a_gap_only_until_the_cpu_has_had_time_to_restart(tmp_path):
    # .item() at the end of the step, then 59 ms of host work (say a checkpoint save) before the next launch.
    b = TraceBuilder()
    b.step(1, 0.0, 100_000.0)
    b.kernel("k1", 0.0, 1_000.0, launch_at=-10.0)
    b.sync(500.0, 1_005.0, op=None)  # blocked when the GPU drains at 1000, returns at 1005
    b.kernel("k2", 60_000.0, 1_000.0, launch_at=59_990.0)
    r = analyse(b, tmp_path)
    causes = {c.cause: c.ns for c in r.evidence["idle_causes"]}
    restart = 10_000  # us: SYNC_RESTART_NS
    assert causes["sync"] == (1_005 + restart - 1_000) * US
    assert causes["host_launch"] == (60_000 - (1_005 + restart)) * US
    assert causes["other"] == (100_000 - 61_000) * US
    assert sum(causes.values()) == (100_000 - 2_000) * US


def test_iteration_name_is_the_repeating_one_covering_most_time():
    """Name 1: three instances, one overlapping the next (not an iteration). Names 2 and 3 each
    cover 10 ns without overlap (tie: the lower id wins); name 4 covers 12 ns but occurs once."""
    import numpy as np

    from tracedoc.analyses.gputime.window import _longest_repeating

    names = np.array([1, 1, 1, 3, 2, 3, 2, 4], dtype=np.int32)
    start = np.array([0, 5, 20, 30, 40, 50, 60, 70], dtype=np.int64)
    end = np.array([10, 8, 25, 35, 45, 55, 65, 82], dtype=np.int64)
    c = {"name": names, "start_ns": start, "end_ns": end}
    assert _longest_repeating(c, np.arange(8)).tolist() == [4, 6]
    assert _longest_repeating(c, np.array([0, 2, 3, 5, 7])).tolist() == [0, 2]  # without row 1, name 1 covers 15
    assert _longest_repeating(c, np.array([7])) is None
    assert _longest_repeating({k: v[:0] for k, v in c.items()}, np.zeros(0, dtype=np.int64)) is None


def test_children_time_agrees_with_a_scan_of_every_span_on_random_nestings():
    """A span's direct children: every span one level deeper on its own (pid, tid) thread goes to the
    latest span of the level above that started at or before it (ties: the last in file order)."""
    from tracedoc.analyses.host.cpu_ops import _children_ns

    class Rows(dict):
        def __len__(self):
            return self["start_ns"].size

    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(1, 40))
        c = Rows(
            pid=rng.integers(0, 2, n),
            tid=rng.integers(0, 3, n),
            start_ns=rng.integers(0, 30, n),
            depth=rng.integers(0, 4, n),
        )
        c["end_ns"] = c["start_ns"] + rng.integers(0, 10, n)
        want = [0] * n
        by_start = sorted(range(n), key=lambda i: c["start_ns"][i])  # stable: file order among ties
        for k in range(n):
            parent = None
            for p in by_start:
                if (
                    c["depth"][p] == c["depth"][k] - 1
                    and (c["pid"][p], c["tid"][p]) == (c["pid"][k], c["tid"][k])
                    and c["start_ns"][p] <= c["start_ns"][k]
                ):
                    parent = p
            if parent is not None:
                want[parent] += int(c["end_ns"][k] - c["start_ns"][k])
        assert _children_ns(c).tolist() == want


def test_step_time_tail_ratio_measures_the_slow_steps_against_the_median(tmp_path):
    """Five back-to-back steps of 10, 10, 10, 10 and 30 ms (each one's kernel ends inside its CPU span, so
    the completion intervals are the spans): the median is 10 ms, the 95th percentile 26 ms (linear
    between the 4th and 5th of the sorted five: 10 + 0.8 x 20), so the slow tail is 1.6 medians."""
    b = TraceBuilder()
    s = 1_000_000.0
    for i, ms in enumerate((10, 10, 10, 10, 30)):
        b.step(i + 1, s, s + ms * 1000.0)
        b.kernel("ampere_sgemm_128x64_tn", s + 100.0, 500.0, launch_at=s + 10.0)
        s += ms * 1000.0
    m = analyse(b, tmp_path).metrics
    assert m["step_time_p50_ns"] == 10_000_000 and m["step_time_p95_ns"] == pytest.approx(26_000_000)
    assert m["step_time_tail_ratio"] == pytest.approx(1.6)
    steady = TraceBuilder()
    s = 1_000_000.0
    for i in range(4):
        steady.step(i + 1, s, s + 10_000.0)
        steady.kernel("ampere_sgemm_128x64_tn", s + 100.0, 500.0, launch_at=s + 10.0)
        s += 10_000.0
    assert analyse(steady, tmp_path, "steady.json").metrics["step_time_tail_ratio"] == 0.0
    no_steps = TraceBuilder()
    no_steps.kernel("ampere_sgemm_128x64_tn", 100.0, 500.0, launch_at=10.0)
    assert analyse(no_steps, tmp_path, "nosteps.json").metrics["step_time_tail_ratio"] is None


def test_period_search_finds_the_repeating_kernel_sequence(tmp_path):
    """Ten kernels an iteration, six iterations with a gap after each; the period is ten ops and each
    iteration begins at the op after the gap. A sequence that does not repeat has no period."""
    import random

    from tracedoc.analyses.gputime.periodic import find_period

    b = TraceBuilder()
    t = 1000.0
    for _ in range(6):
        for k in range(10):
            b.kernel(f"kernel_{k}", t, 5.0)
            t += 6.0
        t += 200.0
    p = find_period(tracedoc.load(b.write(tmp_path / "periodic.json")))
    assert p is not None and p.ops == 10 and p.match == 1.0
    assert len(p.first) >= 5 and len(p.completion_ns) >= 5

    rnd = random.Random(1)
    b = TraceBuilder()
    for i in range(60):
        b.kernel(f"kernel_{rnd.randrange(40)}", 1000.0 + 6.0 * i, 5.0)
    assert find_period(tracedoc.load(b.write(tmp_path / "random.json"))) is None
