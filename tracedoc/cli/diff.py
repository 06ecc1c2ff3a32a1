"""``tracedoc diff BASE NEW``: what changed between two runs, and a regression gate for CI.
``tracedoc diff BASE RUN2 RUN3 ...``: a series of runs, each compared with the first, as a trend table.

Each side is a trace file, a directory of rank traces, or a report saved with ``tracedoc analyze
--format json``. Exit codes (``tracedoc.exits``) as the rest of the CLI, and ``EXIT_GATE`` when the
gate failed (``--fail-on-regression PCT`` on step time, ``--fail-if EXPR`` on a metric delta), with
the reason on stderr.
"""

from __future__ import annotations

import argparse
import math
import sys

from ..exits import EXIT_GATE, EXIT_OK
from ..render import FORMATS, renderer
from .common import add_width_option, check_output_path, jobs_count, output_format, output_width, print_warning
from ..neutral import clean_text
from ..outfiles import write_atomic


def _percent(text: str) -> float:
    try:
        value = float(text.strip().rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expects a percentage such as 5 or 2.5, got {text[:40]!r}") from None
    if not math.isfinite(value):  # NaN compares false with everything: the gate would never fail
        raise argparse.ArgumentTypeError(f"expects a finite percentage such as 5 or 2.5, got {text[:40]!r}")
    if value < 0:
        raise argparse.ArgumentTypeError(f"expects a percentage of 0 or more, got {text!r}")
    return value


def register(sub) -> None:
    d = sub.add_parser(
        "diff",
        help="compare two runs (traces or saved JSON reports); gate CI on regressions",
        description="Compare two runs: each a trace file, a directory of rank traces, or a report "
        "saved with `tracedoc analyze --format json`. Says how the step time changed "
        "and why (the change split over compute, exposed communication, memcpy and "
        "idle by cause), which kernels and operators moved, came or went, and which "
        "labels and metrics changed, and checks the base report's what-if predictions "
        "against the step the new run measured. With more runs, each is compared with "
        "BASE in one trend table.",
    )
    d.add_argument("before", metavar="BASE", help="the baseline run: trace, rank directory or JSON report")
    d.add_argument(
        "after",
        metavar="NEW",
        nargs="+",
        help="the run to judge: trace, rank directory or JSON report; several: a trend table of each "
        "against BASE, with the step change's attribution per run",
    )
    d.add_argument(
        "-f",
        "--format",
        choices=FORMATS,
        default=None,
        help="output format (default: from the -o file's extension, else text)",
    )
    d.add_argument("-o", "--output", help="write the output to this file instead of stdout")
    d.add_argument(
        "-j",
        "--jobs",
        type=jobs_count,
        default=None,
        help="processes for rank directories (1 to the CPU count; default: CPU count)",
    )
    d.add_argument("--step-range", metavar="NAME", help="nsys: the NVTX range that marks a step")
    add_width_option(d)
    d.add_argument(
        "--noise",
        metavar="PCT",
        type=_percent,
        default=None,
        help="step-time changes smaller than this are 'within noise' (default: 2)",
    )
    gate = d.add_argument_group("gate")
    gate.add_argument(
        "--fail-on-regression",
        metavar="PCT",
        type=_percent,
        default=None,
        help="exit with 3 when the step time grew by more than PCT percent (of any run, for a trend)",
    )
    gate.add_argument(
        "--fail-if",
        metavar="EXPR",
        action="append",
        default=[],
        help="exit with 3 when EXPR holds on the metric deltas, e.g. 'exposed_comm_fraction > +0.05' "
        "(names: any metric (its change), METRIC_before, METRIC_after, step_ms, step_pct, "
        "CATEGORY_ms); repeatable",
    )
    d.set_defaults(func=cmd_diff)


def _conditions(sources: list[str]) -> list:
    from ..diff import gate_names
    from ..engine.expr import NUM, ExprError, compile_expr
    from ..errors import UsageError

    names = dict.fromkeys(gate_names(), NUM)
    out = []
    for source in sources:
        try:
            out.append(compile_expr(source, names))
        except ExprError as exc:
            raise UsageError(
                "--fail-if",
                str(exc),
                None,
                "write a condition on metric deltas, e.g. 'exposed_comm_fraction > +0.05' or 'step_pct > 5'",
            ) from None
    return out


def cmd_diff(args) -> int:
    from ..api import diff
    from ..diff import gate_failures

    conditions = _conditions(args.fail_if)  # a bad expression fails before any trace is read
    runs = list(args.after)
    report = "diff" if len(runs) == 1 else "trend"
    fmt = output_format(args.format, args.output, report)
    options = {"step_range": args.step_range} if args.step_range else {}
    sides = [("the BASE input", args.before)] + [
        ("the NEW input" if report == "diff" else f"run {i + 2}", run) for i, run in enumerate(runs)
    ]
    if args.output:  # before any run is analysed: -o never names an input
        check_output_path(args.output, sides)
    if report == "diff":
        result = diff(args.before, runs[0], jobs=args.jobs, noise_pct=args.noise, **options)
        diffs = [result]
    else:
        from ..api import trend

        result = trend(args.before, *runs, jobs=args.jobs, noise_pct=args.noise, **options)
        diffs = result.diffs
    for i, d in enumerate(diffs):
        for w in d.warnings:
            print_warning(f"run {i + 2}: {w}" if report == "trend" else w)
    text = renderer(fmt, report).render(result, **({"width": output_width(args)} if fmt == "text" else {}))
    if args.output:
        check_output_path(args.output, sides)
        write_atomic(args.output, text)
        print(f"tracedoc: wrote {fmt} {report} to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    reasons = []
    for i, d in enumerate(diffs):
        where = f"run {i + 2} ({d.after_path}): " if report == "trend" else ""
        reasons += [where + r for r in gate_failures(d, args.fail_on_regression, conditions)]
    for reason in reasons:
        print(f"tracedoc: gate failed: {clean_text(reason)}", file=sys.stderr)
    return EXIT_GATE if reasons else EXIT_OK
