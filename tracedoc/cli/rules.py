"""``tracedoc rules`` (list the rules) and ``tracedoc rules explain ID`` (print one rule's documentation)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..errors import TracedocError, UsageError
from ..exits import EXIT_OK
from .common import print_error

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.rulefile import Rule


def register(subparsers: Any) -> None:
    """Add ``tracedoc rules`` and ``tracedoc rules explain ID`` to a subparsers action."""
    rules = subparsers.add_parser("rules", help="list the diagnosis rules, or explain one",
                                  description="List the rules tracedoc evaluates; 'tracedoc rules explain ID' prints one rule's documentation.")  # fmt: skip
    rules.add_argument("--rules", metavar="DIR", action="append", default=[], help="also load the rule files in DIR")
    _add_layout_options(rules)
    rules.set_defaults(func=cmd_rules_list)
    sub = rules.add_subparsers(dest="rules_command", metavar="SUBCOMMAND")
    explain = sub.add_parser("explain", help="print a rule's documentation, thresholds and fixes, or the rules "
                                             "behind a label")
    explain.add_argument("rule", metavar="ID", help="rule id or name, e.g. TD301 or dataloader-stall; or a label, "
                                                    "e.g. io_bound, to list the rules that produce it")
    explain.add_argument("--param", metavar="RULE.name=value", action="append", default=argparse.SUPPRESS,
                         help="show the texts with this threshold instead of the default (repeatable)")
    explain.add_argument("--rules", metavar="DIR", action="append", default=argparse.SUPPRESS,
                         help="also load the rule files in DIR")  # fmt: skip
    _add_layout_options(explain, argparse.SUPPRESS)
    explain.set_defaults(func=cmd_rules_explain)


def _add_layout_options(parser: argparse.ArgumentParser, default: Any = None) -> None:
    from .common import _positive_int

    parser.add_argument("--width", metavar="N", type=_positive_int, default=default,
                        help="lay the output out for N columns (default: the terminal's width, 100 off a terminal)")
    parser.add_argument("--no-color", action="store_true", default=default if default is not None else False,
                        help="no colour even on a terminal (so does NO_COLOR)")


def _console(args: argparse.Namespace | None = None):
    """The same layout as the analysis summary: fit a terminal; off one, wrap and never cut."""
    from ..render.console import TextOptions, make_console

    options = TextOptions.for_stream(sys.stdout, width=getattr(args, "width", None),
                                     no_color=bool(getattr(args, "no_color", False)))
    return make_console(options), options


def _guard(func):
    def run(args: argparse.Namespace) -> int:
        try:
            return func(args)
        except TracedocError as exc:
            return print_error(exc)

    run.__name__ = func.__name__
    run.__doc__ = func.__doc__
    return run


@_guard
def cmd_rules_list(args: argparse.Namespace) -> int:
    """Print every rule as a table: id, name, label, severity, title."""
    from rich.table import Table

    from ..engine.rulefile import load_rules

    console, options = _console(args)
    table = Table(title="tracedoc rules", title_justify="left")
    for column in ("id", "name", "scope", "label", "severity", "title"):
        table.add_column(column, no_wrap=column != "title", min_width=24 if column == "title" else None,
                         overflow="fold" if column == "title" else options.overflow)
    for rule in sorted(load_rules(getattr(args, "rules", ()) or ()), key=lambda r: r.id):
        table.add_row(rule.id, rule.name, rule.scope, rule.label, rule.severity, rule.title, style=None)
    from ..render.console import print_item

    if not options.terminal:  # --width narrower than the table: widen it as far as its unwrappable cells need
        need = console.measure(table, options=console.options.update_width(100_000)).minimum
        console.width = max(console.width, need)
    print_item(console, table, options)
    return EXIT_OK


@_guard
def cmd_rules_explain(args: argparse.Namespace) -> int:
    """Print one rule's documentation, parameters and fixes."""
    from ..engine.expr import suggest
    from ..engine.rulefile import find_rule, load_rules

    from ..engine.params import collect_params, resolve_params

    rules = load_rules(getattr(args, "rules", ()) or ())
    values = resolve_params(rules, collect_params(getattr(args, "param", None) or []), where="--param")
    console = _console(args)[0]
    rule = find_rule(rules, args.rule)
    if rule is None:
        producing = sorted((r for r in rules if r.label == args.rule.strip().lower()), key=lambda r: r.id)
        if producing:
            console.print(*label_lines(args.rule.strip().lower(), producing, values), sep="\n")
            return EXIT_OK
        keys = [r.id for r in rules] + [r.name for r in rules] + sorted({r.label for r in rules})
        raise UsageError(f"tracedoc rules explain {args.rule}",
                         f"no rule or label {args.rule!r}{suggest(args.rule, keys)}",
                         todo="'tracedoc rules' lists the rules and their labels")  # fmt: skip
    console.print(*explain_lines(rule, values.get(rule.id)), sep="\n")
    return EXIT_OK


def label_lines(label: str, rules: list["Rule"], values: dict[str, dict[str, Any]]) -> Iterable[Any]:
    """Yield rich renderables listing the rules that give findings the label ``label``."""
    from rich.text import Text

    from ..labels import label_meaning

    yield Text.assemble((label, "bold"), f": {label_meaning(label)}")
    yield Text("1 rule gives this label:" if len(rules) == 1 else f"{len(rules)} rules give this label:")
    for rule in rules:
        yield Text.assemble(("  " + rule.id, "bold"), f" {rule.name} ({rule.severity}): {rule.title}")
        yield Text(f"    when {_with_values(rule.when.source, values.get(rule.id, {}))}")
    yield Text(f"\n'tracedoc rules explain {rules[0].id}' documents one rule in full.", style="dim")


def _with_values(source: str, values: dict[str, Any]) -> str:
    """A condition's source with its parameters' current values after their names."""
    import re

    return re.sub(r"\b[A-Za-z_][A-Za-z0-9_]*\b",
                  lambda m: f"{m.group(0)} (= {values[m.group(0)]!r})" if m.group(0) in values else m.group(0), source)



# how a finding predicts its gain (the rule's ``what_if``), in words
WHAT_IF_WORDS = {"share": "today's share of the step, as an upper bound",
                 "estimate": "the rule's impact formula, as an upper bound",
                 "none": "not modelled (the fix's effect cannot be told from the trace)"}

def explain_lines(rule: "Rule", values: dict[str, Any] | None = None) -> Iterable[Any]:
    """Yield rich renderables documenting ``rule``; its texts show the parameter ``values``
    (the defaults when None) and ``<expression>`` where a report puts a measured value."""
    from rich.markup import escape
    from rich.text import Text

    from ..labels import label_meaning

    values = {p.name: p.default for p in rule.params.values()} | dict(values or {})
    yield Text.assemble((f"{rule.id} {rule.name}", "bold"), f"  ({rule.label}, {rule.severity}; {rule.scope} rule)")
    yield Text(rule.title, style="italic")
    yield Text.assemble(("Label ", "dim"), (rule.label, "bold"), f": {label_meaning(rule.label)}")
    yield ""
    sections = (("What it detects", rule.docs["what_it_detects"]), ("Why it matters", rule.docs["why_it_matters"]))
    for heading, text in sections:
        yield Text(heading, style="bold underline")
        yield Text(" ".join(text.split()))
        yield ""
    yield Text("Condition", style="bold underline")
    yield Text(f"  when:   {_with_values(rule.when.source, values)}")
    if rule.impact is not None:
        yield Text(f"  impact: {rule.impact.source}  (fraction of the step)")
    if rule.requires_no_other_verdict:
        yield Text("  fires only when no other verdict rule fires")
    kind = rule.what_if_kind
    if kind is not None:
        yield Text(f"  what-if: {WHAT_IF_WORDS.get(kind, f'critical-path replay of the {kind} fix')}")
    yield ""
    if rule.params:
        yield Text("Parameters (override with --param " f"{rule.id}.NAME=VALUE)", style="bold underline")
        for p in rule.params.values():
            changed = f" (default {p.default!r})" if values.get(p.name) != p.default else ""
            yield Text.assemble(("  " + p.name, "bold"), f" = {values.get(p.name)!r} [{p.unit}]{changed}")
            yield Text("    " + p.justification)
        yield ""
    yield Text("Message", style="bold underline")
    yield Text("  " + rule.message.explain(values))
    yield ""
    yield Text("Fixes", style="bold underline")
    for fix in rule.fixes:
        cond = f"[dim](when {escape(fix.when.source)})[/dim] " if fix.when is not None else ""
        yield f"  - {cond}{escape(fix.text.explain(values))}"
    yield ""
    yield Text("Expect after the fix", style="bold underline")
    yield Text("  " + rule.expect.explain(values))
    yield ""
    yield Text("References", style="bold underline")
    for ref in rule.docs["references"]:
        yield Text("  " + ref)
    yield Text(f"\nDefined in {rule.path}", style="dim")
