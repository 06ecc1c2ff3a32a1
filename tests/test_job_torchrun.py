"""A real 4-process DDP job (CPU torch, gloo) captured with ``tracedoc run``: one rank's input pipeline
sleeps every step; the directory analysis names that rank as the straggler with an input-pipeline
cause and labels the job straggler_bound. The same job without the sleep names no input-pipeline
straggler.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

from test_capture import ROOT, TRAIN, _env, _traces  # noqa: E402

from machine_lock import one_job_at_a_time  # noqa: E402
from torchjobs import capture_run, run_job, torchrun  # noqa: E402

from tracedoc.api import analyze  # noqa: E402

SLOW_RANK = 2
# Every rank ends each step with this wait, standing for device work the host waits on. A few ms of
# CPU work per step and rank stretch by half or more when four ranks share two busy cores, and
# differently in two separate runs; this wait is wall time that does not, so it holds the step time
# of both runs near the same floor and the balanced run stays comparable with the prediction.
STEP_WAIT_S = 0.03


def _start(out: Path, *extra: str, report: bool = True) -> subprocess.Popen:
    cmd = [
        sys.executable,
        *torchrun(4),
        *capture_run(out, 8),
        "--dist-timeout",
        "30",
        "--no-monitor",
        *([] if report else ["--no-report"]),
        "--",
        str(TRAIN),
        "--steps",
        "11",
        "--ddp",
        "--step-sleep",
        str(STEP_WAIT_S),
        *extra,
    ]
    return subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finished(proc: subprocess.Popen) -> subprocess.CompletedProcess:
    out, _ = proc.communicate(timeout=150)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, "")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """Slow input on one rank, then the same job balanced. One job at a time: two 4-rank jobs at once
    on a 2-core machine made a balanced rank late at every collective by CPU contention alone."""
    base = tmp_path_factory.mktemp("ddp")
    # 8 samples x 3 ms: rank 2 spends ~24 ms per step in DataLoader.__next__, the others ~0.5 ms
    starts = {
        "slow": lambda: _start(base / "slow", "--sleep", "0.003", "--sleep-rank", str(SLOW_RANK)),
        "balanced": lambda: _start(base / "balanced", report=False),
    }
    groups = {}
    with one_job_at_a_time():  # and no other test session's job beside them (tests/machine_lock.py)
        for name, start in starts.items():
            proc = run_job(lambda start=start: _finished(start()), base / name)  # again if torch aborted a rank
            out = proc.stdout
            assert proc.returncode == 0, out
            traces = _traces(base / name)
            assert len(traces) == 4, (traces, out)
            (groups[name],) = {t.parent for t in traces}
    return groups


def test_torchrun_rank_with_slow_input_is_the_straggler(runs):
    group = runs["slow"]
    result = analyze(group, jobs=2)
    job = result.to_dict()["job"]
    assert job["ranks_used"] == [0, 1, 2, 3]
    assert job["timing"] == "cpu"
    assert job["collectives_matched"] >= 4  # one DDP all-reduce per profiled step
    assert job["straggler_ranks"] == [SLOW_RANK]
    s = job["stragglers"][0]
    assert s["cause"] == "dataloader"
    assert s["cause_ms_per_step"] > 15.0  # most of the 24 ms of sleep per step
    assert job["verdict"]["labels"][0] == "straggler_bound"
    assert "Rank 2" in job["verdict"]["findings"][0]["message"]
    assert job["wait_fraction_of_comm"] > 0.5
    # the report written by tracedoc run for the directory carries the same job view
    report = json.loads(Path(str(group) + ".report.json").read_text())
    assert report["job"]["straggler_ranks"] == [SLOW_RANK]


def test_torchrun_straggler_prediction_is_near_the_balanced_job(runs):
    """The job's step with rank 2's input sleep removed, predicted from the slow run, against the step
    time measured on the balanced run of the same job (captured right after it on the same cores)."""
    slow = analyze(runs["slow"], jobs=2).to_dict()["job"]
    balanced = analyze(runs["balanced"], jobs=2).to_dict()["job"]
    w = slow["straggler_what_if"]
    (finding,) = [f for f in slow["verdict"]["findings"] if f["rule_id"] == "TD620"]
    # the finding carries the replay's gain, framed on the job's step (the report's one step time)
    assert finding["what_if"]["gain_ms"] == pytest.approx(w["gain_ms"], abs=1e-3) and "replay" in w["method"]
    assert finding["what_if"]["step_ms_before"] == pytest.approx(slow["verdict"]["step_time_ns"] / 1e6, abs=1e-3)
    measured = sorted(r["step_time_p50_ns"] / 1e6 for r in balanced["ranks"])[2]
    print(
        f"torchrun: before {w['step_ms_before']:.1f} ms, predicted {w['step_ms_after']:.1f} ms, "
        f"balanced run measured {measured:.1f} ms (p50), gain {w['gain_ms']:.1f} ms"
    )
    # the sleep is ~24 ms a step: most of it comes off
    assert 0.5 * 24 < w["gain_ms"] < w["step_ms_before"]
    # Each step is the 30 ms wait plus the ranks' CPU work, which on two shared cores stretches by up to
    # half between two runs; the prediction may differ by that share of the work as well as by 15%.
    # (Eight runs with busy loops on both cores: measured 40-50 ms, predicted within 1.5-8 ms of it.)
    work = max(measured - 1000 * STEP_WAIT_S, 0.0)
    assert abs(w["step_ms_after"] - measured) <= 0.15 * measured + 0.5 * work, (w, measured)


def test_torchrun_balanced_job_has_no_input_pipeline_straggler(runs):
    """Without the sleep, no rank is held back by its input pipeline. Four ranks share two cores, so the
    scheduler alone can make one rank steadily late at the collectives (about one capture in seven
    here); the analysis may name such a rank, but never with the input pipeline as its cause, and never
    at a cost near the planted 24 ms a step."""
    job = analyze(runs["balanced"], jobs=2).to_dict()["job"]
    assert job["collectives_matched"] >= 4
    assert all(r["dataloader_ns_per_step"] < 5e6 for r in job["ranks"]), job["ranks"]
    for s in job["stragglers"]:
        assert s["cause"] != "dataloader" and s["wait_cost_ms_per_step"] < 12.0, s
    # The job's verdict never blames a straggler's input pipeline. A rank's own DataLoader time may still
    # cross a rule's share of the step when four ranks share two busy cores (seen once: 5% of the step
    # against a 5% bar); such a finding is allowed only far below the planted 24 ms a step.
    for f in job["verdict"]["findings"]:
        if "DataLoader" in f["message"] or "input pipeline" in f["message"]:
            assert f.get("impact_ms_per_step") is not None and f["impact_ms_per_step"] < 12.0, f
