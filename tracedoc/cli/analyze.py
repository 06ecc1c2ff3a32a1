"""``tracedoc analyze``: analyse a trace file or a directory of rank traces and print or write a report.

The rules options it shares with ``tracedoc logs`` (``--rules``, ``--param``, ``--fail-on``) and the
``--fail-on`` exit code are in ``ruleoptions``; how ``-o`` and ``--format`` choose a report's format
is ``common.output_format``.
"""

from __future__ import annotations

import argparse
import os
import re
import zlib
import shlex
import sys
from typing import Any

from ..errors import TracedocError, UsageError
from ..render import FORMATS, renderer
from .estimate import add_estimate_options, estimate_request
from .common import (
    add_output_options,
    check_output_path,
    jobs_count,
    output_format,
    print_error,
    print_warning,
    text_options,
)
from .ruleoptions import add_engine_options, engine_kwargs, fail_on_exit_code
from ..outfiles import write_atomic
from ..exits import EXIT_OK

BIG_INPUT_BYTES = 20 * 1024 * 1024  # a progress bar for inputs larger than this (or directories)


def example_path() -> str:
    """The built-in example trace shipped with the package."""
    from importlib import resources

    return str(resources.files("tracedoc") / "examples" / "dataloader_starved.pt.trace.json.gz")


def register(sub: Any) -> None:
    a = sub.add_parser(
        "analyze",
        help="analyse a trace file or a directory of rank traces",
        description="Analyse a torch.profiler trace (.json/.json.gz), an nsys SQLite export, "
        "or a directory of per-rank traces.",
    )
    a.add_argument(
        "path",
        nargs="?",
        help="trace file or directory (omit with --example); or a URL: s3://, gs://, "
        "az:// (a file, or a prefix of rank files ending in /), https:// (a file)",
    )
    a.add_argument("--example", action="store_true", help="analyse the built-in example trace")
    a.add_argument(
        "-f",
        "--format",
        choices=FORMATS,
        default=None,
        help="output format (default: from the -o file's extension, else text)",
    )
    a.add_argument(
        "-o",
        "--output",
        help="write the output to this file instead of stdout (.html, .md, .json or .txt choose the format)",
    )
    a.add_argument(
        "-j",
        "--jobs",
        type=jobs_count,
        default=None,
        help="processes for directories (1 to the CPU count; default: CPU count)",
    )
    a.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="analyse the ranks of a directory on a Dask cluster (e.g. tcp://host:8786); "
        "its workers must see the same paths, or read the same URLs",
    )
    a.add_argument("--step-range", metavar="NAME", help="nsys: the NVTX range that marks a step")
    a.add_argument(
        "--steps",
        metavar="A:B",
        help="torch.profiler traces: analyse a slice, ProfilerStep#A to #B (both included; A: and :B "
        "leave an end open, N is one step), in the memory the slice needs; the report says it is "
        "a slice",
    )
    a.add_argument("--pid", metavar="PID|all", help="nsys: analyse one process (default: one rank per process)")
    a.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    a.add_argument(
        "--timeline",
        action="store_true",
        help="-f json: include each rank's timeline excerpts (left out by default: they are most of the document)",
    )
    a.add_argument(
        "--perfetto",
        metavar="OUT.json",
        help="also write the trace with tracedoc's tracks (idle causes, critical path, findings) "
        "for ui.perfetto.dev or chrome://tracing; for a directory of ranks, every rank on one "
        "timeline, matched collectives linked across ranks (.gz compresses)",
    )
    a.add_argument(
        "--log",
        metavar="FILE",
        help="a training log whose findings join the trace report (a tracedoc run directory brings its steps.jsonl)",
    )
    add_estimate_options(a)
    a.add_argument(
        "--rank", type=int, default=None, metavar="N", help="directories: show rank N's details after the job verdict"
    )
    add_engine_options(a)
    add_output_options(a)
    a.set_defaults(func=cmd_analyze)


# -- the command -------------------------------------------------------------------------------------


def cmd_analyze(args) -> int:
    from ..api import analyze
    from ..ingest import sniff
    from ..remote import is_url

    if args.example:
        path = example_path()
    elif args.path:
        path = args.path
    else:
        raise UsageError("tracedoc analyze", "needs a trace path", None, "pass a file or directory, or --example")
    fmt = output_format(args.format, args.output)
    if args.perfetto and is_url(path):
        raise UsageError(
            "--perfetto",
            f"reads the trace files again to write the timeline, and {path} is a URL",
            None,
            "copy the trace files to a local folder and pass that folder with --perfetto",
        )
    kind = sniff(path) if args.rank is not None and not is_url(path) else None  # sniffed once, handed on
    if kind == "kineto":  # a directory or an nsys export may hold several
        raise _rank_on_one_trace(path, "a Kineto trace file: one process")
    if args.rank is not None:
        _check_rank_first(args.rank, path, kind)
    engine = engine_kwargs(args)
    update, progress = _progress_callback(not args.no_progress and _big_input(path), _of_ranks(path))
    options = {}
    if args.step_range:
        options["step_range"] = args.step_range
    if args.steps is not None:
        from ..ingest.kineto.window import parse_steps

        options["steps"] = parse_steps(args.steps)
    if args.pid:
        options["pid"] = args.pid if args.pid == "all" else _int_arg("--pid", args.pid)
    command = "tracedoc " + " ".join(shlex.quote(a) for a in sys.argv[1:]) if sys.argv[1:] else None
    try:
        result = analyze(
            path,
            jobs=args.jobs,
            params=engine["params"],
            rule_dirs=engine["extra_rule_dirs"],
            progress=update,
            command=command,
            scheduler=args.scheduler,
            log=args.log,
            estimate=estimate_request(args),
            kind=kind,
            **options,
        )
    except TracedocError:
        log_format = training_log_format(path)
        if log_format is None:
            raise
        raise UsageError(
            path,
            f"is a training log ({log_format}), not a profiler trace",
            None,
            f"use `tracedoc logs {shlex.quote(path)}` for a training log; `tracedoc analyze` reads "
            "torch.profiler traces (.json, .json.gz), Nsight Systems exports (.sqlite) and "
            "directories of rank traces",
        ) from None
    finally:
        if progress is not None:
            progress.stop()
    result.config_files = engine["config_files"]
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
            raise UsageError(
                "--rank", f"rank {args.rank} is not in {path}", f"ranks {have[:16]}", "pick one of the ranks listed"
            )
        result = result.with_focus(args.rank)
    render_options: dict = {"timeline": True} if fmt == "json" and args.timeline else {}
    if fmt in ("md", "html") and args.full_names:
        from ..render.views import Caps

        render_options["caps"] = Caps(full_names=True)
    if args.perfetto and args.output and os.path.realpath(args.perfetto) == os.path.realpath(args.output):
        raise UsageError(
            args.output,
            "is named by both -o and --perfetto; one would overwrite the other",
            None,
            "give the report and the Perfetto timeline different paths",
        )
    if args.perfetto:  # both outputs checked before either is written
        check_output_path(
            args.perfetto, _inputs(args, path, result) + [("the --output file", args.output)], "--perfetto"
        )
    if args.output:
        check_output_path(args.output, _inputs(args, path, result) + [("the --perfetto output", args.perfetto)])
    overlay_failed = _write_overlay(args, result) if args.perfetto else None  # never costs the report
    if (
        args.perfetto
        and overlay_failed is None
        and fmt == "html"
        and args.output
        and _same_folder(args.output, args.perfetto)
    ):
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
    if overlay_failed is not None:
        return overlay_failed
    if args.fail_on:
        verdicts = list(result.verdicts) + ([result.job.verdict] if result.job is not None else [])
        return max((fail_on_exit_code(v, args.fail_on) for v in verdicts if v is not None), default=EXIT_OK)
    return EXIT_OK


LOG_SNIFF_BYTES = 256 * 1024


def training_log_format(path: str) -> str | None:
    """The training-log format of the file at ``path`` (what ``tracedoc logs`` would read it as), or None
    for anything else: asked only after the file failed to read as a trace, so a trace never pays for it."""
    import gzip

    from ..logs.errors import LogError
    from ..logs.reader import sniff as sniff_log

    try:
        if not os.path.isfile(path):
            return None
        with open(path, "rb") as raw:
            head = raw.read(LOG_SNIFF_BYTES)
        if head[:2] == b"\x1f\x8b":
            with gzip.open(path, "rb") as gz:
                head = gz.read(LOG_SNIFF_BYTES)
    except (OSError, EOFError, zlib.error):  # gzip.BadGzipFile is an OSError
        return None
    if b'"traceEvents"' in head or head.startswith(b"SQLite format"):
        return None  # a trace, however damaged: its own error says what is wrong with it
    try:
        kind = sniff_log(head)
    except (LogError, ValueError, RecursionError):
        return None
    if kind == "json" and b'"log_history"' not in head:
        return None  # a JSON document that is neither a trace nor a trainer_state.json
    lines = head.strip().split(b"\n")
    if kind == "jsonl" and not (_LOG_KEYS.search(lines[0]) and (len(lines) > 1 or _STEP_KEYS.search(lines[0]))):
        return None  # JSON objects, but none of a training log's fields in the first (one object of settings
        # such as {"lr": 0.1, "batch_size": 32} is a config file: a log of one line names its step or loss)
    if kind == "csv" and not _LOG_COLUMNS.search(head.split(b"\n", 1)[0]):
        return None  # a line with commas ("hello, this is not json"), not a header of a log's columns
    return kind


_LOG_KEYS = re.compile(rb'"[^"]{0,40}(loss|step|iter|epoch|lr|learning_rate|tokens|samples)[^"]{0,40}"\s*:', re.I)
_STEP_KEYS = re.compile(rb'"[^"]{0,40}(loss|step|iter)[^"]{0,40}"\s*:', re.I)
_LOG_COLUMNS = re.compile(rb"(^|[,;\t])[^,;\t]{0,40}(loss|step|iter|epoch|lr|learning_rate|tokens|samples)", re.I)


def _write_overlay(args: argparse.Namespace, result) -> int | None:
    """Write the ``--perfetto`` timeline; None when written, else the exit code of its one-line error (the
    report is written all the same)."""
    from ..render.perfetto import write_perfetto

    try:
        write_perfetto(result, args.perfetto)
    except TracedocError as exc:
        code = print_error(exc)
        print(
            f"tracedoc: --perfetto {args.perfetto} not written; the report is written anyway (exit status {code})",
            file=sys.stderr,
        )
        return code
    except MemoryError:
        print(
            f"tracedoc: --perfetto {args.perfetto} not written: out of memory while reading the trace again; the "
            "report is written anyway (exit status 1)",
            file=sys.stderr,
        )
        return 1
    from ..render.perfetto_job import MAX_FULL_RANKS

    merged = result.job is not None and result.job.not_a_job is None
    n_ranks = len(result.job.ranks_used) if merged else 0
    bounded = (
        ""
        if n_ranks <= MAX_FULL_RANKS
        else (
            f" (the stragglers, the median rank and the ranks that wait most in full, up to {MAX_FULL_RANKS} of "
            f"{n_ranks}; every matched collective on 'all ranks')"
        )
    )
    print(
        f"tracedoc: wrote the {'merged timeline of the ranks' if merged else 'Perfetto overlay'} to "
        f"{args.perfetto}{bounded}",
        file=sys.stderr,
    )
    return None


def _check_rank_first(rank: int, path: str, kind: str | None) -> None:
    """A ``--rank`` that no rank of ``path`` can be, refused before the analysis (which may take minutes);
    ``kind``: what ``ingest.sniff`` told of ``path`` (None for a URL)."""
    if rank < 0:
        raise UsageError("--rank", f"rank {rank} is negative", None, "ranks are numbered from 0")
    from ..stages import directory_ranks

    if kind != "directory":
        return

    have = directory_ranks(path)
    if have is not None and rank not in have:
        shown = sorted(have)
        raise UsageError(
            "--rank",
            f"rank {rank} is not in {path}",
            f"ranks {shown[:16]}" + (f" and {len(shown) - 16:,} more" if len(shown) > 16 else ""),
            "pick one of the ranks listed",
        )


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
    return UsageError(
        "--rank",
        f"picks one rank's details after the job verdict of several ranks, and {path} is a single trace",
        seen,
        "leave --rank out (the report is that trace's), or pass the directory that holds every rank's trace",
    )


def _same_folder(a: str, b: str) -> bool:
    return os.path.dirname(os.path.abspath(a)) == os.path.dirname(os.path.abspath(b))


def _progress_callback(enabled: bool, ranks: bool = False):
    """A rich progress bar on stderr for inputs that take more than a moment (``ranks``: of the rank files
    done, in the local process pool or on a cluster); None when stderr is not a TTY."""
    if not enabled or not sys.stderr.isatty():
        return None, None
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    # Redrawn on each update rather than by rich's refresh thread: with no other thread running, the
    # reader may fork its decode workers and the critical path its child (a fork copies one thread only).
    columns = (
        (TextColumn("[bold]ranks"), BarColumn(), MofNCompleteColumn())
        if ranks
        else (TextColumn("[bold]reading"), BarColumn(), TaskProgressColumn())
    )
    progress = Progress(*columns, TimeElapsedColumn(), console=Console(stderr=True), transient=True, auto_refresh=False)
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


def _of_ranks(path: str) -> bool:
    """Whether ``path`` names several rank files (a directory, or a URL prefix ending in /)."""
    from ..remote import is_url

    return path.endswith("/") if is_url(path) else os.path.isdir(path)


def _big_input(path: str) -> bool:
    from ..remote import is_url

    if is_url(path):  # a prefix of ranks, or a file fetched first
        return True
    try:
        return os.path.isdir(path) or os.path.getsize(path) > BIG_INPUT_BYTES
    except OSError:
        return False
