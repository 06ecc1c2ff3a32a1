"""Writing captured traces atomically and the reports next to them.

The analysis runs in a child process (``python -m tracedoc.cli.capture_report PATH``) so that it never
competes with the training process for memory or the GIL, and a crash in it cannot reach the job.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sys
import time

from ..exits import EXIT_ERROR, EXIT_OK
from ..ingest import rank_files
from ..outfiles import replace_atomically, write_atomic

TRACE_SUFFIX = ".pt.trace.json.gz"


def say(msg: str) -> None:
    """One line on stderr, prefixed ``tracedoc:``; never raises."""
    try:
        sys.stderr.write(f"tracedoc: {msg}\n")
        sys.stderr.flush()
    except Exception:
        pass


def gzip_into_place(src_json: str, final_path: str, level: int = 6) -> None:
    """Compress ``src_json`` to ``final_path`` atomically, then remove ``src_json``.

    The compressed bytes go to a temporary name in the destination directory; only a complete file
    is renamed to ``final_path``.
    """

    def write(raw) -> None:
        with open(src_json, "rb") as fin:
            with gzip.GzipFile(
                fileobj=raw, mode="wb", compresslevel=level, filename=os.path.basename(final_path)[:-3]
            ) as gz:
                shutil.copyfileobj(fin, gz, 1 << 20)
        raw.flush()
        os.fsync(raw.fileno())

    try:
        replace_atomically(final_path, write, suffix=".gz")
    finally:
        _unlink(src_json)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _write_reports(trace_path: str, answer: list[str] | None = None) -> list[str]:
    """Analyse ``trace_path`` (a trace file or a directory of rank traces) and write the reports.

    Writes ``<trace_path>.report.txt`` (the terminal summary), ``.report.json`` (every metric and
    finding) and ``.report.html`` (the self-contained report to attach to a ticket). Returns the
    paths written, and puts the answer's lines (verdict, top finding) in ``answer`` when given.
    Raises on analysis errors; callers decide how to report them.
    """
    trace_path = trace_path.rstrip(os.sep) or trace_path
    from ..api import analyze
    from ..render.text import answer_lines, render_text

    result = analyze(trace_path)
    if answer is not None:
        answer.extend(answer_lines(result))
    written = []
    txt = trace_path + ".report.txt"
    write_atomic(txt, render_text(result), option=None)
    written.append(txt)
    js = trace_path + ".report.json"
    write_atomic(js, result.to_json(), option=None)
    written.append(js)
    from ..render import render_html

    html = trace_path + ".report.html"
    write_atomic(html, render_html(result), option=None)
    written.append(html)
    return written


def wait_for_ranks(directory: str, world_size: int, timeout_s: float, poll_s: float = 0.2) -> list[str]:
    """Wait until ``world_size`` rank traces are in ``directory`` or ``timeout_s`` passes."""
    deadline = time.monotonic() + timeout_s
    while True:
        files = rank_files(directory, required=False)
        if len(files) >= world_size or time.monotonic() >= deadline:
            return files
        time.sleep(poll_s)


def report_when_ready(path: str, world_size: int = 0, timeout_s: float = 300.0) -> int:
    """Analyse ``path`` at low priority and write its reports; for a directory, wait for ``world_size`` ranks.

    Returns the process exit status (0 written, 1 nothing to analyse or the analysis failed).
    """
    try:
        os.nice(10)
    except (OSError, AttributeError):
        pass
    if world_size:
        files = wait_for_ranks(path, world_size, timeout_s)
        if not files:
            say(f"{path}: no rank traces arrived within {timeout_s:.0f} s; nothing to analyse")
            return EXIT_ERROR
        if len(files) < world_size:
            say(f"{path}: {len(files)} of {world_size} rank traces arrived within {timeout_s:.0f} s; analysing those")
    answer: list[str] = []
    try:
        written = _write_reports(path, answer)
    except Exception as exc:  # the analysis failed: the trace is still there
        say(
            f"the analysis of {path} failed ({type(exc).__name__}: {exc}); "
            f"the trace is kept, run `tracedoc analyze {path}` to see the error"
        )
        return EXIT_ERROR
    for line in answer:  # the answer itself, not only where it is
        say(line)
    if written:
        say(f"report: {written[0]} (also .json, .html)")
    return EXIT_OK
