"""NaN, infinity, huge numbers and malformed settings are usage errors that name the value: they never
silently switch a gate or a rule off, and never crash."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from trace_builder import TraceBuilder, training_steps
from tracedoc.cli import main

ROOT = Path(__file__).resolve().parents[1]
HUGE = "1" + "0" * 400


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    b = TraceBuilder()
    training_steps(b, steps=4, kernels=3)
    return b.write(tmp_path_factory.mktemp("bad") / "t.json")


def _run(args, capsys):
    try:
        rc = main([str(a) for a in args])
    except SystemExit as exc:  # argparse's usage errors
        rc = exc.code
    out = capsys.readouterr()
    return rc, out.out, out.err


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e400"])
def test_fail_on_regression_must_be_finite(trace, capsys, value):
    rc, _, err = _run(["diff", trace, trace, f"--fail-on-regression={value}"], capsys)
    assert rc == 2 and value in err and "finite" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "expr", [f"step_pct > {HUGE}", "step_pct > 1e400", "step_pct > -1e999", "step_pct > 9" * 1 + "9" * 5000]
)
def test_fail_if_refuses_numbers_out_of_range(trace, capsys, expr):
    rc, _, err = _run(["diff", trace, trace, "--fail-if", expr], capsys)
    assert rc == 2 and "--fail-if" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and len(err) < 1000  # one line quoting a short excerpt


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "nan%", HUGE, "9" * 5000])
def test_param_values_must_be_finite(trace, capsys, value):
    rc, _, err = _run(["analyze", trace, "--no-progress", "-q", "--param", f"TD301.stall_threshold={value}"], capsys)
    assert rc == 2 and "TD301.stall_threshold" in err and "Traceback" not in err
    assert len(err) < 1000


def _pyproject(tmp_path: Path, body: str) -> Path:
    d = tmp_path / "proj"
    d.mkdir(exist_ok=True)
    (d / "pyproject.toml").write_text(body)
    return d


def _cli(cwd: Path, *args) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


@pytest.mark.parametrize(
    "body,needle",
    [
        ("[tool.tracedoc.params]\nTD301.stall_threshold = nan\n", "finite"),
        ("[tool.tracedoc.params]\nTD301.stall_threshold = inf\n", "finite"),
        ("[tool.tracedoc.params]\nTD301.stall_threshold = 0.1\n[tool.tracedoc\nrules = 3\n", "not valid TOML"),
        ("[tool]\ntracedoc = 5\n", "must be a table"),
        ("[tool.tracedoc]\nparam = {TD301 = {stall_threshold = 0.1}}\n", "unknown key"),
        ("[tool.tracedoc.params]\nTD301.stall_threshold = " + "9" * 5000 + "\n", "not valid TOML"),
    ],
)
def test_a_bad_pyproject_section_is_an_error_naming_it(trace, tmp_path, body, needle):
    proc = _cli(_pyproject(tmp_path, body), "analyze", trace, "--no-progress", "-q")
    assert proc.returncode == 2, proc.stderr
    assert "pyproject.toml" in proc.stderr and "tool.tracedoc" in proc.stderr and needle in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_a_pyproject_without_tracedoc_settings_is_still_ignored(trace, tmp_path):
    proc = _cli(_pyproject(tmp_path, "[tool.black\nline-length = 3\n"), "analyze", trace, "--no-progress", "-q")
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("jobs", ["0", "-1", "1025", "99999999999999999999999", "two", "1.5"])
def test_jobs_is_bounded(trace, capsys, jobs):
    for cmd in (["analyze", trace, "--no-progress"], ["diff", trace, trace]):
        rc, _, err = _run([*cmd, "-j", jobs], capsys)
        assert rc == 2 and "-j" in err and "Traceback" not in err


def test_jobs_above_the_cpu_count_runs_as_many_as_there_are_cpus():
    from tracedoc.cli.common import jobs_count

    assert jobs_count("1") == 1
    assert jobs_count("1024") == (os.cpu_count() or 1)


def test_trigger_refuses_a_number_that_is_no_pid_and_creates_nothing(tmp_path):
    for target in ("1e3", "0x10", "-2.5"):
        proc = _cli(tmp_path, "trigger", target)
        assert proc.returncode == 2 and "not a process id" in proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_trigger_refuses_a_fifo_without_hanging(tmp_path):
    fifo = tmp_path / "TRIGGER"
    os.mkfifo(fifo)
    proc = _cli(tmp_path, "trigger", fifo)  # the timeout of _cli fails the test if it hangs
    assert proc.returncode == 1 and "named pipe" in proc.stderr
    proc = _cli(tmp_path, "trigger", tmp_path)  # the directory form reaches the same FIFO
    assert proc.returncode == 1 and "named pipe" in proc.stderr


def test_trigger_touches_a_trigger_file_and_never_follows_a_link_to_create_one(tmp_path):
    proc = _cli(tmp_path, "trigger", tmp_path)
    assert proc.returncode == 0 and (tmp_path / "TRIGGER").is_file()
    victim_dir = tmp_path / "elsewhere"
    victim_dir.mkdir()
    (tmp_path / "dangling").symlink_to(victim_dir / "created")
    proc = _cli(tmp_path, "trigger", tmp_path / "dangling")
    assert proc.returncode == 1 and not (victim_dir / "created").exists()


@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "dir"])
def test_model_config_that_is_not_a_regular_file_is_refused_at_once(trace, tmp_path, capsys, special):
    if special == "fifo":
        target = tmp_path / "config.fifo"
        os.mkfifo(target)
    elif special == "dir":
        target = tmp_path
    else:
        target = special
    rc, _, err = _run(["analyze", trace, "--no-progress", "--model", target, "--tokens-per-step", "16"], capsys)
    assert rc == 2 and ("not a model config" in err or "is a directory" in err)
