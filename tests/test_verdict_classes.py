"""Verdicts on the trace shapes common in the wild: CPU running ahead of the GPU, CUDA-graph replays,
implicit synchronisation, no step spans, GPU-only and tiny traces.

Every expected number is worked out by hand from the hand-built timeline in the test.
"""

import pytest

import tracedoc
from trace_builder import TraceBuilder
from tracedoc.model.evidence import IdleCpuOp, ImplicitSync, SyncBlockedCall

US = 1000  # ns per microsecond


def analyse(b: TraceBuilder, tmp_path, name="t.json"):
    return tracedoc.analyze(b.write(tmp_path / name)).ranks[0]


# -- step time is throughput ---------------------------------------------------------------------


def cpu_runs_ahead(
    b: TraceBuilder, steps: int = 6, cpu_step_us: float = 1000.0, kernels: int = 10, kernel_us: float = 1000.0
) -> None:
    """A GPU-bound loop without a host sync: the CPU launches a step's kernels in ``cpu_step_us``
    while the GPU needs ``kernels * kernel_us``, so each step's span reaches further into the queue."""
    gpu_t = 5.0
    for i in range(steps):
        s = i * cpu_step_us
        b.step(i + 1, s, s + cpu_step_us)
        for k in range(kernels):
            launch = s + k * cpu_step_us / kernels
            b.kernel("volta_sgemm_128x64_nn", max(gpu_t, launch + 5.0), kernel_us, launch_at=launch, launch_dur=4.0)
            gpu_t = max(gpu_t, launch + 5.0) + kernel_us


def test_cpu_running_ahead_gives_the_true_period(tmp_path):
    b = TraceBuilder()
    cpu_runs_ahead(b)
    r = analyse(b, tmp_path)
    # The GPU runs kernels back to back from t=5 us: step i completes at 5 + 10,000 (i + 1) us.
    # Step time: first step 10,005 - 0; every later step 10,000 us -- the GPU period.
    times = [row["step_time_ns"] for row in r.per_step]
    assert times == [10_005 * US] + [10_000 * US] * 5
    assert r.metrics["step_time_p50_ns"] == 10_000 * US
    assert r.metrics["step_time_mean_ns"] == pytest.approx((6 * 10_000 + 5) * US / 6)
    # The spans overlap and grow with the queue (step 6: 5,000 -> 60,005 us); they are not the step time.
    assert r.per_step[5]["end_ns"] - r.per_step[5]["start_ns"] == (60_005 - 5_000) * US
    # the per-step quantities are measured over the step time, not over the span
    assert [row["window_ns"] for row in r.per_step] == times
    assert r.verdict is not None and "small_batch_bound" not in r.verdict.labels
    for f in r.verdict.findings:  # every ms-per-step impact is a share of the 10 ms step, never of a span
        if f.impact_fraction is not None and f.impact_ms_per_step is not None:
            assert f.impact_ms_per_step == pytest.approx(f.impact_fraction * r.metrics["step_time_p50_ns"] / 1e6)
        if f.what_if is not None:
            assert f.what_if["step_ms_before"] == pytest.approx(10.0)


def graph_replay_loop(
    b: TraceBuilder,
    steps: int = 6,
    kernels: int = 200,
    period_us: float = 5.0,
    kernel_us: float = 4.25,
    cpu_step_us: float = 300.0,
) -> None:
    """Each step replays one CUDA graph of ``kernels`` short kernels (85% busy inside the graph);
    the CPU only launches the graph and runs ahead."""
    graph_us = kernels * period_us
    for i in range(steps):
        s = i * cpu_step_us
        b.step(i + 1, s, s + cpu_step_us)
        g0 = 5.0 + i * graph_us
        b.graph_replay(s + 1.0, [(f"triton_poi_fused_{j % 7}", g0 + j * period_us, kernel_us) for j in range(kernels)])


def test_cuda_graph_replay_is_not_many_small_launches(tmp_path):
    b = TraceBuilder()
    graph_replay_loop(b)
    r = analyse(b, tmp_path)
    m = r.metrics
    assert m["graph_launches"] == 6 and m["graph_kernels"] == 1200 and m["graph_kernel_fraction"] == 1.0
    # Busy 4.25 of every 5 us: 85%, and all kernels are under 10 us.
    assert m["gpu_busy_fraction"] == pytest.approx(0.85, abs=0.002)
    assert m["kernels_under_10us_fraction"] == 1.0
    # The 0.75 us gaps inside a replayed graph are GPU-side, not the host launching late; only the
    # 5 us before the first graph (window start 0, launched at 1 us) is.
    assert m["idle_short_launch_fraction"] == pytest.approx(5 / 6004.25)
    assert "small_batch_bound" not in r.verdict.labels
    assert not any(f.rule_id == "TD103" for f in r.verdict.findings)
    # Graph i runs [5 + 1000 i, 5 + 1000 i + 999.25): step time is the 1 ms graph period.
    assert [row["step_time_ns"] for row in r.per_step] == [1_004_250] + [1_000_000] * 5
    assert m["step_time_p50_ns"] == 1_000_000


def test_kernels_launched_one_by_one_with_the_same_gaps_are_small_batch(tmp_path):
    """The near miss of the graph test: the same kernels each with its own launch call, launched late."""
    b = TraceBuilder()
    t = 0.0
    for i in range(4):
        b.step(i + 1, t, t + 1000.0)
        for j in range(100):
            launch = t + j * 10.0
            b.kernel("elementwise_kernel", launch + 6.0, 4.0, launch_at=launch, launch_dur=5.0)
        t += 1000.0
    r = analyse(b, tmp_path)
    assert r.metrics["graph_kernel_fraction"] == 0.0
    # Each 10 us: 4 us kernel, 6 us of idle waiting for the next launch (the call starts after the gap begins).
    assert r.metrics["idle_short_launch_fraction"] == pytest.approx(0.6, abs=0.01)
    assert "small_batch_bound" in r.verdict.labels


# -- implicit synchronisation --------------------------------------------------------------------


def hipfree_loop(b: TraceBuilder, steps: int = 5, step_us: float = 12_000.0) -> None:
    """Per step: 10 kernels of 1 ms launched up front, then a hipFree (caching allocator bypassed)
    that blocks from +200 us until 50 us after the GPU drains at +10,010 us; the next step's launches
    start at the next step boundary."""
    for i in range(steps):
        s = i * step_us
        b.step(i + 1, s, s + step_us)
        for j in range(10):
            b.kernel(
                "Cijk_Ailk_Bljk_SB_MT64x64x16",
                s + 10.0 + j * 1000.0,
                1000.0,
                launch_at=s + j * 20.0,
                launch_dur=5.0,
                launch_name="hipLaunchKernel",
            )
        ext = b.cpu_op("aten::empty", s + 199.0, s + 10_061.0)
        b.runtime("hipFree", s + 200.0, s + 10_060.0, ext=ext)


def test_hipfree_per_step_is_sync_bound(tmp_path):
    b = TraceBuilder(gpu="A100")
    hipfree_loop(b)
    r = analyse(b, tmp_path)
    m = r.metrics
    # Window 0 -> 60,000 us. Idle: 10 us before the first kernel (launched at 0: launch latency);
    # 4 step boundaries of 2,000 us (GPU drained at +10,010 while the CPU was still in hipFree): sync;
    # after the last step 50 us still inside hipFree (sync) and 1,940 us with nothing pending (other).
    assert m["idle_sync_fraction"] == pytest.approx((4 * 2000 + 50) / 60_000)
    assert m["idle_host_launch_fraction"] == 0.0
    assert m["implicit_sync_calls"] == 5
    assert m["implicit_sync_fraction"] == pytest.approx(5 * 9_860 / 60_000)
    assert r.verdict.labels[0] == "sync_bound"
    assert "small_batch_bound" not in r.verdict.labels
    rows = r.evidence["implicit_syncs"]
    assert rows == [ImplicitSync(op="aten::empty", call="hipFree", count=5, total_ns=5 * 9_860 * US, per_step=1.0)]
    td501 = next(f for f in r.verdict.findings if f.rule_id == "TD501")
    assert td501.evidence["implicit_syncs"][0].call == "hipFree"
    assert any("caching allocator" in fix for fix in td501.fixes)
    assert r.metrics["step_time_p50_ns"] == 12_000 * US


def test_cudamalloc_is_an_implicit_sync_only_while_the_allocator_frees(tmp_path):
    b = TraceBuilder()
    b.step(1, 0.0, 1000.0)
    b.kernel("k", 10.0, 500.0, launch_at=0.0)
    b.runtime("cudaMalloc", 100.0, 200.0)
    b.runtime("cudaHostAlloc", 300.0, 320.0)
    r = analyse(b, tmp_path, "grow.json")
    assert r.metrics["implicit_sync_calls"] == 1  # cudaHostAlloc; the cache growing is not pressure
    b.runtime("cudaFree", 400.0, 450.0)
    r = analyse(b, tmp_path, "pressure.json")
    assert r.metrics["implicit_sync_calls"] == 3
    assert {row.call for row in r.evidence["implicit_syncs"]} == {"cudaMalloc", "cudaHostAlloc", "cudaFree"}


def test_pageable_async_copy_and_empty_cache_are_implicit_syncs(tmp_path):
    b = TraceBuilder()
    b.step(1, 0.0, 2000.0)
    b.memcpy(100.0, 300.0, src="Pageable", launch_at=50.0, launch_dur=360.0)  # call returns after the copy
    b.memcpy(600.0, 100.0, src="Pinned", launch_at=550.0)  # pinned: asynchronous
    b.cpu_op("torch/cuda/memory.py(192): empty_cache", 900.0, 1100.0, cat="python_function")
    r = analyse(b, tmp_path)
    assert r.metrics["implicit_sync_calls"] == 2
    calls = {row.call: row for row in r.evidence["implicit_syncs"]}
    assert calls["cudaMemcpyAsync"].total_ns == 360 * US
    assert calls["torch/cuda/memory.py(192): empty_cache"].total_ns == 200 * US


TC_GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn"  # a Tensor Core GEMM on the A100


def host_between_steps(
    b: TraceBuilder, host_work: str, steps: int = 5, kernel_us: float = 500.0, kernels: int = 10
) -> None:
    """Per 12 ms step: ``kernels`` kernels launched up front run back to back from +10 us and drain the
    GPU at +5,010 us (10 of 500 us, or 1,000 of 5 us). Then, in steps 1-4, the host does ``host_work`` from +5,200 to
    +10,900 us -- a ``cudaFree`` ("free") or a CPU op ("cpu") -- after the GPU went idle, and launches the
    next step at the step boundary. A pin-memory thread allocates pinned memory (cudaHostAlloc) at
    +5,050..+5,150 us: it launches nothing, so it never holds the launch stream back."""
    for i in range(steps):
        s = i * 12_000.0
        b.step(i + 1, s, s + 12_000.0)
        for j in range(kernels):
            b.kernel(TC_GEMM, s + 10.0 + j * kernel_us, kernel_us, launch_at=s + j * min(20.0, kernel_us))
        if i == steps - 1:
            continue
        b.runtime("cudaHostAlloc", s + 5050.0, s + 5150.0, tid=2000)
        if host_work == "free":
            ext = b.cpu_op("aten::empty", s + 5199.0, s + 10_901.0)
            b.runtime("cudaFree", s + 5200.0, s + 10_900.0, ext=ext)
        else:
            b.cpu_op("augment_batch", s + 5200.0, s + 10_900.0, cat="python_function")


def test_gpu_idle_while_the_host_sits_in_cudafree_is_sync_bound_not_host_late(tmp_path):
    b = TraceBuilder()
    host_between_steps(b, "free")
    r = analyse(b, tmp_path)
    m = r.metrics
    # Window 0 -> 60,000 us. The idle gaps at the 4 step boundaries run +5,010 -> +12,010 (7,000 us);
    # when each began the host was not yet in cudaFree and the next launch came at +12,000: the
    # canonical split calls all 28,000 us host_launch (the pinned allocation on the other thread,
    # +5,050..+5,150, is not at a gap start either). [0, 10) is launch latency; the last step's
    # 53,010 -> 60,000 has nothing pending and no sync: other.
    assert m["idle_host_launch_fraction"] == pytest.approx(4 * 7000 / 60_000)
    assert m["idle_sync_fraction"] == 0.0
    assert m["idle_other_fraction"] == pytest.approx(6990 / 60_000)
    # But for 5,700 us of each gap the launching thread sat inside cudaFree: 4 * 5,700 = 22,800 us, all
    # in long gaps (ten launch periods: 10 * 20 us). The pin-memory thread's cudaHostAlloc (another 4 * 100 us) does
    # not count.
    assert m["idle_blocked_in_sync_fraction"] == pytest.approx(22_800 / 60_000)
    assert m["idle_host_late_blocked_fraction"] == pytest.approx(22_800 / 60_000)
    assert m["sync_blocked_longest_call_ns"] == 5700 * US
    assert m["sync_blocked_longest_call_fraction"] == pytest.approx(0.25)
    assert m["sync_blocked_longest_call"] == "cudaFree in aten::empty"
    assert r.verdict.labels[0] == "sync_bound"
    assert not {"small_batch_bound", "host_bound"} & set(r.verdict.labels)
    assert not any(f.rule_id == "TD104" for f in r.verdict.findings)
    td501 = next(f for f in r.verdict.findings if f.rule_id == "TD501")
    # the replay removes the frees: each step's 5.7 ms inside cudaFree (the GPU already idle) is gained
    assert td501.what_if["step_ms_before"] == pytest.approx(12.0)
    assert td501.what_if["gain_ms"] == pytest.approx(5.7, abs=0.01)
    assert "sync idle 0%" in td501.message and "38%" in td501.message
    assert td501.evidence["sync_blocked_calls"][0] == SyncBlockedCall(
        call="cudaFree",
        op="aten::empty",
        annotation="ProfilerStep#1",
        start_ns=5200 * US,
        dur_ns=5700 * US,
        idle_ns=5700 * US,
    )
    # four equal frees, each a step apart: a per-step cost, not a one-time one
    assert not any("one-time" in fix for fix in td501.fixes)


@pytest.mark.parametrize("kernel_us, kernels", [(500.0, 10), (5.0, 1000)])
def test_gpu_idle_while_the_host_works_between_launches_is_host_bound(tmp_path, kernel_us, kernels):
    b = TraceBuilder()
    host_between_steps(b, "cpu", kernel_us=kernel_us, kernels=kernels)
    r = analyse(b, tmp_path)
    m = r.metrics
    # The cudaFree test's timeline with plain CPU work in place of the free: the 4 boundary gaps of
    # 7,000 us are host_launch, and no thread that launches is blocked in any of them.
    assert m["idle_host_launch_fraction"] == pytest.approx(4 * 7000 / 60_000)
    assert m["idle_short_launch_fraction"] == pytest.approx(10 / 60_000)
    assert m["idle_blocked_in_sync_fraction"] == 0.0 and m["idle_host_late_blocked_fraction"] == 0.0
    assert m["sync_blocked_longest_call"] is None
    # the boundary gaps are long (7,000 us, over ten of the host's launch periods): host work, not
    # the dispatch of the next op, whatever the kernels' size
    assert m["idle_host_long_fraction"] == pytest.approx(4 * 7000 / 60_000)
    td104 = next(f for f in r.verdict.findings if f.rule_id == "TD104")
    assert td104.label == "host_bound" and r.verdict.labels[0] == "host_bound"
    assert not {"sync_bound", "small_batch_bound"} & set(r.verdict.labels)
    assert any("py-spy" in fix or "with_stack" in fix for fix in td104.fixes)
    # the replay moves the host work off the thread: each boundary gap closes (7 ms of every 12 ms
    # step; the next step's kernels then follow the previous ones)
    assert td104.what_if["method"].startswith("critical-path replay")
    assert td104.what_if["step_ms_before"] == pytest.approx(12.0)
    assert td104.what_if["gain_ms"] == pytest.approx(7.0, abs=0.05)
    # the evidence names the host work by self time
    assert td104.evidence["host_late_python"][0].name == "augment_batch"
    assert td104.evidence["host_late_python"][0].self_ns == 4 * 5700 * US


def test_one_long_free_in_a_profile_without_steps_says_it_is_start_up(tmp_path):
    """A one-shot profile: a 2 s cudaFree inside a convolution while the GPU is idle, then a few
    frees of 10 ms; no step spans and nothing that repeats."""
    b = TraceBuilder()
    b.kernel(TC_GEMM, 0.0, 1000.0, launch_at=-10.0)
    conv = b.cpu_op("aten::cudnn_convolution", 1500.0, 2_003_000.0)
    b.runtime("cudaFree", 2000.0, 2_002_000.0, ext=conv)
    t = 2_003_000.0
    for k in range(30):
        b.kernel(TC_GEMM, t + k * 1000.0, 1000.0, launch_at=t + k * 1000.0 - 10.0)
    t += 30_000.0
    for k in range(3):
        b.runtime("cudaFree", t + k * 20_000.0, t + k * 20_000.0 + 10_000.0)
        b.kernel(TC_GEMM, t + k * 20_000.0 + 15_000.0, 1000.0, launch_at=t + k * 20_000.0 + 14_990.0)
    r = analyse(b, tmp_path)
    m = r.metrics
    assert m["steps"] == 0 and m["iterations"] == 0
    # Blocked idle: the long free 2,000,000 us (the GPU idles from 1,000 to 2,003,000) + 3 * 10,000 us.
    assert m["sync_blocked_longest_call_ns"] == 2_000_000 * US
    assert m["sync_blocked_longest_call_fraction"] == pytest.approx(2_000_000 / 2_030_000)
    assert m["sync_blocked_longest_call"] == "cudaFree in aten::cudnn_convolution"
    assert r.verdict.labels == ["sync_bound"]
    td501 = next(f for f in r.verdict.findings if f.rule_id == "TD501")
    assert "one-time" in td501.fixes[0] and "schedule(wait=1, warmup=2, active=3)" in td501.fixes[0]
    assert "cudaFree in aten::cudnn_convolution, 2.00 s" in td501.fixes[0]


# -- tiny traces ---------------------------------------------------------------------------------


def test_thirteen_event_trace_withholds_the_verdict(tmp_path):
    b = TraceBuilder()
    b.step(1, 0.0, 100.0)
    b.cpu_op("aten::add", 10.0, 30.0)
    b.kernel("vectorized_elementwise_kernel", 40.0, 3.0, launch_at=20.0, op="aten::mul")
    b.runtime("cudaDeviceSynchronize", 30.0, 45.0)
    doc = b.to_dict()
    assert len(doc["traceEvents"]) == 8  # + 5 metadata rows below: 13 events
    doc["traceEvents"] += [
        {"ph": "M", "name": "process_name", "pid": p, "args": {"name": n}} for p, n in ((1000, "python"), (0, "GPU 0"))
    ]
    doc["traceEvents"] += [
        {"ph": "M", "name": "thread_name", "pid": 1000, "tid": 1000, "args": {"name": "main"}},
        {"ph": "M", "name": "thread_name", "pid": 0, "tid": 7, "args": {"name": "stream 7"}},
        {"ph": "M", "name": "process_sort_index", "pid": 0, "args": {"sort_index": 0}},
    ]
    import json

    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(doc))
    r = tracedoc.analyze(path).ranks[0]
    assert r.metrics["gpu_op_count"] == 1
    assert r.verdict.withheld and "only 1 GPU op" in r.verdict.withheld
    assert not r.verdict.labels
    assert any(h.code == "tiny-trace" and h.level == "error" for h in r.verdict.health)
    assert r.metrics["gpu_busy_fraction"] is not None  # the numbers are still reported


def test_twenty_kernels_are_enough_for_a_verdict(tmp_path):
    b = TraceBuilder()
    b.step(1, 0.0, 25_000.0)
    for j in range(20):
        b.kernel("volta_sgemm_128x64_nn", 10.0 + j * 1000.0, 1000.0, launch_at=j * 10.0)
    r = analyse(b, tmp_path)
    assert not r.verdict.withheld
    assert r.verdict.labels  # 80% busy with one long GEMM after another: a verdict is given


# -- GPU-only traces -----------------------------------------------------------------------------


def test_gpu_only_trace_is_not_small_batch_bound(tmp_path):
    """Only kernel events (a trace exported without CPU activity): 6 us kernels every 6.75 us."""
    b = TraceBuilder()
    for j in range(400):
        b.kernel("vectorized_elementwise_kernel", j * 6.75, 6.0)
    doc = b.to_dict()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    import json

    path = tmp_path / "gpu_only.json"
    path.write_text(json.dumps(doc))
    r = tracedoc.analyze(path).ranks[0]
    m = r.metrics
    assert m["has_host_events"] is False
    # Window: 0 -> 399 * 6.75 + 6 = 2,699.25 us, busy 400 * 6 = 2,400 us: 88.9%.
    assert m["gpu_busy_fraction"] == pytest.approx(2400 / 2699.25)
    # No launch calls: the idle has no known cause; nothing is blamed on the host.
    assert m["idle_host_launch_fraction"] == 0.0 and m["idle_launch_latency_fraction"] == 0.0
    assert m["idle_other_fraction"] == pytest.approx(299.25 / 2699.25)
    assert "small_batch_bound" not in r.verdict.labels
    health = {h.code: h for h in r.verdict.health}
    assert "gpu-only-trace" in health and "cannot be seen" in health["gpu-only-trace"].message
    assert "can still be judged" in health["gpu-only-trace"].message


# -- the largest measured cause always becomes a finding -----------------------------------------


def test_other_idle_lists_the_cpu_ops_running_during_it(tmp_path):
    b = TraceBuilder()
    for i in range(10):
        t = i * 10_000.0
        b.step(i + 1, t, t + 10_000.0)
        b.kernel("volta_sgemm_128x64_nn", t + 10.0, 2000.0, launch_at=t)
        # Launched before the GPU drained (so not a late host), but queued behind a wait until +7,000.
        b.kernel("volta_sgemm_128x64_nn", t + 7000.0, 2000.0, launch_at=t + 100.0)
        b.cpu_op("checkpoint.save", t + 2500.0, t + 6000.0)
        b.cpu_op("aten::copy_", t + 2600.0, t + 5000.0)  # nested inside the save: not listed on its own
        b.cpu_op("logging.info", t + 6000.0, t + 6500.0)
    r = analyse(b, tmp_path)
    # Per step idle: [0,10) the first step's launch latency (later steps: host late, launched at the
    # boundary after the GPU drained at +9,000); [2010,7000) other (next op launched at +100, long
    # before); [9000,10000) of the last step other (nothing pending).
    assert r.metrics["idle_other_fraction"] == pytest.approx((10 * 4990 + 1000) / 100_000)
    rows = r.evidence["idle_other_cpu_ops"]
    assert rows == [
        IdleCpuOp(op="checkpoint.save", count=10, idle_overlap_ns=35_000 * US),
        IdleCpuOp(op="logging.info", count=10, idle_overlap_ns=5_000 * US),
    ]
    td101 = next(f for f in r.verdict.findings if f.rule_id == "TD101")
    assert td101.evidence["idle_other_cpu_ops"][0].op == "checkpoint.save"


def test_dlrm_host_launch_idle_gets_a_finding():
    from conftest import shared_traces

    r = tracedoc.analyze(shared_traces() / "kineto" / "dlrm_128rank_rank0.json.gz").ranks[0]
    assert r.metrics["idle_host_launch_fraction"] == pytest.approx(0.296, abs=0.005)
    f = next(f for f in r.verdict.findings if f.rule_id == "TD104")
    assert f.label == "host_bound" and f.impact_fraction > 0.1 and f.fixes
    assert r.verdict.labels[0] == "host_bound"
    # exposed communication takes a quarter of the window, but it is off the critical path: overlapping
    # it gains under 2% of the step, so it is a minor finding, not a label
    comm = next(f for f in r.verdict.findings if f.rule_id == "TD201")
    assert comm.minor and comm.what_if["share_fraction"] > 0.2 and "comm_bound" not in r.verdict.labels


def test_v100_resnet_launch_overhead_gets_a_finding():
    from conftest import shared_traces

    r = tracedoc.analyze(shared_traces() / "kineto" / "v100_resnet_ns_rank0.pt.trace.json.gz").ranks[0]
    # Half the window the host sits in launch calls, but they block on a full launch queue (1,022 ops
    # queued on the stream when a call returns): back-pressure from a busy GPU, not launch overhead
    m = r.metrics
    assert m["launch_queue_depth_max"] >= 1022 and m["launch_blocked_calls"] > 1000
    assert m["launch_blocked_fraction"] > 0.4
    assert m["cpu_launch_overhead_fraction"] < 0.1
    assert not any(f.rule_id == "TD105" for f in r.verdict.findings)
    assert r.verdict.labels[0] == "low_tensor_core_use"


# -- no step spans -------------------------------------------------------------------------------


def test_no_step_trace_with_host_launch_starvation_is_labelled_per_iteration(tmp_path):
    """An inference loop annotated with vLLM's execute_model and no prof.step(): 100 kernels of 5 us
    per iteration, each launched 20 us after the last (the GPU waits 15 us for every launch)."""
    b = TraceBuilder()
    for i in range(5):
        t = i * 2500.0
        b.annotation("execute_model", t, t + 2000.0)
        for j in range(100):
            launch = t + j * 20.0
            b.kernel("triton_poi_fused_add_0", launch + 8.0, 5.0, launch_at=launch, launch_dur=5.0)
    r = analyse(b, tmp_path)
    m = r.metrics
    assert m["steps"] == 0 and m["iterations"] == 5 and m["iteration_name"] == "execute_model"
    # Completions at 2,000 + 2,500 i (CPU end after the last kernel at +1,993): 2,000 then 2,500 us.
    assert m["step_time_p50_ns"] == 2500 * US  # the report's step
    assert m["step_time_mean_ns"] == pytest.approx((2000 + 4 * 2500) / 5 * US)
    # The window is still the GPU span: 8 us -> 4 * 2,500 + 1,993 us.
    assert r.window.kind == "gpu" and m["window_ns"] == (11_993 - 8) * US
    assert r.verdict.labels[0] == "small_batch_bound"
    top = r.verdict.findings[0]
    assert top.impact_ms_per_step == pytest.approx(top.impact_fraction * 2.5)
    assert top.impact_ms_per_step > 0.5
    health = next(h for h in r.verdict.health if h.code == "no-steps")
    assert "execute_model" in health.message and "window" in health.message


def test_optimizer_steps_mark_iterations_without_step_spans(tmp_path):
    b = TraceBuilder()
    for i in range(4):
        t = i * 10_000.0
        for j in range(8):
            b.kernel("volta_sgemm_128x64_nn", t + 10.0 + j * 1000.0, 1000.0, launch_at=t + j * 5.0)
        b.cpu_op("Optimizer.step#SGD.step", t + 8_500.0, t + 9_000.0)
    r = analyse(b, tmp_path)
    m = r.metrics
    # Iterations run between consecutive Optimizer.step ends (9,000 + 10,000 i): 3 of 10 ms.
    assert m["steps"] == 0 and m["iterations"] == 3 and m["iteration_name"] == "Optimizer.step#SGD.step"
    assert m["step_time_p50_ns"] == 10_000 * US


def test_trace_without_any_iteration_is_one_span_named_in_health(tmp_path):
    b = TraceBuilder()
    for j in range(30):
        b.kernel("volta_sgemm_128x64_nn", j * 100.0, 50.0, launch_at=j * 100.0 - 5)
    r = analyse(b, tmp_path)
    assert r.metrics["iterations"] == 0 and r.metrics["step_time_p50_ns"] is None
    health = next(h for h in r.verdict.health if h.code == "no-steps")
    assert "one span" in health.message and "share of that window" in health.message


def test_no_step_report_says_per_iteration_never_zero_ms_per_step(tmp_path):
    from tracedoc.render.text import render_text

    b = TraceBuilder()
    for i in range(5):
        t = i * 2500.0
        b.annotation("execute_model", t, t + 2000.0)
        for j in range(100):
            b.kernel("triton_poi_fused_add_0", t + j * 20.0 + 8.0, 5.0, launch_at=t + j * 20.0, launch_dur=5.0)
    text = render_text(tracedoc.analyze(b.write(tmp_path / "t.json")))
    assert "ms/iteration" in text
    assert "ms/step" not in text and "0.0 ms/" not in text
    # the fix's prediction is per iteration too, from the median iteration (2,500 us)
    assert "if fixed: iteration 2.5 ms →" in text and "if fixed: step" not in text


# -- shared real traces: one-shot profiles and unit-test traces ----------------------------------


def _expected(name: str) -> dict:
    from conftest import expected_rows

    return next(row for row in expected_rows() if row["trace"] == name)


def test_shared_one_shot_profile_without_steps_is_one_span_labelled_sync_bound():
    """a100_alexnet: a one-shot profile with no ProfilerStep and nothing that repeats; the GPU is idle
    99.5% of the window. The split calls 95% host_launch (each next launch came after its gap began),
    but the launching thread spent most of it blocked in cudaFree/cudaMalloc: sync_bound."""
    import gzip
    import json

    from conftest import shared_traces
    from tracedoc.render.text import render_text

    path = shared_traces() / "kineto" / "a100_alexnet.json.gz"
    result = tracedoc.analyze(path)
    r = result.ranks[0]
    m = r.metrics
    assert m["steps"] == 0 and m["iterations"] == 0 and m["step_time_p50_ns"] is None
    assert m["window_ns"] == pytest.approx(_expected("a100_alexnet.json.gz")["window_us"] * US)
    health = next(h for h in r.verdict.health if h.code == "no-steps")
    assert "one span" in health.message

    # Independently from the raw events: GPU busy = union of kernels/copies/memsets; blocked = the
    # host's cudaFree, cudaMalloc (the trace also frees: pressure) and cudaHostAlloc calls, all on
    # its one thread. Their overlap with idle, / the window.
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]

    def merged(spans):
        out = []
        for a, b in sorted(spans):
            if out and a <= out[-1][1]:
                out[-1][1] = max(out[-1][1], b)
            else:
                out.append([a, b])
        return out

    busy = merged(
        [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    )
    lo, hi = busy[0][0], max(b for _, b in busy)
    calls = [
        e for e in events if e.get("cat") == "cuda_runtime" and e["name"] in ("cudaFree", "cudaMalloc", "cudaHostAlloc")
    ]
    blocked = merged(
        [(max(e["ts"], lo), min(e["ts"] + e["dur"], hi)) for e in calls if e["ts"] < hi and e["ts"] + e["dur"] > lo]
    )
    blocked_busy = sum(max(0.0, min(b1, b2) - max(a1, a2)) for a1, b1 in blocked for a2, b2 in busy)
    blocked_idle_us = sum(b - a for a, b in blocked) - blocked_busy
    # The pageable copies' launch calls and the explicit syncs add little (< 0.5% of the window).
    assert m["idle_blocked_in_sync_fraction"] == pytest.approx(blocked_idle_us / (hi - lo), abs=0.005)
    assert m["idle_blocked_in_sync_fraction"] > 0.6 > m["idle_sync_fraction"]
    longest = max(calls, key=lambda e: e["dur"])
    assert longest["name"] == "cudaFree" and longest["dur"] == pytest.approx(6_008_692)
    assert m["sync_blocked_longest_call_ns"] == pytest.approx(longest["dur"] * US)
    assert m["sync_blocked_longest_call"] == "cudaFree in aten::cudnn_convolution"

    assert r.verdict.labels == ["sync_bound"]
    assert not any(f.rule_id == "TD104" for f in r.verdict.findings)  # mostly blocked, not late
    td501 = next(f for f in r.verdict.findings if f.rule_id == "TD501")
    assert td501.impact_fraction == pytest.approx(m["idle_blocked_in_sync_fraction"])
    # impact is a share of the one span: the window, never a per-step number
    assert td501.impact_ms_per_step == pytest.approx(td501.impact_fraction * m["window_ns"] / 1e6)
    assert td501.what_if["method"].startswith("upper bound")
    # one 6 s free is 71% of the blocked idle in a profile with no step to compare: start-up
    assert "one-time" in td501.fixes[0] and "cudaFree in aten::cudnn_convolution, 6.01 s" in td501.fixes[0]
    text = render_text(result)
    assert "of the window" in text and "ms/step" not in text and "if fixed: window" in text


@pytest.mark.parametrize(
    "name", ["triton_example.json.gz", "h100_2026_format.json", "cuda_event_sync.json.gz", "mi250_rocm_minitoy.json.gz"]
)
def test_shared_unit_test_traces_withhold_the_verdict(name):
    from conftest import shared_traces

    r = tracedoc.analyze(shared_traces() / "kineto" / name).ranks[0]
    assert r.metrics["kernel_count"] == _expected(name)["kernels"]
    assert r.metrics["gpu_op_count"] < 20
    assert r.verdict.withheld and not r.verdict.labels
    assert any(h.code == "tiny-trace" and h.level == "error" for h in r.verdict.health)
