"""Fuzzed training logs and configs as a test: every mutant of a log in each format (and every hostile
config beside it) gives numbers that can be true, or one clear tracedoc error; never a traceback, a
hang, an impossible number or a changed input.

``tests/fuzz_logs.py`` holds the mutations; ``benchmarks/fuzz_logs_campaign.py`` runs thousands of them.
"""

from __future__ import annotations

import collections

import fuzz_logs

FAST_CASES = 264  # every class, every format, a config case in eight


def test_mutated_logs_and_configs(tmp_path):
    seen: collections.Counter = collections.Counter()
    bad = []
    for i, case in enumerate(fuzz_logs.generate(seed=20260512, n=FAST_CASES)):
        formats = ("json", ("html", "md", "text")[i % 3]) if i % 6 == 0 else ("json",)
        outcome, message = fuzz_logs.run_case(case, tmp_path / f"c{i}", timeout_s=30, formats=formats)
        seen[(case.cls, outcome)] += 1
        if outcome not in ("result", "error"):
            bad.append(f"#{i} {case.cls} [{outcome}] {case.detail}: {message}")
    assert not bad, "\n".join(bad)
    assert {cls for cls, _ in seen} == set(fuzz_logs.LOG_MUTATIONS) | {"config"}
    # both outcomes occur, or the run proves little
    assert sum(n for (_, o), n in seen.items() if o == "result") > FAST_CASES // 3
    assert sum(n for (_, o), n in seen.items() if o == "error") > FAST_CASES // 10


def test_the_invariants_catch_impossible_numbers():
    doc = {
        "metrics": {
            "throughput_dip_lost_fraction": 1.5,
            "step_time_p50_s": -0.2,
            "log_first_step": 10,
            "log_last_step": 5,
            "throughput_p10": 3.0,
            "throughput_p50": 2.0,
            "throughput_p90": 4.0,
            "skipped_iterations": -1,
        },
        "anomalies": [{"kind": "nan", "step": 99}],
    }
    problems = fuzz_logs.violations(doc)
    assert len(problems) == 6, problems
