"""A log is one run's story: LLaMA-Factory's trainer_log.jsonl, a resume, two writers, Lightning version_N
segments joined in step order, periodic patterns ranked by the time they lose, and a loss that rises
after a resume. The fixtures (``run_fixtures``) plant the values; the tests compare what is reported."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import run_fixtures as R

from tracedoc.api import analyze_log
from tracedoc.logs.periodic import find_patterns
from tracedoc.logs.reader import read_log
from tracedoc.logs.runs import recognise
from tracedoc.logs.series import parse_duration


def write(tmp_path, text: str, name: str = "trainer_log.jsonl"):
    path = tmp_path / name
    path.write_text(text)
    return path


def kinds(result, kind):
    return [a for a in result.anomalies if a["kind"] == kind]


# ---- LLaMA-Factory -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, seconds",
    [
        ("0:00:09", 9),
        ("1:02:03", 3723),
        ("2 days, 1:00:00", 176400),
        ("1 day, 0:00:01.5", 86401.5),
        (12.5, 12.5),
        ("soon", None),
    ],
)
def test_elapsed_time_strings(text, seconds):
    assert parse_duration(text) == seconds


def test_llamafactory_steps_step_times_and_throughput(tmp_path):
    rows = R.llamafactory_rows(total=3000, log_every=10, step_s=0.9)
    result = analyze_log(write(tmp_path, R.jsonl(rows)))
    series = result.series
    assert series.format == "LLaMA-Factory trainer_log.jsonl"
    assert series.step.tolist() == [r["current_steps"] for r in rows]  # the logged steps, not 0..N
    assert series.fields_seen["step"] == "current_steps" and series.fields_seen["elapsed_s"] == "elapsed_time"
    assert series.units["throughput"] == "tokens/s"
    assert series.columns["throughput"][5] == pytest.approx(float(rows[5]["throughput"]))
    assert series.columns["total_tokens"][-1] == rows[-1]["total_tokens"]
    # elapsed_time is whole seconds over 10 steps: the step time is 0.9 s give or take one tick / 10 steps
    assert result.metrics["step_time_p50_s"] == pytest.approx(0.9, abs=0.1)
    assert not [w for w in result.warnings if "no step field" in w]
    assert result.anomalies == [] and result.labels == []


def test_llamafactory_without_measured_throughput_uses_step_times(tmp_path):
    result = analyze_log(write(tmp_path, R.llamafactory(throughput=False)))
    assert "throughput" not in result.series.columns  # "0.00" is not measured, not a zero throughput
    assert not [w for w in result.warnings if "zero or negative" in w]
    assert result.metrics["throughput_unit"] == "steps/s"
    assert not any("no throughput or step-time field" in n for n in result.notes)
    assert result.anomalies == []  # a 1-second clock's rounding is not a dip


def test_llamafactory_output_directory(tmp_path):
    (tmp_path / "trainer_log.jsonl").write_text(R.llamafactory(total=500))
    (tmp_path / "trainer_state.json").write_text(json.dumps({"log_history": [{"step": 1, "loss": 2.0}]}))
    assert read_log(tmp_path).format == "LLaMA-Factory trainer_log.jsonl"


# ---- resumes and second writers ---------------------------------------------------------------------
def test_resume_is_one_line_and_no_anomaly_at_the_join(tmp_path):
    result = analyze_log(write(tmp_path, R.llamafactory_resumed(total=6000, stop=5220, resume=5010)))
    assert result.story == [
        "resumed from a checkpoint: the step counter goes back from 5220 to 5020, 210 steps "
        "trained again; elapsed time starts again; the later values are analysed"
    ]
    assert result.series.step.tolist() == list(range(10, 6001, 10))
    assert result.series.resume_steps == [5020]
    assert result.anomalies == []  # no lr_jump, no stall from the elapsed-time reset
    st = result.series.columns["step_time_s"]
    assert np.nanmax(st) < 1.2  # no step time across the join
    assert result.metrics["lr_jump_count"] == 0


def test_before_the_resume_was_recognised(tmp_path):
    """What the base reading did with the same log: record numbers as steps and an lr_jump at the join."""
    result = analyze_log(write(tmp_path, R.llamafactory_resumed()))
    assert kinds(result, "lr_jump") == [] and not kinds(result, "throughput_dip")


def test_two_writers(tmp_path):
    result = analyze_log(write(tmp_path, R.llamafactory_two_writers(total=3000)))
    (line,) = result.story
    assert line.startswith("two writers: every step logged twice") and "300 lines are analysed" in line
    assert result.series.step.tolist() == list(range(10, 3001, 10))
    assert result.anomalies == []
    assert result.metrics["step_time_p50_s"] == pytest.approx(0.9, abs=0.1)  # one writer's clock


def test_a_restart_from_scratch_is_not_two_writers():
    step = np.r_[np.arange(1, 101), np.arange(1, 101)]
    story = recognise(step, {"loss": np.ones(200, dtype=bool)})
    assert story.keep.all() and story.segment.tolist() == [0] * 100 + [1] * 100
    assert story.lines[0].startswith("restarted from the beginning")


def test_rows_of_different_kinds_at_one_step_are_not_writers():
    step = np.repeat(np.arange(10, 200, 10), 2)  # a train row and an eval row at every step
    train = np.tile([True, False], step.size // 2)
    story = recognise(step, {"loss": train, "eval_loss": ~train})
    assert story.keep.all() and story.lines == []


# ---- Lightning segments and the rising trend ----------------------------------------------------------
def test_lightning_versions_join_in_step_order_and_the_rise_after_the_resume(tmp_path):
    paths = R.lightning_segments(tmp_path / "lightning_logs")
    by_dir = analyze_log(tmp_path / "lightning_logs")
    by_files = analyze_log([str(paths[1]), str(paths[0])])  # any order: joined by their steps
    for result in (by_dir, by_files):
        assert result.story[0].startswith("2 segments of one run joined in step order: version_0/metrics.csv")
        assert "goes back from 1199 to 1049" in result.story[1]
        assert [s.path for s in result.segments] == [str(p) for p in paths]
        steps = result.series.step
        assert np.all(np.diff(steps) > 0) and steps[0] == 49 and steps[-1] == 1799
        (reg,) = kinds(result, "loss_regression")
        assert reg["after_resume_step"] == 1049 and reg["rule"] == "TD608"
        assert reg["eval_loss_from"] < reg["eval_loss_to"] and reg["field"] == "training loss"
        assert "rose from each window to the next" in reg["criterion"]
        assert not kinds(result, "loss_spike") and not kinds(result, "lr_jump")
        assert "TD608" in {f.rule_id for f in result.findings}


def test_overfitting_is_a_note(tmp_path):
    rows = []
    for e in range(8):
        for k in range(10):
            step = e * 10 + k
            rows.append({"step": step, "epoch": e + k / 10, "loss": 3.0 - 0.1 * step / 10})
        rows.append({"step": e * 10 + 9, "epoch": e + 0.9, "eval_loss": 3.0 - 0.05 * e if e < 4 else 2.8 + 0.02 * e})
    result = analyze_log(write(tmp_path, R.jsonl(rows), "o.jsonl"))
    assert not kinds(result, "loss_regression")
    assert any("overfitting" in n and "validation loss rose" in n for n in result.notes)


def test_a_falling_loss_has_no_trend(tmp_path):
    rows = R.llamafactory_rows(total=3000)
    result = analyze_log(write(tmp_path, R.jsonl(rows)))
    assert result.metrics["loss_regression"] is False


# ---- periodic patterns ------------------------------------------------------------------------------
def test_the_costly_pattern_wins_and_its_steps_are_not_dips(tmp_path):
    result = analyze_log(write(tmp_path, R.nanogpt_two_patterns(), "train.log"))
    m = result.metrics
    assert m["periodic_stall_period_text"] == "189-190" and m["periodic_stall_period_steps"] in (189, 190)
    assert m["periodic_stall_slowdown"] == pytest.approx(2.4, abs=0.1)
    assert m["periodic_stall_lost_fraction"] == pytest.approx(0.014, abs=0.003)
    assert m["periodic_stall_cause"] is None and m["periodic_pattern_count"] == 1
    stalls = kinds(result, "periodic_stall")
    assert [a["start_step"] for a in stalls] == R.shard_switch_steps()
    assert not kinds(result, "throughput_dip")  # neither the shard switches nor the post-eval steps
    (cheap,) = [n for n in result.notes if n.startswith("also a slow step every 125 steps after each evaluation")]
    assert "not reported as a stall, nor as dips" in cheap
    (f,) = [f for f in result.findings if f.rule_id == "TD612"]
    assert "every 189-190 steps" in f.message and "2.4x the median step" in f.message
    ev = result.analysis.evidence["periodic_stalls"]
    assert [(e["period_steps"], e["reported"], e["cause"]) for e in ev] == [
        (m["periodic_stall_period_steps"], True, None),
        (125, False, "evaluation"),
    ]


def test_patterns_ranked_by_time_lost_not_by_count():
    cheap = np.arange(100, 5000, 100)  # 49 stalls costing 1 each
    costly = np.arange(150, 5000, 333)  # 15 stalls costing 20 each
    starts = np.r_[cheap, costly]
    lost = np.r_[np.ones(cheap.size), np.full(costly.size, 20.0)]
    order = np.argsort(starts)
    pats = find_patterns(starts[order], lost[order], 1, 5000, 5000)
    assert [p.period for p in pats] == [333, 100]
    assert pats[0].lost == pytest.approx(300.0) and pats[1].lost == pytest.approx(49.0)


def test_random_slow_steps_make_no_pattern():
    rng = np.random.default_rng(3)
    starts = np.sort(rng.choice(np.arange(50, 5000), 40, replace=False))
    assert find_patterns(starts, np.ones(40), 1, 5000, 5000) == []


# ---- the command line ----------------------------------------------------------------------------------
def test_cli_joins_files_and_prints_the_story(tmp_path):
    paths = R.lightning_segments(tmp_path)
    p = subprocess.run(
        [sys.executable, "-m", "tracedoc", "logs", str(paths[0]), str(paths[1])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "run: 2 segments of one run joined in step order" in p.stdout
    assert "run: resumed from a checkpoint (version_1/metrics.csv after version_0/metrics.csv)" in p.stdout
