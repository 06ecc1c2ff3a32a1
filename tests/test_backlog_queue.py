"""The pre-window backlog, the full launch queue and the one step time (docs/definitions.md).

Built traces whose answers follow from how they were built: a GPU still running work launched before
the profiler opened (recorded without launch calls, or not recorded at all), a CPU blocked on a full
launch queue (with and without Kineto's Command Buffer Full records), and traces without either,
which must come out as before.
"""

from __future__ import annotations

import json

import pytest
from trace_builder import TraceBuilder

import tracedoc
from tracedoc.analyses.gputime.backlog import find_backlog
from tracedoc.analyses.host.launchqueue import QUEUE_CAPACITY
from tracedoc.render.text import render_text

US = 1000  # ns per microsecond
GEMM = "ampere_sgemm_128x64_tn"
TC_GEMM = "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn"  # a Tensor Core GEMM on the A100


def analyse(b: TraceBuilder, tmp_path, name: str = "t.pt.trace.json"):
    return tracedoc.analyze(b.write(tmp_path / name)).ranks[0]


def cpu_ahead(b: TraceBuilder, gpu_from: float, steps: int = 5, kernels: int = 10, kernel_us: float = 1000.0) -> None:
    """Each CPU step (1 ms, from i ms) launches ``kernels`` kernels of ``kernel_us``; the GPU runs them back to
    back from ``gpu_from`` (later than their launch: the CPU runs ahead)."""
    gpu_t = gpu_from
    for i in range(steps):
        s = i * 1000.0
        b.step(i + 1, s, s + 900.0)
        for k in range(kernels):
            b.kernel(GEMM, gpu_t, kernel_us, launch_at=s + 10.0 + 50.0 * k, launch_dur=4.0)
            gpu_t += kernel_us


def with_backlog(recorded: bool) -> TraceBuilder:
    """The CPU loop above, with the GPU still busy until 19,500 us with 20 kernels launched before the
    profiler opened: recorded without launch calls (``recorded``), or not recorded at all."""
    b = TraceBuilder()
    if recorded:
        for j in range(20):
            b.unlaunched(GEMM, -500.0 + 1000.0 * j, 1000.0, correlation=10 + j)
    cpu_ahead(b, gpu_from=19_500.0)
    return b


@pytest.mark.parametrize("recorded", [True, False], ids=["unlinked_ops", "unrecorded"])
def test_backlog_leaves_the_window_and_the_first_step(tmp_path, recorded):
    r = analyse(with_backlog(recorded), tmp_path)
    m = r.metrics
    # By hand: step i completes at 19,500 + 10,000 (i + 1) us. The first step's interval (29.5 ms from its
    # start) carries the backlog; the others are the GPU's 10 ms.
    assert m["backlog_ns"] == 19_500 * US and m["backlog_ops"] == (20 if recorded else 0)
    assert [row["step_time_ns"] for row in r.per_step] == [None] + [10_000 * US] * 4
    assert m["steps"] == 5 and m["iterations"] == 4
    assert m["step_time_p50_ns"] == m["step_time_mean_ns"] == 10_000 * US
    # the window: first completion -> last completion; the GPU is busy all of it
    assert r.window.kind == "steady"
    assert (r.window.start_ns, r.window.end_ns) == (29_500 * US, 69_500 * US)
    assert r.window.span_lo == 0
    assert m["idle_fraction"] == 0.0 and m["gpu_busy_fraction"] == 1.0
    # not a sign of an old torch: every op the capture launched is linked
    assert m["launch_link_fraction"] == 1.0
    codes = {h.code: h for h in r.verdict.health}
    assert "missing-launch-links" not in codes and codes["pre-window-backlog"].confidence == "high"
    assert "19.5 ms" in codes["pre-window-backlog"].message
    # the first step's own span holds no idle either: the backlog is not idle time
    assert r.per_step[0]["idle_ns"] == 0
    # every finding starts from the report's step; the first step has no critical-path step time
    cp = r.critical_path
    assert [row["timed"] for row in cp.steps] == [False, True, True, True, True]
    assert cp.steps[0]["backlog_ns"] > 0 and cp.steps[0]["idle_ns"] == 0
    for p in cp.predictions.values():
        assert p.step_ms_before == pytest.approx(10.0)
    for f in r.verdict.findings:
        if f.what_if:
            assert f.what_if["step_ms_before"] == pytest.approx(10.0)
    assert r.verdict.step_time_ns == 10_000 * US


def test_without_a_backlog_nothing_changes(tmp_path):
    """The same loop with the GPU free when the capture begins: the window starts at the first step,
    every step has a step time, and the report's step is their median."""
    b = TraceBuilder()
    cpu_ahead(b, gpu_from=15.0)
    r = analyse(b, tmp_path)
    m = r.metrics
    assert m["backlog_ns"] is None and m["backlog_ops"] == 0
    assert r.window.kind == "steps" and r.window.start_ns == 0
    assert [row["step_time_ns"] for row in r.per_step] == [10_015 * US] + [10_000 * US] * 4
    assert m["iterations"] == 5 and m["step_time_p50_ns"] == 10_000 * US
    assert m["step_time_mean_ns"] == pytest.approx(10_003 * US)
    assert not any(h.code == "pre-window-backlog" for h in r.verdict.health)


def test_unlinked_ops_that_held_nothing_back_are_no_backlog(tmp_path):
    """An op without a launch call that ended before anything the capture launched, and ops without a
    launch call later in the trace (launched by a thread the profiler did not record): neither delayed a
    launched op, so there is no backlog."""
    b = TraceBuilder()
    b.unlaunched(GEMM, -300.0, 200.0, correlation=5)
    cpu_ahead(b, gpu_from=15.0)
    b.unlaunched("ncclKernel_AllReduce_RING_LL_Sum_float", 30_000.0, 500.0, stream=20)
    assert not find_backlog(tracedoc.load(b.write(tmp_path / "t.json"))).found


def test_gpu_only_trace_has_no_backlog(tmp_path):
    b = TraceBuilder()
    for j in range(30):
        b.unlaunched(GEMM, 100.0 * j, 100.0)
    assert not find_backlog(tracedoc.load(b.write(tmp_path / "t.json"))).found


# -- the full launch queue ---------------------------------------------------------------------------
def full_queue(
    capacity: int = QUEUE_CAPACITY,
    steps: int = 4,
    per_step: int = 400,
    kernel_us: float = 100.0,
    buffer_full_records: bool = False,
) -> tuple[TraceBuilder, int]:
    """A GPU-bound loop: the CPU launches a kernel every 5 us (a 4 us call and 1 us of Python), the GPU
    runs 100 us kernels back to back from 10 us. Once ``capacity`` kernels are queued, each launch call
    waits until a kernel finishes (it returns 2 us after the slot frees): the host is blocked on the full
    queue, and the GPU sets the step (``per_step`` kernels: 40 ms). Returns the trace and how many calls
    it made wait."""
    b = TraceBuilder()
    waited = 0
    gpu_end = [10.0 + kernel_us * (j + 1) for j in range(steps * per_step)]
    t = 0.0
    for i in range(steps):
        step_start = t
        for k in range(per_step):
            j = i * per_step + k
            start = t + 1.0
            end = start + 4.0
            if j >= capacity:  # the queue holds ``capacity`` launched, unfinished kernels
                end = max(end, gpu_end[j - capacity] + 2.0)
            b.kernel(TC_GEMM, gpu_end[j] - kernel_us, kernel_us, launch_at=start, launch_dur=end - start)
            if end - start > 4.0:
                waited += 1
                if buffer_full_records:
                    b.overhead("Command Buffer Full", start + 1.0, end - 1.0)
            t = end
        b.step(i + 1, step_start, t + 1.0)
        t += 2.0
    return b, waited


def test_full_launch_queue_is_back_pressure_not_launch_overhead(tmp_path):
    b, waited = full_queue()
    r = analyse(b, tmp_path)
    m = r.metrics
    # the calls launching kernels 1,024 on, onto a full queue, each waited ~95 us for a slot
    assert waited > 500
    assert m["launch_queue_depth_max"] == QUEUE_CAPACITY
    assert m["launch_blocked_calls"] == waited
    assert m["launch_blocked_fraction"] > 0.3
    # the launch calls' own cost (4 us each) is the launch overhead; their blocked time is not
    assert m["cpu_launch_overhead_fraction"] < 0.05
    assert m["step_time_p50_ns"] == 40_000 * US and m["gpu_busy_fraction"] > 0.99
    v = r.verdict
    assert v.labels == ["compute_bound"]
    assert not {"TD103", "TD105"} & {f.rule_id for f in v.findings}
    # the critical path of a step after the queue filled runs through the GPU, not through launch calls
    row = r.critical_path.steps[3]
    assert row["compute_ns"] > 0.95 * row["step_ns"] and row["launch_overhead_ns"] < 0.02 * row["step_ns"]
    launch = r.critical_path.predictions.get("launch")
    assert launch is None or launch.gain_ms < 0.02 * launch.step_ms_before  # CUDA graphs would not help
    (stream,) = r.evidence["launch_queue"]
    assert stream.depth_max == QUEUE_CAPACITY and stream.blocked_calls == waited
    assert max(stream.series) == QUEUE_CAPACITY and stream.series[-1] < QUEUE_CAPACITY


def test_command_buffer_full_records_mark_blocked_calls_at_any_depth(tmp_path):
    """A driver whose buffer holds 256 launches: below the usual capacity, the calls Kineto marks
    Command Buffer Full are the blocked ones (their blocked time is the records' time)."""
    b, waited = full_queue(capacity=256, steps=2, buffer_full_records=True)
    records = [e for e in b.events if e["name"] == "Command Buffer Full"]
    r = analyse(b, tmp_path)
    m = r.metrics
    assert m["launch_queue_depth_max"] == 256 and waited == len(records) > 400
    assert m["launch_blocked_calls"] == waited
    # the blocked time is the records' time: each spans its call less 1 us at either end
    assert r.evidence["launch_queue"][0].blocked_ns == pytest.approx(sum(e["dur"] for e in records) * US, abs=2)


def test_queue_view_in_every_format(tmp_path):
    b, waited = full_queue()
    result = tracedoc.analyze(b.write(tmp_path / "q.pt.trace.json"))
    text = render_text(result)
    assert "Launch queue:" in text and "back-pressure" in text and "stream 7: up to 1,024 of 1,024" in text
    md = result.to_markdown()
    assert "### Launch queue" in md and "| 0 | 7 | 1,600 | 1,024 |" in md
    html = result.to_html()
    assert 'id="launch-queue"' in html and 'class="queue-depth"' in html and "queue-full" in html
    doc = json.loads(json.dumps(result.to_dict()))
    rank = doc["ranks"][0]
    assert rank["evidence"]["launch_queue"][0]["depth_max"] == QUEUE_CAPACITY
    assert rank["metrics"]["launch_blocked_calls"] == waited


def test_queue_that_never_fills_is_said_so(tmp_path):
    b = TraceBuilder()
    cpu_ahead(b, gpu_from=15.0)
    r = analyse(b, tmp_path)
    # by hand: all 50 kernels launched by 4,464 us, when 4 of them (ending 1,015 + 1,000 k) have finished
    assert r.metrics["launch_blocked_calls"] == 0 and r.metrics["launch_queue_depth_max"] == 46
    md = tracedoc.analyze(b.write(tmp_path / "n.pt.trace.json")).to_markdown()
    assert "no queue reached its capacity" in md


# -- captures without steps --------------------------------------------------------------------------
def layered_loop(b: TraceBuilder, iterations: int = 6, layers: int = 4) -> float:
    """An inference loop without step marks: per iteration a copy in, ``layers`` identical layers of three
    kernels, and a head kernel; the host prepares the next input for 2 ms between iterations. Returns the
    iteration's period in us (the GPU work, 1 + 4 * 3 * 0.1 + 0.2 = 1.4 ms, plus the 2 ms gap)."""
    t = 0.0
    for _ in range(iterations):
        t += 2000.0
        b.memcpy(t, 100.0, src="Pinned", launch_at=t - 10.0)
        t += 100.0
        for _layer in range(layers):
            for name in (GEMM, "void at::native::vectorized_elementwise_kernel<4>()", "triton_poi_fused_relu_0"):
                b.kernel(name, t, 100.0, launch_at=t - 10.0)
                t += 100.0
        b.kernel("void at::native::softmax_warp_forward<float>()", t, 200.0, launch_at=t - 10.0)
        t += 200.0
    return 2000.0 + 100.0 + layers * 300.0 + 200.0


def test_iterations_from_a_repeating_kernel_sequence(tmp_path):
    b = TraceBuilder()
    period_us = layered_loop(b)
    r = analyse(b, tmp_path)
    m = r.metrics
    # the whole iteration (14 ops), not a layer (3 ops): 6 iterations, 5 intervals between completions
    assert m["steps"] == 0 and m["iterations"] == 5
    assert m["iteration_name"].startswith("GPU op sequence of 14 ops")
    assert m["step_time_p50_ns"] == period_us * US
    assert r.window.kind == "gpu"  # the window stays the GPU span
    health = next(h for h in r.verdict.health if h.code == "no-steps")
    assert "repeating GPU op sequence of 14 ops" in health.message and "layer" in health.message


def test_no_repeating_sequence_is_said_so(tmp_path):
    b = TraceBuilder()
    t = 0.0
    for j in range(40):  # forty different kernels, once each
        b.kernel(f"kernel_{j}", t, 50.0 + j, launch_at=t - 5.0)
        t += 100.0 + 7.0 * j
    r = analyse(b, tmp_path)
    assert r.metrics["iterations"] == 0 and r.metrics["step_time_p50_ns"] is None
    health = next(h for h in r.verdict.health if h.code == "no-steps")
    assert "a repeating sequence of GPU ops" in health.message
    text = render_text(tracedoc.analyze(b.write(tmp_path / "w.pt.trace.json")))
    assert "ms/step" not in text and "if fixed: step" not in text  # a window, not a step


def test_a_diff_compares_the_same_medians(tmp_path):
    """The backlog's first step has no step time in the diff either: the run with the backlog and the run
    without it have the same 10 ms step."""
    from tracedoc.api import diff

    before = with_backlog(True).write(tmp_path / "a.pt.trace.json")
    b = TraceBuilder()
    cpu_ahead(b, gpu_from=15.0)
    after = b.write(tmp_path / "b.pt.trace.json")
    d = diff(before, after)
    assert (d.before.step_ns, d.after.step_ns, d.step_delta_ns) == (10_000_000, 10_000_000, 0)
