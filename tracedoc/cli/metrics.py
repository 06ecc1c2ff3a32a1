"""``tracedoc metrics [NAME ...]``: every metric of the metric table with its unit, better side, scope,
range and meaning, as a table (text), JSON or Markdown. Where the reports' numbers are defined."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..exits import EXIT_OK
from .common import add_width_option, output_width

_FORMATS = ("text", "json", "md")
_SCOPES = ("rank", "job", "log")
MAX_PATTERN_CHARS = 200  # a NAME pattern, as --fail-if bounds its expressions


def register(sub: Any) -> None:
    m = sub.add_parser(
        "metrics",
        help="list every metric a report holds, with its unit, range and meaning",
        description="List the metrics tracedoc reports (the metric table): name, unit, which "
        "change is better, scope (rank: one trace; job: across the ranks of a "
        "directory; log: a training log), the range every value lies in, and what it "
        "means. NAME filters by name: a part of it, or a pattern with * and ?.",
    )
    m.add_argument(
        "names",
        metavar="NAME",
        nargs="*",
        help="only metrics whose name contains NAME or matches the pattern (e.g. idle, '*_fraction')",
    )
    m.add_argument(
        "--scope", choices=_SCOPES, action="append", default=None, help="only this scope's metrics (repeatable)"
    )
    m.add_argument("-f", "--format", choices=_FORMATS, default="text", help="output format (default: text)")
    add_width_option(m)
    m.add_argument("--no-color", action="store_true", help="no colour even on a terminal (so does NO_COLOR)")
    m.set_defaults(func=cmd_metrics)


def range_text(bounds: tuple[float, float] | None) -> str:
    """A metric's range in words: ``0 to 1``, ``>= 0``, ``any``."""
    if bounds is None:
        return "any"
    lo, hi = bounds
    inf = float("inf")

    def num(v: float) -> str:
        return f"{v:g}"

    if lo == -inf and hi == inf:
        return "any"
    if hi == inf:
        return f">= {num(lo)}"
    if lo == -inf:
        return f"<= {num(hi)}"
    return f"{num(lo)} to {num(hi)}"


def select(names: list[str], scopes: list[str] | None) -> list:
    """The metric table's entries matching any of ``names`` (a part of the name or a glob pattern) and
    in one of ``scopes``; every entry when both are empty. A name matching nothing is a usage error."""
    from fnmatch import fnmatchcase

    from ..engine.expr import suggest
    from ..errors import UsageError
    from ..model.metrics import TABLE

    table = [m for m in TABLE if not scopes or m.scope in scopes]

    def matches(pattern: str, name: str) -> bool:
        p = pattern.strip().lower()
        return fnmatchcase(name, p) if any(c in p for c in "*?[") else p in name

    if not names:
        return table
    for pattern in names:  # bounded before any matching: fnmatch's translation and difflib grow with its length
        if len(pattern) > MAX_PATTERN_CHARS:
            from ..infile import excerpt

            raise UsageError(
                "tracedoc metrics NAME",
                f"a pattern of {len(pattern):,} characters is longer than the "
                f"{MAX_PATTERN_CHARS} allowed (no metric name is longer than "
                f"{max(len(m.name) for m in TABLE)})",
                excerpt(pattern),
                "give a part of a metric name or a short pattern, e.g. '*_fraction'",
            )
        if not any(matches(pattern, m.name) for m in table):
            where = f" in scope {', '.join(scopes)}" if scopes else ""
            raise UsageError(
                f"tracedoc metrics {pattern}",
                f"no metric{where} matches {pattern!r}{suggest(pattern, [m.name for m in table])}",
                todo="'tracedoc metrics' lists them all",
            )
    return [m for m in table if any(matches(p, m.name) for p in names)]


def metric_rows(metrics: list) -> list[dict[str, Any]]:
    """One plain row per metric: what every format prints."""
    return [
        {
            "name": m.name,
            "unit": m.unit,
            "better": m.better,
            "scope": m.scope,
            "topic": m.topic,
            "range": range_text(m.valid_range),
            "min": None if m.valid_range is None else _finite(m.valid_range[0]),
            "max": None if m.valid_range is None else _finite(m.valid_range[1]),
            "type": m.json_type,
            "meaning": m.meaning,
        }
        for m in metrics
    ]


def _finite(v: float) -> float | None:
    return v if abs(v) != float("inf") else None


def render_metrics_json(rows: list[dict[str, Any]]) -> str:
    import orjson

    return orjson.dumps({"schema": "tracedoc.metrics", "metrics": rows}, option=orjson.OPT_INDENT_2).decode() + "\n"


def render_metrics_md(rows: list[dict[str, Any]]) -> str:
    from ..render.markdown import md_escape

    out = ["| metric | unit | better | scope | range | meaning |", "|---|---|---|---|---|---|"]
    for r in rows:
        out.append(
            f"| `{r['name']}` | {md_escape(r['unit'])} | {r['better'] or '-'} | {r['scope']} | "
            f"{md_escape(r['range'])} | {md_escape(r['meaning'])} |"
        )
    return "\n".join(out) + "\n"


def cmd_metrics(args: argparse.Namespace) -> int:
    rows = metric_rows(select(args.names, args.scope))
    if args.format == "json":
        sys.stdout.write(render_metrics_json(rows))
        return EXIT_OK
    if args.format == "md":
        sys.stdout.write(render_metrics_md(rows))
        return EXIT_OK
    from ..render.fittable import fit_table, wrap_text
    from .rules import print_plain

    width = output_width(args)
    lines = [f"tracedoc metrics ({len(rows)})"]
    lines += fit_table(
        ("metric", "unit", "better", "scope", "range", "meaning"),
        [(r["name"], r["unit"], r["better"] or "-", r["scope"], r["range"], r["meaning"]) for r in rows],
        ("id", "id", "id", "id", "id", "text"),
        width,
    )
    lines += [""] + wrap_text(
        "A value of null (n/a) means not measurable on that trace, never zero. Fractions are of "
        "the analysis window unless the meaning says otherwise.",
        width,
    )
    print_plain(lines, args, header=1)
    return EXIT_OK
