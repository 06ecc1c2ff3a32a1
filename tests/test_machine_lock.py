"""The machine-wide lock the real torch job tests take (tests/machine_lock.py)."""

from __future__ import annotations

import subprocess
import sys

import machine_lock
import pytest

pytest.importorskip("fcntl")


def test_a_second_holder_waits_until_the_first_lets_go(tmp_path, monkeypatch):
    lock, marker = tmp_path / "jobs.lock", tmp_path / "released"
    monkeypatch.setattr(machine_lock, "LOCK_PATH", str(lock))
    holder = (
        "import fcntl, sys, time\n"
        f"fh = open({str(lock)!r}, 'a+')\n"
        "fcntl.flock(fh, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\n"
        "time.sleep(0.5)\n"
        f"open({str(marker)!r}, 'w').close()\n"
        "fcntl.flock(fh, fcntl.LOCK_UN)\n"
        "sys.stdin.read()\n"  # stays alive until told: only the unlock can let the test in
    )
    child = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        with machine_lock.one_job_at_a_time(wait_s=60):
            assert marker.exists()  # the other holder had let go before this block ran
    finally:
        child.communicate("", timeout=30)


def test_after_the_wait_the_block_runs_anyway(tmp_path, monkeypatch):
    lock = tmp_path / "jobs.lock"
    monkeypatch.setattr(machine_lock, "LOCK_PATH", str(lock))
    holder = (
        f"import fcntl, sys\nfh = open({str(lock)!r}, 'a+')\nfcntl.flock(fh, fcntl.LOCK_EX)\n"
        "print('held', flush=True)\nsys.stdin.read()\n"
    )
    child = subprocess.Popen([sys.executable, "-c", holder], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "held"
        ran = False
        with machine_lock.one_job_at_a_time(wait_s=0.3):
            ran = True
        assert ran
    finally:
        child.communicate("", timeout=30)
