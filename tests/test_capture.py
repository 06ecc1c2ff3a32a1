"""Capture: `tracedoc run`, on-demand triggers, failure isolation, torchrun ranks, tracedoc.profile."""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from machine_lock import one_job_at_a_time
from torchjobs import capture_run, run_job, torchrun

torch = pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = Path(__file__).resolve().parent / "capture_scripts"
TRAIN = SCRIPTS / "train_tiny.py"
HAS_API = importlib.util.find_spec("tracedoc.api") is not None


def _env() -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.setdefault("OMP_NUM_THREADS", "1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"):
        env.pop(k, None)
    return env


# Timeouts here guard against a hang, they time nothing: a run that writes its report took over 60 s
# on two cores that other processes kept busy, so they allow minutes.
def _run(args: list[str], timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, *args],
        cwd=kw.pop("cwd", ROOT),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        **kw,
    )


def _traces(d: Path) -> list[Path]:
    return sorted(d.rglob("*.pt.trace.json.gz"))


def _load_trace(p: Path) -> dict:
    with open(p, "rb") as f:
        assert f.read(2) == b"\x1f\x8b", f"{p} is not gzip"
    with gzip.open(p, "rt") as f:
        return json.load(f)


def _names(trace: dict) -> list[str]:
    return [e.get("name", "") for e in trace.get("traceEvents", []) if isinstance(e, dict)]


def _no_temp_files(d: Path) -> None:
    left = [p for p in d.rglob(".tracedoc-tmp-*")]
    assert not left, f"temporary files left behind: {left}"


def _find_numbers(obj, needle: str):
    if isinstance(obj, dict):
        for k, v in obj.items():
            if needle in k.lower() and isinstance(v, (int, float)) and not isinstance(v, bool):
                yield k, v
            yield from _find_numbers(v, needle)
    elif isinstance(obj, list):
        for v in obj:
            yield from _find_numbers(v, needle)


# --------------------------------------------------------------------------- (a) a real run


def test_run_writes_gzip_trace_with_steps_dataloader_and_report(tmp_path):
    out = tmp_path / "out"
    r = _run(
        [
            *capture_run(out, 2),
            "--",
            "python",
            str(TRAIN),
            "--steps",
            "8",
            "--sleep",
            "0.002",
        ]
    )
    assert r.returncode == 0, r.stderr
    assert "trained 8 steps" in r.stdout
    traces = _traces(out)
    assert len(traces) == 1, (traces, r.stderr)
    name = traces[0].name
    assert name.startswith("tracedoc-rank0-") and name.endswith("-c0.pt.trace.json.gz")
    doc = _load_trace(traces[0])
    names = _names(doc)
    steps = {n for n in names if n.startswith("ProfilerStep#")}
    assert len(steps) >= 2, sorted(steps)
    import torch

    assert doc.get("torch_version") == torch.__version__
    assert any(n.startswith("enumerate(DataLoader)") for n in names)
    assert any(n.startswith("Optimizer.step#SGD") for n in names)
    _no_temp_files(out)

    from tracedoc.capture import load_monitor

    log = load_monitor(out)
    summ = log.summaries[0]
    # the warm-up step, the two recorded ones, and the step that pays for the trace's export
    assert summ["steps"] == 7 and summ["profiled_steps"] == 4
    assert log.steps["step"].tolist() == list(range(2, 9))
    assert log.steps.loc[log.steps["profiled"], "step"].tolist() == [3, 4, 5, 6]
    assert (log.steps["step_time_s"] > 0).all() and (log.steps["samples_per_s"] > 0).all()
    assert summ["samples_per_s"] and summ["samples_per_s"] > 0
    assert summ["peak_mem_bytes"] and summ["mem_source"] == "rss"
    assert "7 steps" in r.stderr and "samples/s" in r.stderr

    if HAS_API:
        txt = Path(str(traces[0]) + ".report.txt")
        js = Path(str(traces[0]) + ".report.json")
        html = Path(str(traces[0]) + ".report.html")
        assert txt.is_file() and js.is_file() and html.is_file(), r.stderr
        assert "<!DOCTYPE html>" in html.read_text()
        assert txt.read_text().strip()
        report = json.loads(js.read_text())
        dl = dict(_find_numbers(report, "dataloader"))
        assert dl, "the report has no DataLoader metric"
        assert max(dl.values()) > 0, dl


def test_steps_without_optimizer_come_from_dataloader(tmp_path):
    out = tmp_path / "out"
    r = _run(
        [
            *capture_run(out, 2, warmup=None),
            "--no-report",
            "--",
            "python",
            str(TRAIN),
            "--steps",
            "8",
            "--no-optimizer",
        ]
    )
    assert r.returncode == 0, r.stderr
    (trace,) = _traces(out)
    assert len({n for n in _names(_load_trace(trace)) if n.startswith("ProfilerStep#")}) >= 2


# --------------------------------------------------------------------------- (b) on demand


def _wait_for(pred, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_trigger_twice_in_a_running_job(tmp_path):
    out, ready, stop = tmp_path / "out", tmp_path / "ready", tmp_path / "stop"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tracedoc.capture",
            "run",
            "-o",
            str(out),
            "--wait-for-trigger",
            "--warmup",
            "1",
            "--active",
            "2",
            "--no-report",
            "--",
            "python",
            str(TRAIN),
            "--steps",
            "100000",
            "--step-sleep",
            "0.01",
            "--ready-file",
            str(ready),
            "--stop-file",
            str(stop),
        ],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait_for(ready.exists, 120, "the first step")
        assert _traces(out) == []  # --wait-for-trigger: nothing before a trigger
        r = _run(["-m", "tracedoc.capture", "trigger", str(proc.pid)], timeout=20)  # SIGUSR2
        assert r.returncode == 0, r.stderr
        _wait_for(lambda: len(_traces(out)) >= 1, 120, "the first capture")
        r = _run(["-m", "tracedoc.capture", "trigger", str(out)], timeout=20)  # touch OUTDIR/TRIGGER
        assert r.returncode == 0, r.stderr
        _wait_for(lambda: len(_traces(out)) >= 2, 120, "the second capture")
    finally:
        stop.touch()
        stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 0, stderr
    traces = _traces(out)
    assert len(traces) == 2, traces
    assert [t.name.split("-c")[-1] for t in traces] == ["0.pt.trace.json.gz", "1.pt.trace.json.gz"]
    for t in traces:
        assert sum(n.startswith("ProfilerStep#") for n in _names(_load_trace(t))) >= 2
    _no_temp_files(out)


def test_trigger_refuses_a_process_without_the_handler():
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.2)
        r = _run(["-m", "tracedoc.capture", "trigger", str(sleeper.pid)], timeout=20)
        assert r.returncode == 1 and "does not handle SIGUSR2" in r.stderr
        assert sleeper.poll() is None  # still alive
    finally:
        sleeper.kill()
        sleeper.wait()


# --------------------------------------------------------------------------- (c) never harm the job


def test_capture_failure_keeps_training_and_exit_code(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    r = _run(
        [
            *capture_run(blocker / "out", 2, warmup=None),
            "--",
            "python",
            str(TRAIN),
            "--steps",
            "6",
            "--exit",
            "7",
        ]
    )
    assert r.returncode == 7, r.stderr
    assert "trained 6 steps" in r.stdout
    warnings = [ln for ln in r.stderr.splitlines() if ln.startswith("tracedoc:") and "output directory" in ln]
    assert len(warnings) == 1, r.stderr
    assert "Traceback" not in r.stderr


def test_script_exception_and_exit_codes_pass_through(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text("import sys\ndef f():\n    raise ValueError('boom ' + ' '.join(sys.argv[1:]))\nf()\n")
    r = _run(["-m", "tracedoc.capture", "run", "-o", str(tmp_path / "o"), "--", "python", str(script), "x", "y"])
    assert r.returncode == 1
    assert "ValueError: boom x y" in r.stderr
    tb = r.stderr.split("Traceback (most recent call last):", 1)[1]
    assert "tracedoc" not in tb.split("ValueError")[0] and "runpy" not in tb
    r = _run(
        [
            "-m",
            "tracedoc.capture",
            "run",
            "-o",
            str(tmp_path / "o"),
            "--",
            "python",
            "-c",
            "import sys; sys.exit('bye')",
        ]
    )
    assert r.returncode == 1 and "bye" in r.stderr
    r = _run(
        ["-m", "tracedoc.capture", "run", "-o", str(tmp_path / "o"), "--", "python", "-c", "raise KeyboardInterrupt"]
    )
    assert r.returncode in (130, -signal.SIGINT) and "KeyboardInterrupt" in r.stderr


# --------------------------------------------------------------------------- (d) torchrun ranks


def test_torchrun_two_ranks_write_rank_files_and_one_analysed_directory(tmp_path):
    out = tmp_path / "out"
    with one_job_at_a_time():  # no other test session's job beside it (tests/machine_lock.py)
        r = run_job(  # once more if torch aborted a rank (tests/torchjobs.py)
            lambda: _run(
                [
                    *torchrun(2),
                    *capture_run(out, 2),
                    "--dist-timeout",
                    "30",
                    "--",
                    str(TRAIN),
                    "--steps",
                    "6",
                    "--ddp",
                ],
                timeout=90,
            ),
            out,
        )
    assert r.returncode == 0, r.stdout + r.stderr
    traces = _traces(out)
    assert len(traces) == 2, (traces, r.stderr)
    (group,) = {t.parent for t in traces}
    assert group != out and group.name.endswith("-c0")
    assert sorted(t.name.split("-")[0] for t in traces) == ["rank0", "rank1"]
    for t in traces:
        assert any(n.startswith("ProfilerStep#") for n in _names(_load_trace(t)))
    _no_temp_files(out)
    from tracedoc.capture import load_monitor

    assert set(load_monitor(out).summaries) == {0, 1}
    if HAS_API:
        js = Path(str(group) + ".report.json")
        assert js.is_file(), r.stderr
        report = json.loads(js.read_text())
        assert len(report.get("ranks", [])) == 2
        reports = list(out.glob("*.report.txt"))
        assert len(reports) == 1  # rank 0 only, for the directory


# --------------------------------------------------------------------------- in-process API


def test_profile_context_manager_with_user_steps(tmp_path):
    import tracedoc.capture as capture

    model = torch.nn.Linear(8, 2)
    with capture.profile(
        str(tmp_path), skip_first=1, warmup=1, active=2, report=False, signal=False, trigger_file=""
    ) as prof:
        for _ in range(6):
            model(torch.randn(4, 8)).sum().backward()
            prof.step()
    assert len(prof.traces) == 1
    names = _names(_load_trace(Path(prof.traces[0])))
    assert {"ProfilerStep#2", "ProfilerStep#3"} <= set(names)
    assert capture.session.active_session() is None
    # the hooks are gone: DataLoader iteration is torch's own again
    from torch.utils.data import dataloader as dl

    assert dl._BaseDataLoaderIter.__next__.__module__ == "torch.utils.data.dataloader"


def test_profile_decorator_and_programmatic_trigger(tmp_path):
    import tracedoc.capture as capture

    prof = capture.profile(
        str(tmp_path), on_demand_only=True, warmup=1, active=1, report=False, signal=False, monitor=False
    )

    @prof
    def train(n):
        opt_model = torch.nn.Linear(4, 1)
        opt = torch.optim.SGD(opt_model.parameters(), lr=0.1)
        for i in range(n):
            if i == 3:
                capture.trigger()
            opt_model(torch.randn(2, 4)).sum().backward()
            opt.step()
            opt.zero_grad()
        return "done"

    assert train(8) == "done"
    assert len(prof.traces) == 1
    assert not (tmp_path / "steps.jsonl").exists()


def test_load_monitor_tolerates_a_truncated_line(tmp_path):
    from tracedoc.capture import load_monitor

    p = tmp_path / "steps.jsonl"
    rec = {
        "type": "interval",
        "rank": 0,
        "step": 10,
        "steps": 10,
        "step_time_s": {"mean": 0.1, "p50": 0.1, "p90": 0.2, "max": 0.3},
        "samples_per_s": 80.0,
    }
    p.write_text(json.dumps(rec) + "\n" + json.dumps(rec)[:20])
    log = load_monitor(p)
    assert len(log.intervals) == 1 and log.bad_lines == [2]
    assert log.intervals["step_time_mean_s"].iloc[0] == pytest.approx(0.1)


def test_parse_command_forms():
    from tracedoc.capture.runner import parse_command
    from tracedoc.errors import UsageError

    t = parse_command(["--", "python", "-u", "train.py", "--lr", "1"])
    assert (t.kind, t.name, t.args, t.unbuffered) == ("script", "train.py", ["--lr", "1"], True)
    t = parse_command(["python3", "-m", "pkg.train", "-m", "x"])
    assert (t.kind, t.name, t.args) == ("module", "pkg.train", ["-m", "x"])
    t = parse_command(["train.py"])
    assert t.kind == "script"
    for bad in (["torchrun", "train.py"], ["python", "-X", "dev", "t.py"], ["bash", "x.sh"], []):
        with pytest.raises(UsageError):
            parse_command(bad)


def test_tracedoc_capture_imports_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import tracedoc, tracedoc.capture, tracedoc.cli.run, tracedoc.capture.session\n"
        "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n"
    )
    r = _run(["-c", code], timeout=30)
    assert r.returncode == 0, r.stderr


def test_step_monitor_writes_every_step_in_a_few_batched_writes(tmp_path, monkeypatch):
    """One record per step, but no write per step: 10,000 steps of 0.5 ms reach the file in one write
    per second of steps (or per 4,096 steps), plus the closing interval and summary records."""
    from tracedoc.capture import monitor as M

    writes = []
    real_write = os.write
    monkeypatch.setattr(M.os, "write", lambda fd, data: writes.append(len(data)) or real_write(fd, data))
    mon = M.StepMonitor(str(tmp_path / "steps.jsonl"), interval_s=3600.0, batch_size=4)
    t0 = time.perf_counter()
    for i in range(10_001):
        mon.on_step(t0 + i * 5e-4, i, 4, None, i in (100, 101))
    mon.close()
    assert len(writes) <= 5 + 3, writes  # 5 s of steps, then the last steps, the interval and the summary
    log = M.load_monitor(tmp_path)
    assert log.steps["step"].tolist() == list(range(1, 10_001))
    assert log.steps.loc[log.steps["profiled"], "step"].tolist() == [100, 101]
    assert log.steps["step_time_s"].to_numpy() == pytest.approx(5e-4, rel=1e-3)
    assert log.steps["samples_per_s"].to_numpy() == pytest.approx(4 / 5e-4, rel=1e-3)
    assert log.summaries[0]["steps"] == 10_000 and log.summaries[0]["profiled_steps"] == 2
