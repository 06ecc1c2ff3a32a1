"""CSV training logs: Lightning's ``metrics.csv`` (sparse: one row per log call, empty cells where a
metric was not logged), Weights & Biases exports, and plain CSV with a header row.

A W&B chart export names its columns ``<run> - <metric>`` with ``__MIN``/``__MAX`` companions
(``"Step","lucky-run-1 - train/loss","lucky-run-1 - train/loss__MIN",...``): the run prefix is taken off, the
companions are left out, and with several runs in one file the first run is read (said in a warning). A
W&B history export (``_step``, ``_runtime``, ``_timestamp``, metrics) is a plain CSV whose ``_runtime``
gives step times by difference.
"""

from __future__ import annotations

import csv
import io
import itertools
import re

from .errors import LogError, excerpt
from .records import build_series
from .series import LogSeries

MAX_FIELD_CHARS = 1 << 20
# The longest line a CSV log may have: a training log's row is a few KB, a W&B export with thousands of
# columns a few hundred KB. The file is read a line at a time, each bounded, never whole as text.
MAX_LINE_CHARS = 4 << 20
_RUN_PREFIX_RE = re.compile(r"^(.{1,200}?) - (.{1,200})$")
_DELIMITERS = (",", "\t", ";")


def _delimiter(first: str) -> str:
    """The delimiter of a header line: the candidate found most often outside quotes (commas on a tie)."""
    bare = re.sub(r'"[^"]{0,10000}"', "", first[:100_000])
    return max(_DELIMITERS, key=lambda d: (bare.count(d), d == ","))


def _bounded_lines(source: str, data: bytes | str):
    """The file's lines (newlines kept, NULs dropped), read a chunk at a time; a line longer than
    ``MAX_LINE_CHARS`` is an error naming it."""
    stream = (
        io.StringIO(data, newline="")
        if isinstance(data, str)
        else io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace", newline="")
    )
    number = 0
    while True:
        line = stream.readline(MAX_LINE_CHARS + 1)
        if not line:
            return
        number += 1
        if len(line) > MAX_LINE_CHARS:
            raise LogError(
                source,
                f"line {number:,} is longer than {MAX_LINE_CHARS:,} characters, more than a row of a CSV log holds",
                excerpt(line),
                "check that this is a CSV training log (one row per logged step)",
            )
        yield line.replace("\0", "") if "\0" in line else line


def read_csv(source: str, data: bytes | str) -> LogSeries:
    """A CSV log, read a bounded line at a time into the columns it names (rows are not kept)."""
    warnings: list[str] = []
    csv.field_size_limit(MAX_FIELD_CHARS)
    lines = _bounded_lines(source, data)
    head: list[str] = []
    for line in lines:  # the delimiter is the header line's
        head.append(line)
        if line.strip():
            break
    first = head[-1] if head else ""
    ends_with_newline = data.endswith("\n" if isinstance(data, str) else b"\n")
    reader = csv.reader(itertools.chain(head, lines), delimiter=_delimiter(first))
    header: list[str] | None = None
    names: list = []
    columns: dict[str, list] = {}
    picks: list[tuple[int, list]] = []
    count, bad, last_width, empty_seen = 0, [], None, False
    try:
        for row in reader:
            if not row or not any(c.strip() for c in row):
                continue
            if header is None:
                header = [h.strip() for h in row]
                names, fmt = _wandb_columns(header, warnings)
                for i, name in enumerate(names):
                    if name is not None and name not in columns:
                        columns[name] = []
                        picks.append((i, columns[name]))
                continue
            last_width = len(row)
            if len(row) != len(header):
                bad.append(reader.line_num)
                continue
            count += 1
            for i, col in picks:
                cell = row[i]
                if cell.strip() == "":
                    col.append(None)
                    empty_seen = True
                else:
                    col.append(cell)
    except csv.Error as exc:
        raise LogError(
            source,
            "is not a readable CSV file",
            f"line {reader.line_num:,}: {exc}",
            "check the file, or convert the log to JSON Lines",
        ) from None
    if header is None or count + len(bad) == 0:
        raise LogError(source, "CSV log has a header but no rows", excerpt(first), "log at least one step")
    width = len(header)
    if not ends_with_newline and last_width is not None and last_width != width and bad and bad[-1] == reader.line_num:
        bad.pop()  # the last row, cut off while written
        warnings.append(f"the last line ({reader.line_num}) is cut off; it is left out")
    if bad:
        if len(bad) > (count + len(bad)) // 2:
            raise LogError(
                source,
                f"{len(bad)} of {count + len(bad)} rows do not have the header's {width} columns, "
                "so this is not one CSV table (mixed formats?)",
                f"line {bad[0]}",
                "give tracedoc one log format per file",
            )
        warnings.append(
            f"{len(bad)} rows do not have the header's {width} columns and are left out (first: line {bad[0]})"
        )
    if fmt is None:
        sparse = empty_seen
        fmt = (
            "Lightning metrics.csv"
            if sparse and {"epoch", "step"} <= set(header)
            else ("W&B history CSV" if "_runtime" in header or "_step" in header else "CSV")
        )
    keys = list(columns)
    return build_series(source, fmt, keys, lambda k: list(columns.get(k, [])), count, warnings=warnings)


def _wandb_columns(header: list[str], warnings: list[str]) -> tuple[list[str | None], str | None]:
    """Column names with a W&B chart export's run prefix taken off and its __MIN/__MAX columns dropped
    (None), keeping the first run's; the header unchanged when it is not such an export."""
    runs: dict[str, None] = {}
    split: list[tuple[str, str] | None] = []
    for h in header:
        m = _RUN_PREFIX_RE.match(h)
        split.append((m.group(1), m.group(2)) if m else None)
        if m:
            runs.setdefault(m.group(1))
    if not runs or sum(s is not None for s in split) < max(1, (len(header) - 1) // 2):
        return list(header), None
    keep = next(iter(runs))
    if len(runs) > 1:
        warnings.append(f"{len(runs)} W&B runs in one export; the first, {keep[:80]!r}, is read")
    names: list[str | None] = []
    for h, s in zip(header, split):
        if s is None:
            names.append(h)
        elif s[0] != keep or s[1].endswith(("__MIN", "__MAX")):
            names.append(None)
        else:
            names.append(s[1])
    return names, "W&B CSV export"
