"""Real torch runs in tests: ``tracedoc run``'s command line, and a multi-process torch job (torchrun,
gloo backend) started once more if torch itself aborted a rank.

CPU torch occasionally kills a rank with a signal in its own code: a gloo worker aborting on
"Connection closed by peer", or glibc's "malloc(): unsorted double linked list corrupted" as Kineto's
profiler stops (SIGABRT, about once in 20 full suite runs on a 2-core machine, under the torch job tests
of every kind). torchrun then reports ``failed (exitcode: -6)``. Such a job is started again, once; any
other failure, and a second abort, fail the test.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

RANK_KILLED = "failed (exitcode: -"  # torchrun's line for a rank ended by a signal


def rank_killed_by_signal(output: str) -> bool:
    return RANK_KILLED in output


def run_job(start: Callable[[], subprocess.CompletedProcess], out: Path) -> subprocess.CompletedProcess:
    """``start()`` (a finished job writing to ``out``), and once more, from an empty ``out``, where torch
    killed a rank by a signal."""
    proc = start()
    if proc.returncode != 0 and rank_killed_by_signal((proc.stdout or "") + (proc.stderr or "")):
        shutil.rmtree(out, ignore_errors=True)
        proc = start()
    return proc


def torchrun(nproc: int) -> list[str]:
    """The arguments after ``python`` that start ``nproc`` local ranks on a free port of 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return [
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        str(nproc),
        "--master_addr",
        "127.0.0.1",
        "--master_port",
        str(port),
    ]


def capture_run(out, active: int, *, warmup: int | None = 1, module: str = "tracedoc.capture") -> list[str]:
    """The arguments after ``python`` of a capture (``python -m tracedoc.capture run``, or ``module`` run)
    writing to ``out``: one step skipped, ``warmup`` steps of warm-up (None: the command's default) and
    ``active`` steps recorded. The caller adds its own options, ``--`` and the training command."""
    return [
        "-m",
        module,
        "run",
        "-o",
        str(out),
        "--skip-first",
        "1",
        *([] if warmup is None else ["--warmup", str(warmup)]),
        "--active",
        str(active),
    ]
