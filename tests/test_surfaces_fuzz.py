"""Fuzzed saved reports (given to diff), configs (--config, --model) and --fail-if expressions as a test:
every case gives a possible result or one clear error line; never a hang, a raw control character, a
changed input or, for configs and expressions, a traceback.

``tests/fuzz_surfaces.py`` holds the mutations; ``benchmarks/fuzz_surfaces_campaign.py`` runs thousands.
"""

from __future__ import annotations

import collections
import json

import pytest

import fuzz_surfaces

FAST_CASES = 300  # 60 of each surface share (reports get two)
SEED = 20260601


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    root = tmp_path_factory.mktemp("surfaces")
    base = fuzz_surfaces.make_base(root / "base")
    doc = json.loads(base.read_text())
    out = []
    for i, case in enumerate(fuzz_surfaces.generate(SEED, FAST_CASES, doc)):
        fmt = ("md", "text")[i // 5 % 2] if i % 5 == 0 else "json"
        outcome, message = fuzz_surfaces.run_case(case, root / f"c{i}", base, timeout_s=30, fmt=fmt)
        out.append((i, case, outcome, message))
    return out


def _bad(rows, surfaces, allowed=("result", "error")):
    return [
        f"#{i} {c.surface}/{c.cls} [{o}] {c.detail[:80]}: {m}"
        for i, c, o, m in rows
        if c.surface in surfaces and o not in allowed
    ]


def test_mutated_configs_and_expressions_give_a_result_or_one_clear_error(outcomes):
    bad = _bad(outcomes, ("config", "expr"))
    assert not bad, "\n".join(bad)
    seen = collections.Counter((c.surface, o) for _, c, o, _ in outcomes)
    for surface in ("config", "expr"):  # both outcomes occur, or the run proves little
        assert seen[(surface, "result")] >= 5 and seen[(surface, "error")] >= 5, seen


def test_mutated_reports_and_model_configs_never_hang_leak_controls_or_change_inputs(outcomes):
    bad = [
        f"#{i} {c.surface} [{o}] {c.detail[:80]}: {m}"
        for i, c, o, m in outcomes
        if c.surface in ("report", "model") and (o == "hang" or (o == "violation" and not m.startswith("metric ")))
    ]
    assert not bad, "\n".join(bad)
    seen = collections.Counter((c.surface, o) for _, c, o, _ in outcomes)
    assert seen[("report", "result")] >= 10 and seen[("report", "error")] >= 10, seen


def test_mutated_reports_and_model_configs_never_crash_nor_show_impossible_numbers(outcomes):
    bad = _bad(outcomes, ("report", "model"))
    assert not bad, "\n".join(bad)


def test_the_invariants_catch_impossible_diff_numbers():
    doc = {
        "before": {"step_ns": -1, "category_ns": {"compute": -3}},
        "after": {"step_ns": 2, "category_ns": {"compute": 1}},
        "step_delta_ns": 1,
        "step_delta_interval_ns": [2.0, 1.0],
        "pairs": [{"metrics": [{"name": "gpu_busy_fraction", "unit": "fraction", "before": 7.5, "after": 0.5}]}],
    }
    problems = fuzz_surfaces.diff_violations(doc)
    assert len(problems) == 5, problems
