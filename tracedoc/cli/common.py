"""What every subcommand shares: the argument parser class, error printing, atomic output files and the
report format ``--format`` or ``-o`` names."""

from __future__ import annotations

import argparse
import os
import re
import stat
import sys
import warnings

from ..errors import TracedocError, TraceWarning, UsageError
from ..exits import EXIT_USAGE
from ..neutral import clean_text
from ..render import FORMATS, output_extension, output_extensions_text, renderer_for_path


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # usage errors: one line plus the usage, exit 2
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def print_error(exc: TracedocError) -> int:
    """Print a tracedoc error as one line on stderr; return its exit code."""
    message = clean_text(exc.message())
    if len(message) > MAX_ERROR_CHARS:  # an error quotes an excerpt of what it read, never all of it
        half = MAX_ERROR_CHARS // 2 - 20
        message = f"{message[:half]} ... ({len(message) - 2 * half:,} characters left out) ... {message[-half:]}"
    print(f"tracedoc: error: {message}", file=sys.stderr)
    return exc.exit_code


MAX_ERROR_CHARS = 800


def print_warning(message: object) -> None:
    """One warning line on stderr; what it quotes from an input is cleaned (``tracedoc.neutral``)."""
    print(f"tracedoc: warning: {clean_text(message)}", file=sys.stderr)


_NOT_A_FILE = (
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def check_output_path(path: str, inputs, option: str = "--output") -> None:
    """``-o`` (or another ``option`` naming a file to write) writes a new file or replaces a regular
    one; never a link, a device or a pipe, and never an input.

    ``inputs``: every path the command reads, as paths or (what, path) pairs (``("--log", "train.log")``):
    files, or directories whose files are all inputs. The output is compared with each by resolved
    path, and by device and inode (a hard link to an input is that input)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return  # a new file replaces nothing
    except OSError as exc:
        raise TracedocError(
            path, f"cannot be checked as an {option} path", exc.strerror, "choose another path"
        ) from None
    for test, kind in _NOT_A_FILE:
        if test(st.st_mode):
            raise UsageError(
                path,
                f"is {kind}; {option} writes only a new file or replaces a regular one",
                None,
                "name a file path, or leave -o out to write to stdout",
            )
    real = os.path.realpath(path)
    ident = (st.st_dev, st.st_ino)
    for what, inp in _labelled(inputs):
        clash = _same_input(real, ident, st.st_nlink > 1, inp, what)
        if clash:
            raise UsageError(
                path, f"is {clash}; {option} would overwrite it", None, "write the output to a path that no input uses"
            )


_MAX_SCANNED = 100_000  # files of an input directory compared by inode (only when the output has hard links)
# The names a directory of rank traces gives its reader (.json, .json.gz, .sqlite; a saved report beside
# them, NAME.report.json, or a dot file is not read). A log directory's one log is passed by its path.
_READ_FROM_DIRECTORY = re.compile(r"\.(json|json\.gz|sqlite|sqlite3)$", re.I)


def _read_from_directory(name: str) -> bool:
    return bool(_READ_FROM_DIRECTORY.search(name)) and not name.endswith(".report.json") and not name.startswith(".")


def _labelled(inputs) -> list[tuple[str, str]]:
    out = []
    for item in inputs or ():
        what, inp = item if isinstance(item, tuple) else ("an input", item)
        what = what if what.startswith(("the ", "an ", "a ")) else f"the {what} input"
        if inp:
            out.append((what, os.fspath(inp)))
    return out


def _same_input(real: str, ident: tuple[int, int], linked: bool, inp: str, what: str) -> str | None:
    """How the output at ``real`` (device and inode ``ident``) is the input ``inp``, or None."""
    try:
        inp_real = os.path.realpath(inp)
        ist = os.stat(inp)
    except (OSError, ValueError):
        return None
    if stat.S_ISDIR(ist.st_mode):
        if os.path.dirname(real) == inp_real and _read_from_directory(os.path.basename(real)):
            return f"a file inside {what}, the directory {inp}, that is read as an input"
        if linked:  # a hard link to a file the directory's reader takes, from elsewhere
            try:
                names = [n for n in os.listdir(inp_real) if _read_from_directory(n)][:_MAX_SCANNED]
            except OSError:
                names = []
            for name in names:
                try:
                    fst = os.stat(os.path.join(inp_real, name))
                except OSError:
                    continue
                if (fst.st_dev, fst.st_ino) == ident:
                    return f"a hard link to {os.path.join(inp, name)}, an input inside {what}"
        return None
    if inp_real == real:
        return what
    if (ist.st_dev, ist.st_ino) == ident:
        return f"a hard link to {what}, {inp}"
    return None


def show_warning(message, category, filename, lineno, file=None, line=None):
    """``warnings.showwarning`` for the CLI: tracedoc's own warnings as one line each."""
    if issubclass(category, TraceWarning):
        print_warning(message)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))


def add_output_options(parser: argparse.ArgumentParser) -> None:
    """``--width``, ``--no-color``, ``--quiet``, ``--verbose`` and ``--top`` for commands that print a summary."""
    group = parser.add_argument_group("text output")
    group.add_argument(
        "--width",
        metavar="N",
        type=_positive_int,
        default=None,
        help="lay text out for N columns (default: the terminal's width, 100 off a terminal); "
        "sentences wrap at words, table rows stay on one line with names in short forms",
    )
    group.add_argument(
        "--full-names",
        action="store_true",
        help="kernel and op names whole in text, Markdown and HTML tables (JSON always has them whole)",
    )
    group.add_argument("--no-color", action="store_true", help="no colour even on a terminal (so does NO_COLOR)")
    group.add_argument("-q", "--quiet", action="store_true", help="print the verdict line only")
    group.add_argument(
        "-v", "--verbose", action="store_true", help="every finding with all its fixes, every warning, longer tables"
    )
    group.add_argument(
        "--top", metavar="N", type=_non_negative_int, default=None, help="rows in each table of the summary"
    )


def text_options(args: argparse.Namespace):
    """The ``TextOptions`` for stdout from the output options in ``args``."""
    from ..render.console import TextOptions

    return TextOptions.for_stream(
        sys.stdout,
        width=getattr(args, "width", None),
        no_color=getattr(args, "no_color", False),
        quiet=getattr(args, "quiet", False),
        verbose=getattr(args, "verbose", False),
        top=getattr(args, "top", None),
        full_names=getattr(args, "full_names", False),
        warnings_shown=True,
    )  # the commands print them on stderr as they load


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
        raise UsageError(
            output,
            "has no extension that names a report format",
            f"{ext!r}" if ext else "no extension",
            f"end the name in {output_extensions_text(report)}, or give --format ({', '.join(FORMATS)})",
        )
    return by_path.name


def add_width_option(parser: argparse.ArgumentParser, default=None) -> None:
    """``--width N`` for a command whose text output fits a width (``output_width``)."""
    parser.add_argument(
        "--width",
        metavar="N",
        type=_positive_int,
        default=default,
        help="lay text out for N columns (default: the terminal's width, 100 off a terminal)",
    )


def output_width(args: argparse.Namespace | None = None) -> int:
    """The width text output fits: ``--width``, else the terminal's, else 100 columns (a pipe, a file)."""
    import shutil

    from ..render.console import PIPE_WIDTH

    given = getattr(args, "width", None)
    if given:
        return given
    if getattr(args, "output", None):  # a file: the width off a terminal
        return PIPE_WIDTH
    try:
        if sys.stdout.isatty():
            return max(20, shutil.get_terminal_size((PIPE_WIDTH, 24)).columns)
    except (AttributeError, ValueError, OSError):
        pass
    return PIPE_WIDTH


def _positive_int(text: str) -> int:
    value = _non_negative_int(text)
    if value < 20:
        raise argparse.ArgumentTypeError(f"{text!r} is too narrow; give 20 columns or more")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return value


MAX_JOBS = 1024  # -j above this is a typo, not a machine


def jobs_count(text: str) -> int:
    """argparse type for ``-j``: a whole number from 1 to ``MAX_JOBS``; more than the CPU count runs as
    many processes as there are CPUs (each rank's analysis is CPU-bound, and every process holds a rank)."""
    value = _non_negative_int(text.strip()) if len(text) < 20 else MAX_JOBS + 1
    if not 1 <= value <= MAX_JOBS:
        raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a process count from 1 to {MAX_JOBS}")
    return min(value, os.cpu_count() or 1)
