"""What every subcommand shares: the argument parser class, error printing and atomic output files."""

from __future__ import annotations

import argparse
import os
import sys
import warnings

from ..errors import TracedocError, TraceWarning
from ..exits import EXIT_USAGE


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # usage errors: one line plus the usage, exit 2
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def print_error(exc: TracedocError) -> int:
    """Print a tracedoc error as one line on stderr; return its exit code."""
    print(f"tracedoc: error: {exc.message()}", file=sys.stderr)
    return exc.exit_code


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
