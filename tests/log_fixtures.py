"""Training logs in the formats people have, written line by line in each framework's own layout with
known values: the tests compare what tracedoc reads and finds with what was planted.

Every builder returns the text of one log (and takes a seed where it draws noise). The layouts follow
the frameworks' logging code and public logs of real runs; the values are generated here.
"""

from __future__ import annotations

import json

import numpy as np


def _ts(i: int) -> str:
    return f"[2024-05-01 10:{(i // 60) % 60:02d}:{i % 60:02d},{(i * 37) % 1000:03d}]"


# ---- modded-nanogpt -----------------------------------------------------------------------------
def modded_nanogpt(n=1480, val_every=250, seed=0, with_loss=True, tok_s=False, slow_from=None, step_ms=227.0) -> str:
    """A modded-nanogpt record: the training script's source first, then ``step:0/N val_loss:... step_avg:nanms``,
    training lines with the cumulative ``train_time`` (validation excluded) and val lines. From
    ``slow_from`` on each step takes 1.8x as long (a longer attention window)."""
    rng = np.random.default_rng(seed)
    lines = [
        "import os",
        "import sys",
        "with open(sys.argv[0]) as f:",
        "    code = f.read()",
        "def log(step, train_steps, val_loss, training_time_ms):",
        "    print0(f'step:{step}/{train_steps} val_loss:{val_loss:.4f} train_time:{training_time_ms:.0f}ms '",
        "           f'step_avg:{training_time_ms/max(step, 1):.2f}ms')",
        "=" * 100,
        "Running PyTorch 2.6.0 compiled for CUDA 12.6",
        "nvidia-smi",
        "+" + "-" * 60 + "+",
        f"step:0/{n} val_loss:10.8258 train_time:0ms step_avg:nanms",
    ]
    t = 0.0
    for step in range(1, n + 1):
        dt = step_ms * (1.8 if slow_from and step >= slow_from else 1.0) * (1 + rng.normal(0, 0.004))
        t += dt
        loss = 3.3 + 7.5 * np.exp(-step / 120) + rng.normal(0, 0.03)
        parts = [f"step:{step}/{n}"]
        if with_loss:
            parts.append(f"train_loss:{loss:.4f}")
        parts += [f"train_time:{t:.0f}ms", f"step_avg:{t / step:.2f}ms"]
        if tok_s:
            parts.append(f"tok_s:{int(524288 / dt * 1000)}")
        lines.append(" ".join(parts))
        if step % val_every == 0 or step == n:
            lines.append(
                f"step:{step}/{n} val_loss:{loss + 0.05:.4f} train_time:{t + 40:.0f}ms step_avg:{t / step:.2f}ms"
            )
    lines.append("peak memory allocated: 37325 MiB reserved: 51882 MiB")
    return "\n".join(lines) + "\n"


def nanogpt_karpathy(n=2000, log_every=10, eval_every=250, seed=1) -> str:
    """nanoGPT's train.py: ``iter N: loss X, time T ms, mfu M%`` and ``step N: train loss X, val loss Y``."""
    rng = np.random.default_rng(seed)
    lines = [
        "tokens per iteration will be: 491,520",
        "Initializing a new model from scratch",
        "number of parameters: 123.59M",
        "compiling the model... (takes a ~minute)",
    ]
    for it in range(0, n + 1):
        if it % eval_every == 0:
            lines.append(
                f"step {it}: train loss {3 + 8 * np.exp(-it / 300):.4f}, val loss {3.05 + 8 * np.exp(-it / 300):.4f}"
            )
            if it > 0:
                lines.append("saving checkpoint to out")
        if it % log_every == 0:
            dt = (6000.0 if it % eval_every == 0 else 430.0) * (1 + rng.normal(0, 0.01))
            mfu = -100.0 if it < 5 * log_every else 38.5
            lines.append(
                f"iter {it}: loss {3 + 8 * np.exp(-it / 300) + rng.normal(0, 0.02):.4f}, time {dt:.2f}ms, "
                f"mfu {mfu:.2f}%"
            )
    return "\n".join(lines) + "\n"


# ---- llm.c ------------------------------------------------------------------------------------------
def llmc_main_log(n=2000, val_every=250, seed=2, spike_at=None) -> str:
    """llm.c's main.log: ``s:N trl:X lr:Y norm:Z`` per step, ``s:N tel:X`` and ``s:N eval:X`` at evaluations."""
    rng = np.random.default_rng(seed)
    lines = []
    for s in range(n + 1):
        if s % val_every == 0:
            lines.append(f"s:{s} tel:{3.3 + 7 * np.exp(-s / 300):.4f}")
            lines.append(f"s:{s} eval:{0.25 + 0.05 * s / n:.4f}")
        if s == n:
            break
        loss = 3.2 + 7.8 * np.exp(-s / 300) + rng.normal(0, 0.02)
        norm = 0.3 + rng.normal(0, 0.02)
        if spike_at and s == spike_at:
            loss, norm = loss * 1.6, 9.5
        lr = 6e-4 * min(1.0, (s + 1) / 700)
        lines.append(f"s:{s} trl:{loss:.4f} lr:{lr:.6f} norm:{norm:.2f}")
    return "\n".join(lines) + "\n"


def llmc_console(n=60, seed=3) -> str:
    rng = np.random.default_rng(seed)
    lines = [
        "+-----------------------+----------------------------------------------------+",
        "| Parameter             | Value                                              |",
        "num_parameters: 124475904",
    ]
    for s in range(1, n + 1):
        ms = 1583.2 if s == 1 else 315.0 * (1 + rng.normal(0, 0.01))
        mfu = -100.0 if s == 1 else 41.2
        lines.append(
            f"step {s:4d}/{n} | train loss {4.4 - s * 0.01:.6f} | norm {1.2:.4f} | lr {6e-4:.2e} | "
            f"{ms:.2f} ms | {mfu:.1f}% bf16 MFU | {int(524288 / ms * 1000)} tok/s"
        )
        if s % 20 == 0:
            lines.append(f"val loss {4.5 - s * 0.01:.6f}")
    return "\n".join(lines) + "\n"


# ---- DeepSpeed-Chat SFT (fp16) ----------------------------------------------------------------------
def ds_chat_sft(n=2000, window=100, seed=4, burst_at=None, collapse_from=None) -> str:
    """DeepSpeed-Chat step 1 with fp16 dynamic loss scaling (hysteresis 2, scale window ``window``): the
    scale calibrates from 65536 down to 2048 at the start, then doubles each window and overflows at
    65536, which skips two steps (the hysteresis message, then the halving): the normal rhythm. An
    epoch of 460 steps ends with a perplexity evaluation. ``burst_at``: 7 overflows in a row there.
    ``collapse_from``: from there each window halves the scale twice more, down to 1."""
    rng = np.random.default_rng(seed)
    lines = [
        "cmd = deepspeed main.py --data_path Dahoas/rm-static --zero_stage 2 --deepspeed",
        "***** Running training *****",
        "***** Evaluating perplexity, Epoch 0/5 *****",
        "ppl: 4998.29638671875",
    ]
    skipped = 0
    scale = 65536.0
    calibrate = [65536, 32768, 16384, 8192, 4096]
    overflow_at: dict[int, list[str]] = {}
    for k, s in enumerate(calibrate):
        overflow_at.setdefault(1 + k, []).append(_ds_overflow(s, s / 2))
    skipped_by: dict[int, int] = {1 + k: 1 for k in range(len(calibrate))}
    scale = 2048.0
    last_growth = 6
    step = 6
    while step <= n:
        if step - last_growth >= window:
            scale *= 2
            last_growth = step
        if scale > 32768 and step not in overflow_at:  # the gradients allow 32768 here
            hyst = _ds_overflow(65536, None)
            overflow_at[step] = [hyst]
            overflow_at[step + 1] = [_ds_overflow(65536, 32768)]
            skipped_by[step] = skipped_by.get(step, 0) + 1
            skipped_by[step + 1] = skipped_by.get(step + 1, 0) + 1
            scale = 32768.0
            last_growth = step + 1
            step += 2
            continue
        step += 1
    if burst_at:
        s = 65536.0
        for k in range(7):
            overflow_at.setdefault(burst_at + k, []).append(_ds_overflow(s, s / 2))
            skipped_by[burst_at + k] = skipped_by.get(burst_at + k, 0) + 1
            s /= 2
    if collapse_from:
        s = 32768.0
        for st in range(collapse_from, n, 40):
            for j in range(2):
                overflow_at.setdefault(st + j, []).append(_ds_overflow(s, max(s / 2, 1.0)))
                skipped_by[st + j] = skipped_by.get(st + j, 0) + 1
                s = max(s / 2, 1.0)
    epoch_len = 460
    for st in range(1, n + 1):
        lines += overflow_at.get(st, [])
        skipped += skipped_by.get(st, 0)
        if st % 10 == 0:
            lr = 9.65e-6 * (0.5 + 0.5 * np.cos(np.pi * st / n))
            lines.append(
                f"{_ts(st)} [INFO] [logging.py:96:log_dist] [Rank 0] step={st}, skipped={skipped}, "
                f"lr=[{lr}, {lr}], mom=[(0.9, 0.95), (0.9, 0.95)]"
            )
            sps = 171.8 * (1 + rng.normal(0, 0.002))
            lines.append(
                f"{_ts(st)} [INFO] [timer.py:199:stop] epoch={st // epoch_len}/micro_step={st % epoch_len}/"
                f"global_step={st}, RunningAvgSamplesPerSec={sps + 0.1}, CurrSamplesPerSec={sps}, "
                f"MemAllocated=3.96GB, MaxMemAllocated=22.95GB"
            )
        if st % epoch_len == 0:
            lines.append(f"***** Evaluating perplexity, Epoch {st // epoch_len}/5 *****")
            lines.append(f"ppl: {12.0 / (1 + st / 1000):.6f}")
            lines.append(f"Beginning of Epoch {st // epoch_len + 1}/5, Total Micro Batches {epoch_len}")
    return "\n".join(lines) + "\n"


def _ds_overflow(attempted: float, new: float | None) -> str:
    head = (
        "[2024-05-01 10:00:00,000] [INFO] [loss_scaler.py:18{}:update_scale] [deepspeed] OVERFLOW! "
        "Rank 0 Skipping step. "
    )
    if new is None:
        return head.format(8) + f"Attempted loss scale: {int(attempted)}, but hysteresis is 2. Reducing hysteresis to 1"
    return head.format(1) + f"Attempted loss scale: {int(attempted)}, reducing to {int(new) if new >= 1 else new}"


# ---- DeepSpeed-Chat PPO ------------------------------------------------------------------------------
def ds_chat_ppo(n=200, seed=5, new_format=False, critic_nan_at=None) -> str:
    """DeepSpeed-Chat step 3: actor and critic engines print ``step=N, skipped=S`` side by side (the actor's
    timer line between them), PPO lines with both losses, and the step's end-to-end timing split into
    generation and training. The actor's loss hovers around 0.1, the critic's around 0.05."""
    rng = np.random.default_rng(seed)
    lines = ["***** Running training *****", "Beginning of Epoch 1/1, Total Generation Batches 477"]
    act_skipped = cri_skipped = 0
    for s in range(n):
        if s < 3:  # both engines calibrate
            for a in (65536, 32768):
                lines.append(_ds_overflow(a, a / 2))
            act_skipped += 1
            cri_skipped += 1
        engine_step = s + 1
        if engine_step % 10 == 0:
            lines.append(
                f"{_ts(s)} [INFO] [logging.py:96:log_dist] [Rank 0] step={engine_step}, skipped={act_skipped}, "
                f"lr=[{9.65e-6 * engine_step / n}, {9.65e-6 * engine_step / n}], mom=[(0.9, 0.95), (0.9, 0.95)]"
            )
            lines.append(
                f"{_ts(s)} [INFO] [timer.py:199:stop] epoch=0/micro_step={engine_step}/global_step={engine_step}, "
                f"RunningAvgSamplesPerSec=86.7, CurrSamplesPerSec=85.4, MemAllocated=10.77GB, MaxMemAllocated=20.55GB"
            )
            lines.append(
                f"{_ts(s)} [INFO] [logging.py:96:log_dist] [Rank 0] step={engine_step}, skipped={cri_skipped}, "
                f"lr=[{5e-6 * engine_step / n}, {5e-6 * engine_step / n}], mom=[(0.9, 0.95), (0.9, 0.95)]"
            )
        act = 0.1 + rng.normal(0, 0.05)
        cri = float("nan") if critic_nan_at is not None and s == critic_nan_at else 0.05 + rng.normal(0, 0.02)
        gen = 2.5 * (1 + rng.normal(0, 0.02))
        train = 1.05 * (1 + rng.normal(0, 0.02))
        e2e = gen + train + 0.22
        if new_format:
            lines.append(
                f"Epoch: 0 | Step: {s} | PPO Epoch: 1 | Actor Loss: {act} | Critic Loss: {cri} | Unsupervised Loss: 0.0"
            )
            lines.append(
                f"End-to-End => Latency: {e2e:.2f}s, TFLOPs: 12.31, Samples/sec: {64 / e2e:.2f}, "
                f"Time/seq {e2e / 64:.2f}s, Batch Size: 64, Total Seq. Length: 512"
            )
            lines.append(
                f"Generation => Latency: {gen:.2f}s, Per-token Latency 9.77 ms, TFLOPs: 3.1, BW: 266.5 GB/sec, "
                f"Answer Seq. Length: 256"
            )
            lines.append(f"Training   => Latency: {train:.2f}s, TFLOPs: 40.2")
            lines.append(f"Average reward score: {rng.normal(0, 0.5)} | EMA reward score: 0.1")
        else:
            lines.append(f"epoch: 0|step: {s}|ppo_ep: 1|act_loss: {act}|cri_loss: {cri}|unsuper_loss: 0.0")
            lines.append(f"average reward score: {rng.normal(0, 0.5)}")
            lines.append("-" * 85)
            lines.append(
                f"|E2E latency={e2e:.2f}s |Gather latency=0.00s (0.00%) |Generate time={gen:.2f}s "
                f"({100 * gen / e2e:.2f}%) |Training time={train:.2f}s ({100 * train / e2e:.2f}%) "
                f"|Others=0.22 ({100 * 0.22 / e2e:.2f}%)|CurSamplesPerSec={64 / e2e:.2f} |AvgSamplesPerSec=16.0"
            )
    return "\n".join(lines) + "\n"


# ---- Megatron-DeepSpeed -------------------------------------------------------------------------------
MEGATRON_DS_ARGS = """\
------------------------ arguments ------------------------
  fp16 ............................................ True
  bf16 ............................................ False
  loss_scale ...................................... None
  initial_loss_scale .............................. 4294967296
  min_loss_scale .................................. 1.0
  loss_scale_window ............................... 1000
  global_batch_size ............................... 96
  micro_batch_size ................................ 1
  tensor_model_parallel_size ...................... 4
  pipeline_model_parallel_size .................... 8
  num_attention_heads ............................. 32
  seq_length ...................................... 2048
  world_size ...................................... 64
  eval_interval ................................... 100
  save_interval ................................... 300
-------------------- end of arguments ---------------------
"""


def megatron_deepspeed(
    n_iters=3000, log_every=10, eval_every=100, save_every=None, seed=6, bump=None, scale_doubles_every=500, dip=None
) -> str:
    """Megatron-DeepSpeed with fp16: iteration lines every ``log_every`` iterations whose loss scale grows
    from 2048 to 32768 (doubling every ``scale_doubles_every``), 'validation loss at iteration N' every
    ``eval_every``; the logging window right after each evaluation is ~70% slower (its elapsed time
    includes the evaluation). ``bump``: (start, length, factor) a sustained rise of the loss;
    ``dip``: (start, length) iterations at 1.5x the time."""
    rng = np.random.default_rng(seed)
    lines = [
        "using world size: 64, data-parallel-size: 2, tensor-model-parallel size: 4, pipeline-model-parallel size: 8",
        MEGATRON_DS_ARGS.rstrip("\n"),
    ]
    scale = 2048.0
    for it in range(log_every, n_iters + 1, log_every):
        if it % scale_doubles_every == 0 and scale < 32768:
            scale *= 2
        ms = 18500.0 * (1 + rng.normal(0, 0.01))
        if it % eval_every == log_every % eval_every and it > eval_every:
            ms *= 1.7  # this window includes the evaluation that ran after the previous line
        if dip and dip[0] <= it < dip[0] + dip[1]:
            ms *= 1.5
        loss = 2.6 + 4.0 * np.exp(-it / 800) + rng.normal(0, 0.01)
        if bump and bump[0] <= it < bump[0] + bump[1]:
            loss *= bump[2]
        lines.append(
            f" iteration {it:>8}/{n_iters:>8} | consumed samples: {it * 96:>12} | consumed tokens: "
            f"{it * 96 * 2048:>14} | elapsed time per iteration (ms): {ms:.1f} | learning rate: 6.000E-05 | "
            f"global batch size: {96:>5} | lm loss: {loss:.6E} | loss scale: {scale:.1f} | "
            f"grad norm: {1.2 + rng.normal(0, 0.05):.3f} | num zeros: 0.0 | number of skipped iterations: "
            f"{0:>3} | number of nan iterations: {0:>3} | samples per second: {96 / ms * 1000:.3f} | "
            f"TFLOPs: {150.0 * 18500 / ms:.2f} |"
        )
        if it % eval_every == 0:
            lines.append("-" * 96)
            lines.append(
                f" validation loss at iteration {it} | lm loss value: {loss + 0.1:.6E} | lm loss PPL: "
                f"{np.exp(loss + 0.1):.6E} | "
            )
            lines.append("-" * 96)
        if save_every and it % save_every == 0:
            lines.append(f"saving checkpoint at iteration {it:>7} to checkpoints/tr8")
            lines.append(f"  successfully saved checkpoint at iteration {it:>7} to checkpoints/tr8")
    return "\n".join(lines) + "\n"


# ---- torchtitan ----------------------------------------------------------------------------------------
def torchtitan(n=600, gc_every=50, ckpt_every=None, seed=7, drift=0.0) -> str:
    """torchtitan with colour codes, a periodic GC message every ``gc_every`` steps and the step after it
    slow; ``drift``: the step time grows by this share from the first step to the last."""
    rng = np.random.default_rng(seed)
    lines = [
        "[titan] 2026-01-01 10:00:00,000 - root - INFO - Starting job: Llama 3 8B training",
        "[titan] 2026-01-01 10:00:01,000 - root - INFO - Peak FLOPS used for computing MFU: 9.890e+14",
    ]
    for s in range(1, n + 1):
        slow = gc_every and s > 1 and (s - 1) % gc_every == 0
        tps = 9000 / (1 + drift * s / n) * (0.55 if slow else 1.0) * (1 + rng.normal(0, 0.004))
        lines.append(
            f"\x1b[31m[titan] 2026-01-01 10:{s // 60 % 60:02d}:{s % 60:02d},000 - root - INFO - \x1b[36mstep: {s:2}  "
            f"\x1b[32mloss: {2.5 + 6 * np.exp(-s / 100) + rng.normal(0, 0.01):7.4f}  \x1b[33mgrad_norm: "
            f"{0.9 + rng.normal(0, 0.02):7.4f}  \x1b[38;2;180;60;0mmemory: 40.12GiB(50.00%)  \x1b[34mtps: "
            f"{int(tps):,}  \x1b[36mtflops: 250.31  \x1b[35mmfu: 25.31%\x1b[39m"
        )
        if gc_every and s % gc_every == 0:
            lines.append(
                "[titan] 2026-01-01 10:00:00,000 - root - INFO - [GC] Peforming periodical GC collection. "
                f"0.{s % 7 + 1}2 seconds."
            )
        if ckpt_every and s % ckpt_every == 0:
            lines.append(
                "[titan] 2026-01-01 10:00:00,000 - root - INFO - Saving the checkpoint (or staging if async "
                "is enabled)."
            )
            lines.append(
                "[titan] 2026-01-01 10:00:00,000 - root - INFO - Finished saving the checkpoint (or staging if "
                "async is enabled)in 5.53 seconds."
            )
    return "\n".join(lines) + "\n"


# ---- CSV -------------------------------------------------------------------------------------------------
def lightning_metrics_csv(epochs=8, steps_per_epoch=287, log_every=50, seed=8) -> str:
    """Lightning's CSVLogger: sparse rows (train_loss_step every ``log_every`` steps; val and epoch rows at
    each epoch's end), empty cells where a metric was not logged."""
    rng = np.random.default_rng(seed)
    rows = ["epoch,epoch_time,step,train_loss_epoch,train_loss_step,train_perplexity_step,val_loss,val_perplexity"]
    step = 0
    for e in range(epochs):
        for _ in range(steps_per_epoch):
            step += 1
            if (step + 1) % log_every == 0:
                loss = 5.2 + 3.4 * np.exp(-step / 600) + rng.normal(0, 0.05)
                rows.append(f"{e},,{step},,{loss},{np.exp(loss)},,")
        rows.append(f"{e},,{step},,,,{5.6 + 1.2 * np.exp(-step / 900)},{np.exp(5.6)}")
        rows.append(f"{e},37.5,{step},{5.3 + 2 * np.exp(-step / 600)},,,,")
    return "\n".join(rows) + "\n"


def wandb_chart_csv(n=300, runs=("lucky-sun-12", "misty-dawn-13"), seed=9) -> str:
    """A W&B chart exported as CSV: ``Step`` and per run ``<run> - train/loss`` with __MIN/__MAX columns."""
    rng = np.random.default_rng(seed)
    head = ['"Step"'] + [f'"{r} - train/loss{sfx}"' for r in runs for sfx in ("", "__MIN", "__MAX")]
    rows = [",".join(head)]
    for s in range(n):
        cells = [str(s)]
        for k, _ in enumerate(runs):
            v = 1.6 + 0.4 * np.exp(-s / 50) + k * 0.3 + rng.normal(0, 0.01)
            cells += [f"{v}", f"{v}", f"{v}"] if (s % 2 == 0 or k == 0) else ["", "", ""]
        rows.append(",".join(cells))
    return "\n".join(rows) + "\n"


def wandb_history_csv(n=400, seed=10) -> str:
    """``run.history()`` saved with pandas: ``_step``, ``_runtime`` (seconds since start) and metrics."""
    rng = np.random.default_rng(seed)
    rows = ["_step,_runtime,_timestamp,train/loss,train/learning_rate,train/grad_norm"]
    t = 12.0
    for s in range(n):
        t += 0.8 * (1 + rng.normal(0, 0.01)) * (3.0 if s and s % 100 == 0 else 1.0)
        rows.append(
            f"{s},{t:.3f},{1714557600 + t:.3f},{2.0 + np.exp(-s / 80) + rng.normal(0, 0.01):.5f},3e-4,"
            f"{1.0 + rng.normal(0, 0.05):.4f}"
        )
    return "\n".join(rows) + "\n"


def hf_trainer_state(n=600, logging_steps=5, seed=11, relative_spikes=(), bump=None) -> str:
    """trainer_state.json of a fine-tune whose loss settles around 0.008 (per-batch noise ~20%), with
    loss values ``factor`` x the level at ``relative_spikes`` [(step, factor)] and a bump (start, length,
    factor)."""
    rng = np.random.default_rng(seed)
    hist = []
    for step in range(logging_steps, n * logging_steps + 1, logging_steps):
        level = 0.008 + 1.5 * np.exp(-step / 150)
        loss = level * (1 + rng.normal(0, 0.2))
        for s, f in relative_spikes:
            if step == s:
                loss = level * f
        if bump and bump[0] <= step < bump[0] + bump[1]:
            loss = level * bump[2] * (1 + rng.normal(0, 0.1))
        hist.append(
            {
                "epoch": round(step / 1000, 4),
                "grad_norm": float(abs(0.5 + rng.normal(0, 0.1))),
                "learning_rate": 2e-5,
                "loss": round(float(max(loss, 1e-4)), 4),
                "step": step,
            }
        )
        if step % 500 == 0:
            hist.append(
                {
                    "epoch": round(step / 1000, 4),
                    "eval_loss": 0.03,
                    "eval_runtime": 12.1,
                    "eval_samples_per_second": 80.0,
                    "eval_steps_per_second": 10.0,
                    "step": step,
                }
            )
    state = {
        "best_metric": None,
        "epoch": 3.0,
        "eval_steps": 500,
        "global_step": n * logging_steps,
        "is_world_process_zero": True,
        "log_history": hist,
        "logging_steps": logging_steps,
        "max_steps": n * logging_steps,
        "num_train_epochs": 3,
        "save_steps": 500,
        "train_batch_size": 8,
    }
    return json.dumps(state, indent=2)
