"""Pick the reader for a training log by its content (never by its name alone) and read it.

Formats (``FORMATS``, the names ``--format-hint`` takes): JSON Lines (and ``tracedoc run``'s
``steps.jsonl``), JSON documents (Hugging Face ``trainer_state.json``, lists or columns of records),
the Hugging Face Trainer's console dicts, Megatron-LM and Megatron-DeepSpeed, DeepSpeed and
DeepSpeed-Chat (SFT, RLHF/PPO), torchtitan, nanoGPT / modded-nanogpt, llm.c, CSV (Lightning
``metrics.csv``, W&B exports, plain), and plain text of ``name: value`` pairs (by hint only). A
``tracedoc run`` output directory is read through its ``steps.jsonl``; a Hugging Face output
directory through its newest ``trainer_state.json``.

Each text format has a sniffer: a pattern that one of its record lines matches, searched for in the
first ``HEAD_BYTES`` of the log (a modded-nanogpt log starts with the training script's source).
When none matches, the error lists what was looked for. Fields are mapped by name (``series.ALIASES``);
``field_map`` (``--field loss=train/lm_loss``) maps the ones the aliases miss.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

from .errors import LogError, excerpt
from .jsonlog import PARALLEL_MIN_BYTES, SAMPLE_BYTES, loads_lenient
from .registry import LOG_FORMATS
from .series import FIELD_OVERRIDES, MAPPABLE, LogSeries
from .source import read_bounded, require_regular_file

HEAD_BYTES = 4 * 2**20

# name -> (what it is, a pattern one of its record lines matches); searched in this order
TEXT_SNIFFERS: dict[str, tuple[str, re.Pattern]] = {
    "megatron": (
        "Megatron-LM / Megatron-DeepSpeed ('iteration N/M | ... | lm loss: ...', or its arguments block)",
        re.compile(r"iteration\s{1,40}\d{1,18}\s{0,40}/\s{0,40}\d{1,18}\s{0,40}\||-{3,} arguments -{3,}"),
    ),
    "deepspeed": (
        "DeepSpeed / DeepSpeed-Chat ('step=N, skipped=S, lr=[...]', timer lines, 'act_loss: ... cri_loss:')",
        re.compile(
            r"SamplesPerSec=|\bstep=\d{1,18}, skipped=\d{1,18}, lr=\[|\[deepspeed\]|OVERFLOW! Rank|"
            r"\|act_loss: |Actor Loss: "
        ),
    ),
    "torchtitan": (
        "torchtitan ('[titan] ... step: N  loss: X  grad_norm: ...')",
        re.compile(
            r"\[titan\]|\bstep:\s{0,8}\d{1,18}(?:/\d{1,18} = [\d.]{1,12}%)?\s{1,8}loss:\s{0,8}\S{1,40}"
            r"\s{1,8}(?:grad_norm|memory|tps)"
        ),
    ),
    "nanogpt": (
        "nanoGPT / modded-nanogpt ('step:N/M train_loss:X train_time:Tms', 'iter N: loss X, time T ms')",
        re.compile(
            r"step:\d{1,18}/\d{1,18} (?:train_loss|val_loss|train_time):|^iter \d{1,18}: loss \S{1,40}, time |"
            r"^step \d{1,18}: train loss ",
            re.M,
        ),
    ),
    "llmc": (
        "llm.c (main.log 's:N trl:X lr:Y norm:Z', console 'step N/M | train loss X | ...')",
        re.compile(r"^s:\d{1,18} (?:trl|tel|eval):|^step\s{1,12}\d{1,18}/\d{1,18} \| train loss ", re.M),
    ),
    "hf-console": (
        "Hugging Face Trainer console ({'loss': ..., 'learning_rate': ...} lines)",
        re.compile(r"\{'(?:loss|eval_loss|learning_rate)': "),
    ),
}
OTHER_FORMATS = {
    "jsonl": "JSON Lines (one object per line with a step and loss, lr, grad_norm, tokens_per_sec, ...)",
    "json": "JSON documents (trainer_state.json with log_history, a list or columns of records)",
    "csv": "CSV with a header row (Lightning metrics.csv, W&B exports)",
    "text": "plain text of 'name: value' / 'name=value' pairs with a step (by --format-hint only)",
}
FORMATS = LOG_FORMATS  # jsonl, json, the text sniffers' names in their order, csv, text


def looked_for() -> str:
    """What the sniffers look for, for error messages."""
    kinds = [desc for name, desc in OTHER_FORMATS.items() if name != "text"] + [d for d, _ in TEXT_SNIFFERS.values()]
    return "; ".join(kinds)


_VERSION_RE = re.compile(r"^version_(\d{1,9})$")


def resolve_paths(path: str) -> list[str]:
    """The logs a path stands for: a file; the log inside a run or output directory; or, for a directory of
    Lightning ``version_N`` logs (segments of one run), each version's ``metrics.csv`` in version order."""
    if os.path.isdir(path):
        versions = []
        for d in os.listdir(path):
            m = _VERSION_RE.match(d)
            if m and os.path.isfile(os.path.join(path, d, "metrics.csv")):
                versions.append((int(m.group(1)), os.path.join(path, d, "metrics.csv")))
        if versions and not any(os.path.isfile(os.path.join(path, n)) for n in _RUN_LOGS):
            return [p for _, p in sorted(versions)]
    return [resolve_path(path)]


_RUN_LOGS = ("steps.jsonl", "trainer_log.jsonl", "trainer_state.json", "metrics.csv")


def resolve_path(path: str) -> str:
    """A log file, or the log inside a ``tracedoc run``, LLaMA-Factory or Hugging Face output directory."""
    if not os.path.isdir(path):
        return path
    for name in _RUN_LOGS:
        candidate = os.path.join(path, name)
        if os.path.isfile(candidate):
            return candidate
    checkpoints = sorted(
        (d for d in os.listdir(path) if d.startswith("checkpoint-") and d[11:].isdigit()), key=lambda d: int(d[11:])
    )
    for d in reversed(checkpoints):
        candidate = os.path.join(path, d, "trainer_state.json")
        if os.path.isfile(candidate):
            return candidate
    raise LogError(
        path,
        "is a directory without a training log",
        "no steps.jsonl, trainer_log.jsonl, trainer_state.json, metrics.csv or version_N/metrics.csv",
        "pass the log file itself",
    )


def read_bytes(path: str, truncated: list[str] | None = None) -> bytes:
    """The log's bytes, gzip inflated, within the bounds of :mod:`tracedoc.logs.source`; ``truncated``
    collects why a gzip stream ended early."""
    return read_bounded(path, "log", truncated=truncated)


def _read_head(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read(SAMPLE_BYTES)
    except OSError:
        return None


def sniff(data: bytes) -> str:
    """The format of a log from its content; raise :class:`LogError` (listing what was looked for) when none fits."""
    head = data[:HEAD_BYTES].decode("utf-8", "replace").lstrip("\ufeff")
    stripped = head.lstrip()
    if not stripped:
        raise LogError("", "is empty", None, "point tracedoc at the training log after the run has logged steps")
    first = stripped.split("\n", 1)[0].strip()
    if first.startswith("{'"):
        return "hf-console"  # Python dict reprs, not JSON
    if stripped.startswith("{"):
        return _json_kind(data, first)
    if re.match(r"\[\s{0,1000}[\[{\]]", stripped):
        return "json"
    counts = {name: _count(pattern, head) for name, (_, pattern) in TEXT_SNIFFERS.items()}
    most = max(counts.values())
    if most:  # the first format, in the order above, with a fair share of the record lines: one stray
        # line of another format does not decide, a Megatron-DeepSpeed log's DeepSpeed lines do not either
        return next(name for name, n in counts.items() if n and n >= SNIFF_SHARE * most)
    if "," in first or "\t" in first or ";" in first:
        cells = re.split(r"[,;\t]", first[:100_000])
        if len(cells) >= 2 and all(c.strip() and not _is_number(c) for c in cells):
            return "csv"
    raise LogError(
        "",
        "is not a training log format tracedoc knows",
        f"first line {excerpt(first)}",
        f"tracedoc looked for: {looked_for()}; none matched. Name the format with --format-hint "
        f"({', '.join(FORMATS)}) and map fields with --field NAME=COLUMN",
    )


_NON_SPACE = re.compile(rb"\S")
SNIFF_SHARE = 0.2
SNIFF_MAX_MATCHES = 200


def _count(pattern: re.Pattern, head: str) -> int:
    n = 0
    for _ in pattern.finditer(head):
        n += 1
        if n >= SNIFF_MAX_MATCHES:
            break
    return n


def _json_kind(data: bytes, first: str) -> str:
    """JSON Lines or one JSON document: the first line, read whole however long, is one complete object
    followed by more lines (JSON Lines), or the start of a document."""
    body = data.lstrip(b"\xef\xbb\xbf \t\r\n")
    end = body.find(b"\n")
    line = body if end < 0 else body[:end]
    more = end >= 0 and _NON_SPACE.search(body, end + 1) is not None  # no copy of the rest of the file
    try:
        obj = loads_lenient(line)
    except (ValueError, RecursionError):
        obj = None
    if isinstance(obj, dict):
        if not more and "log_history" in obj:
            return "json"  # a one-line trainer_state.json
        return "jsonl"
    if obj is None and first.endswith("}") and more:
        return "jsonl"  # a damaged first line: the JSON Lines reader says which lines do not decode
    return "json"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def check_field_map(field_map: Mapping[str, str] | None) -> dict[str, str]:
    """``--field`` mappings as {canonical: column}; a LogError naming the accepted names for an unknown one."""
    out: dict[str, str] = {}
    for name, column in (field_map or {}).items():
        if name not in MAPPABLE:
            raise LogError(
                "--field", f"{name!r} is not a field tracedoc reads", None, f"map one of: {', '.join(MAPPABLE)}"
            )
        out[name] = column
    return out


def read_log(
    path: str | os.PathLike, fmt: str | None = None, jobs: int = 1, field_map: Mapping[str, str] | None = None
) -> LogSeries:
    """Read a training log (file or run directory) into a :class:`LogSeries`; ``fmt`` names the format
    (one of ``FORMATS``) instead of sniffing it; ``field_map`` maps canonical fields to the log's own
    names; ``jobs`` > 1 decodes a large JSON Lines file in that many processes."""
    path = resolve_path(os.fspath(path))
    size = require_regular_file(path, "log")
    if fmt is not None and fmt not in FORMATS:
        raise LogError(path, f"unknown log format {fmt!r}", None, f"one of: {', '.join(FORMATS)}")
    overrides = check_field_map(field_map)
    token = FIELD_OVERRIDES.set(overrides)
    try:
        series = _read(path, size, fmt, jobs)
    finally:
        FIELD_OVERRIDES.reset(token)
    missing = [
        f"{name}={column}"
        for name, column in overrides.items()
        if name not in series.fields_seen
        and not (name in ("step_time_ms", "elapsed_ms", "elapsed_s") and "step_time_s" in series.fields_seen)
        and not (name.endswith("_per_s") and "throughput" in series.fields_seen)
        and not (name == "memory_gib" and "memory_bytes" in series.fields_seen)
    ]
    if missing:
        raise LogError(
            path,
            f"--field {', '.join(missing)}: no such field in this {series.format} log",
            None,
            f"the log's fields include {', '.join(sorted(series.fields_seen.values())[:12]) or 'none'}",
        )
    return series


def read_logs(
    paths: list[str | os.PathLike], fmt: str | None = None, jobs: int = 1, field_map: Mapping[str, str] | None = None
) -> LogSeries:
    """Segments of one run (files, or a directory of Lightning ``version_N`` logs) read and joined in step
    order (:func:`tracedoc.logs.runs.join`); one path is read as :func:`read_log` reads it."""
    files = [f for p in paths for f in resolve_paths(os.fspath(p))]
    if len(files) == 1:
        return read_log(files[0], fmt, jobs, field_map)
    from .runs import join

    parts = [read_log(f, fmt, jobs, field_map) for f in files]
    return join(parts, display_names(files))


def display_names(files: list[str]) -> list[str]:
    """Short names for files shown side by side: their paths below the directory they share."""
    try:
        common = os.path.commonpath([os.path.abspath(f) for f in files])
    except ValueError:
        return list(files)
    if os.path.isfile(common):
        common = os.path.dirname(common)
    return [os.path.relpath(os.path.abspath(f), common) for f in files]


def _read(path: str, size: int, fmt: str | None, jobs: int) -> LogSeries:
    head = _read_head(path) if jobs > 1 and size >= PARALLEL_MIN_BYTES else None
    cut: list[str] = []
    data = head if head is not None and head[:2] != b"\x1f\x8b" else read_bytes(path, cut)
    kind = fmt or _sniff_file(path, data)
    if data is head and kind != "jsonl":  # only JSON Lines are decoded in byte ranges
        data = read_bytes(path, cut)
        kind = fmt or _sniff_file(path, data)
    if kind == "jsonl":
        from .jsonlog import read_jsonl

        series = read_jsonl(path, data, jobs, size if data is head else None)
    else:
        series = read_chunk(path, data, kind)
    if len(series) == 0:
        raise LogError(
            path,
            f"holds no logged steps ({series.format})",
            None,
            "point tracedoc at the log after the run has logged steps",
        )
    series.warnings[:0] = [f"{reason}; what came before is read" for reason in cut[:1]]
    return series


def read_chunk(path: str, data: bytes, kind: str) -> LogSeries:
    """Some lines (or all) of a log of a known format (one of ``FORMATS``) as a series: what ``--follow``
    reads each time lines are appended."""
    if kind == "jsonl":
        from .jsonlog import read_jsonl

        series = read_jsonl(path, data)
    elif kind == "json":
        from .jsonlog import read_json_document

        series = read_json_document(path, data)
    elif kind == "csv":
        from .csvlog import read_csv

        series = read_csv(path, data)  # decoded a bounded line at a time
    else:
        series = _text_reader(kind)(path, data.decode("utf-8", "replace"))
    return series


def _sniff_file(path: str, data: bytes) -> str:
    try:
        return sniff(data)
    except LogError as exc:
        raise LogError(path, exc.what, exc.seen, exc.todo) from None


def _text_reader(kind: str):
    if kind == "megatron":
        from .megatron import read_megatron as reader
    elif kind == "deepspeed":
        from .deepspeed import read_deepspeed as reader
    elif kind == "torchtitan":
        from .titan import read_torchtitan as reader
    elif kind in ("nanogpt", "llmc"):
        from . import nanolog

        reader = nanolog.read_nanogpt if kind == "nanogpt" else nanolog.read_llmc
    elif kind == "hf-console":
        from .textlog import read_hf_console as reader
    else:
        from .textlog import read_key_values as reader
    return reader
