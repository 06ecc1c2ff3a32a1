"""CSV training logs: Lightning's ``metrics.csv`` (sparse: one row per log call, empty cells where a
metric was not logged) and plain CSV with a header row."""

from __future__ import annotations

import csv
import io

from .errors import LogError, excerpt
from .records import build_series
from .series import LogSeries


def read_csv(source: str, text: str) -> LogSeries:
    lines = text.splitlines()
    warnings: list[str] = []
    try:
        dialect = csv.Sniffer().sniff(lines[0], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO(text), dialect))
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
    columns = {name: [(c if c.strip() != "" else None) for c in col] for name, col in zip(header, zip(*body))} if body else {}
    sparse = sum(v is None for col in columns.values() for v in col) > 0
    fmt = "Lightning metrics.csv" if sparse and {"epoch", "step"} <= set(header) else "CSV"
    return build_series(source, fmt, header, lambda k: list(columns.get(k, [])), len(body), warnings=warnings)
