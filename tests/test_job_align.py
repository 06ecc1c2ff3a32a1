"""The job view on jobs whose ranks' windows differ: alignment by collective ends, waits as unions of
intervals, clocks on one base, victims' verdicts, files that are not one job, the merged timeline.

Every fixture is a hand-built job whose waits, offsets and ends follow from its parameters; the
expected numbers are worked out here from those parameters, never read from tracedoc's output.
"""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from trace_builder import TraceBuilder

from tracedoc.api import analyze, rank_from_name

STEP_US = 20_000.0
BASE_US = 1_000_000.0
NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _lone_nccl(b: TraceBuilder, start: float, dur: float, nelems: int) -> None:
    """A collective kernel with no launch record: work launched before the profiler opened."""
    b.events.append(
        {
            "ph": "X",
            "cat": "kernel",
            "name": NCCL,
            "pid": 0,
            "tid": 20,
            "ts": start,
            "dur": dur,
            "args": {
                "device": 0,
                "context": 1,
                "stream": 20,
                "Collective name": "allreduce",
                "In msg nelems": nelems,
                "Out msg nelems": nelems,
                "Group size": 2,
                "dtype": "Float",
            },
        }
    )


# -- a window that opens a step later, and work launched before a window opened ----------------------
# Two ranks, two same-size all-reduces per step. Rank 1's window covers steps 1-4 and starts with two
# all-reduce kernels of the step before (launched before its profiler opened); rank 0's covers steps
# 2-4. Rank 1 arrives LATE_US after rank 0 at every collective; both end together.
LATE_US, TRANSFER_US, NELEMS = 3_000.0, 1_000.0, 1 << 20


def _late_window_job(d: Path) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for rank, first in ((0, 2), (1, 1)):
        b = TraceBuilder(rank=rank, world_size=2)
        if rank == 1:
            for j in range(2):  # the backlog: the previous step's two all-reduces, ending before step 1
                arrive = BASE_US - 8_000.0 + j * 3_000.0
                _lone_nccl(b, arrive, 2_000.0, NELEMS)
        for k in range(first, 5):
            base = BASE_US + (k - 1) * STEP_US
            b.step(k, base, base + 18_000.0)
            for j in range(2):
                last = base + 6_000.0 + j * 5_000.0
                arrive = last - (0.0 if rank == 1 else LATE_US)
                b.kernel("ampere_sgemm_128x64_tn", arrive - 2_500.0, 2_000.0, op="aten::mm")
                b.nccl(arrive, last + TRANSFER_US - arrive, nelems=NELEMS, launch_at=base + 100.0 + j * 50.0)
        b.write(d / f"rank{rank}.pt.trace.json.gz")
    return d


def test_a_window_opened_later_and_a_backlog_are_aligned_by_ends(tmp_path):
    job = analyze(_late_window_job(tmp_path / "job"), jobs=1).to_dict()["job"]
    assert job["match_key"] == "group+type+size+aligned-ends"
    assert job["collectives_matched"] == 3 * 2  # steps 2-4, two all-reduces each
    ranks = {r["rank"]: r for r in job["alignment"]["ranks"]}
    # rank 1's step 1 and its two backlog kernels lie before rank 0's window opened
    assert ranks[1]["unmatched"] == {"before_span": 4} and ranks[0]["unmatched"] == {}
    (group,) = job["alignment"]["groups"]
    assert group["reference_rank"] == 1  # the rank with the most calls
    assert {r["rank"]: r["offset_calls"] for r in group["ranks"]} == {0: 4, 1: 0}
    assert group["calls_per_step"] == 2.0
    assert job["alignment"]["end_skew_p50_us"] == 0.0  # the pairs end together exactly
    # rank 0 waits LATE_US at each of its two collectives a step; rank 1 is the late one
    rows = {r["rank"]: r for r in job["ranks"]}
    assert rows[0]["wait_ns_per_step"] / 1e6 == pytest.approx(2 * LATE_US / 1e3)
    assert rows[1]["lateness_ns_per_step"] / 1e6 == pytest.approx(LATE_US / 1e3)  # late by half the gap: median of 2
    assert rows[1]["arrived_last_fraction"] == 1.0


# -- overlapping collectives ----------------------------------------------------------------------------
# Per step two all-reduces on two streams overlap on rank 0: it arrives at 2 ms and 3 ms into the step,
# rank 1 at 10 ms and 10.5 ms; both leave at 12 ms. Rank 0 waits in [2, 10] and [3, 10.5]: 8.5 ms of
# time, which a sum over the collectives would count as 15.5 ms.
def _overlap_job(d: Path, steps: int = 4) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    arrive = {0: (2_000.0, 3_000.0), 1: (10_000.0, 10_500.0)}
    for rank in (0, 1):
        b = TraceBuilder(rank=rank, world_size=2)
        for k in range(steps):
            base = BASE_US + k * STEP_US
            b.step(k + 1, base, base + 19_000.0)
            for j, stream in enumerate((20, 21)):
                a = base + arrive[rank][j]
                b.nccl(a, base + 12_000.0 - a, nelems=NELEMS * (j + 1), stream=stream, launch_at=base + 50.0 * (j + 1))
        b.write(d / f"rank{rank}.pt.trace.json.gz")
    return d


def test_overlapping_collectives_are_waited_for_once(tmp_path):
    job = analyze(_overlap_job(tmp_path / "job"), jobs=1).to_dict()["job"]
    assert job["collectives_matched"] == 4 * 2
    rows = {r["rank"]: r for r in job["ranks"]}
    assert rows[0]["wait_ns_per_step"] / 1e6 == pytest.approx(8.5)
    assert rows[0]["wait_ns_per_step"] / 1e6 <= rows[0]["matched_step_p50_ns"] / 1e6
    assert rows[0]["comm_wait_fraction"] == pytest.approx(8.5 / 10.0)  # of [2, 12] ms
    # late against the median arrival (of two: halfway): [6, 10] and [6.75, 10.5], 4.5 ms of time
    assert rows[1]["lateness_ns_per_step"] / 1e6 == pytest.approx(4.5)
    s = job["stragglers"][0]
    assert s["rank"] == 1 and 0 <= s["wait_cost_fraction"] <= 1
    assert s["wait_cost_ms_per_step"] == pytest.approx(8.5)  # the only other rank's wait
    for k, v in job["metrics"].items():
        if k.endswith("fraction") and v is not None:
            assert 0 <= v <= 1, (k, v)


# -- clocks on one base ---------------------------------------------------------------------------------
def test_traces_on_different_time_bases_are_read_on_one_clock(tmp_path):
    """Two hosts with monotonic clocks an hour apart: each trace's baseTimeNanoseconds says so (its
    times are relative to it); reading both on the Unix clock matches the collectives and measures
    the waits as if the hosts shared a clock."""
    d = tmp_path / "job"
    d.mkdir()
    hour_ns, origin_ns = 3_600 * 10**9, 1_700_000_000 * 10**9
    for rank in (0, 1):
        # rank 1's trace time 0 is an hour before rank 0's: the same moment reads an hour later on it
        b = TraceBuilder(rank=rank, world_size=2, base_time_ns=origin_ns - (hour_ns if rank else 0))
        b.extra_meta["hostname"] = f"node{rank}"
        for k in range(4):
            base = origin_ns / 1000 + BASE_US + k * STEP_US  # Unix time, us
            b.step(k + 1, base, base + 19_000.0)
            a = base + (5_000.0 if rank == 0 else 9_000.0)
            b.nccl(a, base + 10_000.0 - a, nelems=NELEMS, launch_at=base + 100.0)
        b.write(d / f"rank{rank}.pt.trace.json.gz")
    job = analyze(d, jobs=1).to_dict()["job"]
    assert job["collectives_matched"] == 4
    assert "time origins" in job["clock"]
    rows = {r["rank"]: r for r in job["ranks"]}
    assert rows[0]["wait_ns_per_step"] / 1e6 == pytest.approx(4.0)
    assert job["straggler_ranks"] == [1]


# -- one step --------------------------------------------------------------------------------------------
def test_a_one_step_profile_names_its_likely_straggler_and_says_why_it_is_not_sure(tmp_path):
    """One profiled step with four collectives, rank 2 last at all four among three ranks: chance
    (1/3)^4 = 1.2% passes the test over collectives (0.05 / 3 ranks), but one step cannot show that it
    repeats (collectives within a step are not independent): low confidence."""
    d = tmp_path / "job"
    d.mkdir()
    for rank in range(3):
        b = TraceBuilder(rank=rank, world_size=3)
        b.step(1, BASE_US, BASE_US + 19_000.0)
        for j in range(4):
            last = BASE_US + 4_000.0 * (j + 1)
            a = last - (0.0 if rank == 2 else 1_500.0 + 100.0 * rank)
            b.kernel("ampere_sgemm_128x64_tn", a - 1_000.0, 900.0, op="aten::mm")
            b.nccl(a, last + 300.0 - a, nelems=NELEMS << j, launch_at=BASE_US + 100.0 + 10.0 * j)
        b.write(d / f"rank{rank}.pt.trace.json.gz")
    result = analyze(d, jobs=1)
    job = result.to_dict()["job"]
    (s,) = job["stragglers"]
    assert (s["rank"], s["confidence"]) == (2, "low")
    assert "last at 4 of 4 collectives" in s["confidence_why"] and "1 step" in s["confidence_why"]
    (finding,) = [f for f in job["verdict"]["findings"] if f["rule_id"] == "TD620"]
    assert finding["confidence"] == "low" and "confidence low" in finding["message"]
    assert "confidence low: last at 4 of 4" in result.to_text()


# -- a victim rank's verdict ----------------------------------------------------------------------------
def test_a_busy_rank_that_waits_for_a_straggler_is_compute_bound_with_an_exposed_comm_finding(tmp_path):
    """Rank 0 computes 14.6 ms of a 20 ms step, then waits 3 ms in its all-reduce for rank 1 and
    transfers 0.9 ms: 93% busy, 20% exposed communication, 77% of it waiting. It is compute-bound,
    and TD204 says its exposed communication is waiting for rank 1 (TD201 stays silent)."""
    d = tmp_path / "job"
    d.mkdir()
    compute = {0: 14_600.0, 1: 17_600.0}
    for rank in (0, 1):
        b = TraceBuilder(rank=rank, world_size=2)
        for k in range(6):
            base = BASE_US + k * STEP_US
            b.step(k + 1, base, base + STEP_US - 50.0)
            third = compute[rank] / 3
            for i in range(3):  # three back-to-back bf16 Tensor Core GEMMs
                b.kernel(
                    "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn",
                    base + 10.0 + i * third,
                    third,
                    op="aten::mm",
                    launch_at=base + 1.0 + i,
                )
            a = base + 10.0 + compute[rank] + 5.0
            b.nccl(a, base + 10.0 + 17_600.0 + 5.0 + 900.0 - a, nelems=NELEMS, launch_at=base + 6.0)
            # then the GPU idles 1.5 ms until the next step: 18.5 of 20 ms busy
        b.write(d / f"rank{rank}.pt.trace.json.gz")
    result = analyze(d, jobs=1)
    rank0 = next(r for r in result.ranks if r.rank == 0)
    m = rank0.metrics
    assert m["gpu_busy_fraction"] == pytest.approx(0.93, abs=0.02)
    assert m["exposed_comm_fraction"] == pytest.approx(0.195, abs=0.02)
    assert m["rank_comm_wait_fraction"] == pytest.approx(3_000.0 / 3_900.0, abs=0.01)
    rules = {f.rule_id for f in rank0.verdict.findings}
    assert "compute_bound" in rank0.verdict.labels
    assert "TD204" in rules and "TD201" not in rules
    (td204,) = [f for f in rank0.verdict.findings if f.rule_id == "TD204"]
    assert any("Rank 1 is the job's straggler" in x for x in td204.fixes)
    assert result.to_dict()["job"]["straggler_ranks"] == [1]


# -- not one job -----------------------------------------------------------------------------------------
def test_unrelated_traces_are_not_a_job(tmp_path):
    """Two single-GPU traces of different models (no distributedInfo, no collectives): each is analysed
    on its own, with no job verdict, and the report says why."""
    for name, kernel in (("model_a.json", "ampere_sgemm_128x64_tn"), ("model_b.json", "volta_h884gemm_64x64")):
        b = TraceBuilder(rank=None, world_size=None)
        for k in range(3):
            base = BASE_US + k * 10_000.0
            b.step(k + 1, base, base + 9_000.0)
            b.kernel(kernel, base + 100.0, 7_000.0, op="aten::mm")
        b.write(tmp_path / name)
    result = analyze(tmp_path, jobs=1)
    job = result.to_dict()["job"]
    assert "not one job" in job["not_a_job"] and job["verdict"] is None
    assert len(result.ranks) == 2 and all(r.verdict is not None for r in result.ranks)
    text = result.to_text()
    assert text.startswith("tracedoc · 2 trace files, not one job") and "job of" not in text
    assert "not one job" in result.to_markdown()


def test_a_rank_is_never_read_from_a_timestamp_in_a_file_name():
    assert rank_from_name("nw0_worker0.1623143089861.pt.trace.json") == 0
    assert rank_from_name("host_4242.1623143089861.pt.trace.json") is None
    assert rank_from_name("rank3.1795706416352321083.pt.trace.json.gz") == 3
    assert rank_from_name("worker_12.json.gz") == 12
    assert rank_from_name("7.pt.trace.json") == 7


# -- the merged timeline ---------------------------------------------------------------------------------
def _events(path: Path) -> list[dict]:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)["traceEvents"]


def check_merged(events: list[dict], ranks: list[int], matched: int) -> None:
    """One process per rank, named and sorted by rank; every flow arrow of tracedoc's runs between the
    collective tracks of two ranks; one arrow per member other than the last arriver."""
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
    assert sorted(procs.values()) == [f"rank {r}" for r in ranks]
    assert len({e["pid"] for e in events if e.get("ph") == "X"}) == len(ranks)
    ours = [e for e in events if e.get("cat") == "tracedoc.collective"]
    starts = {e["id"]: e for e in ours if e["ph"] == "s"}
    ends = {e["id"]: e for e in ours if e["ph"] == "f"}
    assert starts and set(starts) == set(ends)
    assert all(starts[i]["pid"] != ends[i]["pid"] for i in starts)
    assert len(starts) == matched * (len(ranks) - 1)
    slices = defaultdict(list)
    for e in ours:
        if e["ph"] == "X":
            slices[e["pid"]].append((e["ts"], e["ts"] + e["dur"]))
    for fid in starts:  # each end of an arrow lies inside a slice of its track, where it binds
        for e in (starts[fid], ends[fid]):
            assert any(a <= e["ts"] <= b for a, b in slices[e["pid"]]), e


def test_perfetto_on_a_directory_merges_the_ranks_with_linked_collectives(tmp_path):
    from tracedoc.render.perfetto import write_perfetto

    d = _late_window_job(tmp_path / "job")
    result = analyze(d, jobs=1)
    out = write_perfetto(result, str(tmp_path / "job.perfetto.json.gz"))
    assert Path(out).read_bytes()[:2] == b"\x1f\x8b"
    events = _events(Path(out))
    check_merged(events, [0, 1], result.job.collectives_matched)
    # every original event is there, once, on its rank's process
    originals = sum(len(_events(p)) for p in sorted(d.iterdir()))
    mine = [e for e in events if e.get("cat") != "tracedoc.collective" and e.get("ph") != "M"]
    assert len(mine) == originals - sum(1 for p in d.iterdir() for e in _events(p) if e.get("ph") == "M")
    waits = [e for e in events if e.get("name", "").startswith("wait · ")]
    assert len(waits) == 6 and all(e["args"]["last_rank"] == 1 for e in waits)
    assert Counter(e["cname"] for e in waits) == {"bad": 6}
    late = [e for e in events if e.get("name", "").startswith("late · ")]
    assert late and {e["pid"] for e in late} == {
        next(
            p
            for p, n in (
                (e["pid"], e["args"]["name"]) for e in events if e.get("ph") == "M" and e["name"] == "process_name"
            )
            if n == "rank 1"
        )
    }


def _host_starved_job(d: Path) -> Path:
    """Rank 1 spends 8 ms of every 20 ms step in CPU work before it launches its kernels; its GPU idles
    meanwhile (busy about 12% of the window, idle about 80% of it in host-late gaps of milliseconds)."""
    d.mkdir()
    for rank in (0, 1):
        b = TraceBuilder(rank=rank, world_size=2)
        for k in range(8):
            base = BASE_US + k * STEP_US
            b.step(k + 1, base, base + STEP_US - 100.0)
            host = 8_000.0 if rank == 1 else 0.0
            if host:
                b.cpu_op("aten::index", base + 20.0, base + 20.0 + host)
            t = base + 40.0 + host
            for i in range(2):
                b.kernel(
                    "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn",
                    t + 20.0 + i * 700.0,
                    650.0,
                    op="aten::mm",
                    launch_at=t + i * 5.0,
                )
            a = t + 1_500.0
            last = base + 40.0 + 8_000.0 + 1_500.0
            b.nccl(a, last + 1_000.0 - a, nelems=NELEMS, launch_at=t + 12.0)
        b.write(d / f"rank{rank}.pt.trace.json.gz")
    return d


def test_a_straggler_whose_gpu_waits_for_its_host_is_host_launch_starvation(tmp_path):
    """Rank 1's cause is host work, and the host starves its GPU: the report says host launch starvation."""
    result = analyze(_host_starved_job(tmp_path / "job"), jobs=1)
    job = result.to_dict()["job"]
    (s,) = job["stragglers"]
    assert s["rank"] == 1 and s["cause"] == "host_launch"
    assert s["cause_text"].startswith("host launch starvation")
    rank1 = next(r for r in result.ranks if r.rank == 1)
    assert rank1.metrics["gpu_busy_fraction"] < 0.5
    (finding,) = [f for f in job["verdict"]["findings"] if f["rule_id"] == "TD620"]
    assert any("waits for its host to launch work" in x for x in finding["fixes"])


@pytest.mark.parametrize(
    "param,starved",
    [
        (None, True),
        ("TD101.busy_threshold=0.1", False),
        ("TD101.busy_threshold=0.2", True),
        ("TD104.host_idle_threshold=0.9", False),
        ("host-late.host_idle_threshold=0.5", True),
    ],
)
def test_param_moves_the_bars_of_a_straggler_starved_by_its_host(param, starved, tmp_path, capsys):
    """Host launch starvation is TD101's busy threshold and TD104's host-late threshold: ``--param`` moves
    the straggler's cause with them. Rank 1's GPU is busy about 12% of the window, about 80% idle in
    host-late gaps: starved under the defaults (50%, 10%), at a busy bar of 20% or a host-late bar of 50%;
    not at a busy bar of 10% (it is busier) nor at a host-late bar of 90% (it idles less)."""
    from tracedoc.cli import main

    out = tmp_path / "r.json"
    argv = ["analyze", str(_host_starved_job(tmp_path / "job")), "-j", "1", "--no-progress", "-o", str(out)]
    assert main(argv + (["--param", param] if param else [])) == 0, capsys.readouterr().err
    (s,) = json.loads(out.read_text())["job"]["stragglers"]
    assert s["rank"] == 1
    assert (s["cause"] == "host_launch") is starved, s["cause"]
    assert s["cause_text"].startswith("host launch starvation") is starved
    if not starved:
        assert s["cause"] == "host"  # the lead-in category it spends its lateness in, no longer called starvation
