"""Megatron-LM and Megatron-DeepSpeed console logs.

Record lines (``iteration N/M | name: value | ...``, Megatron-DeepSpeed may put ``samples/sec`` first)
become one record each under Megatron's own names; ``validation loss at iteration N | lm loss value: X``
gives the validation loss at N and an evaluation event; checkpoint saves and DeepSpeed's fp16 overflow
messages (Megatron-DeepSpeed) are events. The ``arguments`` block (and the ``using world size: ...``
line) become the log's header, which the config checks read.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import LogError
from .series import LogSeries, normalise_key, parse_number
from .textlog import Events, log_lines, records_to_series

ITER_RE = re.compile(r"iteration\s{1,40}(\d{1,18})\s{0,40}/\s{0,40}(\d{1,18})\s{0,40}\|")
VALID_RE = re.compile(r"validation loss at iteration\s{1,40}(\d{1,18})\s{0,40}\|")
ARG_RE = re.compile(r"^[ \t]{0,64}([A-Za-z_]\w{0,127}) \.{2,} (.*)$")
SIZES_RE = re.compile(r"using world size:\s{0,8}(\d{1,9})(.*)")
SIZE_PAIR_RE = re.compile(r"(?<![a-z\-])([a-z\-]{1,40}) size:\s{0,8}(\d{1,9})")
MEMORY_RE = re.compile(r"\(after (\d{1,18}) iterations\) memory \(MB\)(.*)")


def read_megatron(source: str, text: str) -> LogSeries:
    records: list[dict[str, Any]] = []
    header: dict[str, Any] = {}
    memory: dict[int, float] = {}
    in_args = False
    warnings: list[str] = []
    events = Events()
    last: int | None = None
    for line in log_lines(text, warnings, ITER_RE):
        if "arguments" in line and line.strip().startswith("-"):
            in_args = "end of arguments" not in line
            continue
        if in_args:
            m = ARG_RE.match(line)
            if m:
                header[m.group(1)] = arg_value(m.group(2))
            continue
        m = ITER_RE.search(line)
        if m:
            rec: dict[str, Any] = {"iteration": int(m.group(1))}
            header.setdefault("train_iters", int(m.group(2)))
            for part in (line[: m.start()] + "|" + line[m.end() :]).split(
                "|"
            ):  # Megatron-DeepSpeed puts samples/sec first
                name, sep, value = part.partition(":")
                if sep:
                    rec[name.strip()] = parse_number(value)
            records.append(rec)
            last = rec["iteration"]
            continue
        m = VALID_RE.search(line)
        if m:
            step = int(m.group(1))
            values = dict(_pairs(line[m.end() :]))
            loss = next((v for k, v in values.items() if k.endswith("loss_value") or k == "loss"), None)
            if loss is not None:
                records.append({"iteration": step, "validation loss": loss})
            events.items.append({"kind": "eval", "step": step})
            continue
        m = SIZES_RE.search(line)
        if m:
            header.setdefault("world_size", int(m.group(1)))  # the arguments block, when present, wins
            for name, value in SIZE_PAIR_RE.findall(m.group(2)):
                header.setdefault(name.replace("-", "_") + "_size", int(value))
            continue
        m = MEMORY_RE.search(line)
        if m:
            fields = dict(_pairs(m.group(2)))
            value = fields.get("max_allocated", fields.get("allocated"))
            if value is not None:
                memory[int(m.group(1))] = value * 2**20
            continue
        events.feed(line, last)
    if not any("iteration" in r and len(r) > 2 for r in records):
        raise LogError(
            source,
            "looks like a Megatron-LM log but has no 'iteration N/M | ...' lines",
            f"{len(header)} arguments",
            "pass the log of the last pipeline stage (it prints the loss)",
        )
    for rec in records:
        gbs, ms = rec.get("global batch size"), rec.get("elapsed time per iteration (ms)")
        if gbs and ms and ms > 0:
            rec["samples_per_sec"] = gbs / (ms / 1e3)
        if rec["iteration"] in memory:
            rec["memory_bytes"] = memory[rec["iteration"]]
    series = records_to_series(source, "Megatron-LM", records, header, warnings, events.items)
    if header.get("bf16"):
        series.header["precision"] = "bf16"
    elif header.get("fp16") or any(e["kind"] == "overflow" for e in events.items):
        series.header["precision"] = "fp16"
    return series


def _pairs(text: str):
    for part in text.split("|"):
        name, sep, value = part.partition(":")
        if sep:
            x = parse_number(value)
            if x is not None:
                yield normalise_key(name), x


def arg_value(text: str) -> Any:
    """A value of Megatron's arguments block: bool, None, int, float or the text."""
    t = text.strip()
    if t in ("True", "False"):
        return t == "True"
    if t == "None":
        return None
    x = parse_number(t) if len(t) <= 64 else None
    if x is not None and "," not in t:
        return int(x) if x == x and x.is_integer() and "." not in t and "e" not in t.lower() else x
    return t
