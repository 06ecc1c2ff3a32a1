"""A slice of a trace by its steps (``--steps A:B``): the time window of ``ProfilerStep#A`` to ``#B``.

A first pass streams the file and decodes only the ``ProfilerStep#N`` events (found by their name in
the bytes; nothing else is decoded or kept); the read that follows keeps the events that start inside
the window and drops the rest as they are decoded, so a slice of a huge trace needs the memory of the
slice. The window cuts the trace as a profiler's capture window does: GPU work of the last steps still
running after the window's end is left out, as work of earlier steps still running at its start is kept.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import msgspec

from ...errors import TraceError, UsageError
from ...model.numbers import BAD_NUMBER, decimal_text_to_scaled_int
from .source import _Source

_STEP_NAME_RE = re.compile(rb'"name"\s*:\s*"ProfilerStep#(\d{1,18})"')
_EVENT_END_RE = re.compile(rb"\}\s*(?:,\s*\{|\])")
_END_TRIES = 8  # ends tried per step event (an object inside its args ends like an event)
_LOOK_BACK = 4096  # bytes searched before a step's name for its opening brace (its ph, cat, pid... keys)
_CHUNK = 4 << 20
_HOLD_LIMIT = 64 << 20  # the most bytes held back for one step event that has not ended yet
_MAX_STEP = 10**18


class _StepEvent(msgspec.Struct, gc=False):
    ph: object = None
    name: object = None
    ts: msgspec.Raw = msgspec.Raw(b"null")
    dur: msgspec.Raw = msgspec.Raw(b"null")


_decode_step = msgspec.json.Decoder(_StepEvent).decode


class Steps(NamedTuple):
    """Steps ``first`` to ``last``, both included (None: from the first, to the last)."""

    first: int | None
    last: int | None

    def text(self) -> str:
        return f"{'' if self.first is None else self.first}:{'' if self.last is None else self.last}"


class Window(NamedTuple):
    """The time window of the chosen steps, in ns, and what it covers."""

    start_ns: int
    end_ns: int
    first: int
    last: int
    steps: int  # steps inside it
    total: int  # steps in the trace


def parse_steps(text: str) -> Steps:
    """``A:B`` (steps A to B, both included), ``A:`` (A to the last), ``:B`` or ``N`` (step N alone);
    a ``UsageError`` for anything else."""
    value = str(text).strip()
    first, sep, last = value.partition(":")
    if not sep:
        last = first
    try:
        a = int(first) if first.strip() else None
        b = int(last) if last.strip() else None
    except ValueError:
        a = b = -1
    if (a is not None and not 0 <= a < _MAX_STEP) or (b is not None and not 0 <= b < _MAX_STEP) or value in ("", ":"):
        raise UsageError(
            "--steps",
            f"{text!r} is not a range of step numbers",
            None,
            "write A:B for ProfilerStep#A to #B (both included), A: or :B for open ends, or N for one "
            "step, e.g. --steps 10:12",
        )
    if a is not None and b is not None and a > b:
        raise UsageError(
            "--steps", f"{text!r} starts after it ends", None, f"write the smaller step first: --steps {b}:{a}"
        )
    return Steps(a, b)


def find_window(path: str, steps: Steps) -> Window:
    """Stream ``path`` once and return the window of the chosen steps; a ``TraceError`` when the trace
    has no ``ProfilerStep#N`` events, or none in the range."""
    spans: dict[int, list[int]] = {}
    with _Source(path) as src:
        carry, base = b"", 0  # base: the offset in the JSON of buf[0]
        seen: set[int] = set()  # offsets of the step names read (the carried bytes are searched again)
        done = False
        while not done:
            chunk = src.read(_CHUNK)
            done = not chunk
            buf = carry + chunk
            keep = max(0, len(buf) - 2 * _LOOK_BACK)
            for m in _STEP_NAME_RE.finditer(buf):
                if base + m.start() in seen:
                    continue
                brace = buf.rfind(b"{", max(0, m.start() - _LOOK_BACK), m.start())
                ends = [e.start() + 1 for _, e in zip(range(_END_TRIES), _EVENT_END_RE.finditer(buf, m.end()))]
                if done:
                    ends.append(len(buf))
                if (
                    brace >= 0
                    and not _add_step(spans, [buf[brace:stop] for stop in ends], int(m.group(1)))
                    and not done
                    and len(ends) < _END_TRIES
                ):  # the event may end in the next chunk
                    keep = min(keep, brace)
                    break
                seen.add(base + m.start())
            keep = max(keep, len(buf) - _HOLD_LIMIT)  # an event that never ends is not held on to
            carry, base = buf[keep:], base + keep
    if not spans:
        raise TraceError(
            path,
            "has no ProfilerStep#N events to choose steps from",
            f"--steps {steps.text()}",
            "analyse the whole trace (record it with a torch.profiler schedule and prof.step() to mark steps)",
        )
    numbers = sorted(spans)
    chosen = [
        n for n in numbers if (steps.first is None or n >= steps.first) and (steps.last is None or n <= steps.last)
    ]
    if not chosen:
        raise TraceError(
            path,
            f"has no steps in {steps.text()}",
            f"steps ProfilerStep#{numbers[0]} to #{numbers[-1]} ({len(numbers):,} in all)",
            f"pick steps in that range, e.g. --steps {numbers[0]}:{numbers[min(1, len(numbers) - 1)]}",
        )
    start = min(spans[n][0] for n in chosen)
    end = max(spans[n][1] for n in chosen)
    return Window(start, end, chosen[0], chosen[-1], len(chosen), len(numbers))


def _add_step(spans: dict[int, list[int]], texts: list[bytes], number: int) -> bool:
    """Record the span of one ``ProfilerStep#N`` event (its earliest start and latest end over threads)
    from the first of ``texts`` that decodes as an event; False when none does."""
    for text in texts:
        try:
            ev = _decode_step(text)
            break
        except (msgspec.DecodeError, UnicodeDecodeError):
            continue
    else:
        return False
    if ev.ph != "X":
        return True
    ts, dur = decimal_text_to_scaled_int([ev.ts, ev.dur]).tolist()
    if ts == BAD_NUMBER or dur == BAD_NUMBER or dur < 0:
        return True
    span = spans.setdefault(number, [ts, ts + dur])
    span[0], span[1] = min(span[0], ts), max(span[1], ts + dur)
    return True


def slice_warning(path: str, window: Window, outside: int) -> str:
    """What a report of a slice says about it."""
    steps = f"step {window.first}" if window.first == window.last else f"steps {window.first} to {window.last}"
    return (
        f"{path}: a slice of the trace: {steps} ({window.steps:,} of its {window.total:,} ProfilerStep#N "
        f"steps), the {(window.end_ns - window.start_ns) / 1e6:,.3f} ms from the first step's start to the "
        f"last step's end; {outside:,} events outside it were left out, and numbers cover the slice only"
    )
