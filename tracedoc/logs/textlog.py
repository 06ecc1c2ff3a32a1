"""What every console-log reader shares: the lines of one rank, each cut to a length patterns may see,
``name: value`` pairs found in linear time, the events a log reports (fp16 overflows, evaluations,
checkpoint saves, garbage collections), and the hand-over of records to :func:`build_series`.

Also two small formats: the Hugging Face Trainer's console dicts, and plain text with ``key=value`` or
``key: value`` pairs per line (read when the user names it, ``--format-hint text``).

Every pattern here and in the format readers runs on a line of at most ``MAX_LINE_CHARS`` characters
and has no two unbounded quantifiers that can match the same characters next to each other, so
parsing is linear in the size of the log whatever the lines hold.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import LogError, excerpt
from .records import build_series
from .series import LogSeries, field_overrides, normalise_key, parse_number

MAX_LINE_CHARS = 8192  # real record lines are under 2 KB; longer ones are cut to this before any pattern
ANSI_RE = re.compile(r"\x1b\[[0-9;]{0,32}[A-Za-z]")
RANK_PREFIX_RE = re.compile(r"^\[(?:rank|default)(\d{1,6})\]:")

# ``name: value`` / ``name=value``: a key of at most 80 characters that does not start inside another
# word or path, then a number (or nan/inf); the bounded key length keeps findall linear
NUMBER = r"[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d{1,4})?|[-+]?(?:nan|NaN|inf|Inf|Infinity)\b"
PAIR_RE = re.compile(r"(?<![\w/.\-])([A-Za-z_][\w/.\-]{0,79}?)[ \t]{0,4}[=:][ \t]{0,4}(" + NUMBER + r")")


def pairs(line: str) -> dict[str, float]:
    """Every ``name: number`` / ``name=number`` of a line, the first occurrence of a name winning."""
    out: dict[str, float] = {}
    for name, value in PAIR_RE.findall(line):
        x = parse_number(value)
        if x is not None:
            out.setdefault(name.rstrip(".-"), x)
    return out


def log_lines(text: str, warnings: list[str], record_re: re.Pattern | None = None) -> list[str]:
    """The log's lines for parsing: one rank's, without colour codes, each at most MAX_LINE_CHARS long,
    without a last record line cut off mid-write; lines of JSON objects (another format) are counted."""
    lines = text.splitlines()
    if (
        lines
        and record_re is not None
        and not text.endswith(("\n", "\r"))
        and record_re.search(lines[-1][:MAX_LINE_CHARS])
    ):
        warnings.append(f"the last line ({len(lines)}) is cut off; it is left out")
        lines.pop()
    long = 0
    for i, ln in enumerate(lines):
        if len(ln) > MAX_LINE_CHARS:
            ln = " ".join(ln[: 16 * MAX_LINE_CHARS].split())  # padding collapsed first: the values stay
            if len(ln) > MAX_LINE_CHARS:
                ln = ln[:MAX_LINE_CHARS]
                long += 1
            lines[i] = ln
        if "\x1b" in ln:
            lines[i] = ANSI_RE.sub("", ln)
    if long:
        warnings.append(
            f"{long} lines are longer than {MAX_LINE_CHARS:,} characters; only their first {MAX_LINE_CHARS:,} are read"
        )
    foreign = sum(1 for ln in lines if ln.startswith("{") and ln.rstrip().endswith("}"))
    if foreign:
        warnings.append(f"{foreign} lines are JSON objects, another log format; they are left out")
    return one_rank(lines, warnings)


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
            out.append(ln[m.end() :])
    return out


# ---- events ------------------------------------------------------------------------------------
OVERFLOW_RE = re.compile(
    r"Attempted loss scale: ([^,\s]{1,40})(?:, reducing to ([^,\s]{1,40})|, but hysteresis is (\d{1,4}))"
)
APEX_OVERFLOW_RE = re.compile(r"reducing loss scale to ([^,\s]{1,40})")
NAMED_STEP_RE = re.compile(r"(?:iteration|global_step|checkpoint-|at step|step)[ :=]{0,12}(\d{1,15})\b", re.I)


class Events:
    """The events a console log reports, each placed after the last step logged before it (or at the
    step the line names): ``overflow`` (an fp16 step skipped; ``loss_scale`` attempted, ``new_scale``
    after, ``hysteresis`` for DeepSpeed's first-overflow form), ``min_scale``, ``eval``, ``save``, ``gc``."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []

    def feed(self, line: str, last_step: int | None) -> bool:
        """Record the event this line reports, if any; True when it was one."""
        kind = _event_kind(line)
        if kind is None:
            return False
        ev: dict[str, Any] = {"kind": kind}
        if kind == "overflow":
            m = OVERFLOW_RE.search(line)
            if m:
                ev["loss_scale"] = parse_number(m.group(1))
                if m.group(2):
                    ev["new_scale"] = parse_number(m.group(2))
                else:
                    ev["hysteresis"] = True
            else:
                m = APEX_OVERFLOW_RE.search(line)
                if m:
                    ev["new_scale"] = parse_number(m.group(1))
            ev["step"] = last_step
        else:
            m = NAMED_STEP_RE.search(line) if kind in ("eval", "save") else None
            ev["step"] = int(m.group(1)) if m else last_step
        if ev["step"] is None:
            ev["step"] = 0
        self.items.append(ev)
        return True


def _event_kind(line: str) -> str | None:
    if "OVERFLOW!" in line or "loss scale overflow" in line or "Gradient overflow." in line:
        return "overflow"
    if "loss scale already at minimum" in line.lower():
        return "min_scale"
    low = line.lower()
    if "checkpoint" in low and ("saving" in low or "saved" in low or "save request" in low):
        return None if "load" in low.split("checkpoint", 1)[0] else "save"
    if (
        "validation loss at iteration" in low
        or "running evaluation" in low
        or "***** evaluating" in low
        or "validate step" in low
        or "evaluating at step" in low
    ):
        return "eval"
    if "[gc]" in low and "collection" in low:
        return "gc"
    return None


# ---- records -> series ----------------------------------------------------------------------------
def records_to_series(
    source: str,
    fmt: str,
    records: list[dict[str, Any]],
    header: dict[str, Any],
    warnings: list[str] | None = None,
    events: list[dict[str, Any]] | None = None,
) -> LogSeries:
    keys: dict[str, None] = {}
    for r in records:
        keys.update(dict.fromkeys(r))
    series = build_series(source, fmt, keys, lambda k: [r.get(k) for r in records], len(records), header=header)
    series.warnings[:0] = warnings or []
    series.events = list(events or [])
    return series


# ---- Hugging Face Trainer console ----------------------------------------------------------------
HF_DICT_RE = re.compile(r"\{'(?:loss|eval_loss|train_loss|learning_rate|grad_norm)': [^{}]{0,4000}\}")
_HF_PAIR_RE = re.compile(r"'([^'\n]{1,200})':\s{0,4}([^,}\n]{1,100})")


def read_hf_console(source: str, text: str) -> LogSeries:
    """The dicts the Trainer prints (``{'loss': 1.23, 'grad_norm': 0.9, 'learning_rate': 2e-05, 'epoch': 0.1}``);
    they carry no step, so records are numbered, and the final summary dict is left out."""
    warnings: list[str] = []
    records = []
    events = Events()
    for line in log_lines(text, warnings):
        for m in HF_DICT_RE.finditer(line):
            rec = {k: parse_number(v.strip().strip("'")) for k, v in _HF_PAIR_RE.findall(m.group(0))}
            if "eval_loss" in rec:
                events.items.append({"kind": "eval", "step": len(records) - 1})
            if "train_runtime" not in rec and "loss" in rec:
                records.append(rec)
        if "Saving model checkpoint" in line:
            events.items.append({"kind": "save", "step": len(records) - 1})
    if not records:
        raise LogError(
            source,
            "has Trainer metric dicts but none with a training loss",
            excerpt(text),
            "pass the trainer_state.json from the output directory instead",
        )
    series = records_to_series(source, "Hugging Face Trainer console", records, {}, warnings, events.items)
    series.warnings = [w for w in series.warnings if not w.startswith("no step field")]
    series.warnings.append(
        "the Trainer's console dicts carry no step: logged records are numbered 0, 1, ...; "
        "trainer_state.json has the steps"
    )
    return series


# ---- plain text with name: value pairs --------------------------------------------------------------
_STEP_KEYS = ("step", "global_step", "iteration", "iter", "it", "s", "steps")


def read_key_values(source: str, text: str) -> LogSeries:
    """Any text log whose record lines hold a step and other ``name: value`` / ``name=value`` pairs; names
    are mapped like JSON keys (``--field`` maps the rest). Lines without a step are left out."""
    warnings: list[str] = []
    records: list[dict[str, Any]] = []
    events = Events()
    last: int | None = None
    mapped = field_overrides().get("step")
    step_keys = set(_STEP_KEYS) | ({normalise_key(mapped)} if mapped else set())
    for line in log_lines(text, warnings):
        rec = pairs(line)
        step_key = next((k for k in rec if normalise_key(k) in step_keys), None)
        if step_key is None:
            events.feed(line, last)
            continue
        records.append(rec)
        value = rec[step_key]
        last = int(value) if value == value and abs(value) < 2**53 else last
    if not records:
        raise LogError(
            source,
            "has no line with a step and name: value pairs",
            excerpt(text),
            "name the log's format with --format-hint, or map its fields with --field",
        )
    return records_to_series(source, "text (name: value pairs)", records, {}, warnings, events.items)
