"""One run's story from a log that several processes wrote: resumes, second writers, joined segments.

A log is one run's story (the project's definition of log anomalies, README "Training logs"):

- **resume**: the step counter goes back (5220 -> 5020) and the steps after it are trained again; the
  elapsed time usually starts again near 0. The later values of a step logged twice are analysed.
- **second writer**: a launcher started the trainer twice (``srun --ntasks=2`` around a one-process
  trainer): every step is logged twice, by two processes whose lines interleave. The first writer's
  lines (the first line of each step) are analysed; the other writer's are left out.
- **segments**: ``tracedoc logs A B`` or a directory of Lightning ``version_N`` logs: pieces of one run,
  joined in step order (a later piece that starts before the previous ended is a resume).

Each is recognised from the rows in the order the file holds them, reported in one line, and removed
before anomalies are sought: step times come from elapsed-time differences *within* a segment and one
writer, so a join is never a stall, and the values at a join come from one run, so it is never an
``lr_jump``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

MAX_RESUMES = 20  # more back-steps than this is not a run resumed now and then: the generic warning stands
WRITERS_SHARE = 0.9  # steps logged k times (k >= 2) with the same fields, as a share of the steps


@dataclass
class Story:
    """What the rows of a log say about the processes that wrote it."""

    keep: np.ndarray  # rows analysed (a second writer's rows are False)
    segment: np.ndarray  # per row: the run segment (0, 1, ... in file order; resumes start a new one)
    lines: list[str] = field(default_factory=list)  # one line per resume / the writers, for the report
    resumes: list[int] = field(default_factory=list)  # the first step logged after each resume


def _row_signature(present: dict[str, np.ndarray], n: int) -> np.ndarray:
    """A number per row that says which fields it holds (rows of one kind share it)."""
    sig = np.zeros(n, dtype=np.int64)
    for bit, name in enumerate(sorted(present)[:62]):
        sig |= present[name].astype(np.int64) << bit
    return sig


def _writers(step: np.ndarray, signature: np.ndarray) -> tuple[int, np.ndarray] | None:
    """(k, the occurrence number of each row) when every step was logged k >= 2 times with the same
    fields, as k processes writing the same file do; None otherwise."""
    n = step.size
    if n < 6:
        return None
    order = np.lexsort((np.arange(n), signature, step))  # by step, then fields, then file order
    s, g = step[order], signature[order]
    new = np.r_[True, (s[1:] != s[:-1]) | (g[1:] != g[:-1])]
    starts = np.flatnonzero(new)
    counts = np.diff(np.r_[starts, n])
    k = int(np.median(counts))
    if k < 2 or np.mean(counts == k) < WRITERS_SHARE:
        return None
    group_of = np.repeat(np.arange(starts.size), counts)
    occurrence = np.empty(n, dtype=np.int64)
    occurrence[order] = np.arange(n) - starts[group_of]
    if np.flatnonzero(occurrence > 0)[0] > np.flatnonzero(occurrence == 0)[-1]:
        return None  # the run logged once, then again from the start: a restart, not writers side by side
    return k, occurrence


def _stride(step: np.ndarray) -> int:
    d = np.diff(step)
    d = d[d > 0]
    return max(1, int(np.median(d))) if d.size else 1


def recognise(
    step: np.ndarray, present: dict[str, np.ndarray], elapsed: np.ndarray | None = None, names: list[str] | None = None
) -> Story:
    """The story of rows in file order: second writers, then resumes (``names``: per row, the file it came
    from, when segments of several files were joined)."""
    n = step.size
    keep = np.ones(n, dtype=bool)
    segment = np.zeros(n, dtype=np.int64)
    lines: list[str] = []
    resumes: list[int] = []
    if n < 2 or bool(np.all(step[1:] > step[:-1])):
        return Story(keep, segment, lines)  # every step once, in order: one writer, no resume
    writers = _writers(step, _row_signature(present, n))
    if writers is not None:
        k, occurrence = writers
        keep = occurrence == 0
        lines.append(
            f"{_count_word(k)} writers: every step logged {_times(k)} (lines of {k} processes interleave, "
            f"e.g. a launcher that started the trainer {_times(k)}); the first writer's "
            f"{int(keep.sum())} lines are analysed, the other {n - int(keep.sum())} left out"
        )
    rows = np.flatnonzero(keep)
    s = step[rows]
    back = np.flatnonzero(np.diff(s) < 0)
    if 0 < back.size <= MAX_RESUMES:
        stride = _stride(s)
        segment[rows[back + 1]] = 1
        segment = np.cumsum(segment)
        for i in back.tolist():
            lines.append(_resume_line(s, i, stride, rows, elapsed, names))
            resumes.append(int(s[i + 1]))
    return Story(keep, segment, lines, resumes)


def _resume_line(
    s: np.ndarray, i: int, stride: int, rows: np.ndarray, elapsed: np.ndarray | None, names: list[str] | None
) -> str:
    top, again = int(s[: i + 1].max()), int(s[i + 1])
    repeated = top - again + stride
    where = ""
    if names is not None:
        where = f" ({names[rows[i + 1]]} after {names[rows[i]]})"
    clock = ""
    if elapsed is not None:
        before, after = elapsed[rows[i]], elapsed[rows[i + 1]]
        if np.isfinite(before) and np.isfinite(after) and after < before:
            clock = "; elapsed time starts again"
    first = int(s[0])
    if again <= first + stride and again < top:
        return (
            f"restarted from the beginning{where}: the step counter goes back from {top} to {again}{clock}; "
            f"the later run's values are analysed"
        )
    return (
        f"resumed from a checkpoint{where}: the step counter goes back from {top} to {again}, "
        f"{repeated} steps trained again{clock}; the later values are analysed"
    )


def _count_word(k: int) -> str:
    return {2: "two", 3: "three", 4: "four"}.get(k, str(k))


def _times(k: int) -> str:
    return {2: "twice", 3: "three times"}.get(k, f"{k} times")


def segment_step_times(step: np.ndarray, elapsed: np.ndarray, present: np.ndarray, segment: np.ndarray) -> np.ndarray:
    """Per row, the step time from elapsed-time differences to the previous row of the same segment that
    has one, over the steps between them; NaN at each segment's first row and where the clock goes back."""
    out = np.full(step.size, np.nan)
    at = np.flatnonzero(present & np.isfinite(elapsed))
    if at.size < 2:
        return out
    t, s = elapsed[at], step[at].astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        per = np.diff(t) / np.diff(s)
    ok = np.isfinite(per) & (per > 0) & (segment[at[1:]] == segment[at[:-1]])
    out[at[1:][ok]] = per[ok]
    return out


def join(parts: list, names: list[str]):
    """Segments of one run (each a :class:`LogSeries` read from its own file, named by ``names``) as one
    series in step order: the pieces sorted by their first step, a later piece that starts before the
    previous one ended is a resume (its values win), each recognised and said in the story."""
    from .series import LogSeries

    order = sorted(range(len(parts)), key=lambda i: (int(parts[i].step[0]) if len(parts[i]) else 0, i))
    parts = [parts[i] for i in order]
    names = [names[i] for i in order]
    fields: list[str] = []
    for p in parts:
        fields += [f for f in p.columns if f not in fields]
    step = np.concatenate([p.step for p in parts])
    columns, present = {}, {}
    for f in fields:
        columns[f] = np.concatenate([p.columns[f] if f in p.columns else np.full(len(p), np.nan) for p in parts])
        present[f] = np.concatenate([p.present[f] if f in p.present else np.zeros(len(p), dtype=bool) for p in parts])
    row_names = [n for p, n in zip(parts, names) for _ in range(len(p))]
    story = recognise(step, present, None, names=row_names)
    joined = "; ".join(f"{n} (steps {int(p.step[0])}-{int(p.step[-1])})" for p, n in zip(parts, names) if len(p))
    lines = [f"{len(parts)} segments of one run joined in step order: {joined}"]
    lines += [line for p, n in zip(parts, names) for line in (f"{n}: {x}" for x in p.story)]
    lines += [x for x in story.lines if not x.startswith(("two writers", "three writers", "four writers"))]
    first = parts[0]
    units: dict[str, str] = {}
    seen: dict[str, str] = {}
    header: dict = {}
    for p in reversed(parts):
        units.update(p.units)
        seen.update(p.fields_seen)
        header.update(p.header)
    out = LogSeries(
        source=first.source,
        format=first.format,
        step=step,
        columns=columns,
        present=present,
        units=units,
        fields_seen=seen,
        header=header,
        warnings=[f"{n}: {w}" for p, n in zip(parts, names) for w in p.warnings],
        events=[e for p in parts for e in p.events],
        story=lines,
        resume_steps=sorted({*story.resumes, *(r for p in parts for r in p.resume_steps)}),
        clock_tick_s=max((p.clock_tick_s for p in parts if p.clock_tick_s), default=None),
    )
    return out.finish()
