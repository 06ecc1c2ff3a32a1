"""What every subcommand shares: the argument parser class, error printing and atomic output files."""

from __future__ import annotations

import argparse
import os
import stat
import sys
import warnings

from ..errors import TracedocError, TraceWarning, UsageError
from ..exits import EXIT_USAGE


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # usage errors: one line plus the usage, exit 2
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def print_error(exc: TracedocError) -> int:
    """Print a tracedoc error as one line on stderr; return its exit code."""
    print(f"tracedoc: error: {exc.message()}", file=sys.stderr)
    return exc.exit_code


_NOT_A_FILE = ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def check_output_path(path: str, inputs: list[str], option: str = "--output") -> None:
    """``-o`` (or another ``option`` naming a file to write) writes a new file or replaces a regular
    one; never an input, a link, a device or a pipe."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise TracedocError(path, f"cannot be checked as an {option} path", exc.strerror, "choose another path") from None
    for test, kind in _NOT_A_FILE:
        if test(st.st_mode):
            raise UsageError(path, f"is {kind}; {option} writes only a new file or replaces a regular one", None,
                             "name a file path, or leave -o out to write to stdout")
    for inp in inputs:
        try:
            same = os.path.samefile(path, inp)
        except OSError:
            same = False
        if same:
            raise UsageError(path, f"is the trace being analysed; {option} would overwrite it", None,
                             "write the report to another path")


def write_atomic(path: str, data: str | bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename; a clear error when it cannot."""
    tmp = f"{path}.tmp-{os.getpid()}"
    try:
        if isinstance(data, bytes):
            with open(tmp, "wb") as f:
                f.write(data)
        else:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise TracedocError(path, "cannot be written", exc.strerror, "choose another --output path") from None


def show_warning(message, category, filename, lineno, file=None, line=None):
    """``warnings.showwarning`` for the CLI: tracedoc's own warnings as one line each."""
    if issubclass(category, TraceWarning):
        print(f"tracedoc: warning: {message}", file=sys.stderr)
    else:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
