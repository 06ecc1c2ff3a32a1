"""The `tracedoc analyze` command end to end: verdict gating, thresholds, extra rules, formats."""

import json
import subprocess
import sys

import pytest

from tracedoc.cli import example_path


def run(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "tracedoc", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


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
    (tmp_path / "TD900-team-budget.toml").write_text('''
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
''')
    proc = run("analyze", "--example", "--rules", str(tmp_path), "--format", "json", "--fail-on", "error")
    assert proc.returncode == 3, proc.stderr
    findings = json.loads(proc.stdout)["ranks"][0]["verdict"]["findings"]
    assert any(f["rule_id"] == "TD900" and "exceeds the budget of 10 ms" in f["message"] for f in findings)


@pytest.mark.parametrize("fmt,needle", [("json", '"schema": "tracedoc.analysis"'), ("md", "io_bound"),
                                        ("html", "<!DOCTYPE html>")])
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
    assert err == ("tracedoc: error: job/TRIGGER: cannot be written (saw read-only file system); "
                   "pass another --outdir\n")

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(trigger, "cmd_trigger", interrupted)
    assert capture_main(["trigger", "job"]) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == "tracedoc: interrupted\n"
