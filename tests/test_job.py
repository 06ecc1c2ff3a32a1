"""Job view: collectives matched across ranks, waits, the straggler and its cause, bad directories.

Expected numbers are worked out by hand from the fixtures' parameters, or recomputed from the raw
JSON of the shared traces, never taken from tracedoc's own output.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from pathlib import Path

import pytest
from conftest import shared_traces
from trace_builder import TraceBuilder

from tracedoc.api import analyze

# -- a hand-built 4-rank GPU job with known waits --------------------------------------------------
# Per step (20 ms apart): rank r computes COMPUTE_US[r] then enters an all-reduce kernel. Rank 0
# starts every step 3 ms early (its ProfilerStep spans are the longest) and waits; rank 3 computes
# 4 ms longer and arrives last. The all-reduce ends TRANSFER_US after rank 3 arrives.
STEP_US, STEPS, TRANSFER_US = 20_000.0, 4, 2_000.0
EARLY_US = {0: 3_000.0, 1: 0.0, 2: 0.0, 3: 0.0}
COMPUTE_US = {0: 5_000.0, 1: 5_000.0, 2: 5_000.0, 3: 9_000.0}
NELEMS = 1 << 24  # float: 64 MiB


def arrival_us(rank: int, base: float) -> float:
    return base - EARLY_US[rank] + 100.0 + COMPUTE_US[rank]


def write_gpu_job(d: Path, shift_us: dict[int, float] | None = None, hosts: dict[int, str] | None = None) -> Path:
    d.mkdir(parents=True, exist_ok=True)
    for rank in range(4):
        b = TraceBuilder(rank=rank, world_size=4)
        if hosts:
            b.extra_meta["host_name"] = hosts[rank]
        sh = (shift_us or {}).get(rank, 0.0)
        for k in range(STEPS):
            base = 1_000_000.0 + k * STEP_US
            b.step(k + 1, base - EARLY_US[rank] + sh, base + 15_000.0 + sh)
            b.kernel("ampere_sgemm_128x64_tn", base - EARLY_US[rank] + 100.0 + sh, COMPUTE_US[rank], op="aten::mm")
            start = arrival_us(rank, base)
            b.nccl(start + sh, arrival_us(3, base) + TRANSFER_US - start, nelems=NELEMS)
        b.write(d / f"rank{rank}.pt.trace.json.gz")
    return d


@pytest.fixture(scope="module")
def gpu_job(tmp_path_factory):
    d = write_gpu_job(tmp_path_factory.mktemp("gpujob") / "run")
    return analyze(d, jobs=1)


def test_straggler_is_the_late_arriver_not_the_longest_step(gpu_job):
    job = gpu_job.to_dict()["job"]
    # the victim: rank 0 has the longest ProfilerStep spans and the most wait
    spans = {r.rank: max(s["end_ns"] - s["start_ns"] for s in r.per_step) for r in gpu_job.ranks}
    assert max(spans, key=spans.get) == 0
    assert job["straggler_ranks"] == [3]
    assert 0 not in job["straggler_ranks"]
    s = job["stragglers"][0]
    assert s["arrived_last_fraction"] == 1.0
    # each other rank waits (7 + 4 + 4) / 3 ms per step for rank 3
    waits_ms = {r: (arrival_us(3, 0) - arrival_us(r, 0)) / 1e3 for r in range(4)}
    assert waits_ms == {0: 7.0, 1: 4.0, 2: 4.0, 3: 0.0}
    assert s["wait_cost_ms_per_step"] == pytest.approx((7.0 + 4.0 + 4.0) / 3)
    assert s["cause"] == "compute"
    assert s["cause_ms_per_step"] == pytest.approx((COMPUTE_US[3] - COMPUTE_US[1]) / 1e3)
    table = {row["rank"]: row for row in job["ranks"]}  # the one rank table, in ns
    for r in range(4):
        assert table[r]["wait_ns_per_step"] == pytest.approx(waits_ms[r] * 1e6)
    assert [r for r in range(4) if table[r]["straggler"]] == [3]


def test_wait_transfer_split_and_bus_bandwidth(gpu_job):
    job = gpu_job.to_dict()["job"]
    assert job["collectives_matched"] == STEPS
    assert job["match_key"] == "group+type+size+aligned-ends"
    assert job["timing"] == "gpu"
    wait = sum((arrival_us(3, 0) - arrival_us(r, 0)) for r in range(4))
    total = sum((arrival_us(3, 0) + TRANSFER_US - arrival_us(r, 0)) for r in range(4))
    assert job["wait_fraction_of_comm"] == pytest.approx(wait / total)  # 15 / 23
    (row,) = job["collectives"]
    assert row["collective"] == "all_reduce" and row["count"] == STEPS
    assert row["transfer_p50_ms"] == pytest.approx(TRANSFER_US / 1e3)
    nbytes = NELEMS * 4
    assert row["bytes"] == nbytes
    assert row["busbw_p50_gbps"] == pytest.approx(nbytes / (TRANSFER_US * 1e3) * 2 * 3 / 4)
    # step times are completion intervals: 20 ms after the first step
    for row in job["ranks"]:
        assert row["step_time_p50_ns"] == pytest.approx(STEP_US * 1e3)
    assert "step_ms_by_rank" not in job and "rank_table" not in job  # one rank table, in ns


def test_job_verdict_is_straggler_bound_not_comm_bound(gpu_job):
    job = gpu_job.to_dict()["job"]
    labels = job["verdict"]["labels"]
    assert labels[0] == "straggler_bound"
    assert "comm_bound" not in labels
    finding = job["verdict"]["findings"][0]
    assert finding["rule_id"] == "TD620"
    assert "Rank 3" in finding["message"] and "5.0 ms per step" in finding["message"]
    assert any("Rank 3 computes longer" in f for f in finding["fixes"])
    # every rank sees 30% exposed communication, but the job says it is waiting: no comm_bound anywhere
    for v in gpu_job.verdicts:
        assert "comm_bound" not in v.labels


def test_clock_offsets_between_hosts_are_estimated_and_removed(tmp_path):
    d = write_gpu_job(tmp_path / "run", shift_us={2: 500.0, 3: 500.0}, hosts={0: "a", 1: "a", 2: "b", 3: "b"})
    job = analyze(d, jobs=1).to_dict()["job"]
    assert "b +500 us" in job["clock"]
    wait = sum((arrival_us(3, 0) - arrival_us(r, 0)) for r in range(4))
    total = sum((arrival_us(3, 0) + TRANSFER_US - arrival_us(r, 0)) for r in range(4))
    assert job["wait_fraction_of_comm"] == pytest.approx(wait / total)
    assert job["straggler_ranks"] == [3]


def test_one_host_needs_no_offsets(tmp_path):
    d = write_gpu_job(tmp_path / "run", hosts={r: "node1" for r in range(4)})
    job = analyze(d, jobs=1).to_dict()["job"]
    assert job["clock"].startswith("all ranks on host node1")


def test_balanced_job_names_no_straggler(tmp_path):
    saved = dict(COMPUTE_US)
    try:
        COMPUTE_US[3] = COMPUTE_US[1]
        EARLY_US[0], early = 0.0, EARLY_US[0]
        job = analyze(write_gpu_job(tmp_path / "run"), jobs=1).to_dict()["job"]
    finally:
        COMPUTE_US.update(saved)
        EARLY_US[0] = early
    assert job["straggler_ranks"] == []
    assert "straggler_bound" not in job["verdict"]["labels"]


def test_single_file_has_no_job_section():
    doc = analyze(shared_traces() / "kineto" / "dlrm_128rank_rank0.json.gz").to_dict()
    assert doc["job"] is None
    assert len(doc["ranks"]) == 1


# -- the shared DLRM pair: real matching ------------------------------------------------------------

_KERNEL_TYPES = (
    ("AllToAll", "all_to_all"),
    ("SendRecv", "all_to_all"),
    ("AllReduce", "all_reduce"),
    ("AllGather", "all_gather"),
    ("ReduceScatter", "reduce_scatter"),
)


def _raw_comm_kernels(path: Path) -> list[tuple[str, float]]:
    """(type, end in us) of every NCCL kernel in the raw JSON."""
    with gzip.open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "kernel"]
    out = []
    for e in events:
        if "nccl" in e["name"].lower():
            typ = next((t for key, t in _KERNEL_TYPES if key.lower() in e["name"].lower()), "other")
            out.append((typ, e["ts"] + e["dur"]))
    return out


def test_dlrm_pair_matches_the_collectives_that_end_together():
    """Two ranks of a 128-rank DLRM job whose collective sequences differ: only the calls whose NCCL
    kernels end together on both ranks (within 1 ms, where the nearest wrong one is over 10 ms off) are
    the same collective. Recomputed from the raw JSON by pairing kernels of one type by their ends."""
    paths = [shared_traces() / "kineto" / f"dlrm_128rank_rank{r}.json.gz" for r in (0, 1)]
    k0, k1 = _raw_comm_kernels(paths[0]), _raw_comm_kernels(paths[1])
    together = [(t, e) for t, e in k0 if any(t == t1 and abs(e - e1) < 1_000.0 for t1, e1 in k1)]
    nearest = sorted(min(abs(e - e1) for t1, e1 in k1 if t1 == t) for t, e in together)
    others = sorted(
        min((abs(e - e1) for t1, e1 in k1 if t1 == t), default=1e9) for t, e in k0 if (t, e) not in together
    )
    assert (len(together), len(k0), len(k1)) == (5, 10, 10)  # what the raw files give
    assert nearest[-1] < 500.0 and others[0] > 10_000.0  # right partners: < 0.5 ms; the rest: > 10 ms off
    with tempfile.TemporaryDirectory() as tmp:
        for p in paths:
            os.symlink(p, Path(tmp) / p.name)
        job = analyze(tmp, jobs=1).to_dict()["job"]
    assert job["collectives_matched"] == len(together)
    assert job["match_key"] == "group+type+size+aligned-ends"
    assert job["unmatched_calls"] == len(k0) + len(k1) - 2 * len(together)
    by_rank = {r["rank"]: r for r in job["alignment"]["ranks"]}
    assert {r: sum(v["unmatched"].values()) for r, v in by_rank.items()} == {0: 5, 1: 5}
    assert job["missing_ranks"] == list(range(2, 128))
    # with 126 ranks absent no straggler is named, and the report says why
    assert job["straggler_ranks"] == []
    if job["late_among_present"]:
        assert any("cannot be named" in i for i in job["issues"])
    assert 0 < job["wait_fraction_of_comm"] < 1


def test_single_dlrm_rank_gets_all_to_all_advice_not_ddp_buckets():
    result = analyze(shared_traces() / "kineto" / "dlrm_128rank_rank0.json.gz")
    (finding,) = [f for f in result.verdicts[0].findings if f.rule_id == "TD201"]
    text = " ".join(finding.fixes)
    assert "all-to-all" in text
    assert "bucket_cap_mb" not in text


# -- bad directories ---------------------------------------------------------------------------------


def _rank(d: Path, rank: int, world: int = 2, first_step: int = 1, name: str | None = None) -> None:
    b = TraceBuilder(rank=rank, world_size=world)
    for k in range(3):
        base = 1_000_000.0 + k * STEP_US
        b.step(first_step + k, base, base + 15_000.0)
        b.kernel("ampere_sgemm_128x64_tn", base + 100.0, 5_000.0, op="aten::mm")
        b.nccl(base + 5_200.0 + 300.0 * rank, 1_000.0)
    b.write(d / (name or f"rank{rank}.pt.trace.json.gz"))


def test_mixed_jobs_duplicates_and_bad_files_cost_only_their_ranks(tmp_path):
    _rank(tmp_path, 0)
    _rank(tmp_path, 1)
    _rank(tmp_path, 1, name="rank1-again.pt.trace.json.gz")
    _rank(tmp_path, 5, world=8)
    (tmp_path / "rank2.pt.trace.json.gz").write_bytes(b"")
    (tmp_path / "rank3.pt.trace.json.gz").write_bytes(b"\x1f\x8b\x08\x00garbage")
    result = analyze(tmp_path, jobs=1)
    job = result.to_dict()["job"]
    assert job["ranks_used"] == [0, 1]
    issues = " | ".join(job["issues"])
    assert "mixes jobs" in issues and "world size 2" in issues
    assert "rank 1 appears twice" in issues
    failed = {i["path"].rsplit("/", 1)[1] for i in result.to_dict()["inputs"] if i.get("error")}
    assert failed == {"rank2.pt.trace.json.gz", "rank3.pt.trace.json.gz"}
    assert 2 not in job["ranks_used"] and 3 not in job["ranks_used"]
    assert {e["rank"] for e in job["excluded"]} == {1, 5}
    assert job["collectives_matched"] == 3  # best effort: the two ranks that agree


def test_an_unreadable_member_rank_is_named_as_such_and_is_no_straggler(tmp_path):
    for rank in (0, 1, 2):
        _rank(tmp_path, rank, world=4)
    (tmp_path / "rank3.pt.trace.json.gz").write_bytes(b"")
    result = analyze(tmp_path, jobs=1)
    job = result.to_dict()["job"]
    assert job["ranks_used"] == [0, 1, 2] and 3 not in job["straggler_ranks"]
    assert {r["rank"] for r in job["ranks"]} == {0, 1, 2}
    assert all(r["wait_ns_per_step"] is not None for r in job["ranks"])
    assert list(result.failed) == [str(tmp_path / "rank3.pt.trace.json.gz")]
    assert any("1 member rank of the job's groups is in an unreadable file (3)" in i for i in job["issues"]), job[
        "issues"
    ]
    assert job["missing_ranks"] == [3]  # absent for matching: no straggler is named for the ranks present


def test_step_numbers_that_differ_are_aligned(tmp_path):
    """Two ranks record the same three steps at the same times, numbered from 1 on one and from 2 on
    the other (a profiler started a step later): the collectives still match, and the rank x step
    table uses the first rank's numbers for both."""
    _rank(tmp_path, 0, first_step=1)
    _rank(tmp_path, 1, first_step=2)
    job = analyze(tmp_path, jobs=1).to_dict()["job"]
    assert job["collectives_matched"] == 3
    shifts = {r["rank"]: r["step_number_shift"] for r in job["alignment"]["ranks"]}
    assert shifts == {0: 0, 1: -1}
    assert job["heatmap"]["steps"] == [1, 2, 3]
    assert not any("recorded different steps" in i for i in job["issues"])


def test_ranks_whose_windows_differ_are_aligned_and_the_rest_listed(tmp_path):
    """Rank 1's profiler opens one step after rank 0's and closes one step later, with the same step
    numbers for the same steps: the collectives of the two steps only one rank recorded are listed as
    outside the span both windows cover, and the offset found is one step."""
    _rank(tmp_path, 0, first_step=1)
    b = TraceBuilder(rank=1, world_size=2)
    for k in range(1, 4):  # steps 2-4
        base = 1_000_000.0 + k * STEP_US
        b.step(k + 1, base, base + 15_000.0)
        b.kernel("ampere_sgemm_128x64_tn", base + 100.0, 5_000.0, op="aten::mm")
        b.nccl(base + 5_200.0 + 300.0, 1_000.0 - 300.0)  # ends with rank 0's
    b.write(tmp_path / "rank1.pt.trace.json.gz")
    job = analyze(tmp_path, jobs=1).to_dict()["job"]
    assert job["collectives_matched"] == 2
    ranks = {r["rank"]: r for r in job["alignment"]["ranks"]}
    assert ranks[0]["unmatched"] == {"before_span": 1} and ranks[1]["unmatched"] == {"after_span": 1}
    (group,) = job["alignment"]["groups"]
    assert {r["rank"]: r["offset_steps"] for r in group["ranks"]} == {0: 0.0, 1: 1.0}
    assert any("ranks recorded different steps" in i for i in job["issues"])
    assert job["heatmap"]["steps"] == [2, 3]


def test_directory_with_no_readable_rank_is_one_clear_error(tmp_path):
    from tracedoc.errors import TraceError

    (tmp_path / "rank0.pt.trace.json.gz").write_bytes(b"")
    (tmp_path / "rank1.pt.trace.json.gz").write_bytes(b"")
    with pytest.raises(TraceError, match="no rank file could be read"):
        analyze(tmp_path, jobs=1)


# -- output ------------------------------------------------------------------------------------------


def test_text_report_puts_the_job_verdict_first(gpu_job):
    from tracedoc.render.text import render_text

    text = render_text(gpu_job, width=140)
    lines = text.splitlines()
    assert lines[0].startswith("tracedoc · job of 4 ranks")
    assert lines.index(next(x for x in lines if x.startswith("Verdict: straggler_bound"))) < 3
    assert text.index("Straggler: rank 3") < text.index("Ranks in the job")
    assert "Per-rank details: --rank N" in text and "Details for rank" not in text
    assert "Details for rank 0" in render_text(gpu_job.with_focus(0), width=140)  # what --rank 0 does


def test_quiet_text_is_the_job_verdict_line(gpu_job):
    from tracedoc.render.text import render_text

    text = render_text(gpu_job, quiet=True)
    assert text.count("\n") == 1 and text.startswith("Job verdict: straggler_bound")


def test_markdown_and_html_lead_with_the_job(gpu_job):
    from tracedoc.render import render_html, render_md

    md = render_md(gpu_job)
    assert md.lstrip().startswith("## tracedoc job verdict: `straggler_bound`")
    assert md.index("job verdict") < md.index("## tracedoc verdict")
    page = render_html(gpu_job)
    assert page.index('id="job"') < page.index('id="verdict"')
    assert "Step time (ms), rank x step" in page and "Wait in collectives (ms), rank x step" in page
    assert "rank 3 (straggler)" in page and "(median rank)" in page
    # the rank shown in detail is the straggler unless --rank says otherwise, its timeline beside the median rank's
    assert "details for rank 3" in page
    assert "rank 3 (straggler) · " in page and "rank 1 (median rank) · " in page


def test_cli_rank_option(tmp_path):
    import subprocess
    import sys

    d = write_gpu_job(tmp_path / "run")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root)}
    ok = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", str(d), "--rank", "2", "-j", "1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("tracedoc · job of 4 ranks") and "Details for rank 2" in ok.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", str(d), "--rank", "7", "-j", "1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=root,
        timeout=120,
    )
    assert bad.returncode == 2 and "rank 7 is not in" in bad.stderr and "Traceback" not in bad.stderr


def test_nsys_export_with_nccl_nvtx_ranges_gets_a_job_view(tmp_path):
    """Two processes of one nsys export; NCCL's own NVTX ranges (ncclAllReduce) hold the kernel launch."""
    from nsys_builder import NsysDb

    t0, ms = 1_000_000_000, 1_000_000
    db = NsysDb(tmp_path / "job.sqlite")
    db.session(t0, t0 + 100 * ms, 1_760_000_000_000_000_000)
    corr = 1
    for pid, late_ms in ((200, 0), (300, 6)):  # process 300 (rank 1) computes 6 ms longer every step
        db.process(pid, f"python-{pid}")
        for step in range(4):
            base = t0 + step * 20 * ms
            db.nvtx(pid, pid, base, base + 18 * ms, text=f"ProfilerStep#{step + 1}")
            db.runtime(pid, pid, base + 10_000, base + 20_000, corr, "cudaLaunchKernel_v7000")
            db.kernel(pid, base + 100_000, base + (4 + late_ms) * ms, corr, "ampere_sgemm_128x64_tn")
            corr += 1
            arrive = base + (4 + late_ms) * ms + 10_000
            db.nvtx(pid, pid, base + 50_000, base + 70_000, text="ncclAllReduce")
            db.runtime(pid, pid, base + 55_000, base + 60_000, corr, "cudaLaunchKernel_v7000")
            db.kernel(pid, arrive, base + 11 * ms, corr, "ncclDevKernel_AllReduce_Sum_f32_RING_LL", stream=20)
            corr += 1
    result = analyze(db.close())
    job = result.to_dict()["job"]
    assert job["ranks_used"] == [0, 1]
    assert job["collectives_matched"] == 4 and job["timing"] == "gpu"
    # two ranks, four steps: last every step has a 1/16 chance, but 6 ms late every step is steady
    assert job["straggler_ranks"] == [1]
    assert job["stragglers"][0]["cause"] == "compute"
    rows = {r["rank"]: r for r in job["ranks"]}
    assert rows[0]["wait_ns_per_step"] == pytest.approx(6e6)
    assert rows[1]["arrived_last_fraction"] == 1.0


def test_job_view_round_trips_through_json(gpu_job):
    from tracedoc.result import AnalysisResult

    d = json.loads(gpu_job.to_json())
    back = json.loads(AnalysisResult.from_dict(d).to_json())
    assert back["job"] == d["job"]
    assert back["job"]["straggler_ranks"] == [3]


def test_process_groups_and_sequence_numbers(tmp_path):
    """Newer torch: Process Group Name/Ranks and Seq on the NCCL kernels. Two pair groups inside one
    world group; rank 3 lost its third world all-reduce (a dropped event), which must be reported."""
    pairs = {0: ("1", [0, 1]), 1: ("1", [0, 1]), 2: ("2", [2, 3]), 3: ("2", [2, 3])}
    for rank in range(4):
        b = TraceBuilder(rank=rank, world_size=4)
        calls = [("0", [0, 1, 2, 3], seq) for seq in (1, 2, 3) if not (rank == 3 and seq == 3)]
        calls += [(pairs[rank][0], pairs[rank][1], seq) for seq in (1, 2)]
        t = 1_000_000.0
        for pg, members, seq in calls:
            b.kernel(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                t + 50.0 * rank,
                500.0,
                stream=20,
                op="record_param_comms",
                args={
                    "Collective name": "allreduce",
                    "In msg nelems": 1024,
                    "Out msg nelems": 1024,
                    "Group size": len(members),
                    "dtype": "Float",
                    "Process Group Name": pg,
                    "Process Group Ranks": members,
                    "Seq": seq,
                },
            )
            t += 1_000.0
        b.write(tmp_path / f"rank{rank}.pt.trace.json.gz")
    job = analyze(tmp_path, jobs=1).to_dict()["job"]
    assert job["match_key"] == "group+seq"
    assert job["match_keys_by_group"] == {"0": "group+seq", "1": "group+seq", "2": "group+seq"}
    assert job["collectives_matched"] == 2 + 2 + 2  # world seq 1-2, each pair group seq 1-2
    assert job["unmatched_calls"] == 3  # world seq 3 on ranks 0, 1 and 2
    (dis,) = job["disagreements"]
    assert dis["group"] == "0" and dis["ranks_without"] == [3]
    assert sorted(dis["calls_by_rank"]) == ["0", "1", "2"]
    assert job["missing_ranks"] == []


def test_match_key_helper_agrees_with_plain_python_on_random_rows():
    """The numpy grouping under collective matching: keys numbered by first appearance."""
    import numpy as np

    from tracedoc.job.match import _codes_by_appearance

    rng = np.random.default_rng(3)
    for _ in range(100):
        n = int(rng.integers(1, 50))
        a, b = rng.integers(-1, 3, n), rng.integers(0, 3, n)
        numbers: dict[tuple, int] = {}
        want = [numbers.setdefault(key, len(numbers)) for key in zip(a.tolist(), b.tolist())]
        assert _codes_by_appearance(a, b).tolist() == want


def test_disagreements_agree_with_plain_python_on_random_calls():
    """Calls of keys not matched on every member rank, summarised per (group, step, type, size): the
    distinct keys each rank called, ranks without any; the largest parts first (ties in order of
    appearance), at most MAX_DISAGREEMENTS."""
    import numpy as np

    from tracedoc.job.match import MAX_DISAGREEMENTS, Stacked, _disagreements

    rng = np.random.default_rng(11)
    for _ in range(200):
        n = int(rng.integers(1, 120))
        rank = rng.integers(0, 4, n)
        cols = {
            "group": rng.integers(0, 2, n),
            "step": rng.integers(-1, 3, n),
            "type": rng.integers(0, 2, n),
            "dtype": rng.integers(0, 2, n),
        }
        size = rng.integers(-1, 3, n) * 512
        codes = rng.integers(0, 30, n)
        ok_code = rng.random(30) < 0.3
        members = {"a": [0, 1, 2, 3], "b": [1, 2]}
        stacked = Stacked(
            rank=rank, cols=cols, groups=["a", "b"], types=["all_reduce", "broadcast"], dtypes=["Float", "Half"]
        )
        parts: dict[tuple, dict[int, set]] = {}
        first_row: dict[tuple, int] = {}
        for i in range(n):
            if ok_code[codes[i]]:
                continue
            part = (int(cols["group"][i]), int(cols["step"][i]), int(cols["type"][i]), int(size[i]))
            first_row.setdefault(part, i)
            parts.setdefault(part, {}).setdefault(int(rank[i]), set()).add(int(codes[i]))
        ranked = sorted(parts, key=lambda p: (-sum(len(k) for k in parts[p].values()), first_row[p]))
        want = []
        for part in ranked[:MAX_DISAGREEMENTS]:
            g, step, ctype, sz = part
            have = {r: len(k) for r, k in sorted(parts[part].items())}
            r0 = first_row[part]
            want.append(
                {
                    "group": stacked.groups[g],
                    "step": step if step >= 0 else None,
                    "collective": stacked.types[ctype],
                    "size": sz if sz >= 0 else None,
                    "dtype": stacked.dtypes[int(cols["dtype"][r0])],
                    "calls_by_rank": {str(r): k for r, k in have.items()},
                    "ranks_without": [r for r in members[stacked.groups[g]] if r not in have],
                }
            )
        assert _disagreements(stacked, np.flatnonzero(~ok_code[codes]), codes, members, size) == want


def test_a_rank_late_as_often_as_chance_allows_among_four_is_not_a_straggler():
    """Every rank is tested, so the chance bound is shared among them: last in 5 of 8 steps among 4
    ranks (p = 0.027 for one rank, about 0.1 that some rank of four does it) is not a straggler;
    last in 8 of 8 is, with high confidence."""
    from tracedoc.job.straggler import RankStats, find_stragglers

    def stats(late_steps: int) -> list[RankStats]:
        late = RankStats(
            rank=2,
            instances=8,
            arrived_last=late_steps,
            decided=8,
            wait_ns=0,
            lateness_ns=8_000_000,
            time_ns=80_000_000,
            steps=8,
            late_steps=late_steps,
            trials=8,
        )
        others = [
            RankStats(
                rank=r,
                instances=8,
                arrived_last=1,
                decided=8,
                wait_ns=16_000_000,
                lateness_ns=0,
                time_ns=80_000_000,
                steps=8,
                late_steps=1,
                trials=8,
            )
            for r in (0, 1, 3)
        ]
        return [late, *others]

    def cost(rank: int) -> float:
        return 0.2  # the late rank costs the others 20% of their step: significant

    assert find_stragglers(stats(5), 4, cost) == []
    (found,) = find_stragglers(stats(8), 4, cost)
    assert (found.rank, found.confidence) == (2, "high")


def test_confidence_follows_what_the_profile_can_show():
    """Three ranks (too few for a score of size: the count decides). Enough steps: the chance test over
    steps decides (high, or no one). Fewer: the test runs over collectives (medium when it passes, low
    over one step); too few collectives for any test, or a one-step profile: the rank last most often
    is named with low confidence, never no one."""
    from tracedoc.job.straggler import RankStats, find_stragglers

    def job(steps: int, decided: int, last: int, late_steps: int) -> list[RankStats]:
        s = RankStats(
            rank=1,
            instances=decided,
            arrived_last=last,
            decided=decided,
            wait_ns=0,
            lateness_ns=4_000_000,
            time_ns=40_000_000 * steps,
            steps=steps,
            late_steps=late_steps,
            trials=steps,
        )
        others = [
            RankStats(
                rank=r,
                instances=decided,
                arrived_last=(decided - last) // 2,
                decided=decided,
                wait_ns=8_000_000,
                lateness_ns=0,
                time_ns=40_000_000 * steps,
                steps=steps,
                late_steps=0,
                trials=steps,
            )
            for r in (0, 2)
        ]
        return [s, *others]

    def named(stats):
        return [(s.rank, s.confidence) for s in find_stragglers(stats, 3, lambda r: 0.1)]

    assert named(job(steps=6, decided=24, last=24, late_steps=6)) == [(1, "high")]  # 6 of 6: chance 0.14%
    assert named(job(steps=6, decided=24, last=10, late_steps=3)) == []  # 3 of 6 among 3 ranks: chance
    assert named(job(steps=2, decided=8, last=7, late_steps=1)) == [(1, "medium")]  # 7 of 8: chance 0.2%
    assert named(job(steps=1, decided=8, last=7, late_steps=1)) == [(1, "low")]  # ... but one step: at most low
    assert named(job(steps=1, decided=2, last=2, late_steps=1)) == [(1, "low")]  # (1/3)^2 = 11%: no test
    assert named(job(steps=1, decided=8, last=4, late_steps=1)) == [(1, "low")]  # one step: most often last
    assert named(job(steps=2, decided=8, last=4, late_steps=1)) == []  # two steps, 4 of 8: chance (8%)
    # the wait it costs must be significant at every level
    assert find_stragglers(job(steps=1, decided=8, last=7, late_steps=1), 3, lambda r: 0.01) == []


def test_api_cli_and_reports_show_the_same_rank(gpu_job, tmp_path, capsys):
    """One focus rule for every surface: on a 4-rank job whose straggler is rank 3, the API's focus, its
    repr and ``table()``, the JSON, and the Markdown, HTML and text reports all show rank 3; ``--rank 1``
    moves every one of them to rank 1."""
    from tracedoc.cli import main
    from tracedoc.render import render_html, render_md, render_text

    assert gpu_job.job.straggler_ranks == [3]
    straggler = next(r for r in gpu_job.ranks if r.rank == 3)
    assert gpu_job.focus is straggler and gpu_job.job.focus_rank == 3
    assert "(rank 3 shown)" in repr(gpu_job)
    assert gpu_job.table("top_kernels").equals(straggler.table("top_kernels"))
    assert "details for rank 3 of 4 ranks" in render_md(gpu_job)
    assert "Details above are for rank 3 (the straggler; --rank N shows another)" in render_html(gpu_job)
    run = Path(gpu_job.paths[0]).parent
    assert main(["analyze", str(run), "-j", "1", "-f", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["job"]["focus_rank"] == 3
    assert main(["analyze", str(run), "-j", "1", "-f", "md"]) == 0
    assert "details for rank 3 of 4 ranks" in capsys.readouterr().out
    # --rank N everywhere
    one = gpu_job.with_focus(1)
    assert one.focus.rank == 1 and "(rank 1 shown)" in repr(one) and "details for rank 1 of 4" in render_md(one)
    assert "Details for rank 1" in render_text(one, width=140)
    assert main(["analyze", str(run), "-j", "1", "--rank", "1", "-f", "json", "-o", str(tmp_path / "r.json")]) == 0
    saved = json.loads((tmp_path / "r.json").read_text())["job"]
    assert saved["focus_rank"] == 1 and saved["focus_asked"] is True
    assert main(["analyze", str(run), "-j", "1", "--rank", "1"]) == 0
    assert "Details for rank 1" in capsys.readouterr().out
