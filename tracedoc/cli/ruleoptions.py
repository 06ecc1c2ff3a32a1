"""The rules options every analysing command takes (``--rules``, ``--param``, ``--fail-on``) and the
``--fail-on`` exit code."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from ..exits import EXIT_FAIL_ON, EXIT_OK
from ..labels import LABELS, SEVERITIES

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.evaluate import Verdict


def fail_on_value(text: str) -> str:
    """argparse type for ``--fail-on``: a severity or a label (or, for ``tracedoc logs --follow``, a kind of
    live finding)."""
    from ..logs.registry import WATCH_KINDS

    value = text.strip().lower()
    if value not in SEVERITIES and value not in LABELS and value not in WATCH_KINDS:
        from ..engine.expr import suggest

        choices = ", ".join(SEVERITIES + LABELS) + f" (tracedoc logs --follow also: {', '.join(WATCH_KINDS)})"
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a severity or label{suggest(value, SEVERITIES + LABELS)}; one of: {choices}"
        )
    return value


def add_engine_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--rules DIR``, ``--param RULE.name=value`` and ``--fail-on LEVEL`` to ``parser``.

    They land in ``args.rules`` (list of directories), ``args.param`` (list of assignments) and
    ``args.fail_on`` (None or a severity/label).
    """
    group = parser.add_argument_group("rules")
    group.add_argument("--rules", metavar="DIR", action="append", default=[],
                       help="also load the *.toml rule files in DIR (repeatable)")  # fmt: skip
    group.add_argument("--param", metavar="RULE.name=value", action="append", default=[],
                       help="override a rule threshold, e.g. TD301.stall_threshold=0.1 (repeatable); "
                            "[tool.tracedoc.params] in pyproject.toml sets defaults")  # fmt: skip
    group.add_argument("--fail-on", metavar="LEVEL", type=fail_on_value, default=None,
                       help=f"exit with 3 when a finding has this label, or a severity at or above it "
                            f"({', '.join(SEVERITIES)}; or a label such as io_bound)")  # fmt: skip


def engine_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """``params`` and ``extra_rule_dirs`` from parsed args (pyproject.toml params merged with ``--param``), and
    ``config_files``: the pyproject.toml whose settings they hold (a report names it)."""
    from ..engine.params import collect_params, read_pyproject

    _, pyproject_dirs, config = read_pyproject()
    return {
        "params": collect_params(getattr(args, "param", None) or []),
        "extra_rule_dirs": tuple(str(d) for d in pyproject_dirs) + tuple(getattr(args, "rules", None) or ()),
        "config_files": [str(config)] if config is not None else [],
    }


def fail_on_exit_code(verdict: "Verdict | None", fail_on: str | None) -> int:
    """3 when a finding of ``verdict`` has label ``fail_on`` or a severity at or above it, else 0."""
    if not fail_on or verdict is None:
        return EXIT_OK
    fail_on = fail_on.lower()
    if fail_on not in SEVERITIES and fail_on not in LABELS:
        raise UsageError(
            "--fail-on",
            f"{fail_on!r} is not a severity or label",
            None,
            "the kinds of live finding (nan, stall, ...) are for tracedoc logs --follow",
        )
    for finding in verdict.findings:
        if fail_on in SEVERITIES:
            if SEVERITIES.index(finding.severity) >= SEVERITIES.index(fail_on):
                return EXIT_FAIL_ON
        elif finding.label == fail_on:
            return EXIT_FAIL_ON
    return EXIT_OK
