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
import re

from .errors import LogError, excerpt
from .records import build_series
from .series import LogSeries

MAX_FIELD_CHARS = 1 << 20
_RUN_PREFIX_RE = re.compile(r"^(.{1,200}?) - (.{1,200})$")
_DELIMITERS = (",", "\t", ";")


def _delimiter(first: str) -> str:
    """The delimiter of a header line: the candidate found most often outside quotes (commas on a tie)."""
    bare = re.sub(r'"[^"]{0,10000}"', "", first[:100_000])
    return max(_DELIMITERS, key=lambda d: (bare.count(d), d == ","))


def read_csv(source: str, text: str) -> LogSeries:
    lines = text.splitlines()
    first = next((ln for ln in lines if ln.strip()), "")
    warnings: list[str] = []
    csv.field_size_limit(MAX_FIELD_CHARS)
    try:
        rows = list(csv.reader(io.StringIO(text.replace("\0", "")), delimiter=_delimiter(first)))
    except csv.Error as exc:
        raise LogError(source, "is not a readable CSV file", str(exc),
                       "check the file, or convert the log to JSON Lines") from None
    rows = [r for r in rows if r and any(c.strip() for c in r)]
    if len(rows) < 2:
        raise LogError(source, "CSV log has a header but no rows", excerpt(text), "log at least one step")
    header = [h.strip() for h in rows[0]]
    width = len(header)
    body = rows[1:]
    if not text.endswith("\n") and len(body[-1]) != width:
        warnings.append(f"the last line ({len(rows)}) is cut off; it is left out")
        body = body[:-1]
    bad = [i for i, r in enumerate(body, 2) if len(r) != width]
    if bad:
        if len(bad) > len(body) // 2:
            raise LogError(source, f"{len(bad)} of {len(body)} rows do not have the header's {width} columns, "
                           "so this is not one CSV table (mixed formats?)", f"line {bad[0]}",
                           "give tracedoc one log format per file")
        warnings.append(f"{len(bad)} rows do not have the header's {width} columns and are left out (first: line {bad[0]})")
        body = [r for r in body if len(r) == width]
    names, fmt = _wandb_columns(header, warnings)
    columns: dict[str, list] = {}
    for i, name in enumerate(names):
        if name is None or name in columns:
            continue
        columns[name] = [(r[i] if r[i].strip() != "" else None) for r in body]
    if fmt is None:
        sparse = any(v is None for col in columns.values() for v in col)
        fmt = "Lightning metrics.csv" if sparse and {"epoch", "step"} <= set(header) else (
            "W&B history CSV" if "_runtime" in header or "_step" in header else "CSV")
    keys = list(columns)
    return build_series(source, fmt, keys, lambda k: list(columns.get(k, [])), len(body), warnings=warnings)


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
