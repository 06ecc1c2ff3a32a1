"""What a profile shows at once: the answer lines a capture prints, and what a profile without GPU ops
can still tell (host time by operator, the DataLoader's share)."""

import subprocess
import sys
from pathlib import Path

import pytest
from torchjobs import capture_run

from tracedoc import analyze
from tracedoc.cli import example_path
from tracedoc.render.text import answer_lines

ROOT = Path(__file__).resolve().parents[1]


def test_host_operators_by_self_time(builder, tmp_path):
    b = builder
    b.step(1, 0, 1000)
    b.cpu_op("aten::linear", 100, 700)  # 600 µs total, children 200 + 300 -> self 100
    b.cpu_op("aten::t", 110, 310)  # nested: 200 µs, no children
    b.cpu_op("aten::addmm", 350, 650)  # nested: 300 µs
    b.cpu_op("aten::relu", 750, 800)  # 50 µs
    result = analyze(str(b.write(tmp_path / "cpu.json")))
    rows = {r.name: r for r in result.focus.evidence["host_operators"]}
    assert rows["aten::linear"].self_ns == 100_000 and rows["aten::linear"].cpu_ns == 600_000
    assert rows["aten::addmm"].self_ns == 300_000 and rows["aten::t"].self_ns == 200_000
    assert [r.name for r in result.focus.evidence["host_operators"]][:2] == ["aten::addmm", "aten::t"]
    window = result.focus.window.length_ns
    assert rows["aten::addmm"].share == pytest.approx(300_000 / window)
    lines = answer_lines(result)
    assert lines[0].startswith("Verdict withheld: the trace holds CPU activity only")
    assert lines[1].startswith("Host time by operator (self time, share of the window): aten::addmm")


def test_answer_of_a_gpu_trace_names_the_verdict_and_top_finding():
    lines = answer_lines(analyze(example_path()))
    assert lines[0].startswith("Verdict: io_bound")
    assert lines[1].startswith("top finding: [io_bound]") and "ms/step" in lines[1]
    assert lines[2].startswith("fix: ")


def _capture_cpu_run(out: Path, *script_args: str) -> subprocess.CompletedProcess:
    pytest.importorskip("torch")
    script = ROOT / "tests" / "capture_scripts" / "train_tiny.py"
    proc = subprocess.run(
        [
            sys.executable,
            *capture_run(out, 3, module="tracedoc"),
            "--",
            sys.executable,
            str(script),
            *script_args,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX capture")
def test_run_prints_the_answer_and_profile_returns_the_result(tmp_path):
    # 8 samples x 3 ms of sleep per batch: the loop waits ~24 ms a step on a few ms of work
    err = _capture_cpu_run(tmp_path / "out", "--steps", "7", "--sleep", "0.003").stderr
    assert "tracedoc: Verdict: io_bound" in err
    assert "tracedoc: GPU-side metrics were not recorded (the trace holds CPU activity only)" in err
    assert "tracedoc: top finding: [io_bound] The training loop waits for the DataLoader" in err
    assert "tracedoc: fix: The DataLoader runs in the main process (num_workers=0)" in err
    assert "tracedoc: DataLoader: the main thread spends" in err
    host = [
        line
        for line in err.splitlines()
        if line.startswith("tracedoc: Host time by operator (self time, share of the window): ")
    ]
    assert len(host) == 1 and "aten::" in host[0], err[-3000:]  # which op leads depends on the machine's load
    assert err.index("Verdict: io_bound") < err.index("tracedoc: report: ")

    import torch

    import tracedoc.capture as capture

    model = torch.nn.Linear(8, 2)
    with capture.profile(
        str(tmp_path / "p"), skip_first=1, warmup=1, active=2, report=True, signal=False, trigger_file="", monitor=False
    ) as prof:
        for _ in range(6):
            model(torch.randn(4, 8)).sum().backward()
            prof.step()
    result = prof.result
    assert result is not None and result.ranks and result.focus.verdict is not None
    assert result.focus.evidence["host_operators"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX capture")
def test_captured_cpu_run_with_a_slow_dataloader_gets_a_host_side_verdict(tmp_path):
    """A real CPU training run whose DataLoader sleeps: the verdict is io_bound on the host-side evidence,
    says that GPU-side metrics were not recorded, predicts the step without the wait, and no rule that
    needs GPU metrics speaks."""
    import json

    from tracedoc.engine.rulefile import load_rules

    out = tmp_path / "out"
    _capture_cpu_run(out, "--steps", "7", "--sleep", "0.003")
    (report,) = out.glob("*.report.json")
    rank = json.loads(report.read_text())["ranks"][0]
    v, m = rank["verdict"], rank["metrics"]
    assert m["has_gpu_ops"] is False and m["runtime_calls"] == 0
    assert m["dataloader_fraction"] > 0.5  # ~24 ms of sleep on a few ms of work a step
    assert v["withheld"] is None and v["labels"] == ["io_bound"]
    (health,) = [h for h in v["health"] if h["withhold"]]
    assert health["code"] == "cpu-only-trace" and "GPU-side metrics were not recorded" in health["message"]
    gpu_rules = {r.id for r in load_rules() if r.requires_gpu}
    assert not {f["rule_id"] for f in v["findings"]} & gpu_rules
    (top,) = [f for f in v["findings"] if f["label"] == "io_bound"]
    assert top["rule_id"] == "TD304" and "GPU-side metrics were not recorded" in top["message"]
    w = top["what_if"]
    assert "replay" in w["method"] and w["step_ms_after"] < 0.5 * w["step_ms_before"]
