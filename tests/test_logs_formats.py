"""Console logs (Megatron-LM, DeepSpeed, torchtitan) written line by line in each framework's format
with known values, and bad input: empty logs, no recognisable fields, a cut-off last line, mixed formats."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from tracedoc.api import analyze_log
from tracedoc.logs.errors import LogError
from tracedoc.logs.reader import read_log

MEGATRON_ARGS = """\
------------------------ arguments ------------------------
  bf16 ............................................ True
  fp16 ............................................ False
  global_batch_size ............................... {gbs}
  micro_batch_size ................................ 2
  num_attention_heads ............................. 32
  seq_length ...................................... 4096
  tensor_model_parallel_size ...................... {tp}
  pipeline_model_parallel_size .................... 2
  context_parallel_size ........................... 1
  world_size ...................................... 16
  loss_scale ...................................... None
-------------------- end of arguments ---------------------
"""


def megatron_line(it, total, ms, lr, loss, gnorm, skipped=0, nan=0, gbs=64):
    return (
        f" [2025-04-13 23:41:12] iteration {it:>8}/{total:>8} | consumed samples: {it * gbs:>12} | "
        f"elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): 312.4 | "
        f"learning rate: {lr:.6E} | global batch size: {gbs:>5} | lm loss: {loss:.6E} | loss scale: 1.0 | "
        f"grad norm: {gnorm:.3f} | num zeros: 0.0 | params norm: 250.1 | number of skipped iterations: {skipped:>3} | "
        f"number of nan iterations: {nan:>3} |"
    )


def write_megatron(path, n=60, gbs=64, tp=2, nan_at=(), slow_every=None):
    lines = [
        f"using world size: 16, data-parallel size: {16 // (tp * 2)}, context-parallel size: 1, "
        f"tensor-model-parallel size: {tp}, pipeline-model-parallel size: 2",
        MEGATRON_ARGS.format(gbs=gbs, tp=tp),
    ]
    for i in range(1, n + 1):
        it = 10 * i
        ms = 1000.0 + (i % 3)
        if slow_every and it % slow_every == 0:
            ms = 3000.0
        loss = float("nan") if it in nan_at else 7.0 - i * 0.01
        lines.append(megatron_line(it, 10 * n, ms, 3e-4, loss, 1.5, nan=int(it in nan_at), gbs=gbs))
        if i == 1:
            lines.append(
                "[Rank 0] (after 10 iterations) memory (MB) | allocated: 1000.0 | max allocated: 2048.0 | "
                "reserved: 3000.0 | max reserved: 3000.0"
            )
    path.write_text("\n".join(lines) + "\n")
    return path


def test_megatron_log_fields_header_and_nan(tmp_path):
    path = write_megatron(tmp_path / "megatron.log", nan_at=(200,))
    series = read_log(path)
    assert series.format == "Megatron-LM"
    assert series.step.tolist() == list(range(10, 601, 10))
    assert series.columns["step_time_s"][0] == pytest.approx(1.001)
    assert series.columns["throughput"][0] == pytest.approx(64 / 1.001)  # samples/s = global batch / time
    assert series.units["throughput"] == "samples/s"
    assert series.columns["loss"][1] == pytest.approx(6.98)
    assert series.columns["memory_bytes"][0] == 2048 * 2**20
    assert series.header["tensor_model_parallel_size"] == 2 and series.header["bf16"] is True
    result = analyze_log(path)
    assert [a.get("step") for a in result.anomalies if a["kind"] == "nan"] == [200, 200]  # the loss and the counter
    assert result.metrics["nan_iterations"] == 1
    assert result.metrics["precision"] == "bf16"
    checks = {r["check"]: r["ok"] for r in result.config_checks}
    assert checks == {"parallel sizes": True, "batch arithmetic": True, "divisible by TP / PP / CP": True}


def test_megatron_periodic_slow_iterations(tmp_path):
    path = write_megatron(tmp_path / "megatron.log", n=200, slow_every=200)
    result = analyze_log(path)
    assert result.metrics["periodic_stall_period_steps"] == 200
    assert [a["step"] for a in result.anomalies if a["kind"] == "periodic_stall"] == list(range(200, 2001, 200))
    assert "periodic_stall" in result.labels


def test_megatron_header_config_errors(tmp_path):
    """TP 3 x PP 2 does not divide 16 ranks (Megatron's own line then says DP 2: 3 x 2 x 2 = 12), and TP 3
    does not divide 32 heads."""
    path = write_megatron(tmp_path / "megatron.log", gbs=100, tp=3)
    result = analyze_log(path)
    m = result.metrics
    assert m["parallel_mismatch"] is True and "16" in m["parallel_text"]
    assert m["tp_divisibility_problem"] is True and "heads 32 not divisible by TP 3" in m["tp_divisibility_text"]
    assert {"TD701", "TD703"} <= {f.rule_id for f in result.findings}
    assert "config_error" in result.labels


DEEPSPEED_LOG = "\n".join(
    [
        "[2024-01-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, lr=[5e-05, 5e-05], "
        "mom=[(0.9, 0.999), (0.9, 0.999)]",
        "[2024-01-01 10:00:00,000] [INFO] [timer.py:260:stop] epoch=0/micro_step=40/global_step=10, "
        "RunningAvgSamplesPerSec=25.03, CurrSamplesPerSec=25.70, MemAllocated=4.32GB, MaxMemAllocated=38.49GB",
        "step 10 loss: 2.5000",
        "[2024-01-01 10:00:01,000] [INFO] [fused_optimizer.py:344:_update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping "
        "step. Attempted loss scale: 65536, reducing to 32768",
        "[2024-01-01 10:00:02,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=20, skipped=3, lr=[4.9e-05, 4.9e-05], "
        "mom=[(0.9, 0.999), (0.9, 0.999)]",
        "[2024-01-01 10:00:02,000] [INFO] [timer.py:260:stop] epoch=0/micro_step=80/global_step=20, "
        "RunningAvgSamplesPerSec=24.00, CurrSamplesPerSec=12.00, MemAllocated=4.32GB, MaxMemAllocated=38.49GB",
        "step 20 loss: nan",
        "",
    ]
)


def test_deepspeed_log(tmp_path):
    path = tmp_path / "ds.log"
    path.write_text(DEEPSPEED_LOG)
    series = read_log(path)
    assert series.format == "DeepSpeed"
    assert series.step.tolist() == [10, 20]
    np.testing.assert_allclose(series.columns["throughput"], [25.70, 12.00])
    np.testing.assert_allclose(series.columns["lr"], [5e-05, 4.9e-05])
    np.testing.assert_allclose(series.columns["skipped_iterations"], [0, 3])  # running total -> per interval
    assert series.columns["memory_bytes"][0] == pytest.approx(38.49 * 2**30)
    assert series.columns["loss"][0] == 2.5 and np.isnan(series.columns["loss"][1])
    result = analyze_log(path)
    assert result.metrics["overflow_messages"] == 1
    assert result.metrics["skipped_iterations"] == 3


def test_torchtitan_log_with_colour_codes(tmp_path):
    lines = [
        f"\x1b[31m[titan] 2026-01-01 10:00:{i:02d},000 - root - INFO - \x1b[36mstep: {i:2}  \x1b[32mloss: "
        f"{8 - i * 0.1:.5f}  \x1b[33mgrad_norm: {1 + i * 0.01:.4f}  \x1b[34mmemory: 40.12GiB(50.00%)  "
        f"\x1b[35mtps: {9000 + i:,}  \x1b[36mtflops: 250.31  \x1b[35mmfu: 25.31%\x1b[39m"
        for i in range(1, 31)
    ]
    path = tmp_path / "titan.log"
    path.write_text("\n".join(["[titan] Peak FLOPS used for computing MFU: 9.890e+14"] + lines) + "\n")
    series = read_log(path)
    assert series.format == "torchtitan"
    assert series.step.tolist() == list(range(1, 31))
    np.testing.assert_allclose(series.columns["throughput"], [9000 + i for i in range(1, 31)])
    assert series.units["throughput"] == "tokens/s"
    np.testing.assert_allclose(series.columns["loss"], [8 - i * 0.1 for i in range(1, 31)], rtol=1e-6)
    assert series.columns["memory_bytes"][0] == pytest.approx(40.12 * 2**30)
    assert series.columns["mfu_percent"][0] == 25.31


def test_gzipped_jsonl(tmp_path):
    path = tmp_path / "log.jsonl.gz"
    path.write_bytes(
        gzip.compress(b"".join(json.dumps({"step": i, "loss": 1.0 / i}).encode() + b"\n" for i in range(1, 51)))
    )
    assert len(read_log(path)) == 50


def test_aliases_are_mapped(tmp_path):
    path = tmp_path / "wandb.jsonl"
    path.write_text(
        "".join(
            json.dumps({"_step": i, "train/loss": 2.0, "train/learning_rate": 1e-4, "perf/tokens_per_second": 1000.0})
            + "\n"
            for i in range(5)
        )
    )
    series = read_log(path)
    assert series.fields_seen["loss"] == "train/loss" and series.fields_seen["step"] == "_step"
    assert series.fields_seen["lr"] == "train/learning_rate"
    assert series.fields_seen["throughput"] == "perf/tokens_per_second" and series.units["throughput"] == "tokens/s"


def test_an_eval_prefix_does_not_make_a_training_loss(tmp_path):
    path = tmp_path / "wandb.jsonl"
    path.write_text("".join(json.dumps({"_step": i, "eval/loss": 2.0, "charts/lr": 1e-4}) + "\n" for i in range(5)))
    series = read_log(path)
    assert "loss" not in series.fields_seen and series.fields_seen["lr"] == "charts/lr"


# ---- bad input ---------------------------------------------------------------------------------


def test_empty_log(tmp_path):
    path = tmp_path / "empty.jsonl"
    path.write_text("\n\n")
    with pytest.raises(LogError, match="is empty"):
        read_log(path)


def test_no_recognisable_fields_names_what_was_seen(tmp_path):
    path = tmp_path / "other.jsonl"
    path.write_text('{"foo": 1, "bar": 2}\n{"foo": 3, "bar": 4}\n')
    with pytest.raises(LogError) as exc:
        read_log(path)
    assert "no training-log field recognised" in str(exc.value) and "'foo'" in str(exc.value)


def test_unknown_text_names_the_first_line(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello world\nthis is not a log\n")
    with pytest.raises(LogError) as exc:
        read_log(path)
    assert "not a training log format" in str(exc.value) and "hello world" in str(exc.value)


def test_truncated_last_line_is_a_warning(tmp_path):
    path = tmp_path / "cut.jsonl"
    path.write_text("".join(json.dumps({"step": i, "loss": 1.0}) + "\n" for i in range(1, 11)) + '{"step": 11, "lo')
    series = read_log(path)
    assert len(series) == 10
    assert series.warnings == ["the last line (11) is cut off; it is left out"]


def test_truncated_csv_row_is_a_warning(tmp_path):
    path = tmp_path / "cut.csv"
    path.write_text("step,loss,lr\n1,2.0,0.1\n2,1.9,0.1\n3,1.")
    series = read_log(path)
    assert series.step.tolist() == [1, 2] and "cut off" in series.warnings[0]


def test_a_few_foreign_lines_are_a_warning_with_the_count(tmp_path):
    lines = [json.dumps({"step": i, "loss": 1.0}) for i in range(1, 101)]
    lines[50:50] = ["Traceback (most recent call last):", "  oops"]
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(lines) + "\n")
    series = read_log(path)
    assert len(series) == 100
    assert series.warnings and series.warnings[0].startswith("2 lines are not JSON objects")
    assert "line 51" in series.warnings[0]


def test_mixed_formats_is_an_error(tmp_path):
    lines = []
    for i in range(1, 21):
        lines.append(json.dumps({"step": i, "loss": 1.0}))
        lines.append(megatron_line(i, 20, 1000.0, 1e-4, 2.0, 1.0))
        lines.append(megatron_line(i, 20, 1000.0, 1e-4, 2.0, 1.0))
    path = tmp_path / "mixed.log"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(LogError, match="mixed formats"):
        read_log(path)


def test_binary_garbage(tmp_path):
    path = tmp_path / "garbage.bin"
    path.write_bytes(bytes(range(256)) * 10)
    with pytest.raises(LogError, match="not a training log format"):
        read_log(path)


def test_directory_without_a_log(tmp_path):
    with pytest.raises(LogError, match="directory without a training log"):
        read_log(tmp_path)


def test_header_only_csv(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("step,loss\n")
    with pytest.raises(LogError, match="no rows"):
        read_log(path)


@pytest.mark.parametrize("bad_line", [False, True])
def test_parallel_decode_equals_one_pass(tmp_path, monkeypatch, bad_line):
    from tracedoc.logs import jsonlog

    rng = np.random.default_rng(12)
    lines = [
        json.dumps(
            {
                "step": i,
                "loss": float("nan") if i in (7, 500) else float(rng.normal(2, 0.1)),
                "tokens_per_sec": float(rng.normal(1000, 10)),
                "gpu_util": [90, int(rng.integers(50, 99))],
            }
        )
        for i in range(1, 2001)
    ]
    if bad_line:
        lines[1000] = "not json"
    path = tmp_path / "p.jsonl"
    path.write_text("\n".join(lines) + "\n")
    one = read_log(path, jobs=1)
    from tracedoc.logs import reader

    monkeypatch.setattr(jsonlog, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(reader, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(reader, "SAMPLE_BYTES", 5000)  # the parent reads only this head of the file
    calls = []
    real = jsonlog._decode_parallel
    monkeypatch.setattr(jsonlog, "_decode_parallel", lambda *a: calls.append(a) or real(*a))
    many = read_log(path, jobs=3)
    assert calls, "the parallel path ran"
    assert many.step.tolist() == one.step.tolist() and len(one) == (1999 if bad_line else 2000)
    for name in ("loss", "throughput", "gpu_util_percent", "gpu_util_min_percent"):
        np.testing.assert_array_equal(many.columns[name], one.columns[name])
        np.testing.assert_array_equal(many.present[name], one.present[name])
    assert np.isnan(one.columns["loss"][[6, 499]]).all() and one.present["loss"][[6, 499]].all()
    assert many.warnings == one.warnings


def test_hf_trainer_console_dicts(tmp_path):
    lines = ["***** Running training *****", "  Num examples = 1000"]
    for i in range(1, 41):
        loss = "nan" if i == 30 else f"{2.0 - i * 0.01:.4f}"
        lines.append(
            f" 10%|#         | {i * 10}/400 [00:10<01:30,  4.0it/s]{{'loss': {loss}, 'grad_norm': 0.9, "
            f"'learning_rate': 2e-05, 'epoch': {i / 40:.2f}}}"
        )
    lines.append("{'eval_loss': 1.7, 'eval_runtime': 3.2, 'epoch': 1.0}")
    lines.append("{'train_runtime': 100.0, 'train_samples_per_second': 40.0, 'train_loss': 1.8, 'epoch': 1.0}")
    path = tmp_path / "output.log"
    path.write_text("\n".join(lines) + "\n")
    series = read_log(path)
    assert series.format == "Hugging Face Trainer console"
    assert len(series) == 40 and series.step.tolist() == list(range(40))
    assert series.columns["loss"][0] == pytest.approx(1.99) and np.isnan(series.columns["loss"][29])
    assert any("carry no step" in w for w in series.warnings)


def test_cut_off_megatron_line_and_foreign_json_lines(tmp_path):
    path = write_megatron(tmp_path / "megatron.log", n=30)
    text = path.read_text()
    last = text.rstrip("\n").rsplit("\n", 1)[1]
    text = text.rstrip("\n")[: -len(last)] + last[: len(last) // 2]  # the writer died mid-line
    text = text.replace(MEGATRON_ARGS.format(gbs=64, tp=2), MEGATRON_ARGS.format(gbs=64, tp=2) + '{"step": 1}\n')
    path.write_text(text)
    series = read_log(path)
    assert series.step[-1] == 290
    assert series.warnings[:2] == [
        f"the last line ({len(text.splitlines())}) is cut off; it is left out",
        "1 lines are JSON objects, another log format; they are left out",
    ]


def test_torchrun_rank_prefixes_keep_one_rank(tmp_path):
    lines = []
    for step in range(1, 21):
        for rank in (1, 0, 2):  # ranks print in any order
            loss = 5.0 - step * 0.1 + rank  # each rank's loss differs, so the kept rank is visible
            lines.append(
                f"[rank{rank}]:[titan] 2026-05-18 16:04:46,338 - root - INFO - step: {step:2}  loss: {loss:8.5f}  "
                f"grad_norm:  0.8319  memory:  9.46GiB(64.99%)  tps: 7,282  tflops: 0.52  mfu: 0.17%"
            )
    path = tmp_path / "titan.log"
    path.write_text("\n".join(lines) + "\n")
    series = read_log(path)
    assert series.step.tolist() == list(range(1, 21))
    np.testing.assert_allclose(series.columns["loss"], [5.0 - s * 0.1 for s in range(1, 21)], atol=1e-5)
    assert series.warnings == ["lines of 3 ranks in one file; rank 0 is analysed"]


def test_older_deepspeed_timer_lines(tmp_path):
    lines = []
    for step in range(10, 101, 10):
        lines.append(
            f"[2022-03-11 02:06:58,985] [INFO] [logging.py:69:log_dist] [Rank 0] step={step}, skipped=0, "
            f"lr=[5e-05], mom=[[0.9, 0.999]]"
        )
        lines.append(
            f"[2022-03-11 02:06:58,985] [INFO] [timer.py:189:stop] 0/{step}, SamplesPerSec={80 + step / 10}, "
            f"MemAllocated=0.26GB, MaxMemAllocated=9.02GB"
        )
    path = tmp_path / "ds_old.log"
    path.write_text("\n".join(lines) + "\n")
    series = read_log(path)
    assert series.format == "DeepSpeed" and series.step.tolist() == list(range(10, 101, 10))
    np.testing.assert_allclose(series.columns["throughput"], [80 + s / 10 for s in range(10, 101, 10)])
    assert series.columns["memory_bytes"][0] == pytest.approx(9.02 * 2**30)


def test_megatron_deepspeed_lines_with_samples_per_second_first(tmp_path):
    lines = [
        f" samples/sec: {7.5 + i / 100:.3f} | iteration {i:8d}/   10000 | elapsed time per iteration (ms): 4100.0 | "
        f"learning rate: 2.111E-06 | approx flops per GPU: 112.9TFLOPS | lm_loss: {11 - i / 100:.6E} | "
        f"number of skipped iterations:   0 | number of nan iterations:   0 |"
        for i in range(1, 41)
    ]
    path = tmp_path / "mds.log"
    path.write_text("\n".join(lines) + "\n")
    series = read_log(path)
    assert series.format == "Megatron-LM" and series.units["throughput"] == "samples/s"
    np.testing.assert_allclose(series.columns["throughput"], [7.5 + i / 100 for i in range(1, 41)], rtol=1e-3)
    np.testing.assert_allclose(series.columns["loss"], [11 - i / 100 for i in range(1, 41)], rtol=1e-6)


def test_fractional_step_values_are_not_truncated_into_duplicates(tmp_path):
    path = tmp_path / "f.jsonl"
    path.write_text("".join(json.dumps({"iter": i / 4, "loss": 2.0 - i / 100}) + "\n" for i in range(40)))
    series = read_log(path)
    assert len(series) == 40 and series.step.tolist() == list(range(40))
    assert "fractional values" in series.warnings[0]


@pytest.mark.parametrize("nan_every", [1, 3, 700])
def test_nan_literals_many_or_few(tmp_path, nan_every):
    """Few NaN lines are decoded around, many are quoted in one pass: the same values either way."""
    n = 3000
    path = tmp_path / "n.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "step": i,
                    "loss": float("nan") if i % nan_every == 0 else 1.0,
                    "note": "NaN in a string stays a string",
                }
            )
            + "\n"
            for i in range(1, n + 1)
        )
    )
    series = read_log(path)
    want = np.array([i % nan_every == 0 for i in range(1, n + 1)])
    np.testing.assert_array_equal(np.isnan(series.columns["loss"]), want)
    assert series.present["loss"].all() and len(series) == n


def test_resumed_run_keeps_the_later_values(tmp_path):
    first = [{"step": s, "loss": 3.0} for s in range(1, 101)]
    second = [{"step": s, "loss": 2.0} for s in range(51, 151)]  # resumed from the step-50 checkpoint
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in first + second))
    series = read_log(path)
    assert series.step.tolist() == list(range(1, 151))
    assert (series.columns["loss"][:50] == 3.0).all() and (series.columns["loss"][50:] == 2.0).all()
    assert series.story == [
        "resumed from a checkpoint: the step counter goes back from 100 to 51, 50 steps trained "
        "again; the later values are analysed"
    ]
    assert series.warnings == []


@pytest.mark.parametrize("jobs", [1, 2])
def test_step_monitor_of_two_ranks_keeps_rank_zero(tmp_path, monkeypatch, jobs):
    from tracedoc.logs import jsonlog, reader

    monkeypatch.setattr(jsonlog, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(reader, "PARALLEL_MIN_BYTES", 1)
    recs = []
    for step in range(1, 301):
        for rank in (1, 0):
            recs.append(
                {
                    "type": "interval",
                    "schema": 1,
                    "rank": rank,
                    "step": step,
                    "steps": 1,
                    "step_time_s": {"mean": 0.1 + rank, "p50": 0.1, "p90": 0.1, "max": 0.1},
                    "samples_per_s": 100.0 + rank,
                    "gpu_util_percent": [50.0 + rank, 60.0],
                }
            )
    recs.append({"type": "summary", "schema": 1, "rank": 0, "step": 300, "steps": 300, "samples_per_s": 1.0})
    path = tmp_path / "steps.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    series = read_log(path, jobs=jobs)
    assert series.format == "tracedoc step monitor" and series.step.tolist() == list(range(1, 301))
    assert (series.columns["throughput"] == 100.0).all()  # rank 0, and not the summary's 1.0
    assert (series.columns["step_time_s"] == 0.1).all()
    assert (series.columns["gpu_util_percent"] == 55.0).all() and (series.columns["gpu_util_min_percent"] == 50.0).all()
    assert "records of 2 ranks in one file; rank 0 is analysed" in series.warnings
