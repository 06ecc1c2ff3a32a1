"""The CLI never writes over what it should not, never signals what it should not, and stops cleanly."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from trace_builder import TraceBuilder, training_steps
from tracedoc.cli import main

ROOT = Path(__file__).resolve().parents[1]


def env(extra_path: str | None = None) -> dict:
    e = dict(os.environ)
    paths = [str(ROOT)] + ([extra_path] if extra_path else []) + ([e["PYTHONPATH"]] if e.get("PYTHONPATH") else [])
    e["PYTHONPATH"] = os.pathsep.join(paths)
    return e


@pytest.fixture
def trace(tmp_path):
    b = TraceBuilder()
    training_steps(b, steps=2, kernels=3)
    return b.write(tmp_path / "t.json")


def analyze_to(path, trace, capsys) -> tuple[int, str]:
    rc = main(["analyze", str(trace), "--format", "json", "--no-progress", "-o", str(path)])
    return rc, capsys.readouterr().err


def test_output_over_the_input_trace_is_refused(trace, capsys):
    before = trace.read_bytes()
    rc, err = analyze_to(trace, trace, capsys)
    assert rc == 2 and "is the trace being analysed" in err
    assert trace.read_bytes() == before


def test_output_onto_a_symlink_is_refused_and_the_link_stays(trace, tmp_path, capsys):
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    rc, err = analyze_to(link, trace, capsys)
    assert rc == 2 and "is a symbolic link" in err
    assert link.is_symlink() and target.read_text() == "keep"


def test_output_onto_a_fifo_is_refused_without_blocking(trace, tmp_path, capsys):
    fifo = tmp_path / "out.fifo"
    os.mkfifo(fifo)
    rc, err = analyze_to(fifo, trace, capsys)
    assert rc == 2 and "is a named pipe (FIFO)" in err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_output_onto_a_device_node_is_refused(trace, tmp_path, capsys):
    node = tmp_path / "null-like"
    try:
        os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("cannot create a device node here")
    rc, err = analyze_to(node, trace, capsys)
    assert rc == 2 and "is a character device" in err
    assert stat.S_ISCHR(os.lstat(node).st_mode)  # still a device node, not replaced by a file


def test_output_onto_a_directory_is_refused(trace, tmp_path, capsys):
    rc, err = analyze_to(tmp_path, trace, capsys)
    assert rc == 2 and "is a directory" in err


def test_output_to_a_new_or_regular_file_works(trace, tmp_path, capsys):
    new = tmp_path / "r.json"
    assert analyze_to(new, trace, capsys)[0] == 0 and new.read_text().startswith("{")
    new.write_text("old")
    assert analyze_to(new, trace, capsys)[0] == 0 and new.read_text().startswith("{")


@pytest.mark.parametrize("target", ["0", "-5", "+0", "-1", "99999999999"])
def test_trigger_refuses_what_is_not_a_job_pid(target, tmp_path):
    # Its own session: a regression (signalling the process group) must not reach the test runner.
    proc = subprocess.run(
        [sys.executable, "-m", "tracedoc", "trigger", target],
        cwd=tmp_path,
        env=env(),
        capture_output=True,
        text=True,
        timeout=60,
        start_new_session=True,
    )
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "is not the process id of a job" in proc.stderr
    assert os.listdir(tmp_path) == []  # no file named "-5" touched into existence


@pytest.mark.parametrize("entry", [["-m", "tracedoc"], ["-m", "tracedoc.capture"]])
def test_ctrl_c_while_torch_imports_ends_cleanly(entry, tmp_path):
    fake = tmp_path / "fake"
    (fake / "torch").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("raise KeyboardInterrupt\n")
    proc = subprocess.run(
        [
            sys.executable,
            *entry,
            "run",
            "-o",
            str(tmp_path / "out"),
            "--",
            sys.executable,
            "-c",
            "print('the script ran')",
        ],
        cwd=tmp_path,
        env=env(str(fake)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 130, (proc.returncode, proc.stderr)
    assert "tracedoc: interrupted" in proc.stderr and "Traceback" not in proc.stderr
    assert "the script ran" not in proc.stdout


def test_console_entry_freezes_collector_after_analyze_but_not_after_run(trace, tmp_path, monkeypatch, capsys):
    import gc

    from tracedoc.cli import console_main

    frozen = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    rc = console_main(["analyze", str(trace), "--format", "json", "--no-progress", "-o", str(tmp_path / "r.json")])
    assert rc == 0 and frozen == [True]
    assert (tmp_path / "r.json").stat().st_size > 0
    # `run` executes the user's script in this process: its objects keep their normal end of life
    rc = console_main(["run", "-o", str(tmp_path / "out"), "--", str(tmp_path / "missing.py")])
    assert rc != 0 and frozen == [True]
    assert "missing.py" in capsys.readouterr().err
