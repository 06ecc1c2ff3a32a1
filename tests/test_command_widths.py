"""Every command's text output fits the width: ``--width 80``, ``--width 120`` and piped (100 columns).

No line is longer than the width (a path longer than the width, alone on its line, is the one
exception: it is never broken), and no number is broken across lines: every number the narrow output
shows appears whole in the same output laid out 400 columns wide.
"""

from __future__ import annotations

import re

import pytest
from log_fixtures import llmc_main_log
from trace_builder import TraceBuilder, training_steps

from tracedoc.cli import main

WIDTHS = (80, 120, None)  # None: piped, no --width (100 columns)
PIPE_WIDTH = 100
# A number: digits with an optional sign, decimal part and thousands commas, not inside a word or a name.
NUMBER = re.compile(r"(?<![\w.…])[-+−]?\d+(?:[.,]\d+)*(?![\w…])")
LONG_NAME = (
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8>"
    "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)"
)


def _trace(path, dl_us: float, long_names: bool = False):
    b = TraceBuilder()
    spans = training_steps(b, steps=6, kernels=8, dataloader_us=dl_us, step_us=12_000.0)
    if long_names:  # one kernel with a name far wider than any terminal, in every step
        for s, _ in spans:
            b.kernel(LONG_NAME, s + 9_000.0, 300.0, launch_at=s + 8_900.0, op="aten::linear")
    return b.write(path)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    d = tmp_path_factory.mktemp("widths")
    log = d / "train.log"
    log.write_text(llmc_main_log(n=600, spike_at=300))
    return {
        "a": _trace(d / "a.json", 8000.0),
        "b": _trace(d / "b.json", 0.0, long_names=True),
        "c": _trace(d / "c.json", 4000.0, long_names=True),
        "log": log,
        "dir": d,
    }


COMMANDS = {
    "analyze": lambda p: ["analyze", str(p["b"])],
    "analyze-verbose": lambda p: ["analyze", str(p["b"]), "-v"],
    "diff": lambda p: ["diff", str(p["a"]), str(p["b"])],
    "trend": lambda p: ["diff", str(p["a"]), str(p["b"]), str(p["c"])],
    "logs": lambda p: ["logs", str(p["log"])],
    "metrics": lambda p: ["metrics"],
    "rules": lambda p: ["rules"],
    "rules-explain": lambda p: ["rules", "explain", "TD101"],
    "rules-explain-label": lambda p: ["rules", "explain", "io_bound"],
}


def run(capsys, argv: list[str]) -> str:
    code = main(argv)
    out = capsys.readouterr().out
    assert code == 0, argv
    return out


def numbers(text: str) -> set[str]:
    return set(NUMBER.findall(text))


@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"width{w}" if w else "piped")
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_command_fits_the_width(command, width, inputs, capsys, monkeypatch):
    monkeypatch.chdir(inputs["dir"])  # paths as given are short: only the layout decides the lines
    argv = [a.replace(str(inputs["dir"]) + "/", "") for a in COMMANDS[command](inputs)]
    text = run(capsys, argv + (["--width", str(width)] if width else []))
    limit = width or PIPE_WIDTH
    long = [line for line in text.splitlines() if len(line) > limit and " " in line.strip()]
    assert not long, f"{len(long)} lines over {limit} columns, e.g. {long[0]!r}"
    wide = run(capsys, argv + ["--width", "400"])
    broken = sorted(numbers(text) - numbers(wide))
    assert not broken, f"numbers broken across lines (not in the 400-column output): {broken[:8]}"
    if command.startswith("analyze"):  # the verdict comes back at the end, in one summary line
        assert text.rstrip().splitlines()[-1].startswith("Summary: ") or "Summary: " in text.rstrip()[-3 * limit :]


@pytest.mark.parametrize("fixture", ["llmc_main_log", "megatron_deepspeed", "hf_trainer_state"])
def test_analyze_of_a_training_log_says_to_use_logs(fixture, tmp_path, capsys):
    import log_fixtures

    path = tmp_path / ("trainer_state.json" if fixture == "hf_trainer_state" else "train.log")
    path.write_text(getattr(log_fixtures, fixture)())
    code = main(["analyze", str(path)])
    err = capsys.readouterr().err
    assert code != 0 and err.count("\n") == 1 and "Traceback" not in err
    assert "is a training log" in err and f"use `tracedoc logs {path}`" in err


def test_a_json_file_that_is_no_log_keeps_the_trace_error(tmp_path, capsys):
    path = tmp_path / "x.json"
    path.write_text('{"a": 1}\n')
    assert main(["analyze", str(path)]) != 0
    err = capsys.readouterr().err
    assert "training log" not in err and "traceEvents" in err


def test_summary_line_repeats_the_verdict_and_the_top_gain(inputs, capsys):
    text = run(capsys, ["analyze", str(inputs["a"])])  # a DataLoader-bound loop: io_bound with a replayed gain
    last = text.rstrip().splitlines()
    summary = " ".join(" ".join(last[last.index(next(x for x in last if x.startswith("Summary: "))) :]).split())
    verdict = next(x for x in last if x.startswith("Verdict: "))
    assert summary.startswith("Summary: io_bound") and "io_bound" in verdict
    assert "top finding: " in summary and "predicted gain: step " in summary and "→" in summary
    assert run(capsys, ["analyze", str(inputs["a"]), "-q"]).count("Summary:") == 0
