"""Where captured traces go and what happens to them: the background worker that finishes them, their
names, and the child process that analyses them (``python -m tracedoc.cli.capture_report``)."""

from __future__ import annotations

import os
import queue
import subprocess
import sys
import threading
import time

from .config import run_tag
from .report import TRACE_SUFFIX, say


class Worker:
    """One daemon thread that finishes traces (gzip + rename) off the training thread."""

    def __init__(self) -> None:
        self.q: queue.Queue = queue.Queue()
        self.thread: threading.Thread | None = None

    def submit(self, fn, *args) -> None:
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop, name="tracedoc-capture", daemon=True)
            self.thread.start()
        self.q.put((fn, args))

    def _loop(self) -> None:
        while True:
            fn, args = self.q.get()
            try:
                fn(*args)
            except Exception as exc:  # pragma: no cover - fn reports its own failures
                say(f"internal error in the capture worker ({type(exc).__name__}: {exc})")
            finally:
                self.q.task_done()

    def join(self) -> None:
        if self.thread is not None:
            self.q.join()


def trace_path(outdir: str, rank: int, world: int, idx: int) -> tuple[str | None, str]:
    """(group directory or None, trace file) for capture ``idx``; a distributed job's ranks share a directory."""
    t = time.time()
    ts = time.strftime("%Y%m%d-%H%M%S", time.localtime(t)) + f"-{int(t * 1000) % 1000:03d}"
    if world > 1:
        group = os.path.join(outdir, f"tracedoc-{run_tag()}-c{idx}")
        os.makedirs(group, exist_ok=True)
        return group, os.path.join(group, f"rank{rank}-{ts}{TRACE_SUFFIX}")
    return None, os.path.join(outdir, f"tracedoc-rank{rank}-{ts}-c{idx}{TRACE_SUFFIX}")


def start_report(target: str, world: int | None, timeout_s: float) -> subprocess.Popen:
    """Start the analysis of ``target`` in a child process (for a directory: wait for ``world`` ranks)."""
    cmd = [sys.executable, "-m", "tracedoc.cli.capture_report", target]
    if world is not None:
        cmd += ["--world-size", str(world), "--timeout", str(timeout_s)]
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = pkg_parent + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env, close_fds=True)
