"""One step time and labels that need a predicted gain (docs/critical-path.md), at the rules engine, and gap
causes that agree with the idle split.

Every what-if starts from the report's step (the median); a verdict label needs a what-if predicting at
least 2% of it; findings of one cause share one prediction; a fix that cannot be modelled says so.
"""

from __future__ import annotations

import pytest
from test_rules import BASELINE, EVIDENCE
from trace_builder import TraceBuilder

import tracedoc
from tracedoc.engine.evaluate import MIN_GAIN_FRACTION, evaluate
from tracedoc.engine.ruleset import load_ruleset
from tracedoc.render.format import fmt_what_if

RULESET = load_ruleset()
US = 1000


def replay(before_ms: float, gain_ms: float, fix: str) -> dict:
    return {
        "step_ms_before": before_ms,
        "step_ms_after": before_ms - gain_ms,
        "gain_ms": gain_ms,
        "method": f"critical-path replay, median of 9 step times: {fix}",
    }


def metrics(**overrides):
    m = dict(BASELINE)
    m.update(overrides)
    return m


# idle while the host sits in syncs: TD501 (sync_bound) and TD502 (advice, one sync per step) both fire
SYNCS = {
    "gpu_busy_fraction": 0.7,
    "compute_fraction": 0.68,
    "idle_fraction": 0.3,
    "idle_sync_fraction": 0.25,
    "sync_fraction": 0.3,
    "sync_calls": 40,
    "iterations": 10,
}


def test_what_ifs_start_from_the_reports_step_not_the_mean():
    # the replay measured its own step slightly differently: the finding keeps its gain, on the report's step
    m = metrics(step_time_mean_ns=150_000_000, step_time_p50_ns=100_000_000, **SYNCS)
    v = evaluate(m, EVIDENCE, ruleset=RULESET, what_ifs={"sync": replay(100.4, 30.0, "host syncs removed")})
    assert v.step_time_ns == 100_000_000
    td501 = next(f for f in v.findings if f.rule_id == "TD501")
    assert td501.what_if["step_ms_before"] == 100.0 and td501.what_if["gain_ms"] == 30.0
    assert td501.what_if["step_ms_after"] == 70.0
    for f in v.findings:
        if f.what_if:
            assert f.what_if["step_ms_before"] == 100.0


def test_findings_of_one_cause_give_one_number():
    m = metrics(**SYNCS)
    v = evaluate(m, EVIDENCE, 100_000_000, ruleset=RULESET, what_ifs={"sync": replay(100.0, 1.9, "host syncs removed")})
    td501 = next(f for f in v.findings if f.rule_id == "TD501")
    td502 = next(f for f in v.findings if f.rule_id == "TD502")
    assert td501.impact_ms_per_step == td502.impact_ms_per_step == pytest.approx(1.9)


@pytest.mark.parametrize("gain_ms, labelled", [(1.9, False), (2.0, True), (30.0, True)])
def test_a_label_needs_a_predicted_gain_of_two_percent(gain_ms, labelled):
    m = metrics(**SYNCS)
    v = evaluate(m, EVIDENCE, 100_000_000, ruleset=RULESET, what_ifs={"sync": replay(100.0, gain_ms, "syncs removed")})
    td501 = next(f for f in v.findings if f.rule_id == "TD501")
    assert td501.minor is not labelled
    assert ("sync_bound" in v.labels) is labelled
    assert td501.label == "sync_bound"  # the rule's label stays on the finding
    assert MIN_GAIN_FRACTION == 0.02
    # minor findings rank after the others
    assert [f.minor for f in v.findings] == sorted(f.minor for f in v.findings)


def test_a_large_share_without_a_predicted_gain_is_minor():
    """Exposed communication takes 40% of the window, but the replay says overlapping it gains nothing
    (it is off the critical path): the finding stays, minor, with today's share beside the prediction."""
    m = metrics(
        comm_fraction=0.45,
        exposed_comm_fraction=0.4,
        comm_overlap_fraction=0.1,
        compute_fraction=0.5,
        gpu_busy_fraction=0.9,
        world_size=8,
        backend="nccl",
    )
    v = evaluate(m, EVIDENCE, 100_000_000, ruleset=RULESET, what_ifs={"comm": replay(100.0, 0.0, "comm overlapped")})
    td201 = next(f for f in v.findings if f.rule_id == "TD201")
    assert td201.minor and td201.what_if["share_fraction"] == pytest.approx(0.4)
    assert "comm_bound" not in v.labels


def test_low_occupancy_is_replayed_as_a_bigger_batch_not_cuda_graphs():
    m = metrics(blocks_per_sm_mean=0.4, est_occupancy_mean=8.0)
    what_ifs = {"launch": replay(100.0, 0.0, "CUDA graphs"), "batch": replay(100.0, 25.0, "a batch that fills")}
    v = evaluate(m, EVIDENCE, 100_000_000, ruleset=RULESET, what_ifs=what_ifs)
    td402 = next(f for f in v.findings if f.rule_id == "TD402")
    assert td402.what_if["gain_ms"] == 25.0 and "a batch that fills" in td402.what_if["method"]
    assert "small_batch_bound" in v.labels


def test_compute_bound_predicts_nothing_it_cannot_model():
    v = evaluate(dict(BASELINE), EVIDENCE, 100_000_000, ruleset=RULESET)
    (f,) = v.findings
    assert f.label == "compute_bound" and v.labels == ["compute_bound"]
    assert f.what_if["step_ms_after"] is None and f.what_if["gain_ms"] is None
    assert f.what_if["method"].startswith("not modelled: ")
    assert fmt_what_if(f.what_if).startswith("step 100 ms → not predicted")


def test_host_bound_and_small_batch_bound_are_told_apart():
    """Long host-late gaps are host work whatever the kernels' size (host_bound); many short gaps before
    tiny kernels are launch cost (small_batch_bound)."""
    long_gaps = metrics(
        gpu_busy_fraction=0.6,
        idle_fraction=0.4,
        idle_host_launch_fraction=0.35,
        idle_host_long_fraction=0.33,
        idle_short_launch_fraction=0.02,
        kernel_median_ns=18_000,
        kernels_under_10us_fraction=0.3,
    )
    v = evaluate(long_gaps, EVIDENCE, 100_000_000, ruleset=RULESET, what_ifs={"host": replay(100.0, 25.0, "host")})
    assert v.labels == ["host_bound"]
    short_gaps = metrics(
        gpu_busy_fraction=0.6,
        idle_fraction=0.4,
        idle_host_launch_fraction=0.35,
        idle_host_long_fraction=0.0,
        idle_short_launch_fraction=0.38,
        kernel_median_ns=4_000,
        kernels_under_10us_fraction=0.9,
    )
    v = evaluate(short_gaps, EVIDENCE, 100_000_000, ruleset=RULESET, what_ifs={"launch": replay(100.0, 30.0, "graphs")})
    assert v.labels == ["small_batch_bound"]


# -- gap causes --------------------------------------------------------------------------------------
def test_a_gap_is_named_by_the_idle_cause_of_its_time(tmp_path):
    """A DataLoader wait between two kernels: the next kernel is launched after the gap began, but the
    main thread waited on the DataLoader: the split says dataloader, and so does the gap. A side stream
    idling while the compute stream runs is not idle time at all."""
    b = TraceBuilder()
    b.step(1, 0.0, 10_000.0)
    b.kernel("k0", 100.0, 1000.0, launch_at=50.0)
    b.dataloader(1_200.0, 6_000.0)
    b.kernel("k1", 6_100.0, 1000.0, launch_at=6_050.0)
    b.kernel("side0", 200.0, 100.0, launch_at=150.0, stream=20)
    b.kernel("long", 7_200.0, 2_000.0, launch_at=7_150.0)
    b.kernel("side1", 8_000.0, 100.0, launch_at=7_160.0, stream=20)
    r = tracedoc.analyze(b.write(tmp_path / "g.pt.trace.json")).ranks[0]
    top = {(g.stream, g.after): g for g in r.evidence["top_gaps"]}
    dl = top[(7, "k1")]
    assert dl.cause == "dataloader" and dl.device_idle_ns == dl.gap_ns == 5000 * US
    side = top[(20, "side1")]  # 300 -> 8,000 us on stream 20: the device idles only inside the DataLoader wait
    assert side.gap_ns == 7700 * US and side.device_idle_ns == 5000 * US + 100 * US
    assert r.evidence["top_gaps"][0].after == "side1"  # the most device-idle time first
    by_stream = {s.stream: s for s in r.evidence["stream_gaps"]}
    assert by_stream[20].causes_ns["device_busy"] == (7700 - 5100) * US
    busy_only = TraceBuilder()
    busy_only.kernel("long", 0.0, 5_000.0, launch_at=-10.0)
    busy_only.kernel("s0", 100.0, 100.0, launch_at=50.0, stream=20)
    busy_only.kernel("s1", 3_000.0, 100.0, launch_at=2_950.0, stream=20)
    r = tracedoc.analyze(busy_only.write(tmp_path / "b.pt.trace.json")).ranks[0]
    (gap,) = r.evidence["top_gaps"]
    assert gap.cause == "device_busy" and gap.device_idle_ns == 0
