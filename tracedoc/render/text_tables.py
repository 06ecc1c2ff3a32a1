"""The tables of the terminal summary, each fitted to the terminal's width: the top kernels and gaps, the
per-op roofline, the ranks of a job and the job's own tables.

A table leaves out its least needed columns, folds number headers onto two lines and cuts names to a
form no other row shares, in that order, until it fits (``TextOptions.width``; whole with ``--full-names``).
"""

from __future__ import annotations

from typing import Any, Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

from .console import TextOptions
from .fit import MIN_NAME_WIDTH, column_widths
from .names import fit_names
from .roofline import text_cells
from .views import ReportView, TableView

RANK_COLUMNS = (
    "rank",
    "file",
    "step p50",
    "GPU busy",
    "compute",
    "exposed comm",
    "DL stall",
    "verdict",
)  # fit 100 columns
RANK_COLUMNS_DROPPED_FIRST = ("compute", "exposed comm", "DL stall")  # left out, in this order, where they do not fit
_RIGHT = frozenset({"count", "total_ns", "share", "gap_ns", "device_idle_ns", "stream"})
_WIDE = ("name", "after", "launched_by")


def job_table(title: str, header: list[str], rows: list[list[str]], options: TextOptions) -> Table:
    """A job table: numbers right-aligned, the last column (a note) cut to fit."""
    t = Table(title=title, title_justify="left", title_style="bold", box=None, header_style="bold", pad_edge=False)
    columns = [[row[i] for row in rows] for i in range(len(header))]
    flexible = [i == len(header) - 1 or header[i] == "why shown" for i in range(len(header))]  # numbers; notes
    columns, widths = _fit_columns(header, columns, flexible, options)
    for col, w, flex in zip(header, widths, flexible):
        t.add_column(
            col,
            justify="left" if flex else "right",
            no_wrap=True,
            overflow="ellipsis",
            width=w if flex and not options.full_names else None,
            min_width=None if flex else w,
        )
    for row in zip(*columns):
        t.add_row(*row)
    return t


def roofline_table(view, rows: int, options: TextOptions) -> Any:
    """The first rows of the per-op roofline (most GPU time first), with the roof they are measured against."""
    header, cells = text_cells(view, rows)
    title = Text(f"Roofline per op and shape (roof: {view.roof})", style="bold")  # a line of its own: it wraps
    t = Table(box=None, show_header=True, header_style="dim", pad_edge=False)
    columns = [list(c) for c in zip(*cells)] or [[] for _ in header]
    header, columns, dropped = _drop_to_fit(
        list(header), columns, ROOFLINE_DROPPED_FIRST, ("op", "input shapes"), options
    )
    flexible = [label in ("op", "input shapes") for label in header]
    columns, widths = _fit_columns(header, columns, flexible, options, names=True)
    for label, w, wide in zip(header, widths, flexible):
        t.add_column(
            label,
            no_wrap=True,
            overflow="ellipsis",
            width=w if wide and not options.full_names else None,
            min_width=None if wide else w,
            justify="left" if wide or label in ("dtype", "bound") else "right",
        )
    for row in zip(*columns):
        t.add_row(*row)
    more = view.total - len(cells)
    return Group(
        title,
        t,
        Text(
            f"{view.coverage}"
            + (f"; {more} more rows in --format json/html/md" if more > 0 else "")
            + (f"; left out at this width: {', '.join(dropped)}" if dropped else ""),
            style="dim",
        ),
    )


ROOFLINE_DROPPED_FIRST = ("TB/s", "TFLOP/s", "dtype", "calls", "% of roof")


def _drop_to_fit(
    header: list[str],
    columns: list[list[str]],
    order: Sequence[str],
    names: Sequence[str],
    options: TextOptions,
    floor: dict[str, int] | None = None,
) -> tuple[list[str], list[list[str]], list[str]]:
    """Leave columns out, in ``order``, until the table fits ``options.width`` with its name columns at
    their narrowest (``floor``: other columns' narrowest); the labels left out are returned to be named."""
    dropped: list[str] = []
    for label in order:
        if options.full_names or not options.width or label not in header:
            continue
        natural = [
            MIN_NAME_WIDTH if h in names else (floor or {}).get(h) or max([_width(h), *map(len, cells)])
            for h, cells in zip(header, columns)
        ]
        if sum(natural) + 2 * (len(natural) - 1) <= options.width:
            break
        i = header.index(label)
        dropped.append(label)
        header, columns = header[:i] + header[i + 1 :], columns[:i] + columns[i + 1 :]
    return header, columns, dropped


def top_table(title: str, table: TableView, rows: int, options: TextOptions, cols: list[tuple[str, str]]) -> Any:
    if not table.rows or rows <= 0:
        return Text("")
    t = Table(
        title=title,
        title_justify="left",
        title_style="bold",
        box=None,
        show_header=True,
        header_style="dim",
        pad_edge=False,
    )
    cols = sorted(cols, key=lambda c: c[0] in _WIDE)  # numbers first, then the long names
    columns = [_name_cells(table, key, rows, options) if key in _WIDE else table.cells(key)[:rows] for key, _ in cols]
    folded = _fold_headers([label for _, label in cols], columns, [key in _WIDE for key, _ in cols], options)
    cols = [(key, label) for (key, _), label in zip(cols, folded)]
    order = [next((f for f in folded if f.replace("\n", " ") == label), label) for label in TOP_DROPPED_FIRST]
    labels, columns, dropped = _drop_to_fit(
        [label for _, label in cols], columns, order, [label for key, label in cols if key in _WIDE], options
    )
    dropped = [d.replace("\n", " ") for d in dropped]
    cols = [c for c in cols if c[1] in labels]
    columns, widths = _fit_columns(labels, columns, [key in _WIDE for key, _ in cols], options, names=True)
    for (key, label), w in zip(cols, widths):
        wide = key in _WIDE
        # Every row on one line: numbers, streams and causes whole; names in their column's width.
        t.add_column(
            label,
            no_wrap=True,
            overflow="ellipsis",
            width=w if wide and not options.full_names else None,
            min_width=None if wide else w,
            justify="right" if key in _RIGHT else "left",
        )
    for row in zip(*columns):
        t.add_row(*row)
    return Group(t, Text(f"left out at this width: {', '.join(dropped)}", style="dim")) if dropped else t


TOP_DROPPED_FIRST = ("device idle", "stream", "launched by")  # top-table columns left out where they do not fit


def _name_cells(table: TableView, key: str, rows: int, options: TextOptions) -> list[str]:
    """A name column's cells: a kernel's distinct short form (the one the HTML shows), any other name as
    it is; whole with ``--full-names``."""
    cells = table.cells(key)[:rows]
    if options.full_names:
        return cells
    at = [c.key for c in table.columns].index(key) if key in [c.key for c in table.columns] else -1
    short = [r[at] for r in table.short[:rows]] if at >= 0 and table.short else []
    return [s or c for s, c in zip(short, cells)] if short else cells


def _width(text: str) -> int:
    """Columns a cell or header takes: its longest line."""
    return max(map(len, text.split("\n")))


def _fold_headers(
    labels: list[str], columns: list[list[str]], flexible: Sequence[bool], options: TextOptions
) -> list[str]:
    """Headers of number columns folded onto two lines (``device`` over ``idle``) when the table would
    otherwise cut its names: a number column then is only as wide as its numbers, so it gives way before
    a name is cut in the middle."""
    if options.full_names or not options.width:
        return labels
    natural = [max([len(label), *map(len, cells)]) for label, cells in zip(labels, columns)]
    if sum(natural) + 2 * (len(natural) - 1) <= options.width:
        return labels
    out = []
    for label, cells, flex in zip(labels, columns, flexible):
        widest = max(map(len, cells), default=0)
        if not flex and " " in label and len(label) > widest:
            a, _, b = (
                label.rpartition(" ")
                if len(label.rpartition(" ")[0]) >= len(label.partition(" ")[2])
                else label.partition(" ")
            )
            label = f"{a}\n{b}"
        out.append(label)
    return out


def _fit_columns(
    labels: Sequence[str], columns: list[list[str]], flexible: Sequence[bool], options: TextOptions, names: bool = False
) -> tuple[list[list[str]], list[int]]:
    """Columns and their widths for one table of ``options.width``: fixed columns at their widest cell,
    flexible ones sharing the rest, each cell of a flexible column cut to a form no other cell shares
    (``names``: cut as names are, keeping where they differ; else from the end)."""
    natural = [max([_width(label), *map(len, cells)]) for label, cells in zip(labels, columns)]
    if options.full_names or not options.width:
        return columns, natural
    widths = column_widths(natural, flexible, options.width)
    out = []
    for cells, w, flex in zip(columns, widths, flexible):
        if flex and any(len(c) > w for c in cells):
            cells = fit_names(cells, w) if names else [c if len(c) <= w else c[: w - 1] + "…" for c in cells]
        out.append(cells)
    return out, widths


def rank_table(view: ReportView, options: TextOptions = TextOptions()) -> Any:
    rt = view.rank_table
    t = Table(
        title=f"{view.rank_count} ranks",
        title_justify="left",
        title_style="bold",
        box=None,
        header_style="bold",
        pad_edge=False,
    )
    keep = [rt.columns.index(c) for c in RANK_COLUMNS]
    columns = [[row[i] for row in rt.rows] for i in keep]
    # The file name is cut to fit (distinct per rank); the verdict's labels wrap between labels, never within one.
    longest_label = max([len("verdict"), *(len(w) for c in columns[-1] for w in c.split())])
    header, columns, dropped = _drop_to_fit(
        list(RANK_COLUMNS), columns, RANK_COLUMNS_DROPPED_FIRST, ("file",), options, floor={"verdict": longest_label}
    )
    verdict = header.index("verdict")
    full_verdict = max([len("verdict"), *map(len, columns[verdict])])
    plain = columns[:verdict] + [["x" * longest_label]] + columns[verdict + 1 :]
    plain, widths = _fit_columns(header, plain, [col == "file" for col in header], options, names=True)
    columns = plain[:verdict] + [columns[verdict]] + plain[verdict + 1 :]
    if options.width and not options.full_names:
        spare = options.width - sum(widths) - 2 * (len(widths) - 1)
        widths[verdict] = min(full_verdict, widths[verdict] + max(0, spare))
    for col, w in zip(header, widths):
        if col == "file":
            t.add_column(col, no_wrap=True, overflow="ellipsis", width=None if options.full_names else w)
        elif col == "verdict":
            t.add_column(col, overflow="fold", width=None if options.full_names else w)
        else:
            t.add_column(col, justify="right", no_wrap=True, min_width=w)
    for row in zip(*columns):
        t.add_row(*row)
    items: list[Any] = [t]
    if dropped:
        items.append(Text(f"left out at this width: {', '.join(dropped)}", style="dim"))
    if rt.left_out:
        items.append(Text(f"{rt.left_out} more ranks in --format md, html or json", style="dim"))
    return Group(*items)
