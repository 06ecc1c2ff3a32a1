"""The logs of the small GPT trainers: nanoGPT and its speed-run descendants (modded-nanogpt), and llm.c.

- modded-nanogpt: ``step:100/5100 train_loss:3.91 train_time:17612ms step_avg:176.12ms`` (recent records
  drop ``train_loss``; some forks add ``tok_s``) and ``step:250/5100 val_loss:4.50 train_time:... step_avg:...``
  lines. ``train_time`` is the training time so far (validation excluded), so the step time is its
  difference between two training lines over the steps between them. ``step_avg:nanms`` (an average over
  zero timed steps at step 0) is not a value of anything.
- nanoGPT: ``iter 100: loss 3.9100, time 176.12ms, mfu 40.12%`` and ``step 100: train loss 3.91, val loss 3.95``.
- llm.c ``main.log``: ``s:100 trl:3.91 lr:0.0006 norm:0.27`` (training), ``s:100 tel:3.95`` (validation loss),
  ``s:100 eval:0.29`` (HellaSwag accuracy: an evaluation, not a loss); its console:
  ``step    1/74 | train loss 11.01 | norm 15.41 | lr 8.57e-06 | 1583.19 ms | 41.2% bf16 MFU | 33097 tok/s``.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import LogError, excerpt
from .series import LogSeries, parse_number
from .textlog import Events, log_lines, pairs, records_to_series

MODDED_RE = re.compile(r"step:(\d{1,18})/\d{1,18} ")
TRAIN_TIME_RE = re.compile(r"train_time:([\d.]{1,24})(ms|s|m)\b")
ITER_RE = re.compile(r"^iter (\d{1,18}): loss ([^,\s]{1,40}), time ([\d.]{1,24})ms(?:, mfu (-?[\d.]{1,24})%)?")
EVAL_RE = re.compile(r"^step (\d{1,18}): train loss ([^,\s]{1,40}), val loss ([^,\s]{1,40})")
LLMC_RE = re.compile(r"^s:(\d{1,18}) ")
LLMC_STDOUT_RE = re.compile(r"^step\s{1,12}(\d{1,18})/\d{1,18} \| ")
VAL_LOSS_RE = re.compile(r"^val loss ([^\s,]{1,40})")
RECORD_RE = re.compile(r"step:\d|^iter \d|^s:\d|^step\s{1,12}\d")
_TIME_SCALE = {"ms": 1.0, "s": 1e3, "m": 6e4}


def read_nanogpt(source: str, text: str) -> LogSeries:
    warnings: list[str] = []
    records: list[dict[str, Any]] = []
    events = Events()
    last: int | None = None
    for line in log_lines(text, warnings, RECORD_RE):
        m = MODDED_RE.match(line) or MODDED_RE.search(line[:200])
        if m:
            step = int(m.group(1))
            values = pairs(line[m.end() :])
            rec: dict[str, Any] = {"step": step}
            if "val_loss" in values:
                rec["val_loss"] = values["val_loss"]
                events.items.append({"kind": "eval", "step": step})
            else:
                t = TRAIN_TIME_RE.search(line)
                if t:
                    rec["train_time_ms"] = (
                        float(t.group(1)) * _TIME_SCALE[t.group(2)] if _is_float(t.group(1)) else None
                    )
                for key in ("train_loss", "tok_s", "lr", "grad_norm"):
                    if key in values:
                        rec[key] = values[key]
                last = step
            records.append(rec)
            continue
        m = ITER_RE.match(line)
        if m:
            last = int(m.group(1))
            records.append(
                {
                    "step": last,
                    "loss": parse_number(m.group(2)),
                    "step_time_ms": parse_number(m.group(3)),
                    "mfu": parse_number(m.group(4)) if m.group(4) else None,
                }
            )
            continue
        m = EVAL_RE.match(line)
        if m:  # evaluated before iteration N trains: the event follows the last logged iteration
            step = int(m.group(1))
            records.append({"step": step, "val_loss": parse_number(m.group(3))})
            events.items.append({"kind": "eval", "step": last if last is not None else step})
            continue
        events.feed(line, last)
    return _finish(source, "nanoGPT", records, warnings, events, text)


def read_llmc(source: str, text: str) -> LogSeries:
    warnings: list[str] = []
    records: list[dict[str, Any]] = []
    events = Events()
    last: int | None = None
    for line in log_lines(text, warnings, RECORD_RE):
        m = LLMC_RE.match(line)
        if m:
            step = int(m.group(1))
            values = pairs(line[m.end() :])
            if "trl" in values:
                records.append(
                    {"step": step, "loss": values["trl"], "lr": values.get("lr"), "grad_norm": values.get("norm")}
                )
                last = step
            if "tel" in values:
                records.append({"step": step, "val_loss": values["tel"]})
            if "tel" in values or "eval" in values:
                events.items.append({"kind": "eval", "step": step})
            continue
        m = LLMC_STDOUT_RE.match(line)
        if m:
            last = int(m.group(1))
            records.append(_llmc_console(last, line[m.end() :]))
            continue
        m = VAL_LOSS_RE.match(line)
        if m and last is not None:
            records.append({"step": last, "val_loss": parse_number(m.group(1))})
            events.items.append({"kind": "eval", "step": last})
            continue
        events.feed(line, last)
    return _finish(source, "llm.c", records, warnings, events, text)


def _llmc_console(step: int, rest: str) -> dict[str, Any]:
    rec: dict[str, Any] = {"step": step}
    for part in rest.replace("(", "|").replace(")", "|").split("|"):
        words = part.split()
        if len(words) < 2:
            continue
        if words[:2] == ["train", "loss"] and len(words) > 2:
            rec["loss"] = parse_number(words[2])
        elif words[0] in ("norm", "lr"):
            rec["grad_norm" if words[0] == "norm" else "lr"] = parse_number(words[1])
        elif words[-1] == "ms":
            rec["step_time_ms"] = parse_number(words[0])
        elif words[-1] == "tok/s":
            rec["tok_s"] = parse_number(words[0])
        elif words[-1] == "MFU":
            mfu = parse_number(words[0])
            rec["mfu"] = mfu if mfu is not None and mfu >= 0 else None  # -100% = not measured
    return rec


def _is_float(text: str) -> bool:
    return parse_number(text) is not None


def _finish(
    source: str, fmt: str, records: list[dict[str, Any]], warnings: list[str], events: Events, text: str
) -> LogSeries:
    if not records:
        raise LogError(
            source,
            f"looks like a {fmt} log but has no step lines",
            excerpt(text),
            "pass the log the training script wrote (its stdout, or llm.c's main.log)",
        )
    return records_to_series(source, fmt, records, {}, warnings, events.items)
