"""Command line: ``tracedoc analyze``, ``diff``, ``logs``, ``metrics``, ``rules``, ``run`` and ``trigger``.

Thin by design: every command calls into the stages. One module per command, each with a
``register(subparsers)``, listed once in ``COMMANDS``; a new command is a new module added there.
Modules here import only argparse and light constants at import time, so ``tracedoc --help`` and
``--version`` stay fast; each command imports what it runs when it runs. Bad input is reported as
one line on stderr with a non-zero exit (``tracedoc.exits``), never as a traceback.
"""

from __future__ import annotations

import gc
import os
import sys
import warnings

from ..errors import TracedocError
from ..version import __version__
from . import analyze, diff, logs, metrics, rules, run, trigger
from .analyze import example_path
from .common import Parser, print_error, show_warning
from ..exits import EXIT_ERROR, EXIT_FAIL_ON, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE

COMMANDS = (analyze, diff, logs, metrics, rules, run, trigger)
# Commands that run the user's own code in this process: their objects keep the usual end of life.
_RUNS_USER_CODE = frozenset({run.cmd_run})

__all__ = [
    "COMMANDS",
    "EXIT_ERROR",
    "EXIT_FAIL_ON",
    "EXIT_OK",
    "EXIT_USAGE",
    "build_parser",
    "console_main",
    "example_path",
    "main",
    "run_command",
]


def build_parser() -> Parser:
    p = Parser(prog="tracedoc", description="Reads GPU profiler traces and says why a job is slow.")
    p.add_argument("--version", action="version", version=f"tracedoc {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for command in COMMANDS:
        command.register(sub)
    return p


def console_main(argv: list[str] | None = None) -> int:
    """The ``tracedoc`` command and ``python -m tracedoc``: ``main()`` in a process about to exit."""
    return main(argv, exiting=True)


def main(argv: list[str] | None = None, *, exiting: bool = False) -> int:
    """Parse ``argv`` and run its command; returns the exit status.

    ``exiting``: the process ends when this returns. Everything the command made is then frozen out of
    the cyclic collector's reach (``gc.freeze``): the interpreter's last act is otherwise a full
    collection over every container object still alive, the analysis's included, which with what
    follows it took about 30 ms of a 0.5 s ``analyze`` of a 1 MB trace. Reference counting still frees
    the objects as modules are torn down; only objects caught in reference cycles are left to the
    operating system. Not done for ``run``, whose script may rely on its objects being finalised.
    """
    warnings.showwarning = show_warning
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    if exiting and args.func not in _RUNS_USER_CODE:
        one_blas_thread()
    try:
        return run_command(args)
    finally:
        if exiting and args.func not in _RUNS_USER_CODE:
            gc.freeze()


def one_blas_thread() -> None:
    """Ask numpy's OpenBLAS, not loaded yet, for no worker threads: tracedoc does no linear algebra, and
    the thread OpenBLAS starts for each other core spins for about 0.1 s once started (0.12 s of CPU
    in the 0.45 s of a 1 MB ``analyze``). Only for a tracedoc process that runs no user code; a value
    the user set stays."""
    if "numpy" not in sys.modules:
        os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def run_command(args) -> int:
    """Run a parsed command (``args.func``); bad input and interruptions become one line on stderr and
    the shared exit codes (``tracedoc.exits``), never a traceback. ``python -m tracedoc.capture`` too."""
    try:
        return int(args.func(args) or 0)
    except TracedocError as exc:
        return print_error(exc)
    except KeyboardInterrupt:
        print("tracedoc: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except MemoryError:
        print(
            "tracedoc: error: out of memory while analysing; try a smaller trace window or a machine with more memory",
            file=sys.stderr,
        )
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_OK
