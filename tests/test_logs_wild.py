"""The log formats people have (nanoGPT, llm.c, DeepSpeed-Chat SFT and PPO, Megatron-DeepSpeed,
torchtitan, Lightning, W&B exports, Hugging Face), written in each framework's layout by
``log_fixtures``, and what separates a normal run from a broken one: fp16's skip rhythm, stalls
after evaluations, dips that begin on a stall, relative spikes, bumps, drift."""

from __future__ import annotations

import json

import log_fixtures as F
import numpy as np
import pytest

from tracedoc.api import analyze_log
from tracedoc.logs.errors import LogError
from tracedoc.logs.reader import read_log


def write(tmp_path, text: str, name: str = "train.log"):
    path = tmp_path / name
    path.write_text(text)
    return path


def kinds(result, kind):
    return [a for a in result.anomalies if a["kind"] == kind]


def where(a):
    return (a["step"], a["step"]) if "step" in a else (a["start_step"], a["end_step"])


# ---- nanoGPT / modded-nanogpt ---------------------------------------------------------------------
def test_modded_nanogpt_train_time_differences_are_step_times(tmp_path):
    series = read_log(write(tmp_path, F.modded_nanogpt(n=600, val_every=250)))
    assert series.format == "nanoGPT" and series.step.tolist() == list(range(0, 601))
    assert series.fields_seen["loss"] == "train_loss" and series.fields_seen["eval_loss"] == "val_loss"
    st = series.columns["step_time_s"]
    assert np.isnan(st[:2]).all()  # step 0 has no training time before it; step 1 has no earlier training line
    assert np.nanmedian(st) == pytest.approx(0.227, rel=0.01)
    # the val line's train_time (taken after validation) is not a training line: step 251 is an ordinary step
    assert st[251] == pytest.approx(0.227, rel=0.05)
    assert series.columns["eval_loss"][250] == pytest.approx(series.columns["loss"][250] + 0.05, abs=1e-3)
    assert [e["step"] for e in series.events if e["kind"] == "eval"] == [0, 250, 500, 600]


def test_step_avg_nanms_is_not_a_nan_loss(tmp_path):
    result = analyze_log(write(tmp_path, F.modded_nanogpt(n=400, with_loss=False)))
    assert result.metrics["loss_nonfinite_count"] is None and not kinds(result, "nan")
    assert "unstable_training" not in result.labels
    with_loss = analyze_log(write(tmp_path, F.modded_nanogpt(n=400), "b.log"))
    assert with_loss.metrics["loss_nonfinite_count"] == 0


def test_modded_nanogpt_whose_steps_get_slower_is_a_step_drift(tmp_path):
    result = analyze_log(write(tmp_path, F.modded_nanogpt(n=1480, with_loss=False, slow_from=480)))
    m = result.metrics
    assert m["step_time_drift_fraction"] == pytest.approx(0.8, abs=0.03) and m["throughput_drift_shape"] == "step"
    (drift,) = kinds(result, "throughput_drift")
    assert abs(drift["change_step"] - 480) <= 160 and drift["rule"] == "TD614"
    assert "TD614" in {f.rule_id for f in result.findings}


def test_nanogpt_iter_lines_and_the_stall_at_each_evaluation(tmp_path):
    result = analyze_log(write(tmp_path, F.nanogpt_karpathy(n=2000, eval_every=250)))
    m = result.metrics
    assert result.series.format == "nanoGPT" and result.series.fields_seen["step_time_s"] == "step_time_ms"
    assert m["periodic_stall_period_steps"] == 250 and m["periodic_stall_cause"] == "evaluation"
    assert [a["step"] for a in kinds(result, "periodic_stall")] == list(range(250, 2001, 250))
    assert result.series.columns["mfu_percent"][0] == -100.0  # nanoGPT's "not measured yet", kept as logged


# ---- llm.c ---------------------------------------------------------------------------------------------
def test_llmc_main_log(tmp_path):
    series = read_log(write(tmp_path, F.llmc_main_log(n=800, val_every=250), "main.log"))
    assert series.format == "llm.c" and series.step[0] == 0 and series.step[-1] == 799
    assert series.fields_seen["loss"] == "loss" and series.fields_seen["grad_norm"] == "grad_norm"
    assert series.columns["lr"][699] == pytest.approx(6e-4) and series.columns["eval_loss"][250] == pytest.approx(
        3.3 + 7 * np.exp(-250 / 300), abs=1e-4
    )
    at = series.step.tolist().index(750)
    assert np.isfinite(series.columns["loss"][at]) and np.isfinite(series.columns["eval_loss"][at])  # trl and tel
    assert sorted({e["step"] for e in series.events if e["kind"] == "eval"}) == [0, 250, 500, 750]


def test_llmc_grad_norm_spike_comes_with_the_loss_around_it(tmp_path):
    result = analyze_log(write(tmp_path, F.llmc_main_log(n=2000, spike_at=1200), "main.log"))
    (g,) = kinds(result, "grad_norm_spike")
    assert g["step"] == 1200 and g["grad_norm"] == pytest.approx(9.5) and g["reference"] == pytest.approx(0.3, abs=0.03)
    assert g["loss_at"] == pytest.approx(1.6 * g["loss_before"], rel=0.03) and g["loss_rise_fraction"] > 0.5
    (s,) = kinds(result, "loss_spike")
    assert s["step"] == 1200 and s["rule"] == "TD602"


def test_llmc_console(tmp_path):
    series = read_log(write(tmp_path, F.llmc_console(n=60)))
    assert series.format == "llm.c" and series.units["throughput"] == "tokens/s"
    assert np.isnan(series.columns["mfu_percent"][0]) and series.columns["mfu_percent"][5] == 41.2
    assert series.columns["eval_loss"][19] == pytest.approx(4.3)


# ---- DeepSpeed-Chat ----------------------------------------------------------------------------------------
def test_fp16_rhythm_of_dynamic_loss_scaling_is_not_unstable(tmp_path):
    """Two skips every scale window (hysteresis, then the halving) after the calibration: the scaler working."""
    text = F.ds_chat_sft(n=2000, window=100)
    result = analyze_log(write(tmp_path, text))
    m = result.metrics
    assert m["overflow_messages"] == text.count("OVERFLOW!")  # the hysteresis form counts
    assert m["overflow_messages"] == m["skipped_iterations"] > 20
    assert 0.01 < m["skipped_iteration_fraction"] < 0.03
    assert m["skip_pattern"] == "steady" and m["skip_burst_count"] == 0
    assert (m["loss_scale_min"], m["loss_scale_max"]) == (2048.0, 65536.0)
    assert "TD605" not in {f.rule_id for f in result.findings} and "unstable_training" not in result.labels
    groups = result.analysis.evidence["skip_groups"]
    assert groups[0]["kind"] == "calibration" and groups[0]["skips"] == 5
    assert {g["kind"] for g in groups[1:]} == {"steady"} and all(g["skips"] == 2 for g in groups[1:])
    assert [e["step"] for e in result.series.events if e["kind"] == "eval"][:2] == [0, 460]


@pytest.mark.parametrize("kw, pattern", [({"burst_at": 1300}, "burst"), ({"collapse_from": 1500}, "collapsing")])
def test_fp16_bursts_and_a_collapsing_scale_are_unstable(tmp_path, kw, pattern):
    result = analyze_log(write(tmp_path, F.ds_chat_sft(n=2000, **kw)))
    assert result.metrics["skip_pattern"] == pattern
    assert "TD605" in {f.rule_id for f in result.findings}
    if pattern == "collapsing":
        assert result.metrics["loss_scale_final"] == 1.0
    else:
        burst = [g for g in result.analysis.evidence["skip_groups"] if g["kind"] == "burst"]
        assert burst and burst[0]["skips"] >= 7 and 1290 <= burst[0]["start_step"] <= 1310


def test_rising_skip_rate(tmp_path):
    lines = []
    skipped = 0
    for s in range(10, 3001, 10):
        per = 0
        if s > 20 and s % (100 if s < 2000 else 30) == 0:  # one skip per window of 100 steps, then every 30
            per = 1
        skipped += per
        lines.append(
            f"[2024-01-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step={s}, skipped={skipped}, "
            f"lr=[1e-4], mom=[(0.9, 0.999)]"
        )
    result = analyze_log(write(tmp_path, "\n".join(lines) + "\n"))
    assert result.metrics["skip_pattern"] == "rising"
    assert "TD605" in {f.rule_id for f in result.findings}


@pytest.mark.parametrize("new_format", [False, True])
def test_ppo_actor_and_critic_are_separate_series(tmp_path, new_format):
    result = analyze_log(write(tmp_path, F.ds_chat_ppo(n=200, new_format=new_format, critic_nan_at=120)))
    series = result.series
    assert series.format == "DeepSpeed-Chat PPO" and series.name == "actor" and list(series.companions) == ["critic"]
    critic = series.companions["critic"]
    assert series.step.tolist() == critic.step.tolist() == list(range(200))
    assert (
        abs(np.nanmean(series.columns["loss"]) - 0.1) < 0.02 and abs(np.nanmean(critic.columns["loss"]) - 0.05) < 0.01
    )
    assert not any("goes back" in w for w in result.warnings)  # the critic's step=10 is not a resumed run
    # each engine's counter: 3 calibration skips each, on its own series; lr of the actor vs the critic
    assert np.nansum(series.columns["skipped_iterations"]) == 3 and np.nansum(critic.columns["skipped_iterations"]) == 3
    assert series.columns["lr"][9] == pytest.approx(9.65e-6 * 10 / 200) and critic.columns["lr"][9] == pytest.approx(
        5e-6 * 10 / 200
    )
    m = result.metrics
    assert m["log_series"] == "actor, critic" and m["skipped_iterations"] == 6 and m["skip_pattern"] == "calibration"
    assert m["generation_time_fraction"] == pytest.approx(2.5 / 3.77, rel=0.02)
    assert m["step_time_p50_s"] == pytest.approx(3.77, rel=0.02) and series.units["throughput"] == "samples/s"
    nan = kinds(result, "nan")
    assert [(a["step"], a["series"]) for a in nan] == [(120, "critic")]
    assert "TD601" in {f.rule_id for f in result.findings}


# ---- Megatron-DeepSpeed ------------------------------------------------------------------------------------
def test_megatron_deepspeed_stall_after_each_evaluation_and_its_loss_scale(tmp_path):
    result = analyze_log(write(tmp_path, F.megatron_deepspeed(n_iters=3000)))
    m = result.metrics
    assert result.series.fields_seen["loss_scale"] == "loss scale"
    assert (m["loss_scale_min"], m["loss_scale_max"], m["loss_scale_final"]) == (2048.0, 32768.0, 32768.0)
    assert m["fp16_without_loss_scaling"] is False
    assert m["fp16_text"] == "fp16 with a dynamic loss scale, logged from 2048 to 32768 (last 32768)"
    assert m["periodic_stall_period_steps"] == 100 and m["periodic_stall_cause"] == "evaluation"
    assert [a["step"] for a in kinds(result, "periodic_stall")] == list(range(110, 3000, 100))
    assert 0.04 < m["periodic_stall_lost_fraction"] < 0.1  # 0.7 of one window in ten
    finding = {f.rule_id: f for f in result.findings}["TD612"]
    assert "cause from the log: evaluation" in finding.message
    assert any("evaluation right before" in fix for fix in finding.fixes)
    assert result.series.columns["eval_loss"][9] == pytest.approx(result.series.columns["loss"][9] + 0.1, rel=1e-5)


def test_megatron_deepspeed_checkpoint_saves_name_the_cause(tmp_path):
    text = F.megatron_deepspeed(n_iters=3000, eval_every=10**6, save_every=300)
    # the window after each save is the slow one here
    lines = text.splitlines()
    out, slow_next = [], False
    for ln in lines:
        if slow_next and "iteration" in ln and "elapsed time per iteration (ms): " in ln:
            head, rest = ln.split("elapsed time per iteration (ms): ", 1)
            ms, tail = rest.split(" |", 1)
            ln = f"{head}elapsed time per iteration (ms): {float(ms) * 2:.1f} |{tail}"
            slow_next = False
        if "successfully saved checkpoint" in ln:
            slow_next = True
        out.append(ln)
    result = analyze_log(write(tmp_path, "\n".join(out) + "\n"))
    assert result.metrics["periodic_stall_period_steps"] == 300
    assert result.metrics["periodic_stall_cause"] == "checkpoint save"


def test_sustained_bump_in_a_megatron_log(tmp_path):
    """The loss tripling for ~100 iterations and recovering is a bump, not one spike."""
    result = analyze_log(write(tmp_path, F.megatron_deepspeed(n_iters=4000, bump=(2000, 300, 2.2))))
    (b,) = kinds(result, "loss_bump")
    start, end = where(b)
    assert abs(start - 2000) <= 20 and abs(end - 2290) <= 30
    assert b["max_ratio"] == pytest.approx(2.2, rel=0.1) and b["rule"] == "TD607"
    assert not [a for a in kinds(result, "loss_spike") if 1990 <= where(a)[0] <= 2300]
    assert "TD607" in {f.rule_id for f in result.findings}


# ---- the dip/stall distinction and the period ----------------------------------------------------------
def test_a_dip_that_begins_on_a_stall_is_still_a_dip_and_the_period_is_200(tmp_path):
    rng = np.random.default_rng(21)
    n = 4000
    steps = np.arange(1, n + 1)
    tps = 10_000 * (1 + rng.normal(0, 0.01, n))
    tps[steps % 200 == 0] = 3000  # a stall every 200 steps
    tps[(steps >= 2000) & (steps <= 2020)] = 6000  # a 21-step dip from the stall at 2000 ...
    tps[steps == 2000] = 3000  # ... which begins with the stall
    path = tmp_path / "t.jsonl"
    path.write_text(
        "".join(json.dumps({"step": int(s), "tokens_per_sec": float(t)}) + "\n" for s, t in zip(steps, tps))
    )
    result = analyze_log(path)
    assert result.metrics["periodic_stall_period_steps"] == 200
    assert [a["step"] for a in kinds(result, "periodic_stall")] == list(range(200, n + 1, 200))
    assert [where(a) for a in kinds(result, "throughput_dip")] == [(2001, 2020)]
    assert result.metrics["throughput_dip_count"] == 1


# ---- torchtitan, Lightning, W&B, Hugging Face ------------------------------------------------------------
def test_torchtitan_gc_stalls_and_gradual_drift(tmp_path):
    result = analyze_log(write(tmp_path, F.torchtitan(n=600, gc_every=50, drift=0.25)))
    m = result.metrics
    assert m["periodic_stall_period_steps"] == 50 and m["periodic_stall_cause"] == "garbage collection"
    assert [a["step"] for a in kinds(result, "periodic_stall")][:3] == [51, 101, 151]
    assert m["step_time_drift_fraction"] == pytest.approx(1.25 * 0.96 / 1.04 - 1 + 0.0, abs=0.04)
    assert m["throughput_drift_shape"] == "gradual"
    assert {"TD612", "TD614"} <= {f.rule_id for f in result.findings}


def test_torchtitan_checkpoints_and_validation_lines(tmp_path):
    text = F.torchtitan(n=100, gc_every=0, ckpt_every=20)
    text += (
        "[titan] 2026-01-01 10:00:00,000 - root - INFO - validate step: 100  loss: 2.7000  memory: 40.12GiB(50.00%)\n"
    )
    series = read_log(write(tmp_path, text))
    assert series.step.tolist() == list(range(1, 101))  # the validation line is not a training step
    assert series.columns["eval_loss"][-1] == 2.7
    saves = sorted({e["step"] for e in series.events if e["kind"] == "save"})
    assert saves == [20, 40, 60, 80, 100]


def test_lightning_metrics_csv(tmp_path):
    series = read_log(write(tmp_path, F.lightning_metrics_csv(), "metrics.csv"))
    assert series.format == "Lightning metrics.csv" and series.fields_seen["loss"] == "train_loss_step"
    assert series.fields_seen["eval_loss"] == "val_loss"
    assert np.isfinite(series.columns["eval_loss"][series.step.tolist().index(287)])


def test_wandb_chart_export_reads_the_first_run(tmp_path):
    series = read_log(write(tmp_path, F.wandb_chart_csv(n=300), "wandb_export.csv"))
    assert series.format == "W&B CSV export" and series.fields_seen == {"loss": "train/loss", "step": "Step"}
    assert len(series) == 300 and series.columns["loss"][0] == pytest.approx(2.0, abs=0.05)
    assert series.warnings == ["2 W&B runs in one export; the first, 'lucky-sun-12', is read"]


def test_wandb_history_runtime_gives_step_times(tmp_path):
    result = analyze_log(write(tmp_path, F.wandb_history_csv(n=400), "history.csv"))
    assert result.series.format == "W&B history CSV"
    assert result.series.fields_seen["step_time_s"] == "differences of '_runtime'"
    assert result.metrics["step_time_p50_s"] == pytest.approx(0.8, rel=0.02)
    assert [a["step"] for a in kinds(result, "periodic_stall")] == [100, 200, 300]


def test_relative_spikes_in_a_low_loss_regime(tmp_path):
    """A fine-tune settled at 0.008 whose loss jumps 2.1-2.6x three times: spikes by their ratio to the
    local level, where the scaled-MAD test alone misses some (the low loss is noisy in relative terms)."""
    text = F.hf_trainer_state(relative_spikes=((2000, 2.2), (2300, 2.6), (2600, 2.1)))
    result = analyze_log(write(tmp_path, text, "trainer_state.json"))
    spikes = kinds(result, "loss_spike")
    assert [a["step"] for a in spikes] == [2000, 2300, 2600]
    assert any("the trailing median (>= 2x)" in a["criterion"] for a in spikes)
    for a in spikes:
        assert a["reference"] == pytest.approx(0.008, rel=0.15) and a["ratio"] > 2
    clean = analyze_log(write(tmp_path, F.hf_trainer_state(seed=12, n=3000), "clean.json"))
    assert kinds(clean, "loss_spike") == [] and clean.labels == []


def test_bump_in_a_trainer_state(tmp_path):
    result = analyze_log(write(tmp_path, F.hf_trainer_state(bump=(1600, 500, 3.0)), "trainer_state.json"))
    (b,) = kinds(result, "loss_bump")
    assert where(b)[0] == 1600 and abs(where(b)[1] - 2095) <= 10 and 2.5 < b["mean_ratio"] < 3.5
    assert kinds(result, "loss_spike") == []


def test_hf_console_log_starting_with_a_dict_line(tmp_path):
    lines = [
        f"{{'loss': {2.0 - i * 0.01:.4f}, 'grad_norm': 0.9, 'learning_rate': 2e-05, 'epoch': {i / 50:.2f}}}"
        for i in range(1, 51)
    ]
    series = read_log(write(tmp_path, "\n".join(lines) + "\n", "console.log"))
    assert series.format == "Hugging Face Trainer console" and len(series) == 50


# ---- unknown formats, hints and field maps ----------------------------------------------------------------------
def test_unknown_format_lists_what_was_looked_for(tmp_path):
    path = write(tmp_path, "epoch 1 batch 10 objective=2.3 speed=1000\n" * 5)
    with pytest.raises(LogError) as exc:
        read_log(path)
    text = str(exc.value)
    for looked in (
        "JSON Lines",
        "Megatron-LM",
        "DeepSpeed",
        "torchtitan",
        "nanoGPT",
        "llm.c",
        "CSV",
        "--format-hint",
        "--field",
    ):
        assert looked in text


def test_format_hint_and_field_map_read_a_custom_log(tmp_path):
    path = write(
        tmp_path, "".join(f"epoch 1 batch={b} objective={3 - b / 100:.3f} speed={1000 + b}\n" for b in range(1, 101))
    )
    with pytest.raises(LogError, match="no line with a step"):
        read_log(path, fmt="text")
    series = read_log(path, fmt="text", field_map={"step": "batch", "loss": "objective", "samples_per_s": "speed"})
    assert series.step.tolist() == list(range(1, 101)) and series.columns["loss"][0] == pytest.approx(2.99)
    assert series.units["throughput"] == "samples/s"
    with pytest.raises(LogError, match="no such field"):
        read_log(path, fmt="text", field_map={"step": "batch", "loss": "nope"})
    with pytest.raises(LogError, match="is not a field tracedoc reads"):
        read_log(path, fmt="text", field_map={"losss": "objective"})


def test_field_map_overrides_an_alias_in_jsonl(tmp_path):
    path = tmp_path / "l.jsonl"
    path.write_text(
        "".join(json.dumps({"step": i, "loss": 9.0, "lm_loss_smoothed": 2.0 + i / 100}) + "\n" for i in range(50))
    )
    series = read_log(path, field_map={"loss": "lm_loss_smoothed"})
    assert series.fields_seen["loss"] == "lm_loss_smoothed" and series.columns["loss"][1] == pytest.approx(2.01)


def test_the_cli_lists_every_reader():
    from tracedoc.logs import reader

    assert reader.FORMATS == ("jsonl", "json", *reader.TEXT_SNIFFERS, "csv", "text")
    assert set(reader.OTHER_FORMATS) | set(reader.TEXT_SNIFFERS) == set(reader.FORMATS)
