"""``tracedoc trigger``: ask a running ``tracedoc run`` job to capture its next steps."""

from __future__ import annotations

import os
import re
import signal
import sys
from typing import Any

from ..exits import EXIT_ERROR, EXIT_OK, EXIT_USAGE

_MAX_PID = 1 << 22  # Linux's pid_max ceiling


def register(subparsers: Any) -> None:
    t = subparsers.add_parser(
        "trigger",
        help="capture the next steps of a running `tracedoc run` job",
        description="Ask a running job to capture its next --active steps: a PID gets SIGUSR2; a directory "
        "(the job's --outdir) or file gets touched (the trigger file every rank watches).",
    )
    t.add_argument("targets", nargs="+", metavar="PID|OUTDIR|FILE")
    t.add_argument(
        "--force",
        action="store_true",
        help="signal the PID even if it does not seem to handle SIGUSR2 (the default action kills it)",
    )
    t.set_defaults(func=cmd_trigger)


def _catches_sigusr2(pid: int) -> bool | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("SigCgt:"):
                    mask = int(line.split()[1], 16)
                    return bool(mask & (1 << (signal.SIGUSR2 - 1)))
    except (OSError, ValueError):
        return None
    return None


def cmd_trigger(a) -> int:
    status = EXIT_OK
    for target in a.targets:
        if re.fullmatch(r"\s*[+-]?\d+\s*", target):
            pid = int(target)
            if pid <= 0 or pid > _MAX_PID:
                sys.stderr.write(
                    f"tracedoc trigger: {target.strip()} is not the process id of a job; pass the PID "
                    "of a running `tracedoc run` job (a positive number: 0 and negative numbers "
                    "would signal whole process groups), or the job's --outdir\n"
                )
                status = EXIT_USAGE
                continue
            catches = _catches_sigusr2(pid)
            if catches is False and not a.force:
                sys.stderr.write(
                    f"tracedoc trigger: process {pid} does not handle SIGUSR2, so the signal would "
                    "end it; is it running under `tracedoc run`? (for torchrun jobs pass the "
                    "--outdir instead; --force sends it anyway)\n"
                )
                status = EXIT_ERROR
                continue
            try:
                os.kill(pid, signal.SIGUSR2)
            except ProcessLookupError:
                sys.stderr.write(f"tracedoc trigger: no process {pid}\n")
                status = EXIT_ERROR
                continue
            except PermissionError:
                sys.stderr.write(f"tracedoc trigger: not allowed to signal process {pid}\n")
                status = EXIT_ERROR
                continue
            print(f"tracedoc: asked process {pid} for a capture (SIGUSR2)")
        elif _looks_numeric(target):
            sys.stderr.write(
                f"tracedoc trigger: {_shown(target)} is not a process id (a whole number) nor a path "
                "tracedoc created; pass the PID of a running `tracedoc run` job, or its --outdir\n"
            )
            status = EXIT_USAGE
        else:
            path = os.path.join(target, "TRIGGER") if os.path.isdir(target) else target
            why = _touch(path)
            if why:
                sys.stderr.write(
                    f"tracedoc trigger: cannot touch {_shown(path)} ({why}); pass the job's --outdir "
                    "or its --trigger-file\n"
                )
                status = EXIT_ERROR
                continue
            print(f"tracedoc: touched {_shown(path)}; every process watching it captures its next steps")
    return status


def _looks_numeric(target: str) -> bool:
    """``1e3``, ``0x10``, ``-5.0``: a mistyped process id, not the name of a trigger file."""
    text = target.strip()
    if os.path.exists(target) or not text:
        return False
    try:
        float(text)
        return True
    except ValueError:
        pass
    try:
        int(text, 0)
        return True
    except ValueError:
        return False


def _shown(path: str) -> str:
    from ..neutral import clean_text

    return clean_text(path[:200])


def _touch(path: str) -> str | None:
    """Touch the trigger file at ``path`` (created when missing); why not, or None. Only a regular file:
    opening a named pipe would wait for a reader forever, and a link is never followed to create one."""
    import stat

    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        return exc.strerror
    if st is not None and not stat.S_ISREG(st.st_mode):
        from ..infile import kind_of_mode

        return f"it is {kind_of_mode(st.st_mode)}, not a trigger file"
    try:
        if st is None:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
            try:
                os.close(os.open(path, flags, 0o666))
                return None
            except FileExistsError:  # created meanwhile (by another trigger): touch it below if it is a file
                if not os.path.isfile(path) or os.path.islink(path):
                    return "it appeared meanwhile and is not a regular file"
        os.utime(path, None)
    except OSError as exc:
        return exc.strerror
    return None
