"""The `tracedoc analyze` command end to end: verdict gating, thresholds, extra rules, formats."""

import json
import os
import subprocess
import sys

import pytest

from tracedoc.cli import example_path


def run(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def test_fail_on_label_sets_exit_code_3():
    assert run("analyze", "--example", "--fail-on", "io_bound").returncode == 3
    assert run("analyze", "--example", "--fail-on", "comm_bound").returncode == 0
    assert run("analyze", "--example", "--fail-on", "warning").returncode == 3


def test_param_override_on_the_command_line():
    proc = run("analyze", "--example", "--param", "TD301.stall_threshold=0.9", "--fail-on", "io_bound")
    assert proc.returncode == 0, proc.stdout
    assert "io_bound" not in proc.stdout.split("Window:")[0]


def test_param_override_from_pyproject(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.tracedoc.params]\nTD301.stall_threshold = 0.9\n")
    assert run("analyze", example_path(), "--fail-on", "io_bound", cwd=tmp_path).returncode == 0


def test_bad_param_is_a_usage_error():
    proc = run("analyze", "--example", "--param", "TD301.stall_treshold=0.9")
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "stall_threshold" in proc.stderr


def test_extra_rule_directory(tmp_path):
    (tmp_path / "TD900-team-budget.toml").write_text("""
id = "TD900"
name = "step-over-budget"
title = "Steps are slower than the team's budget"
label = "advice"
severity = "error"
when = "step_time_mean_ns > budget_ms * 1000000"
message = "Mean step {step_time_mean_ns / 1000000:.1f} ms exceeds the budget of {budget_ms:.0f} ms"
expect = "Mean step under {budget_ms:.0f} ms"

[params.budget_ms]
default = 10.0
unit = "ms"
justification = "The team's agreed step-time budget for this model."

[[fixes]]
text = "Work through the other findings first."

[docs]
what_it_detects = "Mean step time above a budget."
why_it_matters = "CI should catch step-time regressions."
references = ["https://example.invalid/team-step-budget"]

[[tests.fires]]
step_time_mean_ns = 20_000_000

[[tests.ok]]
step_time_mean_ns = 5_000_000
""")
    proc = run("analyze", "--example", "--rules", str(tmp_path), "--format", "json", "--fail-on", "error")
    assert proc.returncode == 3, proc.stderr
    findings = json.loads(proc.stdout)["ranks"][0]["verdict"]["findings"]
    assert any(f["rule_id"] == "TD900" and "exceeds the budget of 10 ms" in f["message"] for f in findings)


@pytest.mark.parametrize(
    "fmt,needle", [("json", '"schema": "tracedoc.analysis"'), ("md", "io_bound"), ("html", "<!DOCTYPE html>")]
)
def test_formats_to_file(fmt, needle, tmp_path):
    out = tmp_path / f"report.{fmt}"
    proc = run("analyze", "--example", "-f", fmt, "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert needle in out.read_text()
    assert not list(tmp_path.glob("*.tmp-*"))  # written atomically


def test_kineto_trace_rejects_nsys_options():
    proc = run("analyze", "--example", "--step-range", "train_step")
    assert proc.returncode == 2 and "nsys" in proc.stderr and "Traceback" not in proc.stderr


def test_usage_errors_exit_2():
    assert run("analyze").returncode == 2
    assert run("analyze", "--format", "pdf", "--example").returncode == 2
    assert run().returncode == 2


def test_python_m_capture_reports_errors_like_the_cli(monkeypatch, capsys):
    """``python -m tracedoc.capture``: a tracedoc error is one line on stderr with the shared exit code,
    never a traceback; so is Ctrl-C."""
    from tracedoc.capture.__main__ import main as capture_main
    from tracedoc.cli import trigger
    from tracedoc.errors import TraceError
    from tracedoc.exits import EXIT_ERROR, EXIT_INTERRUPTED

    def broken(args):
        raise TraceError("job/TRIGGER", "cannot be written", "read-only file system", "pass another --outdir")

    monkeypatch.setattr(trigger, "cmd_trigger", broken)
    assert capture_main(["trigger", "job"]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err == (
        "tracedoc: error: job/TRIGGER: cannot be written (saw read-only file system); pass another --outdir\n"
    )

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(trigger, "cmd_trigger", interrupted)
    assert capture_main(["trigger", "job"]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "tracedoc: interrupted\n"


def test_rank_on_a_single_trace_is_a_usage_error_that_says_why(tmp_path, capsys):
    """--rank picks a rank of a job; a lone trace, whatever rank it recorded or none, has no job to pick
    from. It was once reported as "rank 1 is not in ... (saw ranks [None])"."""
    from trace_builder import TraceBuilder, training_steps

    from tracedoc.cli import main

    b = TraceBuilder(rank=None, world_size=None)
    training_steps(b)
    no_rank = b.write(tmp_path / "t.json")
    for argv in (["--example", "--rank", "1"], ["--example", "--rank", "0"], [str(no_rank), "--rank", "1"]):
        assert main(["analyze", *argv]) == 2, argv
        err = capsys.readouterr().err
        assert "--rank" in err and "is a single trace" in err and "directory" in err, err
        assert "None" not in err and "Traceback" not in err


def test_rank_on_an_nsys_export_of_one_process_is_a_usage_error(tmp_path, capsys):
    from nsys_builder import NsysDb

    from tracedoc.cli import main

    db = NsysDb(tmp_path / "one.sqlite")
    db.session(1_000_000_000, 1_100_000_000, 1_763_700_000_000_000_000)
    db.process(100, "python3")
    db.thread(100, 100, "python3")
    db.nvtx(100, 100, 1_000_100_000, 1_010_000_000, text="ProfilerStep#1")
    db.nvtx(100, 100, 1_010_000_000, 1_020_000_000, text="ProfilerStep#2")
    assert main(["analyze", db.close(), "--rank", "0", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "is a single trace (saw an export of one process" in err, err


HTML, JSON, MD, TEXT = (
    b"<!DOCTYPE html>",
    b'"schema": "tracedoc.analysis"',
    b"## tracedoc verdict",
    b"Verdict: io_bound",
)


@pytest.mark.parametrize(
    "name,needle",
    [
        ("r.html", HTML),
        ("r.htm", HTML),
        ("r.md", MD),
        ("r.markdown", MD),
        ("r.json", JSON),
        ("r.txt", TEXT),
        ("r.json.gz", JSON),
        ("R.HTML.GZ", HTML),
        ("r.md.gz", MD),
    ],
)
def test_output_format_follows_the_file_extension(name, needle, tmp_path, capsys):
    import gzip

    from tracedoc.cli import main

    out = tmp_path / name
    assert main(["analyze", "--example", "-o", str(out)]) == 0
    data = out.read_bytes()
    if name.lower().endswith(".gz"):
        assert data[:2] == b"\x1f\x8b"
        data = gzip.decompress(data)
    assert [f for f in (HTML, JSON, MD, TEXT) if f in data] == [needle]  # that format, no other's text


@pytest.mark.parametrize("command", ["analyze", "diff", "logs"])
def test_an_unknown_output_extension_is_an_error_unless_format_is_given(command, tmp_path, capsys):
    from tracedoc.cli import main

    log = tmp_path / "steps.jsonl"
    log.write_text("".join(f'{{"step": {i}, "loss": {2.0 - i / 100}, "step_time_s": 0.1}}\n' for i in range(40)))
    inputs = {"analyze": [example_path()], "diff": [example_path(), example_path()], "logs": [str(log)]}[command]
    for name in ("report.pdf", "report", "report.gz"):
        out = tmp_path / name
        assert main([command, *inputs, "-o", str(out)]) == 2, name
        err = capsys.readouterr().err
        assert "no extension that names a report format" in err and ".html" in err and ".json" in err, err
        assert "--format" in err and not out.exists()
    out = tmp_path / "report.pdf"
    assert main([command, *inputs, "-o", str(out), "--format", "md"]) == 0
    assert out.read_text().lstrip().startswith("#")  # the format asked for, under the name given


# The command's run stands in for the real one: it reports the setting, then loads numpy as a command
# would and counts the process's threads where Linux shows them (OpenBLAS starts its own at numpy's import).
_BLAS_PROBE = """
import os, sys
from tracedoc import cli
def run_command(args):
    setting, loaded = os.environ.get("OPENBLAS_NUM_THREADS"), "numpy" in sys.modules
    import numpy
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else "?"
    print(setting, loaded, threads)
    return 0
cli.run_command = run_command
cli.console_main(sys.argv[1:])
"""


@pytest.mark.parametrize(
    ("argv", "preset", "want"),
    [
        (["rules"], None, "1 False"),  # set before numpy is loaded by the command: numpy then runs no thread
        (["rules"], "3", "3 False"),  # the user's value stays
        (["run", "--", "true"], None, "None False"),  # a run's script is the user's: untouched
    ],
)
def test_the_command_line_starts_no_blas_threads(argv, preset, want):
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if preset is not None:
        env["OPENBLAS_NUM_THREADS"] = preset
    out = subprocess.run(
        [sys.executable, "-c", _BLAS_PROBE, *argv], capture_output=True, text=True, env=env, timeout=60
    )
    setting, loaded, threads = out.stdout.split()
    assert f"{setting} {loaded}" == want, out.stderr
    if want.startswith("1 ") and threads != "?":
        assert threads == "1"  # numpy loaded under the setting started no thread of its own
