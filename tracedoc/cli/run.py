"""``tracedoc run``: run a training script with step monitoring and on-demand profiling."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from ..errors import TracedocError
from ..exits import EXIT_INTERRUPTED, EXIT_USAGE

DEFAULT_OUTDIR = "tracedoc_traces"

RUN_EPILOG = """\
examples:
  tracedoc run -- python train.py --epochs 1
  tracedoc run --wait-for-trigger -o traces -- python -m mypkg.train
  torchrun --nproc_per_node 4 -m tracedoc.capture run -o traces -- train.py   (one file per rank)

while it runs: `tracedoc trigger PID` (SIGUSR2) or `tracedoc trigger OUTDIR` (touches OUTDIR/TRIGGER,
which every rank of a distributed job watches) captures the next --active steps again.
Multi-node jobs launched without a rendezvous id should set TRACEDOC_RUN_ID to one value on all nodes.
"""


def register(subparsers) -> None:
    """Add the ``run`` subcommand to an argparse subparsers object."""
    p = subparsers.add_parser(
        "run",
        help="run a training script with step monitoring and on-demand profiling",
        description="Run a Python training script unchanged, in this process, with profiling hooks: one "
        "capture after --skip-first steps, more on demand, a report next to each trace, and a "
        "step monitor (steps.jsonl).",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "-o",
        "--outdir",
        default=DEFAULT_OUTDIR,
        help=f"where traces, reports and steps.jsonl go (default: ./{DEFAULT_OUTDIR})",
    )
    g = p.add_argument_group("schedule")
    g.add_argument("--skip-first", type=int, default=5, metavar="N", help="steps before the first capture (default 5)")
    g.add_argument("--warmup", type=int, default=1, metavar="N", help="warm-up steps per capture (default 1)")
    g.add_argument("--active", type=int, default=3, metavar="N", help="recorded steps per capture (default 3)")
    g.add_argument("--wait-for-trigger", action="store_true", help="no capture at start; capture only when triggered")
    g = p.add_argument_group("profiler")
    g.add_argument(
        "--activities",
        default=None,
        metavar="LIST",
        help="comma-separated profiler activities (cpu,cuda,xpu,...; default: cpu, plus cuda when available)",
    )
    g.add_argument(
        "--record-shapes",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="record operator input shapes, from which reports count FLOPs and MFU (default: on)",
    )
    g.add_argument(
        "--with-flops",
        action="store_true",
        help="also record torch's FLOP estimates (costs more per step; tracedoc counts FLOPs from shapes)",
    )
    g.add_argument("--profile-memory", action="store_true")
    g.add_argument("--with-stack", action="store_true")
    g = p.add_argument_group("triggers")
    g.add_argument(
        "--trigger-file",
        default=None,
        metavar="PATH",
        help="touch this file to capture again (default: OUTDIR/TRIGGER)",
    )
    g.add_argument("--no-trigger-file", action="store_true", help="do not watch a trigger file")
    g.add_argument("--no-signal", action="store_true", help="do not install the SIGUSR2 trigger")
    g = p.add_argument_group("monitor and report")
    g.add_argument(
        "--batch-size",
        type=int,
        default=None,
        metavar="N",
        help="samples per step (default: inferred from the DataLoader batch or model input)",
    )
    g.add_argument(
        "--monitor-interval",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds between steps.jsonl records (default 10)",
    )
    g.add_argument("--no-monitor", action="store_true")
    g.add_argument("--no-report", action="store_true", help="write traces only, no analysis")
    g.add_argument(
        "--dist-timeout",
        type=float,
        default=300.0,
        metavar="S",
        help="how long rank 0 waits for the other ranks' traces before analysing (default 300)",
    )
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- python SCRIPT.py ARGS | -- python -m MODULE ARGS")
    p.set_defaults(func=cmd_run)


def _config_from_args(a):
    from ..capture.session import CaptureConfig

    acts = tuple(x for x in a.activities.split(",") if x.strip()) if a.activities else None
    return CaptureConfig(
        outdir=a.outdir,
        skip_first=a.skip_first,
        warmup=a.warmup,
        active=a.active,
        initial=not a.wait_for_trigger,
        activities=acts,
        record_shapes=a.record_shapes,
        with_flops=a.with_flops,
        profile_memory=a.profile_memory,
        with_stack=a.with_stack,
        trigger_file="" if a.no_trigger_file else a.trigger_file,
        signal=not a.no_signal,
        monitor=not a.no_monitor,
        monitor_interval_s=a.monitor_interval,
        batch_size=a.batch_size,
        report=not a.no_report,
        dist_timeout_s=a.dist_timeout,
    )


def cmd_run(a) -> int:
    from ..capture.report import say
    from ..capture.runner import parse_command, run_target
    from ..capture.session import CaptureSession

    try:
        target = parse_command(a.command)
        config = _config_from_args(a)
        config.validate()
    except TracedocError as exc:
        sys.stderr.write(f"tracedoc: {exc.message()}\n")
        return exc.exit_code
    except ValueError as exc:
        sys.stderr.write(f"tracedoc run: {exc}\n")
        return EXIT_USAGE

    session = None
    try:
        session = CaptureSession(config).install()
    except KeyboardInterrupt:  # Ctrl-C while torch imports: the script has not started, so stop cleanly
        sys.stderr.write("tracedoc: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:
        say(f"profiling disabled ({type(exc).__name__}: {exc}); running the script unprofiled")
        session = None
    try:
        code = run_target(target)
    except KeyboardInterrupt as exc:
        if session is not None:
            _close(session, wait_reports=False)
        _die_of_sigint(exc)
        raise
    if session is not None:
        _close(session, wait_reports=True)
    return code


def _die_of_sigint(exc: KeyboardInterrupt) -> None:
    """End the process the way CPython ends on an unhandled Ctrl-C: traceback, atexit, then SIGINT.

    Done here rather than by re-raising so that the caller's own KeyboardInterrupt handling (a CLI
    printing "interrupted") cannot change what the wrapped script's user sees or its exit status.
    """
    import atexit

    from ..capture.runner import _trim_traceback

    try:
        tb = _trim_traceback(exc.__traceback__)
        exc.with_traceback(tb)
        sys.excepthook(type(exc), exc, tb)
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)  # the signal is delivered before this returns
    except Exception:
        pass


def _close(session, wait_reports: bool) -> None:
    from ..capture.report import say

    try:
        session.close(wait_reports=wait_reports)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        say(f"could not finish the capture ({type(exc).__name__}: {exc})")
