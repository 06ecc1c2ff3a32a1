"""The job view on real jobs: two 3-rank DDP jobs recorded on an H100 (gloo, the ranks sharing one GPU),
whose ranks opened their profilers after different numbers of steps (truth.json beside them: the
planted straggler and profiler_wait_steps_by_rank), and real CPU DDP jobs run here with torchrun
(several buckets per step, profilers opened at different steps and numbering their steps from their
own start, one-step profiles).

Expected values come from how the jobs were made (truth.json, the options given to the job), never
from tracedoc's output; the bounds (no wait above its step, fractions in [0, 1]) from docs/job.md.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import shared_traces
from machine_lock import one_job_at_a_time
from torchjobs import run_job, torchrun
from test_job_align import check_merged

from tracedoc.api import analyze
from tracedoc.checks import check_job

ROOT = Path(__file__).resolve().parents[1]
JOB_SCRIPT = Path(__file__).resolve().parent / "capture_scripts" / "ddp_job.py"


def _truth(name: str) -> dict:
    return json.loads((shared_traces() / "h100" / "truth.json").read_text())[name]


def assert_bounded(result) -> None:
    """docs/job.md (definitions): no wait, lateness or cost per step above the step; every fraction in [0, 1];
    and the job view's own checks find nothing to repair."""
    view = result.job
    job = result.to_dict()["job"]
    for row in job["ranks"]:
        step = row["matched_step_p50_ns"]
        for k in ("wait_ns_per_step", "lateness_ns_per_step"):
            assert row[k] is None or 0 <= row[k] <= step, (row["rank"], k, row[k], step)
        for k in ("wait_fraction", "lateness_fraction", "comm_wait_fraction", "arrived_last_fraction"):
            assert row[k] is None or 0 <= row[k] <= 1, (row["rank"], k, row[k])
    for k, v in job["metrics"].items():
        if k.endswith("fraction") and v is not None:
            assert 0 <= v <= 1, (k, v)
    for s in job["stragglers"]:
        assert s["wait_cost_ms_per_step"] * 1e6 <= job["metrics"]["job_step_time_p50_ns"]
    assert check_job(view) == []


def window_offsets(job: dict) -> dict[int, float]:
    (group,) = job["alignment"]["groups"]
    return {r["rank"]: r["offset_steps"] for r in group["ranks"]}


def relative(steps: list[int]) -> dict[int, float]:
    """profiler_wait_steps_by_rank as steps after the earliest window."""
    return {r: float(w - min(steps)) for r, w in enumerate(steps)}


# -- the H100 jobs ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def slow0():
    return analyze(shared_traces() / "h100" / "job3_slow0_shifted", jobs=2)


@pytest.fixture(scope="module")
def balanced():
    return analyze(shared_traces() / "h100" / "job3_balanced_shifted", jobs=2)


def test_h100_planted_straggler_is_named_with_its_input_pipeline_cause(slow0):
    truth = _truth("job3_slow0_shifted")
    job = slow0.to_dict()["job"]
    assert job["straggler_ranks"][:1] == [truth["straggler_rank"]]
    s = job["stragglers"][0]
    assert s["confidence"] in ("high", "medium") and s["cause"] == "dataloader"
    # its loader spends 16 ms of CPU per batch (truth.json's note): most of that is the cause
    assert s["cause_ms_per_step"] > 10.0
    assert job["verdict"]["labels"][:2].count("straggler_bound") == 1
    assert_bounded(slow0)


def test_h100_windows_that_differ_are_found(slow0, balanced):
    for result, name in ((slow0, "job3_slow0_shifted"), (balanced, "job3_balanced_shifted")):
        job = result.to_dict()["job"]
        assert window_offsets(job) == relative(_truth(name)["profiler_wait_steps_by_rank"]), name
        # the collectives of the steps only some windows hold are listed, not matched a step apart
        outside = sum(
            r["unmatched"].get("before_span", 0) + r["unmatched"].get("after_span", 0)
            for r in job["alignment"]["ranks"]
        )
        assert outside == job["unmatched_calls"] > 0
        assert job["alignment"]["end_skew_p50_us"] < 1_000.0  # the pairs end together (gloo: 100s of us)


def test_h100_step_is_the_unprofiled_step_and_the_what_if_lands_near_the_balanced_job(slow0, balanced):
    truth = _truth("job3_slow0_shifted")
    step_ms = slow0.to_dict()["job"]["metrics"]["job_step_time_p50_ns"] / 1e6
    unprofiled = sorted(truth["step_ms_unprofiled_by_rank"].values())[1]
    assert step_ms == pytest.approx(unprofiled, rel=0.05)
    w = slow0.to_dict()["job"]["straggler_what_if"]
    assert w["step_ms_before"] == pytest.approx(step_ms, rel=1e-3)
    # the same model with equal loaders runs at 20 ms a step (the balanced job, profiled): the
    # prediction with rank 0 on time lands between it and the slow job's step
    balanced_ms = balanced.to_dict()["job"]["metrics"]["job_step_time_p50_ns"] / 1e6
    assert balanced_ms * 0.8 < w["step_ms_after"] < step_ms * 0.8


def test_h100_balanced_job_names_no_straggler_above_low(balanced):
    job = balanced.to_dict()["job"]
    assert [s for s in job["stragglers"] if s["confidence"] != "low"] == []
    assert "straggler_bound" not in job["verdict"]["labels"]
    assert_bounded(balanced)


def test_h100_merged_timeline(slow0, tmp_path):
    from tracedoc.render.perfetto import write_perfetto

    out = Path(write_perfetto(slow0, str(tmp_path / "job.json")))
    events = json.loads(out.read_bytes())["traceEvents"]
    check_merged(events, [0, 1, 2], slow0.job.collectives_matched)


def test_dlrm_pair_is_bounded():
    with_links = shared_traces() / "kineto"
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for r in (0, 1):
            os.symlink(with_links / f"dlrm_128rank_rank{r}.json.gz", Path(tmp) / f"dlrm_128rank_rank{r}.json.gz")
        result = analyze(tmp, jobs=1)
    assert_bounded(result)


# -- CPU DDP jobs run here ------------------------------------------------------------------------------------

SLOW_SLEEP_S = 0.004  # per sample, 4 samples a batch: ~16 ms of input wait per step on the slow rank
# One profiled step has no other step to outvote a scheduling hiccup of three ranks on two cores (up to
# ~20 ms measured): the one-step job's slow rank waits twice as long.
ONE_STEP_SLEEP_S = 0.008


def _run_job(out: Path, *args: str) -> Path:
    from test_capture import _env

    def start() -> subprocess.CompletedProcess:  # a fresh port each time
        cmd = [
            sys.executable,
            *torchrun(3),
            str(JOB_SCRIPT),
            "--out",
            str(out),
            "--bucket-mb",
            "0.05",
            *args,
        ]
        return subprocess.run(cmd, cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=240)

    proc = run_job(start, out)  # once more if torch aborted a rank (tests/torchjobs.py)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    files = sorted(out.glob("rank*.pt.trace.json.gz"))
    assert len(files) == 3, (files, proc.stderr[-2000:])
    return out


@pytest.fixture(scope="module")
def cpu_jobs(tmp_path_factory):
    """Three jobs, one at a time (two at once on a 2-core machine make any rank late by contention):
    ``shifted``: rank 0's input is slow; the ranks profile 5 steps after 1, 2 and 3 unprofiled steps,
    each numbering its steps from its own start; ``one_step``: one profiled step, rank 1's input slow;
    ``balanced``: equal inputs, windows after 2, 1 and 1 steps."""
    pytest.importorskip("torch")
    base = tmp_path_factory.mktemp("cpujobs")
    with one_job_at_a_time():  # and no other test session's job beside them (tests/machine_lock.py)
        return _cpu_jobs(base)


def _cpu_jobs(base: Path) -> dict[str, Path]:
    return {
        "shifted": _run_job(
            base / "shifted",
            "--wait-steps",
            "1,2,3",
            "--late-start",
            "--active",
            "5",
            "--sleep-rank",
            "0",
            "--sleep",
            str(SLOW_SLEEP_S),
        ),
        "one_step": _run_job(
            base / "one_step",
            "--wait-steps",
            "1",
            "--active",
            "1",
            "--sleep-rank",
            "1",
            "--sleep",
            str(ONE_STEP_SLEEP_S),
        ),
        "balanced": _run_job(base / "balanced", "--wait-steps", "2,1,1", "--active", "4"),
    }


def _traces(d: Path) -> list[dict]:
    return [json.loads(gzip.decompress(p.read_bytes())) for p in sorted(d.glob("rank*.pt.trace.json.gz"))]


def test_cpu_job_several_buckets_per_step(cpu_jobs):
    """The jobs' DDP runs several all-reduces per step (small buckets): counted from the raw JSON."""
    for t in _traces(cpu_jobs["shifted"]):
        steps = sorted(e["ts"] for e in t["traceEvents"] if e.get("name", "").startswith("ProfilerStep#"))
        calls = [
            e["ts"]
            for e in t["traceEvents"]
            if e.get("name") == "gloo:all_reduce" and e.get("cat") != "gpu_user_annotation"
        ]
        in_second = [x for x in calls if steps[1] <= x < steps[2]]
        assert len(in_second) >= 2, len(in_second)


def test_cpu_job_whose_windows_and_step_numbers_differ(cpu_jobs):
    result = analyze(cpu_jobs["shifted"], jobs=2)
    job = result.to_dict()["job"]
    # each rank opened its profiler one step after the previous one and numbered from its own start
    assert window_offsets(job) == {0: 0.0, 1: 1.0, 2: 2.0}
    shifts = {r["rank"]: r["step_number_shift"] for r in job["alignment"]["ranks"]}
    assert shifts == {0: 0, 1: 1, 2: 2}
    assert job["heatmap"]["steps"] == [3, 4, 5]  # the steps every window holds, in rank 0's numbers
    assert job["straggler_ranks"][:1] == [0]
    s = job["stragglers"][0]
    assert s["cause"] == "dataloader" and s["confidence"] in ("high", "medium")
    assert_bounded(result)


def test_cpu_job_one_step_profile_names_its_likely_straggler(cpu_jobs):
    result = analyze(cpu_jobs["one_step"], jobs=2)
    job = result.to_dict()["job"]
    assert job["straggler_ranks"][:1] == [1]
    s = job["stragglers"][0]
    assert s["confidence"] in ("low", "medium") and "1 step" in s["confidence_why"]
    assert "last at" in s["confidence_why"]
    assert_bounded(result)


def test_cpu_job_balanced_windows_found_and_no_input_pipeline_straggler(cpu_jobs):
    """Equal inputs: the windows' offsets are found; three ranks share two cores, so scheduling alone
    may make a rank late, but never with the input pipeline as its cause."""
    result = analyze(cpu_jobs["balanced"], jobs=2)
    job = result.to_dict()["job"]
    assert window_offsets(job) == {0: 1.0, 1: 0.0, 2: 0.0}
    for s in job["stragglers"]:
        assert s["cause"] != "dataloader", s
    assert_bounded(result)


def test_cpu_job_merged_timeline_from_the_cli(cpu_jobs, tmp_path):
    html, out = tmp_path / "job.html", tmp_path / "job.perfetto.json.gz"
    env_root = {"PYTHONPATH": str(ROOT)}
    import os

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tracedoc",
            "analyze",
            str(cpu_jobs["shifted"]),
            "-f",
            "html",
            "-o",
            str(html),
            "--perfetto",
            str(out),
            "-j",
            "2",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **env_root},
        cwd=ROOT,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "merged timeline" in proc.stderr
    events = json.loads(gzip.decompress(out.read_bytes()))["traceEvents"]
    result = analyze(cpu_jobs["shifted"], jobs=2)
    check_merged(events, [0, 1, 2], result.job.collectives_matched)
    assert f'href="./{out.name}"' in html.read_text()  # a relative path, never a URL scheme
