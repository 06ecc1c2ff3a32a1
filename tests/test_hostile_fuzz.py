"""Fuzzed nsys export schemas and values, Perfetto inputs and JSON Lines log keys as a test: every case gives
a result or one clear error line; never a traceback, a hang, a violation (a report lost to the overlay, an
overlay that is not JSON or grows past its bound, a changed input) or a run over the memory bound.

``tests/fuzz_hostile.py`` holds the mutations; ``benchmarks/fuzz_hostile_campaign.py`` runs thousands.
"""

from __future__ import annotations

import collections

import pytest
from conftest import shared_traces

import fuzz_hostile

FAST_CASES = 120  # 40 of each surface
SEED = 20261128


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    bases = fuzz_hostile.make_bases(root / "base", shared_traces() / "nsys" / "nsys2026_mock.sqlite")
    return [
        (i, case, *fuzz_hostile.run_case(case, root / f"c{i}", bases, timeout_s=60))
        for i, case in enumerate(fuzz_hostile.generate(SEED, FAST_CASES, bases))
    ]


def test_hostile_exports_perfetto_inputs_and_log_keys_give_a_result_or_one_clear_error(outcomes):
    bad = [
        f"#{i} {c.surface}/{c.cls} [{o}] {c.detail[:80]}: {m}"
        for i, c, o, m in outcomes
        if o not in ("result", "error")
    ]
    assert not bad, "\n".join(bad)
    seen = collections.Counter((c.surface, o) for _, c, o, _ in outcomes)
    for surface in fuzz_hostile.SURFACES:  # both outcomes occur, or the run proves little
        assert seen[(surface, "result")] >= 3 and seen[(surface, "error")] >= 3, seen


def test_every_schema_attack_on_a_table_the_reader_reads_is_refused(outcomes):
    hostile = [
        (c, o, m)
        for _, c, o, m in outcomes
        if c.surface == "nsys"
        and c.cls in ("view", "trigger", "generated")
        and any(t in c.detail for t in fuzz_hostile.READ_TABLES)
        and "not applied" not in c.detail
    ]
    assert hostile
    assert all(o == "error" for _, o, _ in hostile), [(c.detail, o) for c, o, _ in hostile if o != "error"]
