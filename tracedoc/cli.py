"""Command line: ``tracedoc analyze``, ``tracedoc diff``, ``tracedoc rules``, ``tracedoc run``/``trigger``.

Thin by design: every command calls into the stages. Bad input is reported as one line on stderr
with a non-zero exit, never as a traceback. Exit codes: 0 ok, 1 error, 2 usage, 3 a finding at or
above ``--fail-on`` (``diff``: the regression gate failed).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import warnings
from importlib import resources

from . import __version__
from .errors import TracedocError, TraceWarning, UsageError

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_FAIL_ON = 0, 1, 2, 3
FORMATS = ("text", "json", "md", "html")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # usage errors: one line plus the usage, exit 2
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def example_path() -> str:
    """The built-in example trace shipped with the package."""
    return str(resources.files("tracedoc") / "examples" / "dataloader_starved.pt.trace.json.gz")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="tracedoc", description="Reads GPU profiler traces and says why a job is slow.")
    p.add_argument("--version", action="version", version=f"tracedoc {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    a = sub.add_parser("analyze", help="analyse a trace file or a directory of rank traces",
                       description="Analyse a torch.profiler trace (.json/.json.gz), an nsys SQLite export, "
                                   "or a directory of per-rank traces.")
    a.add_argument("path", nargs="?", help="trace file or directory (omit with --example)")
    a.add_argument("--example", action="store_true", help="analyse the built-in example trace")
    a.add_argument("-f", "--format", choices=FORMATS, default="text", help="output format (default: text)")
    a.add_argument("-o", "--output", help="write the output to this file instead of stdout")
    a.add_argument("-j", "--jobs", type=int, default=None, help="processes for directories (default: CPU count)")
    a.add_argument("--scheduler", metavar="ADDRESS",
                   help="analyse the ranks of a directory on a Dask cluster (e.g. tcp://host:8786); "
                        "its workers must see the same paths")
    a.add_argument("--step-range", metavar="NAME", help="nsys: the NVTX range that marks a step")
    a.add_argument("--pid", metavar="PID|all", help="nsys: analyse one process (default: one rank per process)")
    a.add_argument("--no-progress", action="store_true", help="never show a progress bar")
    try:
        from .engine.cli import add_engine_options
    except ImportError:
        a.set_defaults(rules=[], param=[], fail_on=None)
    else:
        add_engine_options(a)
    a.set_defaults(func=cmd_analyze)

    try:
        from .engine.cli import register as register_rules
    except ImportError:
        pass
    else:
        register_rules(sub)
    from .diffcli import register as register_diff

    register_diff(sub)
    try:
        from .capture.cli import register as register_capture
    except ImportError:
        pass
    else:
        register_capture(sub)
    return p


def _progress_callback(enabled: bool):
    """A rich progress bar on stderr for inputs that take more than a moment; None when not a TTY."""
    if not enabled or not sys.stderr.isatty():
        return None, None
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("[bold]reading"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(),
                        console=Console(stderr=True), transient=True)
    state = {"task": None}

    def update(done: int, total: int) -> None:
        if state["task"] is None:
            progress.start()
            state["task"] = progress.add_task("read", total=total)
        progress.update(state["task"], completed=done, total=total)

    return update, progress


def cmd_analyze(args) -> int:
    from .api import analyze

    if args.example:
        path = example_path()
    elif args.path:
        path = args.path
    else:
        raise UsageError("tracedoc analyze", "needs a trace path", None, "pass a file or directory, or --example")
    try:
        from .engine.cli import engine_kwargs
    except ImportError:
        engine = {"params": None, "extra_rule_dirs": ()}
    else:
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
                         progress=update, command=command, scheduler=args.scheduler, **options)
    finally:
        if progress is not None:
            progress.stop()
    for r in result.ranks:
        for w in r.warnings:
            print(f"tracedoc: warning: {w}", file=sys.stderr)
    text = _render(result, args.format)
    if args.output:
        _write_atomic(args.output, text)
        print(f"tracedoc: wrote {args.format} report to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    fail_on = getattr(args, "fail_on", None)
    if fail_on:
        from .engine.cli import fail_on_exit_code

        return max((fail_on_exit_code(v, fail_on) for v in result.verdicts if v is not None), default=EXIT_OK)
    return EXIT_OK


def _int_arg(flag: str, text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise TracedocError(flag, "expects a process id or 'all'", repr(text), "e.g. --pid 4242") from None


def _big_input(path: str) -> bool:
    try:
        return os.path.isdir(path) or os.path.getsize(path) > 20 * 1024 * 1024
    except OSError:
        return False


def _render(result, fmt: str) -> str:
    if fmt == "json":
        return result.to_json()
    if fmt == "text":
        if sys.stdout.isatty():
            from rich.console import Console

            from .render.text import renderables

            console = Console()
            for item in renderables(result):
                console.print(item)
            return ""
        return result.to_text()
    try:
        from . import render
        renderer = getattr(render, f"render_{fmt}")
    except (ImportError, AttributeError):
        raise TracedocError("tracedoc analyze", f"--format {fmt} is not available in this build", None,
                            "use --format text or json") from None
    return renderer(result)


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise TracedocError(path, "cannot be written", exc.strerror, "choose another --output path") from None


def _show_warning(message, category, filename, lineno, file=None, line=None):
    if issubclass(category, TraceWarning):
        print(f"tracedoc: warning: {message}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def main(argv: list[str] | None = None) -> int:
    warnings.showwarning = _show_warning
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except TracedocError as exc:
        print(f"tracedoc: error: {exc.message()}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tracedoc: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print("tracedoc: error: out of memory while analysing; try a smaller trace window or a machine with "
              "more memory", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
