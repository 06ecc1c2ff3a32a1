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
    from ..engine.rulemodel import Rule


def register(subparsers: Any) -> None:
    """Add ``tracedoc rules`` and ``tracedoc rules explain ID`` to a subparsers action."""
    rules = subparsers.add_parser("rules", help="list the diagnosis rules, or explain one",
                                  description="List the rules tracedoc evaluates; 'tracedoc rules explain ID' "
                                              "prints one rule's documentation.")  # fmt: skip
    rules.add_argument("--rules", metavar="DIR", action="append", default=[], help="also load the rule files in DIR")
    _add_layout_options(rules)
    rules.set_defaults(func=cmd_rules_list)
    sub = rules.add_subparsers(dest="rules_command", metavar="SUBCOMMAND")
    explain = sub.add_parser(
        "explain", help="print a rule's documentation, thresholds and fixes, or the rules behind a label"
    )
    explain.add_argument(
        "rule",
        metavar="ID",
        help="rule id or name, e.g. TD301 or dataloader-stall; or a label, "
        "e.g. io_bound, to list the rules that produce it",
    )
    explain.add_argument(
        "--param",
        metavar="RULE.name=value",
        action="append",
        default=argparse.SUPPRESS,
        help="show the texts with this threshold instead of the default (repeatable)",
    )
    explain.add_argument("--rules", metavar="DIR", action="append", default=argparse.SUPPRESS,
                         help="also load the rule files in DIR")  # fmt: skip
    _add_layout_options(explain, argparse.SUPPRESS)
    explain.set_defaults(func=cmd_rules_explain)


def _add_layout_options(parser: argparse.ArgumentParser, default: Any = None) -> None:
    from .common import add_width_option

    add_width_option(parser, default)
    parser.add_argument(
        "--no-color",
        action="store_true",
        default=default if default is not None else False,
        help="no colour even on a terminal (so does NO_COLOR)",
    )


def _colour(args: argparse.Namespace | None) -> bool:
    from ..render.console import color_allowed

    try:
        terminal = sys.stdout.isatty()
    except (AttributeError, ValueError):
        terminal = False
    return terminal and color_allowed(bool(getattr(args, "no_color", False)))


def print_plain(lines: list[str], args: argparse.Namespace | None = None, header: int | None = None) -> None:
    """Print lines already fitted to the width; line ``header`` (a table's header) in bold on a colour terminal."""
    colour = _colour(args)
    out = [f"\x1b[1m{line}\x1b[0m" if colour and i == header else line for i, line in enumerate(lines)]
    sys.stdout.write("".join(line + "\n" for line in out))


def print_wrapped(items: Iterable[Any], args: argparse.Namespace | None = None) -> None:
    """Print rich renderables (``Text`` or markup strings) as lines wrapped at words to the output width,
    each line keeping its indent; styles only on a colour terminal."""
    from rich.text import Text

    from ..render.fittable import wrap_text
    from .common import output_width

    width = output_width(args)
    colour = _colour(args)
    console = None
    if colour:
        from ..render.console import TextOptions, make_console

        console = make_console(TextOptions(width=width, terminal=True, color=True), markup=False)
    for item in items:
        text = item if isinstance(item, Text) else Text.from_markup(item) if item else Text("")
        for line in (x for para in text.plain.split("\n") for x in wrap_text(para, width)):
            if console is not None:
                console.print(Text(line, style=text.style), soft_wrap=True)
            else:
                sys.stdout.write(line + "\n")


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
    from ..engine.rulefile import load_rules
    from ..render.fittable import fit_table
    from .common import output_width

    rules = sorted(load_rules(getattr(args, "rules", ()) or ()), key=lambda r: r.id)
    lines = ["tracedoc rules"] + fit_table(
        ("id", "name", "scope", "label", "severity", "title"),
        [(r.id, r.name, r.scope, r.label, r.severity, r.title) for r in rules],
        ("id", "id", "id", "id", "id", "text"),
        output_width(args),
    )
    print_plain(lines, args, header=1)
    return EXIT_OK


@_guard
def cmd_rules_explain(args: argparse.Namespace) -> int:
    """Print one rule's documentation, parameters and fixes."""
    from ..engine.expr import suggest
    from ..engine.rulefile import find_rule, load_rules

    from ..engine.params import collect_params, resolve_params

    rules = load_rules(getattr(args, "rules", ()) or ())
    values = resolve_params(rules, collect_params(getattr(args, "param", None) or []), where="--param")
    rule = find_rule(rules, args.rule)
    if rule is None:
        producing = sorted((r for r in rules if r.label == args.rule.strip().lower()), key=lambda r: r.id)
        if producing:
            print_wrapped(label_lines(args.rule.strip().lower(), producing, values), args)
            return EXIT_OK
        keys = [r.id for r in rules] + [r.name for r in rules] + sorted({r.label for r in rules})
        raise UsageError(f"tracedoc rules explain {args.rule}",
                         f"no rule or label {args.rule!r}{suggest(args.rule, keys)}",
                         todo="'tracedoc rules' lists the rules and their labels")  # fmt: skip
    print_wrapped(explain_lines(rule, values.get(rule.id)), args)
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

    return re.sub(
        r"\b[A-Za-z_][A-Za-z0-9_]*\b",
        lambda m: f"{m.group(0)} (= {values[m.group(0)]!r})" if m.group(0) in values else m.group(0),
        source,
    )


# how a finding predicts its gain (the rule's ``what_if``), in words
WHAT_IF_WORDS = {
    "share": "today's share of the step, as an upper bound",
    "estimate": "the rule's impact formula, as an upper bound",
    "none": "not modelled (the fix's effect cannot be told from the trace)",
}


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
        yield Text(f"Parameters (override with --param {rule.id}.NAME=VALUE)", style="bold underline")
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
