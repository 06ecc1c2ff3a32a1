"""The straggler by what it costs: named by the size of its lateness (the share of the others' wait it
explains, how far it stands above the other ranks' lateness), with a confidence that combines size
and the number of steps; interleaved collectives of several sizes matched without artefacts.

Jobs are built by ``job_builder``: FSDP-like steps of alternating all_gather and reduce_scatter of
several sizes, a slow rank late at the first collective of every step by a known share of the step.
8-rank jobs go through full traces and ``analyze``; 64 and 512 ranks through the compact per-rank
tables the job step consumes (``build_job``), as a worker would return them.
"""

from __future__ import annotations

import pytest
from job_builder import balanced_step_us, job_tables, write_job

from tracedoc.api import analyze
from tracedoc.job import build_job
from tracedoc.job.straggler import RankStats, find_stragglers

CASES = {"none": {}, "one slow, 5%": {3: 0.05}, "one slow, 30%": {3: 0.30}, "two slow": {2: 0.15, 5: 0.15}}
# a one-step profile is at most low; 3 steps of a rank late in every one pass the chance test over steps
# among 8 or more ranks ((1/8)^3 = 0.2% < 0.05 / 8); 20 steps do
ONE_SLOW_CONFIDENCE = {1: "low", 3: "high", 20: "high"}


def named(view) -> list[tuple[int, str]]:
    return [(s["rank"], s["confidence"]) for s in view.stragglers]


def check(view, case: str, steps: int) -> None:
    slow = CASES[case]
    got = named(view)
    if not slow:  # a balanced job names no one (above low: here, no one at all)
        assert got == [], got
        return
    assert got, f"{case}: no straggler named"
    assert {r for r, _ in got} <= set(slow), got  # never a rank on time
    if len(slow) == 1:
        assert got == [(next(iter(slow)), ONE_SLOW_CONFIDENCE[steps])], got
        s = view.stragglers[0]
        # its lateness is the planted share of the balanced step; the others wait about as long, a share
        # share / (1 + share) of their step (a window's first and last steps are cut short: within 30%)
        share = next(iter(slow.values()))
        assert s["lateness_ms_per_step"] == pytest.approx(share * balanced_step_us() / 1e3, rel=0.05)
        assert s["wait_cost_fraction"] == pytest.approx(share / (1 + share), rel=0.3)
    elif steps == 1:  # one step: one of the two was last at the collective that holds the wait
        assert len(got) == 1 and got[0][1] == "low", got
    elif steps == 20:  # they take turns at arriving last: both are named
        assert sorted(r for r, _ in got) == sorted(slow) and got[0][1] == "high", got


@pytest.mark.parametrize("n_ranks", [64, 512])
@pytest.mark.parametrize("steps", [1, 3, 20])
def test_built_jobs_of_many_ranks_name_the_slow_ranks_by_size(n_ranks, steps):
    for case, slow in CASES.items():
        check(build_job(job_tables(n_ranks, steps, slow, seed=n_ranks + steps)), case, steps)


@pytest.fixture(scope="module")
def eight(tmp_path_factory):
    """8-rank jobs through full traces: windows that open at different times (ranks 4-7 hold more of the
    pre-window backlog), the CPU ahead of the GPU by 10-24 ms, calls launched as the profiler stopped."""
    base = tmp_path_factory.mktemp("eight")
    early = {r: (0.0 if r < 4 else 6_000.0 + 1_500.0 * (r - 4)) for r in range(8)}
    ahead = {r: 10_000.0 + 2_000.0 * r for r in range(8)}
    out = {}
    for steps in (1, 3, 20):
        for case, slow in CASES.items():
            if steps == 20 and case in ("one slow, 5%", "none"):
                continue  # the 20-step pair below covers them
            d = write_job(
                base / f"{steps}-{case}".replace(" ", "_").replace(",", "").replace("%", ""),
                8,
                steps,
                slow,
                seed=steps,
                open_early_us=early,
                runahead_us=ahead,
            )
            out[(steps, case)] = analyze(d, jobs=1)
    return out


@pytest.mark.parametrize("steps", [1, 3, 20])
def test_eight_rank_traces_name_the_slow_ranks_through_the_whole_pipeline(eight, steps):
    for case in CASES:
        if (steps, case) in eight:
            check(eight[(steps, case)].job, case, steps)


def test_the_straggler_finding_and_reports_carry_the_size(eight):
    result = eight[(3, "one slow, 30%")]
    job = result.to_dict()["job"]
    s = job["stragglers"][0]
    assert s["named_by"] == "size"
    # 0.3 / 1.3 of the step (the last step of a window, cut short by the profiler's stop, is shorter)
    late = int(s["confidence_why"].split("late by ")[1].split("%")[0])
    assert 20 <= late <= 30 and late / 100 == pytest.approx(s["lateness_fraction"], abs=0.01)
    assert "spreads above the other ranks' lateness" in s["confidence_why"]
    assert s["explains_wait_fraction"] > 0.9  # the others wait at the first collective of each step only
    (finding,) = [f for f in job["verdict"]["findings"] if f["rule_id"] == "TD620"]
    assert "Rank 3" in finding["message"] and "confidence high" in finding["message"]


# -- interleaved collectives of several sizes ------------------------------------------------------------


@pytest.mark.parametrize("seq", [False, True])
def test_interleaved_collectives_of_several_sizes_leave_no_unexplained_calls(tmp_path, seq):
    """reduce_scatter and all_gather alternating, two layers of one size, windows that differ, the CPU
    ahead of the GPU by a different amount on every rank: every call is matched, or lies before the
    time every window covers (the pre-window backlog of the ranks whose window opened early), or after
    it (its kernel ran after the profiler stopped). None is refused or missing. Ordering a backlog
    kernel by when it ran, among calls ordered by launch, put it after calls issued after it; timing a
    call with no kernel by its launch read the CPU's run-ahead as lateness."""
    early = {r: (0.0 if r < 4 else 6_000.0 + 1_500.0 * (r - 4)) for r in range(8)}
    ahead = {r: 10_000.0 + 2_000.0 * r for r in range(8)}
    d = write_job(tmp_path / "job", 8, 3, {1: 0.27}, seed=3, seq=seq, open_early_us=early, runahead_us=ahead)
    job = analyze(d, jobs=1).to_dict()["job"]
    assert job["match_key"] == ("group+seq" if seq else "group+type+size+aligned-ends")
    for r in job["alignment"]["ranks"]:
        assert set(r["unmatched"]) <= {"before_span", "after_span"}, r
        if r["rank"] < 4:  # opened last: no backlog before the time every window covers
            assert r["unmatched"].get("before_span", 0) <= 4, r
    assert not [i for i in job["issues"] if "refused" in i or "missing on some member" in i], job["issues"]
    assert job["disagreements"] == []
    # 12 collectives a step: the steps every rank holds whole are matched, on the GPU clock
    assert job["collectives_matched"] >= 2 * 12 and job["timing"] == "gpu"
    assert [(s["rank"], s["confidence"]) for s in job["stragglers"]] == [(1, "high")]
    late = {r["rank"]: r["lateness_ns_per_step"] / 1e6 for r in job["ranks"]}
    assert max(v for r, v in late.items() if r != 1) < 0.5  # no run-ahead read as lateness


# -- the confidence, from the rank statistics --------------------------------------------------------------


def _issue_job(late_steps: int, arrived_last: int, steps: int = 3) -> list[RankStats]:
    """8 ranks, 42.7 ms steps: rank 1 late by 11.6 ms a step (27%), waits 0.15 ms; the others wait
    9.5-12 ms and are late by at most 1.1 ms; rank 1 last at 30% of 40 collectives."""
    step = 42_700_000 * steps
    out = [
        RankStats(
            rank=1,
            instances=40,
            arrived_last=arrived_last,
            decided=40,
            wait_ns=150_000 * steps,
            lateness_ns=11_600_000 * steps,
            time_ns=step,
            steps=steps,
            late_steps=late_steps,
            trials=steps,
            explains=0.8,
        )
    ]
    for i, r in enumerate((0, 2, 3, 4, 5, 6, 7)):
        out.append(
            RankStats(
                rank=r,
                instances=40,
                arrived_last=(40 - arrived_last) // 7,
                decided=40,
                wait_ns=(9_500_000 + 350_000 * i) * steps,
                lateness_ns=(150_000 * i) * steps,
                time_ns=step,
                steps=steps,
                late_steps=0,
                trials=steps,
                explains=0.2 / 7,
            )
        )
    return out


def _names(stats, cost=0.25):
    return [(s.rank, s.confidence, s.by_size) for s in find_stragglers(stats, 8, lambda r: cost)]


def test_the_eight_rank_table_names_its_slow_rank_by_size():
    """The counting test alone (late in 1 of 3 steps; last at 30% of the collectives) cannot tell
    rank 1 from chance among 8; its size names it, medium over 3 steps, low over one."""
    assert _names(_issue_job(late_steps=1, arrived_last=12)) == [(1, "medium", True)]
    assert _names(_issue_job(late_steps=1, arrived_last=4, steps=1)) == [(1, "low", True)]
    # late in every step: the chance test over steps passes as well
    assert _names(_issue_job(late_steps=3, arrived_last=12)) == [(1, "high", True)]
    # its cost must still be significant
    assert _names(_issue_job(late_steps=1, arrived_last=12), cost=0.01) == []


def test_a_rank_that_explains_little_of_the_wait_is_not_named_by_size():
    stats = _issue_job(late_steps=1, arrived_last=12)
    stats[0].explains = 0.1  # late, but the others' wait is spent elsewhere
    assert _names(stats) == []


def test_a_rank_barely_later_than_the_others_does_not_stand_out():
    """Lateness of 2% of the step over ranks in lockstep: below the size a straggler must have."""
    stats = _issue_job(late_steps=1, arrived_last=12)
    stats[0].lateness_ns = int(0.02 * stats[0].time_ns)
    assert [x for x in _names(stats) if x[2]] == []


def test_a_few_percent_late_in_steps_that_show_no_repeat_is_not_named():
    """A real 4-rank CPU job with no slow rank, four ranks sharing two cores: one rank stood out by size
    (3% of the step late, 72% of the others' wait) but was late in only 5 of 8 steps, which a balanced
    job gives by chance. The steps could show a repeat and show none: a small lateness is not named.
    A large one in the same steps still is (the count alone cannot decide: medium)."""
    step = 40_000_000 * 8

    def job(late_share: float) -> list[RankStats]:
        out = [
            RankStats(
                rank=3,
                instances=64,
                arrived_last=30,
                decided=64,
                wait_ns=100_000 * 8,
                lateness_ns=int(late_share * step),
                time_ns=step,
                steps=8,
                late_steps=5,
                trials=8,
                explains=0.72,
            )
        ]
        for i, r in enumerate((0, 1, 2)):
            out.append(
                RankStats(
                    rank=r,
                    instances=64,
                    arrived_last=11,
                    decided=64,
                    wait_ns=(1_000_000 + 50_000 * i) * 8,
                    lateness_ns=(20_000 * i) * 8,
                    time_ns=step,
                    steps=8,
                    late_steps=1,
                    trials=8,
                    explains=0.09,
                )
            )
        return out

    assert [(s.rank, s.confidence) for s in find_stragglers(job(0.03), 4, lambda r: 0.05)] == []
    assert [(s.rank, s.confidence) for s in find_stragglers(job(0.12), 4, lambda r: 0.05)] == [(3, "medium")]
