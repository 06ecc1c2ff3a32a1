"""Logs that tell one run's story over several pieces: LLaMA-Factory's ``trainer_log.jsonl`` (its own
time strings and "0.00" throughput), a run resumed from a checkpoint, a file two processes wrote,
Lightning ``version_N`` segments, a nanoGPT-style log with two periodic patterns of different cost,
and a loss that rises after a resume. Each builder returns text (or writes files) with known values
so that the tests compare what tracedoc reports with what was planted.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def hms(seconds: float) -> str:
    """``timedelta``'s str(): ``H:MM:SS`` or ``N days, H:MM:SS`` (LLaMA-Factory's elapsed_time)."""
    s = int(seconds)
    days, s = divmod(s, 86400)
    h, s = divmod(s, 3600)
    m, s = divmod(s, 60)
    text = f"{h}:{m:02d}:{s:02d}"
    return f"{days} day{'s' if days != 1 else ''}, {text}" if days else text


def llamafactory_rows(
    total=3000, log_every=10, step_s=0.9, seed=0, throughput=True, first=1, last=None, t0=0.0, eval_every=0, lr0=5e-5
) -> list[dict]:
    """LLaMA-Factory's LogCallback rows from ``first`` to ``last`` (inclusive) every ``log_every`` steps;
    elapsed time starts at ``t0`` (0 for a fresh or resumed process)."""
    rng = np.random.default_rng(seed)
    last = total if last is None else last
    rows, t = [], t0
    prev = first - 1
    for step in range(first, last + 1):
        if step % log_every and step != last:
            continue
        t += (step - prev) * step_s * (1 + rng.normal(0, 0.01))
        prev = step
        loss = 1.2 + 1.5 * np.exp(-step / 400) + rng.normal(0, 0.02)
        row = {
            "current_steps": step,
            "total_steps": total,
            "loss": round(float(loss), 4),
            "lr": lr0 * 0.5 * (1 + np.cos(np.pi * step / total)),
            "epoch": round(3.0 * step / total, 2),
            "percentage": round(100 * step / total, 2),
            "elapsed_time": hms(t),
            "remaining_time": hms(t / step * (total - step)),
        }
        if throughput:
            row["throughput"] = f"{4096 * 8 / step_s * (1 + rng.normal(0, 0.01)):.2f}"
            row["total_tokens"] = 4096 * 8 * step
        else:
            row["throughput"] = "0.00"
        if eval_every and step % eval_every == 0:
            row["eval_loss"] = round(float(loss + 0.05), 4)
        rows.append(row)
    return rows


def jsonl(rows: list[dict]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def llamafactory(**kw) -> str:
    return jsonl(llamafactory_rows(**kw))


def llamafactory_resumed(total=6000, stop=5220, resume=5010, **kw) -> str:
    """Trained to ``stop``, crashed, resumed from the checkpoint at ``resume``: the steps after it are
    logged again and elapsed time starts again near 0."""
    a = llamafactory_rows(total=total, last=stop, **kw)
    b = llamafactory_rows(
        total=total, first=resume + 1, seed=kw.get("seed", 0) + 1, **{k: v for k, v in kw.items() if k != "seed"}
    )
    return jsonl(a + b)


def llamafactory_two_writers(total=3000, **kw) -> str:
    """A launcher that started the trainer twice: both write every step; their lines interleave
    unevenly (one writer runs a little ahead)."""
    a = llamafactory_rows(total=total, seed=0, **kw)
    b = llamafactory_rows(total=total, seed=1, **kw)
    out, i, j = [], 0, 0
    rng = np.random.default_rng(5)
    while i < len(a) or j < len(b):
        if j >= len(b) or (i < len(a) and (i <= j + 2) and rng.random() < 0.5):
            out.append(a[i])
            i += 1
        else:
            out.append(b[j])
            j += 1
    return jsonl(out)


def lightning_segments(root: Path, epochs=(6, 4), steps_per_epoch=200, resume_epoch=5, seed=3) -> list[Path]:
    """Lightning ``version_0`` (epochs 0..5) and ``version_1`` resumed from the end of epoch ``resume_epoch - 1``;
    after the resume training and validation loss rise epoch after epoch (3.56 -> 3.60 over four epochs)."""
    rng = np.random.default_rng(seed)
    paths = []
    start_epochs = (0, resume_epoch)
    for version, (first_epoch, n_epochs) in enumerate(zip(start_epochs, epochs)):
        rows = ["epoch,step,train_loss_step,train_loss_epoch,val_loss,lr-AdamW"]
        for e in range(first_epoch, first_epoch + n_epochs):
            for k in range(steps_per_epoch):
                step = e * steps_per_epoch + k
                if (step + 1) % 50 == 0:
                    if version == 0:
                        level = 3.5 + 0.6 * np.exp(-step / 300)
                    else:
                        level = (
                            3.5 + 0.6 * np.exp(-resume_epoch * steps_per_epoch / 300) + 0.012 * (e - resume_epoch + 1)
                        )
                    rows.append(f"{e},{step},{level + rng.normal(0, 0.005):.4f},,,{1e-4}")
            end = (e + 1) * steps_per_epoch - 1
            if version == 0:
                val = 3.56 + 0.5 * np.exp(-e / 1.2)
            else:
                val = 3.56 + 0.013 * (e - resume_epoch + 1)
            rows.append(f"{e},{end},,,{val:.4f},")
            rows.append(f"{e},{end},,{val - 0.05:.4f},,")
        d = root / f"version_{version}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "metrics.csv").write_text("\n".join(rows) + "\n")
        paths.append(d / "metrics.csv")
    return paths


def nanogpt_two_patterns(
    n=5100, step_ms=176.0, shard_every=(189, 190), shard_factor=2.4, eval_every=125, eval_factor=1.08, seed=4
) -> str:
    """A modded-nanogpt log: a data-shard switch every 189-190 steps makes two steps 2.4x slower (about
    1.4% of the run), and the step after each evaluation (every 125 steps) is 8% slower (negligible)."""
    rng = np.random.default_rng(seed)
    lines = [f"step:0/{n} val_loss:10.8258 train_time:0ms step_avg:nanms"]
    t = 0.0
    switches, nxt, k = set(), shard_every[0], 0
    while nxt <= n:
        switches.add(nxt)
        k += 1
        nxt += shard_every[k % len(shard_every)]
    for step in range(1, n + 1):
        dt = step_ms * (1 + rng.normal(0, 0.004))
        if step in switches or step - 1 in switches:
            dt *= shard_factor + rng.uniform(-0.05, 0.05)
        elif step > 1 and (step - 1) % eval_every == 0:
            dt *= eval_factor
        t += dt
        loss = 3.3 + 7.5 * np.exp(-step / 300) + rng.normal(0, 0.02)
        lines.append(f"step:{step}/{n} train_loss:{loss:.4f} train_time:{t:.0f}ms step_avg:{t / step:.2f}ms")
        if step % eval_every == 0:
            lines.append(f"step:{step}/{n} val_loss:{loss + 0.05:.4f} train_time:{t:.0f}ms step_avg:{t / step:.2f}ms")
    return "\n".join(lines) + "\n"


def shard_switch_steps(n=5100, shard_every=(189, 190)) -> list[int]:
    out, nxt, k = [], shard_every[0], 0
    while nxt <= n:
        out.append(nxt)
        k += 1
        nxt += shard_every[k % len(shard_every)]
    return out
