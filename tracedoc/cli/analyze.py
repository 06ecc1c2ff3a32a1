"""``tracedoc analyze``: analyse a trace file or a directory of rank traces and print or write a report.

Also the rules options every analysing command takes (``--rules``, ``--param``, ``--fail-on``) and
the ``--fail-on`` exit code.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from typing import TYPE_CHECKING, Any

from ..labels import LABELS, SEVERITIES
from ..errors import TracedocError, UsageError
from ..render import FORMATS, output_extension, output_extensions_text, renderer, renderer_for_path
from .estimate import add_estimate_options, estimate_request
from .common import add_output_options, check_output_path, jobs_count, print_warning, text_options
from ..outfiles import write_atomic
from ..exits import EXIT_FAIL_ON, EXIT_OK

if TYPE_CHECKING:  # pragma: no cover
    from ..engine.evaluate import Verdict

BIG_INPUT_BYTES = 20 * 1024 * 1024  # a progress bar for inputs larger than this (or directories)


def example_path() -> str:
    """The built-in example trace shipped with the package."""
    from importlib import resources

    return str(resources.files("tracedoc") / "examples" / "dataloader_starved.pt.trace.json.gz")


def register(sub: Any) -> None:
    a = sub.add_parser("analyze", help="analyse a trace file or a directory of rank traces",
                       description="Analyse a torch.profiler trace (.json/.json.gz), an nsys SQLite export, "
                                   "or a directory of per-rank traces.")
    a.add_argument("path", nargs="?", help="trace file or directory (omit with --example)")
    a.add_argument("--example", action="store_true", help="analyse the built-in example trace")
    a.add_argument("-f", "--format", choices=FORMATS, default=None,
                   help="output format (default: from the -o file's extension, else text)")
    a.add_argument("-o", "--output", help="write the output to this file instead of stdout "
                                          "(.html, .md, .json or .txt choose the format)")
    a.add_argument("-j", "--jobs", type=jobs_count, default=None, help="processes for directories (1 to the CPU count; default: CPU count)")
    a.add_argument("--scheduler", metavar="ADDRESS",
                   help="analyse the ranks of a directory on a Dask cluster (e.g. tcp://host:8786); "
                        "its workers must see the same paths")
    a.add_argument("--step-range", metavar="NAME", help="nsys: the NVTX range that marks a step")
    a.add_argument("--pid", metavar="PID|all", help="nsys: analyse one process (default: one rank per process)")
    a.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    a.add_argument("--timeline", action="store_true",
                   help="-f json: include each rank's timeline excerpts (left out by default: they are most of "
                        "the document)")
    a.add_argument("--perfetto", metavar="OUT.json",
                   help="also write the trace with tracedoc's tracks (idle causes, critical path, findings) "
                        "for ui.perfetto.dev or chrome://tracing; for a directory of ranks, every rank on one "
                        "timeline, matched collectives linked across ranks (.gz compresses)")
    a.add_argument("--log", metavar="FILE", help="a training log whose findings join the trace report "
                                                 "(a tracedoc run directory brings its steps.jsonl)")
    add_estimate_options(a)
    a.add_argument("--rank", type=int, default=None, metavar="N",
                   help="directories: show rank N's details after the job verdict")
    add_engine_options(a)
    add_output_options(a)
    a.set_defaults(func=cmd_analyze)


# -- rules options ------------------------------------------------------------------------------------


def fail_on_value(text: str) -> str:
    """argparse type for ``--fail-on``: a severity or a label."""
    value = text.strip().lower()
    if value not in SEVERITIES and value not in LABELS:
        from ..engine.expr import suggest

        choices = ", ".join(SEVERITIES + LABELS)
        raise argparse.ArgumentTypeError(f"{text!r} is not a severity or label{suggest(value, SEVERITIES + LABELS)}; one of: {choices}")
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
    """``params`` and ``extra_rule_dirs`` from parsed args (pyproject.toml params merged with ``--param``)."""
    from ..engine.params import collect_params, read_pyproject

    _, pyproject_dirs, _ = read_pyproject()
    return {"params": collect_params(getattr(args, "param", None) or []),
            "extra_rule_dirs": tuple(str(d) for d in pyproject_dirs) + tuple(getattr(args, "rules", None) or ())}


def fail_on_exit_code(verdict: "Verdict | None", fail_on: str | None) -> int:
    """3 when a finding of ``verdict`` has label ``fail_on`` or a severity at or above it, else 0."""
    if not fail_on or verdict is None:
        return EXIT_OK
    fail_on = fail_on.lower()
    if fail_on not in SEVERITIES and fail_on not in LABELS:
        raise UsageError("--fail-on", f"{fail_on!r} is not a severity or label")
    for finding in verdict.findings:
        if fail_on in SEVERITIES:
            if SEVERITIES.index(finding.severity) >= SEVERITIES.index(fail_on):
                return EXIT_FAIL_ON
        elif finding.label == fail_on:
            return EXIT_FAIL_ON
    return EXIT_OK


# -- the command -------------------------------------------------------------------------------------


def cmd_analyze(args) -> int:
    from ..api import analyze
    from ..ingest import sniff

    if args.example:
        path = example_path()
    elif args.path:
        path = args.path
    else:
        raise UsageError("tracedoc analyze", "needs a trace path", None, "pass a file or directory, or --example")
    fmt = output_format(args.format, args.output)
    if args.rank is not None and sniff(path) == "kineto":  # a directory or an nsys export may hold several
        raise _rank_on_one_trace(path, "a Kineto trace file: one process")
    engine = engine_kwargs(args)
    update, progress = _progress_callback(not args.no_progress and _big_input(path))
    options = {}
    if args.step_range:
        options["step_range"] = args.step_range
    if args.pid:
        options["pid"] = args.pid if args.pid == "all" else _int_arg("--pid", args.pid)
    command = "tracedoc " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else None
    try:
        result = analyze(path, jobs=args.jobs, params=engine["params"], rule_dirs=engine["extra_rule_dirs"],
                         progress=update, command=command, scheduler=args.scheduler, log=args.log,
                         estimate=estimate_request(args), **options)
    finally:
        if progress is not None:
            progress.stop()
    for r in result.ranks:
        for w in r.warnings:
            print_warning(w)
    if result.job is not None:
        from ..checks import BUG_PREFIX

        for issue in result.job.issues:
            if issue.startswith(BUG_PREFIX):
                print_warning(issue)
    if args.rank is not None:
        if result.job is None:
            rank = result.ranks[0].rank if result.ranks else None
            raise _rank_on_one_trace(path, "an export of one process" + (f", rank {rank}" if rank is not None else ""))
        have = [r.rank for r in result.ranks]
        if args.rank not in have:
            raise UsageError("--rank", f"rank {args.rank} is not in {path}", f"ranks {have[:16]}",
                             "pick one of the ranks listed")
        result = result.with_focus(args.rank)
    render_options: dict = {"timeline": True} if fmt == "json" and args.timeline else {}
    if fmt in ("md", "html") and args.full_names:
        from ..render.views import Caps

        render_options["caps"] = Caps(full_names=True)
    if args.perfetto and args.output and os.path.realpath(args.perfetto) == os.path.realpath(args.output):
        raise UsageError(args.output, "is named by both -o and --perfetto; one would overwrite the other", None,
                         "give the report and the Perfetto timeline different paths")
    if args.perfetto:  # both outputs checked before either is written
        check_output_path(args.perfetto, _inputs(args, path, result) + [("the --output file", args.output)], "--perfetto")
    if args.output:
        check_output_path(args.output, _inputs(args, path, result) + [("the --perfetto output", args.perfetto)])
    if args.perfetto:
        from ..render.perfetto import write_perfetto
        from ..render.perfetto_job import MAX_FULL_RANKS

        write_perfetto(result, args.perfetto)
        merged = result.job is not None and result.job.not_a_job is None
        n_ranks = len(result.job.ranks_used) if merged else 0
        bounded = "" if n_ranks <= MAX_FULL_RANKS else (
            f" (the stragglers, the median rank and the ranks that wait most in full, up to {MAX_FULL_RANKS} of "
            f"{n_ranks}; every matched collective on 'all ranks')")
        print(f"tracedoc: wrote the {'merged timeline of the ranks' if merged else 'Perfetto overlay'} to "
              f"{args.perfetto}{bounded}", file=sys.stderr)
        if fmt == "html" and args.output and _same_folder(args.output, args.perfetto):
            render_options["overlay_href"] = os.path.basename(args.perfetto)  # the HTML report links to it
    if args.output:
        write_atomic(args.output, renderer(fmt).render(result, **render_options))
        print(f"tracedoc: wrote {fmt} report to {args.output}", file=sys.stderr)
    elif fmt == "text":
        from ..render.text import print_text

        print_text(result, text_options(args))
    else:
        text = renderer(fmt).render(result, **render_options)
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    if args.fail_on:
        verdicts = list(result.verdicts) + ([result.job.verdict] if result.job is not None else [])
        return max((fail_on_exit_code(v, args.fail_on) for v in verdicts if v is not None), default=EXIT_OK)
    return EXIT_OK


def _inputs(args, path: str, result) -> list[tuple[str, str]]:
    """Every path ``analyze`` read, named by what it was: no output may replace one of them."""
    out = [("the trace being analysed", path), ("--log", args.log)]
    if os.path.isdir(path):  # a run directory's step log joins the report
        out.append(("the step log", os.path.join(path, "steps.jsonl")))
    if args.log and os.path.isdir(args.log):
        from ..logs.reader import resolve_path

        try:
            out.append(("--log", resolve_path(args.log)))
        except TracedocError:
            pass
    if args.model and os.path.exists(args.model):
        out.append(("--model", args.model))
    out += [("--rules", d) for d in args.rules or ()]
    return out + [("the trace being analysed", p) for p in result.paths]


def _rank_on_one_trace(path: str, seen: str) -> UsageError:
    """``--rank`` picks one rank of a job: a lone trace has no job view to pick from."""
    return UsageError("--rank", f"picks one rank's details after the job verdict of several ranks, and {path} "
                      "is a single trace", seen, "leave --rank out (the report is that trace's), or pass the "
                      "directory that holds every rank's trace")


def _same_folder(a: str, b: str) -> bool:
    return os.path.dirname(os.path.abspath(a)) == os.path.dirname(os.path.abspath(b))


def output_format(fmt: str | None, output: str | None, report: str = "analysis") -> str:
    """``--format`` when given, else the one ``-o``'s extension names, else text; an ``-o`` file whose
    extension names no format is a usage error (it would otherwise get text under any name)."""
    if fmt:
        return fmt
    if not output:
        return "text"
    by_path = renderer_for_path(output, report)
    if by_path is None:
        ext = output_extension(output)
        raise UsageError(output, "has no extension that names a report format", f"{ext!r}" if ext else "no extension",
                         f"end the name in {output_extensions_text(report)}, or give --format ({', '.join(FORMATS)})")
    return by_path.name


def _progress_callback(enabled: bool):
    """A rich progress bar on stderr for inputs that take more than a moment; None when not a TTY."""
    if not enabled or not sys.stderr.isatty():
        return None, None
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    # Redrawn on each update rather than by rich's refresh thread: with no other thread running, the
    # reader may fork its decode workers and the critical path its child (a fork copies one thread only).
    progress = Progress(TextColumn("[bold]reading"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(),
                        console=Console(stderr=True), transient=True, auto_refresh=False)
    state = {"task": None}

    def update(done: int, total: int) -> None:
        if state["task"] is None:
            progress.start()
            state["task"] = progress.add_task("read", total=total)
        progress.update(state["task"], completed=done, total=total, refresh=True)

    return update, progress


def _int_arg(flag: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise TracedocError(flag, "expects a process id or 'all'", repr(text), "e.g. --pid 4242") from None


def _big_input(path: str) -> bool:
    try:
        return os.path.isdir(path) or os.path.getsize(path) > BIG_INPUT_BYTES
    except OSError:
        return False
