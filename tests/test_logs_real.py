"""Training logs written by real (tiny, CPU) training loops, in every format the tests can produce:
JSON Lines, plain CSV, a Lightning-style sparse metrics.csv, a Hugging Face-style trainer_state.json,
the step monitor's steps.jsonl (fed by the loop, and written by ``tracedoc run``). The values the
reader returns are checked against the loop's own records, not against tracedoc's output."""

from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from torchjobs import capture_run

torch = pytest.importorskip("torch")

from tracedoc.api import analyze_log  # noqa: E402
from tracedoc.capture.monitor import StepMonitor  # noqa: E402
from tracedoc.logs import read_log  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
STEPS = 120


def train(steps: int = STEPS, lr: float = 0.05, explode_at: int | None = None, seed: int = 0) -> list[dict]:
    """A small regression model trained with SGD + a warm-up/cosine schedule; one record per step.
    From ``explode_at`` on the learning rate is multiplied by 1e6, so the loss really overflows to inf/NaN."""
    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    warm = 10
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (s + 1) / warm if s < warm else 0.5 * (1 + math.cos(math.pi * (s - warm) / (steps - warm)))
    )
    x = torch.randn(256, 8)
    y = x @ torch.randn(8, 1) + 0.1 * torch.randn(256, 1)
    records = []
    for step in range(1, steps + 1):
        t0 = time.perf_counter()
        idx = torch.randint(0, 256, (32,))
        loss = torch.nn.functional.mse_loss(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
        if explode_at is not None and step == explode_at:
            for g in opt.param_groups:
                g["lr"] *= 1e6
        cur_lr = opt.param_groups[0]["lr"]
        opt.step()
        if explode_at is None:
            sched.step()
        dt = time.perf_counter() - t0
        records.append(
            {
                "step": step,
                "loss": loss.item(),
                "lr": cur_lr,
                "grad_norm": float(grad_norm),
                "samples_per_sec": 32 / dt,
                "step_time_s": dt,
            }
        )
    return records


@pytest.fixture(scope="module")
def run() -> list[dict]:
    return train()


def _check_columns(series, records, fields=("loss", "lr", "grad_norm")):
    assert series.step.tolist() == [r["step"] for r in records]
    for name in fields:
        want = np.array([r[name] for r in records])
        np.testing.assert_allclose(series.columns[name], want, rtol=1e-6)


def test_jsonl_from_a_training_loop(run, tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in run))
    series = read_log(path)
    assert series.format == "JSON Lines"
    _check_columns(series, run)
    assert series.units["throughput"] == "samples/s"
    np.testing.assert_allclose(series.columns["throughput"], [r["samples_per_sec"] for r in run])
    result = analyze_log(path)
    # the schedule the loop used: linear warm-up over 10 steps to the peak, then cosine decay
    assert result.metrics["lr_schedule"] == "warm-up to step 10, then cosine decay"
    assert result.metrics["loss_nonfinite_count"] == 0
    assert result.metrics["throughput_p50"] == pytest.approx(np.percentile([r["samples_per_sec"] for r in run][3:], 50))


def test_csv_from_a_training_loop(run, tmp_path):
    path = tmp_path / "metrics.csv"
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(run[0]))
        w.writeheader()
        w.writerows(run)
    series = read_log(path)
    assert series.format == "CSV"
    _check_columns(series, run)


def test_lightning_style_sparse_csv(run, tmp_path):
    """Lightning's CSVLogger writes one row per log call: train rows with train_loss_step, and
    validation rows on the same step with only val_loss; empty cells where nothing was logged."""
    path = tmp_path / "metrics.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["epoch", "step", "train_loss_step", "lr-SGD", "val_loss"])
        for r in run:
            w.writerow([0, r["step"], r["loss"], r["lr"], ""])
            if r["step"] % 40 == 0:
                w.writerow([0, r["step"], "", "", r["loss"] * 1.1])
    series = read_log(path)
    assert series.format == "Lightning metrics.csv"
    _check_columns(series, run, fields=("loss", "lr"))
    val_steps = series.step[series.present["eval_loss"]].tolist()
    assert val_steps == [40, 80, 120]


def test_trainer_state_json_from_a_training_loop(run, tmp_path):
    """A trainer_state.json as the Hugging Face Trainer writes it: train entries every logging_steps,
    eval entries, and the final summary entry (train_loss, no loss) that must not replace the last step."""
    logging_steps = 5
    history = []
    for r in run:
        if r["step"] % logging_steps == 0:
            history.append(
                {
                    "loss": r["loss"],
                    "grad_norm": r["grad_norm"],
                    "learning_rate": r["lr"],
                    "epoch": r["step"] / STEPS,
                    "step": r["step"],
                }
            )
        if r["step"] % 60 == 0:
            history.append({"eval_loss": r["loss"], "eval_runtime": 0.5, "epoch": r["step"] / STEPS, "step": r["step"]})
    history.append(
        {
            "train_runtime": 3.0,
            "train_samples_per_second": 100.0,
            "train_loss": 0.5,
            "total_flos": 0,
            "epoch": 1.0,
            "step": STEPS,
        }
    )
    state = {
        "global_step": STEPS,
        "max_steps": STEPS,
        "logging_steps": logging_steps,
        "train_batch_size": 32,
        "log_history": history,
    }
    out = tmp_path / "out" / f"checkpoint-{STEPS}"
    out.mkdir(parents=True)
    (out / "trainer_state.json").write_text(json.dumps(state, indent=2))
    series = read_log(tmp_path / "out")  # the output directory: its newest checkpoint's state
    assert series.format == "Hugging Face trainer_state.json"
    logged = [r for r in run if r["step"] % logging_steps == 0]
    _check_columns(series, logged)
    assert series.step[series.present["eval_loss"]].tolist() == [60, 120]
    result = analyze_log(out / "trainer_state.json")
    assert result.metrics["throughput_logged"] is False
    assert any("no throughput" in n for n in result.analysis.notes)
    assert not any(a["kind"] in ("throughput_dip", "periodic_stall") for a in result.anomalies)


def test_real_nan_from_an_exploding_learning_rate(tmp_path):
    records = train(steps=80, explode_at=40)
    first_bad = next(r["step"] for r in records if not math.isfinite(r["loss"]))
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))  # json writes NaN / Infinity literals
    assert b"NaN" in path.read_bytes() or b"Infinity" in path.read_bytes()
    result = analyze_log(path)
    nonfinite = [r["step"] for r in records if not math.isfinite(r["loss"])]
    assert result.metrics["loss_nonfinite_count"] == len(nonfinite)
    assert result.metrics["loss_nonfinite_first_step"] == first_bad
    nan_anoms = [a for a in result.anomalies if a["kind"] == "nan" and a["field"] == "loss"]
    assert nan_anoms[0].get("step", nan_anoms[0].get("start_step")) == first_bad
    assert "unstable_training" in result.labels
    assert "TD601" in {f.rule_id for f in result.findings}


def test_step_monitor_fed_by_a_training_loop(tmp_path):
    """The monitor as tracedoc run drives it: one record per step (the ones the profiler recorded so
    marked), interval records, then a summary record. The reader takes the steps the profiler did not
    slow, with their own durations and throughputs as the loop timed them."""
    path = tmp_path / "steps.jsonl"
    mon = StepMonitor(str(path), interval_s=0.0, batch_size=32)
    t = time.perf_counter()
    mon.on_step(t, 0, 32, None, False)
    durations = {}
    for step in range(1, 41):
        train(steps=1, seed=step)
        now = time.perf_counter()
        mon.on_step(now, step, 32, None, 20 <= step < 23)
        durations[step], t = now - t, now
    mon.close()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    steps = [r for r in records if r["type"] == "step"]
    assert [r["step"] for r in steps] == list(range(1, 41))
    assert [r["step"] for r in steps if r.get("profiled")] == [20, 21, 22]
    assert {r["type"] for r in records} == {"step", "interval", "summary"}
    series = read_log(tmp_path)  # the run directory
    kept = [s for s in range(1, 41) if not 20 <= s < 23]
    assert series.format == "tracedoc step monitor"
    assert series.step.tolist() == kept
    np.testing.assert_allclose(series.columns["step_time_s"], [durations[s] for s in kept], rtol=1e-5)
    np.testing.assert_allclose(series.columns["throughput"], [32 / durations[s] for s in kept], rtol=1e-5)
    assert series.units["throughput"] == "samples/s"


def test_step_monitor_files_without_step_records_read_their_intervals(tmp_path):
    """A steps.jsonl written before step records existed: its interval records are the series."""
    path = tmp_path / "steps.jsonl"
    recs = [
        {
            "type": "interval",
            "schema": 1,
            "rank": 0,
            "step": 10 * i,
            "steps": 10,
            "step_time_s": {"mean": 0.1 * i, "p50": 0.1, "p90": 0.1, "max": 0.1},
            "samples_per_s": 100.0 / i,
        }
        for i in range(1, 31)
    ]
    recs.append({"type": "summary", "schema": 1, "rank": 0, "step": 300, "steps": 300, "samples_per_s": 1.0})
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    series = read_log(path)
    assert series.step.tolist() == [10 * i for i in range(1, 31)]
    np.testing.assert_allclose(series.columns["step_time_s"], [0.1 * i for i in range(1, 31)])


@pytest.mark.timeout(300)
def test_tracedoc_run_directory(tmp_path):
    """A real ``tracedoc run``: its steps.jsonl is read by ``tracedoc logs OUTDIR``."""
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        [
            sys.executable,
            *capture_run(out, 1),
            "--monitor-interval",
            "0.05",
            "--no-report",
            "--",
            str(ROOT / "tests" / "capture_scripts" / "train_tiny.py"),
            "--steps",
            "30",
            "--step-sleep",
            "0.02",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert proc.returncode == 0, proc.stderr
    want = [json.loads(line) for line in (out / "steps.jsonl").read_text().splitlines()]
    assert [r["step"] for r in want if r["type"] == "step"] == list(range(2, 31))  # the first opens step 2
    assert [r["step"] for r in want if r.get("profiled")] == [3, 4, 5]  # warm-up, active, export
    want = [r for r in want if r["type"] == "step" and not r.get("profiled")]
    proc = subprocess.run(
        [sys.executable, "-m", "tracedoc", "logs", str(out), "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["input"]["format"] == "tracedoc step monitor"
    assert doc["metrics"]["log_points"] == len({r["step"] for r in want})
    assert doc["metrics"]["log_last_step"] == want[-1]["step"]
