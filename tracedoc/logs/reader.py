"""Pick the reader for a training log by its content (never by its name alone) and read it.

Formats: JSON Lines (and ``tracedoc run``'s ``steps.jsonl``), Hugging Face ``trainer_state.json``,
Megatron-LM, DeepSpeed and torchtitan console logs, Lightning ``metrics.csv`` and plain CSV. A
``tracedoc run`` output directory is read through its ``steps.jsonl``; a Hugging Face output
directory through its newest ``trainer_state.json``.
"""

from __future__ import annotations

import gzip
import os
import re

from .errors import LogError, excerpt
from .jsonlog import PARALLEL_MIN_BYTES, SAMPLE_BYTES
from .series import LogSeries

HEAD_BYTES = 64 * 1024
FORMATS = ("jsonl", "json", "megatron", "deepspeed", "torchtitan", "hf-console", "csv")

_MEGATRON_RE = re.compile(r"iteration\s+\d+\s*/\s*\d+\s*\|.*elapsed time per iteration|-+ arguments -+")
_DEEPSPEED_RE = re.compile(r"SamplesPerSec=|\bstep=\d+, skipped=\d+, lr=\[|\[deepspeed\]|OVERFLOW! Rank")
_HF_CONSOLE_RE = re.compile(r"\{'(?:loss|eval_loss|learning_rate)': ")
_TITAN_RE = re.compile(r"\[titan\]|\bstep:\s*\d+\s+loss:\s*\S+\s+(?:grad_norm|memory|tps)")


def resolve_path(path: str) -> str:
    """A log file, or the log inside a ``tracedoc run`` / Hugging Face output directory."""
    if not os.path.isdir(path):
        return path
    for name in ("steps.jsonl", "trainer_state.json", "metrics.csv"):
        candidate = os.path.join(path, name)
        if os.path.isfile(candidate):
            return candidate
    checkpoints = sorted((d for d in os.listdir(path) if d.startswith("checkpoint-") and d[11:].isdigit()),
                         key=lambda d: int(d[11:]))
    for d in reversed(checkpoints):
        candidate = os.path.join(path, d, "trainer_state.json")
        if os.path.isfile(candidate):
            return candidate
    raise LogError(path, "is a directory without a training log", "no steps.jsonl, trainer_state.json or metrics.csv",
                   "pass the log file itself")


def read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        raise LogError(path, "cannot be read", exc.strerror, "check the path and its permissions") from None
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise LogError(path, "is a damaged gzip file", str(exc), "re-copy the log") from None
    return data


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _read_head(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(SAMPLE_BYTES)
    except OSError:
        return None


def sniff(data: bytes) -> str:
    """The format of a log from its first bytes; raise :class:`LogError` when none fits."""
    head = data[:HEAD_BYTES].decode("utf-8", "replace").lstrip("\ufeff")
    stripped = head.lstrip()
    if not stripped:
        raise LogError("", "is empty", None, "point tracedoc at the training log after the run has logged steps")
    first = stripped.split("\n", 1)[0].strip()
    if first.startswith("{") and first.endswith("}"):
        if "\n" not in stripped.strip() and "log_history" in first:
            return "json"  # a one-line trainer_state.json
        return "jsonl"  # the JSON Lines reader reports lines of other formats
    if stripped.startswith("{") or re.match(r"\[\s*(\{|\])", stripped):
        return "json"
    if _MEGATRON_RE.search(head):
        return "megatron"
    if _TITAN_RE.search(head):
        return "torchtitan"
    if _DEEPSPEED_RE.search(head):
        return "deepspeed"
    if _HF_CONSOLE_RE.search(head):
        return "hf-console"
    if "," in first or "\t" in first or ";" in first:
        cells = re.split(r"[,;\t]", first)
        if len(cells) >= 2 and all(c.strip() and not _is_number(c) for c in cells):
            return "csv"
    raise LogError("", "is not a training log format tracedoc knows", f"first line {excerpt(first)}",
                   "tracedoc reads JSON Lines, trainer_state.json, Megatron-LM, DeepSpeed and torchtitan logs, "
                   "Lightning metrics.csv and CSV with a header row")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_log(path: str | os.PathLike, fmt: str | None = None, jobs: int = 1) -> LogSeries:
    """Read a training log (file or run directory) into a :class:`LogSeries`; ``jobs`` > 1 decodes a
    large JSON Lines file in that many processes."""
    path = resolve_path(os.fspath(path))
    size = _file_size(path)
    head = _read_head(path) if jobs > 1 and size >= PARALLEL_MIN_BYTES else None
    data = head if head is not None and head[:2] != b"\x1f\x8b" else read_bytes(path)
    try:
        kind = fmt or sniff(data)
    except LogError as exc:
        raise LogError(path, exc.what, exc.seen, exc.todo) from None
    if data is head and kind != "jsonl":  # only JSON Lines are decoded in byte ranges
        data = read_bytes(path)
    if kind not in FORMATS:
        raise LogError(path, f"unknown log format {kind!r}", None, f"one of: {', '.join(FORMATS)}")
    if kind == "jsonl":
        from .jsonlog import read_jsonl

        series = read_jsonl(path, data, jobs, size if data is head else None)
    elif kind == "json":
        from .jsonlog import read_json_document

        series = read_json_document(path, data)
    elif kind == "csv":
        from .csvlog import read_csv

        series = read_csv(path, data.decode("utf-8", "replace"))
    else:
        from . import textlog

        reader = {"megatron": textlog.read_megatron, "deepspeed": textlog.read_deepspeed,
                  "torchtitan": textlog.read_torchtitan, "hf-console": textlog.read_hf_console}[kind]
        series = reader(path, data.decode("utf-8", "replace"))
    if len(series) == 0:
        raise LogError(path, f"holds no logged steps ({series.format})", None,
                       "point tracedoc at the log after the run has logged steps")
    return series
