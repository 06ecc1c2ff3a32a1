"""``tracedoc logs --follow``: a writer process appends lines (a NaN, then a stall) while the watchdog reads;
the test reads what it prints and when. Rotation, truncation, --fail-on, SIGTERM and the bounded state
too. Timeouts are generous and nothing asserts a duration: the order of events is what is checked."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tracedoc.logs.follow import Tail, bounded_state
from tracedoc.logs.watch import Watch, WatchOptions

ROOT = Path(__file__).resolve().parents[1]
WRITER = (
    r"""
import json, math, sys, time
"""
    + (
        "path, first, last, nan_at, stall_at, rate = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), "
        "int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])\n"
    )
    + r"""t = 0.5 * (first - 1)
with open(path, "a") as fh:
    for step in range(first, last + 1):
        dt = 0.5 * (1 + 0.01 * math.sin(step))
        if step == stall_at:
            dt *= 10
        t += dt
        loss = 2 + math.exp(-step / 100) + 0.01 * math.sin(step * 7)
        fh.write(json.dumps({"step": step, "loss": float("nan") if step == nan_at else loss,
                             "elapsed_s": round(t, 3)}) + "\n")
        fh.flush()
        time.sleep(1 / rate)
"""
)


def record(step: int, loss: float | None = None, elapsed: float | None = None) -> str:
    rec = {
        "step": step,
        "loss": 2 + math.exp(-step / 100) if loss is None else loss,
        "elapsed_s": 0.5 * step if elapsed is None else elapsed,
    }
    return json.dumps(rec) + "\n"


class Follow:
    """``tracedoc logs --follow`` in a process; its stdout lines collected as they come, with the time
    each arrived."""

    def __init__(self, path: Path, *args: str):
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        # Ctrl-C has its usual effect in the child even when the tests run in a background job or under
        # nohup, which start children with SIGINT ignored (Python then installs no KeyboardInterrupt).
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tracedoc", "logs", "--follow", str(path), "--poll", "0.05", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.lines: list[tuple[float, str]] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def wait_for(self, text: str, timeout: float = 60) -> float:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for at, line in list(self.lines):
                if text in line:
                    return at
            if self.proc.poll() is not None and not self.reader.is_alive():
                break
            time.sleep(0.02)
        raise AssertionError(
            f"{text!r} not printed; got {[ln for _, ln in self.lines]}; "
            f"stderr {self.proc.stderr.read() if self.proc.poll() is not None else ''}"
        )

    def stop(self) -> tuple[int, str]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=60)
        self.reader.join(timeout=10)
        return rc, self.proc.stderr.read()


def writer(path: Path, first: int, last: int, nan_at: int = -1, stall_at: int = -1, rate: float = 200.0):
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path), str(first), str(last), str(nan_at), str(stall_at), str(rate)]
    )


def test_follow_prints_the_nan_then_the_stall_as_the_writer_appends(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(record(s) for s in range(1, 61)))  # lines already there when following starts
    follow = Follow(path, "--idle", "0")
    try:
        time.sleep(0.5)
        assert not [ln for _, ln in follow.lines if "nan" in ln or "stall" in ln]  # a healthy start is quiet
        w = writer(path, 61, 200, nan_at=100, stall_at=160)
        nan_at = follow.wait_for("step 100: nan (error): loss is nan")
        stall_at = follow.wait_for("step 160: stall (warning)")
        assert w.wait(timeout=60) == 0
        assert nan_at <= stall_at  # printed when certain, in the order they happened
    finally:
        rc, err = follow.stop()
    assert rc == 0 and "following" in err and "Traceback" not in err
    summary = follow.lines[-1][1]
    assert summary.startswith("tracedoc logs --follow: stopped (SIGTERM): 200 records, steps 1-200")
    assert "nan 1" in summary and "stall 1" in summary
    assert [ln for _, ln in follow.lines].count(summary) == 1
    assert len([ln for _, ln in follow.lines if "loss_spike" in ln or "divergence" in ln]) == 0


def test_fail_on_exits_3_at_the_first_such_finding(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(record(s) for s in range(1, 81)))
    follow = Follow(path, "--fail-on", "nan", "--format", "json")
    w = writer(path, 81, 400, nan_at=120, rate=100)
    try:
        rc = follow.proc.wait(timeout=60)
    finally:
        w.kill()
        w.wait()
    follow.reader.join(timeout=10)
    found = [json.loads(ln) for _, ln in follow.lines]
    assert rc == 3
    assert found[0]["kind"] == "nan" and found[0]["step"] == 120 and found[0]["label"] == "unstable_training"
    assert found[-1]["kind"] == "summary" and found[-1]["stopped"].startswith("--fail-on nan")


def test_rotation_and_truncation_keep_following(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(record(s) for s in range(1, 40)) + record(40, loss=float("nan")))
    follow = Follow(path, "--idle", "0")
    try:
        follow.wait_for("step 40: nan")  # the first file is read
        path.rename(tmp_path / "train.jsonl.1")  # rotation: a new file under the same name
        path.write_text("".join(record(s) for s in range(41, 80)) + record(80, loss=float("inf")))
        follow.wait_for("step 80: nan")
        path.write_text("")  # truncation: the same file, shorter than what was read
        with open(path, "a") as fh:
            fh.write("".join(record(s) for s in range(81, 90)) + record(90, loss=float("nan")))
        follow.wait_for("step 90: nan")
    finally:
        rc, err = follow.stop()
    assert rc == 0
    assert "was replaced (rotated)" in err and "was truncated" in err


def test_no_new_line_for_the_idle_time(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(record(s) for s in range(1, 31)))
    follow = Follow(path, "--idle", "1")
    try:
        follow.wait_for("no_new_line (error): no new line for")
    finally:
        rc, _ = follow.stop()
    assert rc == 0 and "no_new_line 1" in follow.lines[-1][1]


def test_follow_usage_errors(tmp_path):
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": [{"step": 1, "loss": 2.0}]}, indent=1))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.run(
        [sys.executable, "-m", "tracedoc", "logs", "--follow", str(path), "--poll", "0.05"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert p.returncode == 1 and "rewritten whole" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run(
        [sys.executable, "-m", "tracedoc", "logs", "--follow", str(path), str(path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert p.returncode == 2 and "follows one log" in p.stderr


# ---- the pieces, in process -----------------------------------------------------------------------------
def test_tail_keeps_only_the_incomplete_line(tmp_path):
    path = tmp_path / "t.log"
    path.write_bytes(b"one\ntw")
    tail = Tail(str(path))
    assert tail.read_lines() == [b"one"] and tail.partial == b"tw"
    with open(path, "ab") as fh:
        fh.write(b"o\nthree\n")
    assert tail.read_lines() == [b"two", b"three"] and tail.partial == b""
    tail.close()


def test_watch_state_is_bounded_by_the_window():
    watch = Watch(WatchOptions(window=50))
    for step in range(1, 20001):
        watch.feed({"step": step, "loss": 2 + 1 / step, "elapsed_s": 0.5 * step, "throughput": 1000.0})
    assert watch.points == 20000 and watch.counts == {}
    assert bounded_state(watch) <= 50 * 3 + 200 * 2 + 25


def test_watch_resume_is_not_a_spike_or_a_stall():
    watch = Watch()
    out = []
    for step in range(1, 301):
        out += watch.feed({"step": step, "loss": 3 - step / 300, "elapsed_s": 0.5 * step})
    for step in range(201, 401):  # resumed from step 200: the clock starts again
        out += watch.feed({"step": step, "loss": 2.4 - step / 1000, "elapsed_s": 0.5 * (step - 200)})
    assert out == [] and watch.resumes == [(300, 201)]


def test_watch_divergence_and_throughput_regression():
    watch = Watch(WatchOptions(window=20))
    found = []
    for step in range(1, 401):
        loss = (2.0 if step < 200 else 2.0 * (1 + (step - 200) / 200)) + 0.02 * math.sin(step * 7)
        rate = 1000.0 if step < 300 else 600.0
        found += [f.kind for f in watch.feed({"step": step, "loss": loss, "throughput": rate})]
    assert found.count("divergence") == 1 and found.count("throughput_regression") == 1


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_watch_nan_once_per_run_of_them(value):
    watch = Watch()
    kinds = []
    for step in range(1, 40):
        kinds += [f.kind for f in watch.feed({"step": step, "loss": value if 10 <= step < 20 else 2.0})]
    assert kinds.count("nan") == 1 and kinds.count("divergence") == 1  # three NaN lines in a row: diverged


def test_ctrl_c_ends_with_a_summary(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(record(s) for s in range(1, 39)) + record(39, loss=float("nan")))
    follow = Follow(path, "--idle", "0")
    follow.wait_for("step 39: nan")
    follow.proc.send_signal(signal.SIGINT)
    rc = follow.proc.wait(timeout=60)  # it ends by itself: a SIGTERM from stop() now could cut its summary short
    rc, err = follow.stop()
    assert rc == 0 and "Traceback" not in err
    assert follow.lines[-1][1].startswith("tracedoc logs --follow: stopped (Ctrl-C): 39 records, steps 1-39: nan 1")
