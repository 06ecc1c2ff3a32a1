"""On every shared trace: one step time, and labels that hold (docs/definitions.md, docs/critical-path.md).

Every what-if starts from the report's step (the median step time; without steps, the window); every
verdict label is carried by a finding that predicts at least 2% of that step, unless its gain cannot be
modelled; the report's step p50 of the H100 traces is the median interval between step completions that
the raw trace gives (truth.json's step_ms_profiled).
"""

from __future__ import annotations

import json

import pytest
from conftest import TRACES, have_shared, shared_traces

import tracedoc
from tracedoc.engine.evaluate import MIN_GAIN_FRACTION


def _inputs() -> list[str]:
    if not have_shared():
        return []
    out = []
    for sub, pattern in (("kineto", "*.json*"), ("nsys", "*.sqlite"), ("h100", "*.json.gz"), ("h100", "job*")):
        out += [
            f"{sub}/{p.name}"
            for p in sorted((TRACES / sub).glob(pattern))
            if not p.name.startswith("tbp_gpu_metrics_expected")
        ]
    return out


def _check_verdict(where: str, v, p50_ns) -> None:
    if v is None or v.step_time_ns is None:
        return
    step_ms = v.step_time_ns / 1e6
    if p50_ns:
        assert v.step_time_ns == pytest.approx(p50_ns), f"{where}: the verdict's step is not the step p50"
    for f in v.findings:
        if f.what_if:
            assert f.what_if["step_ms_before"] == pytest.approx(step_ms, rel=1e-4), f"{where}: {f.rule_id}"
    for label in v.labels:
        gains = [(f.what_if or {}).get("gain_ms") for f in v.findings if f.label == label]
        numeric = [g for g in gains if isinstance(g, (int, float))]
        if numeric and len(numeric) == len(gains):
            assert max(numeric) >= MIN_GAIN_FRACTION * step_ms - 1e-9, f"{where}: label {label} gains {numeric}"


@pytest.mark.parametrize("name", _inputs())
def test_every_finding_starts_from_the_reports_step_and_every_label_has_a_gain(name):
    result = tracedoc.analyze(shared_traces() / name)
    for r in result.ranks:
        _check_verdict(f"{name} rank {r.rank}", r.verdict, r.metrics.get("step_time_p50_ns"))
    if result.job is not None and result.job.verdict is not None:
        job_p50 = result.job.metrics.get("job_step_time_p50_ns")
        _check_verdict(f"{name} job", result.job.verdict, job_p50)


@pytest.mark.parametrize("name", [n for n in _inputs() if n.startswith("h100/") and n.endswith(".json.gz")])
def test_h100_step_p50_is_the_median_completion_interval(name):
    truth = json.loads((shared_traces() / "h100" / "truth.json").read_text())[name.split("/")[1].split(".pt.")[0]]
    m = tracedoc.analyze(shared_traces() / name).ranks[0].metrics
    assert m["step_time_p50_ns"] / 1e6 == pytest.approx(truth["step_ms_profiled"], rel=0.03)
    # the CPU runs ahead on these traces: the mean is the same number once the backlog's step is left out
    assert m["step_time_mean_ns"] == pytest.approx(m["step_time_p50_ns"], rel=0.03)
