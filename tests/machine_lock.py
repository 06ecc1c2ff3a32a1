"""One multi-process torch job at a time on this machine, across test sessions.

The tests that run real 4-rank jobs (torchrun with the gloo backend) compare step times, lateness and
predictions against what the same machine measures a moment later. Two such jobs at once on a 2-core
machine (two test sessions side by side) make ranks late by CPU contention alone and stretch one run's
steps to twice another's, so each job holds a machine-wide lock while it runs. Other load is fine: the
tests are tuned to hold with busy loops on every core.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time

try:
    import fcntl
except ImportError:  # Windows: no torchrun tests there anyway
    fcntl = None

LOCK_PATH = os.path.join(tempfile.gettempdir(), "tracedoc-tests-torch-jobs.lock")


@contextlib.contextmanager
def one_job_at_a_time(wait_s: float = 900.0):
    """Hold the machine-wide job lock while the block runs (waiting up to ``wait_s`` for another test
    session's job to finish; after that the block runs anyway, as it would without the lock)."""
    if fcntl is None:
        yield
        return
    with open(LOCK_PATH, "a+") as fh:
        deadline = time.monotonic() + wait_s
        locked = False
        while not locked:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                locked = True
            except BlockingIOError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        try:
            yield
        finally:
            if locked:
                fcntl.flock(fh, fcntl.LOCK_UN)
