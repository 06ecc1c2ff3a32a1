"""A report agrees with itself: per-step bars, the timeline's representative step and the operator tables
come from the report's window and steps; FLOP rates stay under their peaks; one MFU everywhere. A built
trace of a CPU far ahead of the GPU (the pattern that broke all three), and every shared trace."""

from __future__ import annotations

import pytest
from conftest import shared_names, shared_traces
from report_consistency import disagreements, job_disagreements
from trace_builder import TraceBuilder

import tracedoc
from tracedoc.model.record import replace

US = 1000
MM = {"Input Dims": [[2048, 2048], [2048, 2048]], "Input type": ["float", "float"]}


def _cpu_far_ahead(tmp_path):
    """Five 1 ms CPU steps, each launching ten 1 ms fp32 GEMMs (aten::mm) that the GPU runs back to back
    from 20 ms, after twenty kernels launched before the profiler opened: every step's own span (CPU start
    to completion) is 20-60 ms long, its step time 10 ms."""
    b = TraceBuilder(gpu="A100")
    for j in range(20):
        b.unlaunched("ampere_sgemm_128x64_nn", -500.0 + 1000.0 * j, 1000.0, correlation=10 + j)
    gpu_t = 19_500.0
    for i in range(5):
        s = i * 1000.0
        b.step(i + 1, s, s + 900.0)
        for k in range(10):
            at = s + 10.0 + 50.0 * k
            b.kernel("ampere_sgemm_128x64_nn", gpu_t, 1000.0, launch_at=at, launch_dur=4.0, op="aten::mm", op_args=MM)
            gpu_t += 1000.0
    return tracedoc.analyze(b.write(tmp_path / "ahead.pt.trace.json")).ranks[0]


def test_figures_beside_a_cpu_far_ahead_come_from_the_report_steps(tmp_path):
    r = _cpu_far_ahead(tmp_path)
    assert r.metrics["step_time_p50_ns"] == 10_000 * US
    assert disagreements(r) == []
    # per-step rows measure the step time; the step without one (the backlog ran ahead of it) says so
    assert [row["window_ns"] for row in r.per_step[1:]] == [10_000 * US] * 4
    assert [row["busy_ns"] for row in r.per_step[1:]] == [10_000 * US] * 4
    # the per-step bars: one per timed step, as long as its 10 ms; none for the step without a step time
    from types import SimpleNamespace

    from tracedoc.render.stepview import build_steps

    bars = build_steps(r.per_step, SimpleNamespace(steps=10)).bars
    assert [(b.time, b.width) for b in bars] == [("no step time", 0.0)] + [("10.0 ms", 100.0)] * 4
    # the timeline's representative step is a 10 ms step, not a 50 ms span
    (rep, *_) = r.timeline["excerpts"]
    assert rep["title"] == "representative step" and rep["length_ns"] == 10_000 * US
    # the operator table counts the calls behind the window's kernels, launched before the window
    (mm,) = [row for row in r.evidence["top_operators"] if row.name == "aten::mm"]
    assert mm.gpu_ops == 40 and mm.calls == 40 and mm.cpu_ns == 40 * 6 * US


def test_the_check_finds_what_the_old_reports_showed(tmp_path):
    r = _cpu_far_ahead(tmp_path)
    r.per_step[2]["window_ns"] = 40_000 * US  # a step measured over its own span
    r.evidence["top_operators"][0] = replace(r.evidence["top_operators"][0], calls=0)
    r.timeline["excerpts"][0]["length_ns"] = 42_000 * US
    found = disagreements(r)
    assert len([d for d in found if "measured over" in d]) == 1
    assert any("top_operators" in d for d in found) and any("timeline representative" in d for d in found)


def _shared() -> list[str]:
    """Every shared trace and job folder, relative to the shared traces ([] without them)."""
    names = [f"kineto/{n}" for n in shared_names("kineto", "*.json*") if "expected" not in n]
    names += [f"h100/{n}" for n in shared_names("h100", "*.pt.trace.json.gz")]
    names += [f"nsys/{n}" for n in shared_names("nsys", "*.sqlite")]
    names += [f"h100/{n}" for n in shared_names("h100", "job*")]
    return names


@pytest.mark.parametrize("name", _shared())
def test_no_shared_trace_report_contradicts_itself(name):
    result = tracedoc.analyze(str(shared_traces() / name))
    bad = [f"rank {r.rank}: {d}" for r in result.ranks for d in disagreements(r)]
    assert bad + job_disagreements(result) == []
