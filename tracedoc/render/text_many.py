"""The terminal's view of a job of many ranks (``manyranks.MANY_RANKS`` or more): the ranks that matter
in one table, a line per measure for the rest, and the per-rank verdict table cut to the same ranks.
Laid out with rich, like ``text.py``, from the view model only."""

from __future__ import annotations

from typing import Any

from rich.text import Text

from .views import DigestView, RankTableView


def digest_renderables(d: DigestView, table: Any) -> list[Any]:
    """The digest table (``table``: a rich Table builder taking header and rows) and the rest's lines."""
    out: list[Any] = [
        table(f"Ranks that matter ({len(d.rows)} of {d.total})", d.columns, [row.cells for row in d.rows])
    ]
    if d.rest:
        out.append(Text(d.rest[0], style="bold"))
        out.extend(Text("  " + line, style="dim") for line in d.rest[1:])
    out.append(Text(f"all {d.total} ranks: --format html (sortable table, rank x step heatmaps) or json", style="dim"))
    out.append(Text(""))
    return out


def cut_rank_table(rt: RankTableView, d: DigestView) -> RankTableView:
    """The per-rank verdict table with only the digest's ranks (in the digest's order)."""
    keep = [str(row.rank) for row in d.rows]
    by_rank = {row[0]: row for row in rt.rows}
    rows = [by_rank[r] for r in keep if r in by_rank]
    return RankTableView(columns=rt.columns, rows=rows, total=rt.total, left_out=rt.total - len(rows))
