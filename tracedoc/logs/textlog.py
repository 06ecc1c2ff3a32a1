"""Console training logs: Megatron-LM, DeepSpeed and torchtitan.

Each reader keeps the lines of its format, turns each into a record of ``name: value`` pairs under
the format's own names, and hands the records to :func:`build_series`. Megatron's ``arguments``
block (and its ``using world size: ...`` line) become the log's header, which the config checks read.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import LogError, excerpt
from .records import build_series
from .series import LogSeries, normalise_key, parse_number

ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def complete_lines(text: str, warnings: list[str], record_re: re.Pattern) -> list[str]:
    """The log's lines, without a last record line that was cut off mid-write; lines of JSON objects
    (another log format in the same file) are counted in a warning."""
    lines = text.splitlines()
    if lines and not text.endswith(("\n", "\r")) and record_re.search(lines[-1]):
        warnings.append(f"the last line ({len(lines)}) is cut off; it is left out")
        lines.pop()
    foreign = sum(1 for ln in lines if ln.startswith("{") and ln.rstrip().endswith("}"))
    if foreign:
        warnings.append(f"{foreign} lines are JSON objects, another log format; they are left out")
    return one_rank(lines, warnings)


RANK_PREFIX_RE = re.compile(r"^\[(?:rank|default)(\d+)\]:")


def one_rank(lines: list[str], warnings: list[str]) -> list[str]:
    """torchrun --tee prefixes every rank's output with ``[rankN]:``; with several ranks in one file the
    lowest rank's lines (and unprefixed ones) are kept, without the prefix."""
    ranks = {int(m.group(1)) for m in map(RANK_PREFIX_RE.match, lines[:20000]) if m}
    if not ranks:
        return lines
    first = min(ranks)
    if len(ranks) > 1:
        warnings.append(f"lines of {len(ranks)} ranks in one file; rank {first} is analysed")
    out = []
    for ln in lines:
        m = RANK_PREFIX_RE.match(ln)
        if m is None:
            out.append(ln)
        elif int(m.group(1)) == first:
            out.append(ln[m.end():])
    return out

# ---- Megatron-LM -------------------------------------------------------------------------------
MEGATRON_ITER_RE = re.compile(r"iteration\s+(\d+)\s*/\s*(\d+)\s*\|")
MEGATRON_ARG_RE = re.compile(r"^\s*([A-Za-z_][A-Za-z0-9_]*) \.{2,} (.*?)\s*$")
MEGATRON_SIZES_RE = re.compile(r"using world size:\s*(\d+)(.*)")
MEGATRON_MEMORY_RE = re.compile(r"\(after (\d+) iterations\) memory \(MB\)(.*)")


def read_megatron(source: str, text: str) -> LogSeries:
    records: list[dict[str, Any]] = []
    header: dict[str, Any] = {}
    memory: dict[int, float] = {}
    in_args = False
    warnings: list[str] = []
    for line in complete_lines(text, warnings, MEGATRON_ITER_RE):
        if "arguments" in line and line.strip().startswith("-"):
            in_args = "end of arguments" not in line
            continue
        if in_args:
            m = MEGATRON_ARG_RE.match(line)
            if m:
                header[m.group(1)] = _arg_value(m.group(2))
            continue
        m = MEGATRON_ITER_RE.search(line)
        if m:
            rec: dict[str, Any] = {"iteration": int(m.group(1))}
            header.setdefault("train_iters", int(m.group(2)))
            for part in (line[:m.start()] + "|" + line[m.end():]).split("|"):  # Megatron-DeepSpeed puts samples/sec first
                name, sep, value = part.partition(":")
                if sep:
                    rec[name.strip()] = parse_number(value)
            records.append(rec)
            continue
        m = MEGATRON_SIZES_RE.search(line)
        if m:
            header.setdefault("world_size", int(m.group(1)))  # the arguments block, when present, wins
            for name, value in re.findall(r"([a-z\-]+) size:\s*(\d+)", m.group(2)):
                header.setdefault(name.replace("-", "_") + "_size", int(value))
            continue
        m = MEGATRON_MEMORY_RE.search(line)
        if m:
            fields = dict(_pairs(m.group(2)))
            value = fields.get("max_allocated", fields.get("allocated"))
            if value is not None:
                memory[int(m.group(1))] = value * 2**20
    if not records:
        raise LogError(source, "looks like a Megatron-LM log but has no 'iteration N/M | ...' lines",
                       f"{len(header)} arguments", "pass the log of the last pipeline stage (it prints the loss)")
    for rec in records:
        gbs, ms = rec.get("global batch size"), rec.get("elapsed time per iteration (ms)")
        if gbs and ms:
            rec["samples_per_sec"] = gbs / (ms / 1e3)
        if rec["iteration"] in memory:
            rec["memory_bytes"] = memory[rec["iteration"]]
    series = _records(source, "Megatron-LM", records, header)
    series.warnings[:0] = warnings
    series.header["precision"] = "bf16" if header.get("bf16") else ("fp16" if header.get("fp16") else series.header.get("precision"))
    return series


def _pairs(text: str):
    for part in text.split("|"):
        name, sep, value = part.partition(":")
        if sep:
            x = parse_number(value)
            if x is not None:
                yield normalise_key(name), x


def _arg_value(text: str) -> Any:
    t = text.strip()
    if t in ("True", "False"):
        return t == "True"
    if t == "None":
        return None
    x = parse_number(t)
    if x is not None and "," not in t:
        return int(x) if x == x and x.is_integer() and "." not in t and "e" not in t.lower() else x
    return t


# ---- DeepSpeed ---------------------------------------------------------------------------------
DS_STEP_RE = re.compile(r"\bstep=(\d+), skipped=(\d+), lr=\[([^\]]*)\]")
# timer lines: "epoch=0/micro_step=40/global_step=10, RunningAvgSamplesPerSec=.., CurrSamplesPerSec=.., ..."
# and, in older releases, "0/40, SamplesPerSec=.." or "0/40, RunningAvgSamplesPerSec=.., CurrSamplesPerSec=.."
DS_TIMER_RE = re.compile(r"(?:global_step=(\d+)|\]\s+\d+/(\d+)),\s*(?:RunningAvgSamplesPerSec=[^,\s]+,\s*"
                         r"CurrSamplesPerSec=([^,\s]+)|SamplesPerSec=([^,\s]+))"
                         r"(?:,\s*MemAllocated=([\d.]+)GB,\s*MaxMemAllocated=([\d.]+)GB)?")
DS_OVERFLOW_RE = re.compile(r"OVERFLOW!.*?Attempted loss scale: ([^,\s]+), reducing to ([^,\s]+)"
                            r"|fp16 dynamic loss scale overflow!")
GENERIC_PAIR_RE = re.compile(r"\b([A-Za-z_][\w/]*)\s*[=:]\s*(-?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|nan|NaN|inf|Infinity|-inf))")
_USER_STEP_RE = re.compile(r"\b(?:step|global_step|iteration|iter)\s*[=:]?\s*(\d+)", re.I)


def read_deepspeed(source: str, text: str) -> LogSeries:
    by_step: dict[int, dict[str, Any]] = {}
    events: list[dict[str, Any]] = []
    prev_skipped = 0
    last_step = 0
    warnings: list[str] = []
    for line in complete_lines(text, warnings, re.compile(r"step=\d+|global_step=\d+")):
        m = DS_STEP_RE.search(line)
        if m:
            step, skipped = int(m.group(1)), int(m.group(2))
            rec = by_step.setdefault(step, {"step": step})
            rec["skipped"] = max(0, skipped - prev_skipped)  # DeepSpeed prints a running total
            prev_skipped = skipped
            lrs = [parse_number(x) for x in m.group(3).split(",")]
            rec["lr"] = lrs[0] if lrs else None
            last_step = step
            continue
        m = DS_TIMER_RE.search(line)
        if m:
            step = int(m.group(1) or m.group(2))
            rec = by_step.setdefault(step, {"step": step})
            rec["CurrSamplesPerSec"] = parse_number(m.group(3) or m.group(4))
            if m.group(6):
                rec["max_memory_allocated_gb"] = parse_number(m.group(6))
            last_step = step
            continue
        m = DS_OVERFLOW_RE.search(line)
        if m:
            events.append({"kind": "overflow", "after_step": last_step,
                           "loss_scale": parse_number(m.group(1)) if m.group(1) else None})
            continue
        if "loss" in line.lower():  # the training script prints the loss itself
            m = _USER_STEP_RE.search(line)
            if m:
                rec = by_step.setdefault(int(m.group(1)), {"step": int(m.group(1))})
                for name, value in GENERIC_PAIR_RE.findall(line):
                    if normalise_key(name) in ("loss", "train_loss", "lm_loss", "grad_norm"):
                        rec[normalise_key(name)] = parse_number(value)
    if not by_step:
        raise LogError(source, "looks like a DeepSpeed log but has no 'step=N, skipped=..' or timer lines",
                       excerpt(text), "set steps_per_print in the DeepSpeed config so that steps are logged")
    series = _records(source, "DeepSpeed", list(by_step.values()), {})
    series.warnings[:0] = warnings
    series.events = events
    if events:
        series.header["precision"] = "fp16"
    return series


# ---- torchtitan --------------------------------------------------------------------------------
TITAN_STEP_RE = re.compile(r"\bstep:\s*(\d+)\s+loss:")
TITAN_PAIR_RE = re.compile(r"\b([a-z_]+):\s*(-?[\d,]*\.?\d+(?:[eE][-+]?\d+)?|nan|inf|-inf)(GiB)?(?:\(([\d.]+)%\))?%?")


def read_torchtitan(source: str, text: str) -> LogSeries:
    records = []
    header: dict[str, Any] = {}
    warnings: list[str] = []
    for raw in complete_lines(text, warnings, TITAN_STEP_RE):
        line = ANSI_RE.sub("", raw)
        m = TITAN_STEP_RE.search(line)
        if m:
            rec: dict[str, Any] = {}
            for name, value, _gib, _pct in TITAN_PAIR_RE.findall(line[m.start():]):
                rec[name] = parse_number(value)
            records.append(rec)
            continue
        if "Peak FLOPS used for computing MFU" in line:
            header["peak_flops"] = parse_number(line.rsplit(":", 1)[-1])
    if not records:
        raise LogError(source, "looks like a torchtitan log but has no 'step: N  loss: ...' lines", excerpt(text),
                       "pass the log of rank 0")
    series = _records(source, "torchtitan", records, header)
    series.warnings[:0] = warnings
    return series


# ---- Hugging Face Trainer console ----------------------------------------------------------------
HF_DICT_RE = re.compile(r"\{'(?:loss|eval_loss|train_loss|learning_rate|grad_norm)': [^{}]*\}")
_HF_PAIR_RE = re.compile(r"'([^']+)':\s*([^,}]+)")


def read_hf_console(source: str, text: str) -> LogSeries:
    """The dicts the Trainer prints (``{'loss': 1.23, 'grad_norm': 0.9, 'learning_rate': 2e-05, 'epoch': 0.1}``);
    they carry no step, so records are numbered, and the final summary dict is left out."""
    records = []
    for m in HF_DICT_RE.finditer(ANSI_RE.sub("", text)):
        rec = {k: parse_number(v.strip().strip("'")) for k, v in _HF_PAIR_RE.findall(m.group(0))}
        if "train_runtime" not in rec and "loss" in rec:
            records.append(rec)
    if not records:
        raise LogError(source, "has Trainer metric dicts but none with a training loss", excerpt(text),
                       "pass the trainer_state.json from the output directory instead")
    series = _records(source, "Hugging Face Trainer console", records, {})
    series.warnings = [w for w in series.warnings if not w.startswith("no step field")]
    series.warnings.append("the Trainer's console dicts carry no step: logged records are numbered 0, 1, ...; "
                           "trainer_state.json has the steps")
    return series


def _records(source: str, fmt: str, records: list[dict[str, Any]], header: dict[str, Any]) -> LogSeries:
    keys: dict[str, None] = {}
    for r in records:
        keys.update(dict.fromkeys(r))
    return build_series(source, fmt, keys, lambda k: [r.get(k) for r in records], len(records), header=header)
