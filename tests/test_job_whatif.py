"""The straggler what-if of the job view: the job's step time predicted with the straggler on time.

Each fixture is a lockstep 4-rank GPU job simulated by hand: every step the ranks wait in their
input pipeline, compute, all-reduce, compute, all-reduce, run the optimizer and synchronise; a
collective starts on the last arrival and the next step starts when the step's work is done. The
prediction made on the job with a late rank is checked against the step time of the same job
simulated *without* the lateness, never against a number derived from the prediction.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from trace_builder import TraceBuilder

from tracedoc.api import analyze

RANKS, STEPS = 4, 6
LOADER_US = {0: 3_000.0, 1: 3_200.0, 2: 2_900.0, 3: 3_100.0}  # the on-time input wait of each rank
COMPUTE1_US = {0: 4_000.0, 1: 4_050.0, 2: 4_000.0, 3: 3_950.0}
COMPUTE2_US = {0: 2_500.0, 1: 2_400.0, 2: 2_450.0, 3: 2_600.0}
TRANSFER1_US, TRANSFER2_US, OPTIMIZER_US = 1_500.0, 900.0, 700.0
LATE_RANK = 2


def simulate(late_us: dict[int, float], late_at: int = 1) -> list[dict]:
    """The lockstep schedule: per step, each rank's times (us); lateness ``late_us[rank]`` is added to the
    rank's input wait (``late_at=1``) or to its compute before the second all-reduce (``late_at=2``)."""
    t = 1_000_000.0
    steps = []
    for _ in range(STEPS):
        loader = {r: LOADER_US[r] + (late_us.get(r, 0.0) if late_at == 1 else 0.0) for r in range(RANKS)}
        c2 = {r: COMPUTE2_US[r] + (late_us.get(r, 0.0) if late_at == 2 else 0.0) for r in range(RANKS)}
        ready = {r: t + loader[r] + 30.0 for r in range(RANKS)}  # launches after the input is there
        arrive1 = {r: ready[r] + COMPUTE1_US[r] for r in range(RANKS)}
        end1 = max(arrive1.values()) + TRANSFER1_US
        arrive2 = {r: end1 + c2[r] for r in range(RANKS)}
        end2 = max(arrive2.values()) + TRANSFER2_US
        done = end2 + OPTIMIZER_US
        steps.append(
            {
                "start": t,
                "loader": loader,
                "ready": ready,
                "arrive1": arrive1,
                "end1": end1,
                "arrive2": arrive2,
                "end2": end2,
                "done": done,
                "c2": c2,
            }
        )
        t = done + 15.0  # the CPU leaves its synchronize and starts the next step
    return steps


def write_job(d: Path, steps: list[dict]) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for r in range(RANKS):
        b = TraceBuilder(rank=r, world_size=RANKS)
        for k, s in enumerate(steps):
            b.step(k + 1, s["start"], s["done"] + 10.0)
            b.dataloader(s["start"] + 1.0, s["start"] + 1.0 + s["loader"][r])
            cpu = s["ready"][r] - 20.0
            b.kernel("ampere_sgemm_128x64_tn", s["ready"][r], COMPUTE1_US[r], launch_at=cpu, op="aten::mm")
            b.nccl(s["arrive1"][r], s["end1"] - s["arrive1"][r], nelems=1 << 22, launch_at=cpu + 5.0)
            b.kernel("ampere_sgemm_64x64_nn", s["end1"], s["c2"][r], launch_at=cpu + 10.0, op="aten::mm")
            b.nccl(s["arrive2"][r], s["end2"] - s["arrive2"][r], nelems=1 << 20, launch_at=cpu + 15.0)
            b.kernel(
                "void at::native::vectorized_elementwise_kernel<4>()",
                s["end2"],
                OPTIMIZER_US,
                launch_at=cpu + 20.0,
                op="aten::add_",
            )
            b.sync(cpu + 30.0, s["done"] + 5.0, name="cudaDeviceSynchronize", op=None)
        b.write(d / f"rank{r}.pt.trace.json.gz")
    return d


def mean_step_ms(steps: list[dict]) -> float:
    """Mean step time by docs/definitions.md (first step: completion - start; then completion intervals)."""
    return (steps[-1]["done"] - steps[0]["start"]) / len(steps) / 1e3


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    base = tmp_path_factory.mktemp("whatif")
    late, on_time = simulate({LATE_RANK: 6_000.0}), simulate({})
    return {
        "late": (late, analyze(write_job(base / "late", late), jobs=1)),
        "on_time": (on_time, analyze(write_job(base / "on_time", on_time), jobs=1)),
    }


def test_prediction_lands_on_the_step_of_the_job_without_the_lateness(pair):
    late_steps, late = pair["late"]
    on_time_steps, on_time = pair["on_time"]
    job = late.to_dict()["job"]
    assert job["straggler_ranks"] == [LATE_RANK]
    w = job["straggler_what_if"]
    assert w is not None and "replay" in w["method"] and f"rank {LATE_RANK}" in w["method"]
    measured_before, measured_after = mean_step_ms(late_steps), mean_step_ms(on_time_steps)
    # the fixture's own schedules: input wait + compute reach the first all-reduce at 7.25 ms on rank 1,
    # 6.9 ms on rank 2 when on time: 6 ms of lateness costs the job 6.0 - (7.25 - 6.9) = 5.65 ms a step
    assert measured_before - measured_after == pytest.approx(5.65, abs=0.01)
    assert w["step_ms_before"] == pytest.approx(measured_before, rel=0.01)
    assert abs(w["step_ms_after"] - measured_after) <= 0.15 * measured_after
    # and what tracedoc measures on the job built without the lateness agrees
    balanced = on_time.to_dict()["job"]
    p50 = sorted(r["step_time_p50_ns"] / 1e6 for r in balanced["ranks"])[RANKS // 2]
    assert abs(w["step_ms_after"] - p50) <= 0.15 * p50
    assert w["gain_ms"] == pytest.approx(w["step_ms_before"] - w["step_ms_after"], abs=1e-3)


def test_straggler_finding_carries_the_prediction_and_ranks_by_its_gain(pair):
    _, late = pair["late"]
    job = late.to_dict()["job"]
    findings = job["verdict"]["findings"]
    (td620,) = [f for f in findings if f["rule_id"] == "TD620"]
    # the finding carries the job's prediction, framed on the job's step (plus its share of the step today)
    w, replay = td620["what_if"], job["straggler_what_if"]
    assert w["step_ms_before"] == pytest.approx(job["verdict"]["step_time_ns"] / 1e6, abs=1e-4)
    assert w["gain_ms"] == pytest.approx(replay["gain_ms"], abs=1e-4) and w["method"] == replay["method"]
    assert w["step_ms_before"] == pytest.approx(replay["step_ms_before"], rel=0.01)
    assert td620["impact_ms_per_step"] == pytest.approx(td620["what_if"]["gain_ms"])
    assert findings[0]["rule_id"] == "TD620"
    impacts = [f["impact_fraction"] for f in findings if f["impact_fraction"] is not None]
    assert impacts == sorted(impacts, reverse=True)


def test_reports_show_the_prediction_under_the_job_verdict(pair):
    from tracedoc.render import render_html, render_md
    from tracedoc.render.text import render_text

    _, late = pair["late"]
    w = late.to_dict()["job"]["straggler_what_if"]
    before, after = round(w["step_ms_before"]), round(w["step_ms_after"])
    text = render_text(late, width=200)
    assert text.index(f"if fixed: step {before} ms → ~{after} ms") < text.index("Ranks in the job")
    md = render_md(late)
    assert md.index("If fixed: **step") < md.index("## tracedoc verdict") and "job replay of" in md
    assert "job replay of" in render_html(late)


def test_job_without_a_straggler_has_no_straggler_what_if(pair):
    _, on_time = pair["on_time"]
    job = on_time.to_dict()["job"]
    assert job["straggler_ranks"] == []
    assert job["straggler_what_if"] is None
    assert not any(f["rule_id"] == "TD620" for f in job["verdict"]["findings"])


def test_lateness_at_a_later_collective_is_counted_once(tmp_path):
    """Rank 2 computes 5 ms longer before the second all-reduce of every step; the other ranks wait
    there. Predicted against the same job simulated without the extra compute."""
    late_steps = simulate({LATE_RANK: 5_000.0}, late_at=2)
    on_time_steps = simulate({}, late_at=2)
    job = analyze(write_job(tmp_path / "late2", late_steps), jobs=1).to_dict()["job"]
    assert job["straggler_ranks"] == [LATE_RANK]
    w = job["straggler_what_if"]
    measured_after = mean_step_ms(on_time_steps)
    # on time, rank 3 (2.6 ms) sets the second all-reduce's start: 5.0 - (2.6 - 2.45) ms saved a step
    assert mean_step_ms(late_steps) - measured_after == pytest.approx(4.85, abs=0.01)
    assert abs(w["step_ms_after"] - measured_after) <= 0.15 * measured_after


def test_saved_report_keeps_the_prediction(pair, tmp_path):
    from tracedoc.result import AnalysisResult

    _, late = pair["late"]
    doc = late.to_dict()
    back = AnalysisResult.from_dict(doc).to_dict()
    assert back["job"]["straggler_what_if"] == doc["job"]["straggler_what_if"]


# -- the replay's pieces, against hand-worked answers and a brute-force search ------------------------


def test_replay_over_groups_counts_each_delay_once():
    """Ranks 0-2, straggler 2. A (0,1,2): waits 3, 1, 0 -> 1 ms earlier (rank 1 was next to last).
    B (0,1 after A): waits 0, 2 -> min(0 + 1, 2 + 1) = 1. C (0 after B, 2 after A): rank 0 waits 4 for
    the straggler -> 4 + 1 = 5. D (0 after C, 1 after B): waits 0, 6 -> min(0 + 5, 6 + 1) = 5."""
    import numpy as np

    from tracedoc.job.whatif import _replay

    A, B, C, D, NONE = 0, 1, 2, 3, -1
    inst = np.array([A, A, A, B, B, C, C, D, D])
    rank = np.array([0, 1, 2, 0, 1, 0, 2, 0, 1])
    wait = np.array([3, 1, 0, 0, 2, 4, 0, 0, 6])
    prev = np.array([NONE, NONE, NONE, A, A, B, A, C, B])
    last = np.array([10, 20, 30, 40])
    assert _replay(inst, rank, wait, prev, last, 2, 4)[:4].tolist() == [1, 1, 5, 5]
    # one group in sequence (the pointer-doubling path): the delays add up along the chain
    inst = np.repeat(np.arange(4), 3)
    rank = np.tile(np.arange(3), 4)
    wait = np.array([3, 1, 0, 0, 2, 1, 5, 4, 0, 0, 0, 0])
    prev = np.repeat([NONE, 0, 1, 2], 3)
    assert _replay(inst, rank, wait, prev, last, 2, 4)[:4].tolist() == [1, 1, 5, 5]


@pytest.mark.parametrize("span", [10**6, 4 * 10**18])
def test_last_instance_begun_before_a_time(span):
    import numpy as np

    from tracedoc.job.whatif import _Began

    rng = np.random.default_rng(3)
    n = 200
    rank = rng.integers(0, 5, n)
    end = rng.integers(0, span, n)
    inst = np.arange(n)
    q_rank = rng.integers(0, 6, 300)  # rank 5 has no instance
    q_time = np.r_[rng.integers(0, span, 290), end[:10]]
    q_rank[290:] = rank[:10]
    began = _Began(rank, end, inst)
    for strict in (True, False):
        got = began.before(q_rank, q_time, strict)
        for r, tq, g in zip(q_rank, q_time, got):
            ok = (rank == r) & ((end < tq) if strict else (end <= tq))
            want = -1 if not ok.any() else inst[ok][np.argmax(end[ok])]
            assert g == want or (g >= 0 and end[g] == end[want] and rank[g] == r)


def test_diff_checks_the_straggler_prediction_against_the_job_without_the_lateness(pair):
    from tracedoc.api import diff
    from tracedoc.render.diff import render_diff_text

    _, late = pair["late"]
    _, on_time = pair["on_time"]
    d = diff(late, on_time)
    checks = [
        {k.replace("_ns", "_ms"): v / 1e6 if k.endswith("_ns") and v is not None else v for k, v in p.items()}
        for p in d.to_dict()["job_predictions"]
        if p["rule_id"] == "TD620"
    ]  # times as ms
    assert len(checks) == 1
    p = checks[0]
    job_b, job_a = late.to_dict()["job"], on_time.to_dict()["job"]
    # against the job's step on both sides (the job verdict's step), and the straggler is gone
    assert p["status"] == "gone"
    assert p["measured_before_ms"] == pytest.approx(job_b["metrics"]["job_step_time_p50_ns"] / 1e6)
    assert p["measured_after_ms"] == pytest.approx(job_a["metrics"]["job_step_time_p50_ns"] / 1e6)
    assert p["predicted_after_ms"] == pytest.approx(job_b["straggler_what_if"]["step_ms_after"], abs=1e-3)
    assert p["error_ms"] == pytest.approx(p["measured_after_ms"] - p["predicted_after_ms"])
    # the replay lands within 15% of the job simulated without the lateness (as above)
    assert abs(p["error_ms"]) <= 0.15 * p["measured_after_ms"]
    assert "job: straggler_bound fix predicted" in render_diff_text(d)
