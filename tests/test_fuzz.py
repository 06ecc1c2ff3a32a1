"""Fuzzed inputs as a test: every mutant of a real trace gives numbers whose invariants hold, or one
clear tracedoc error; never a traceback, a hang, an impossible number or a changed input.

``tests/fuzzing.py`` holds the mutations; ``benchmarks/fuzz_campaign.py`` runs thousands of them.
"""

from __future__ import annotations

import collections
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzzing

pytestmark = pytest.mark.skipif(not fuzzing.have_sources(), reason=f"the shared traces are not at {fuzzing.TRACES}")

FAST_CASES = 216  # 18 per mutation class


def test_mutants_of_real_traces(tmp_path):
    seen: collections.Counter = collections.Counter()
    bad = []
    for i, case in enumerate(fuzzing.generate(seed=20261123, n=FAST_CASES)):
        outcome, message = fuzzing.run_case(
            case, tmp_path / f"c{i}", timeout_s=30, render_html=i % 12 == 0, via_cli=i % 9 == 4
        )
        seen[(case.cls, outcome)] += 1
        if outcome not in ("result", "error"):
            bad.append(f"#{i} {case.cls} [{outcome}] {case.detail}: {message}")
    assert not bad, "\n".join(bad)
    classes = {cls for cls, _ in seen}
    assert {"truncation", "gzip", "event_shapes", "directory", "special_file"} <= classes
    # The run must exercise both outcomes, or it proves little.
    assert sum(n for (_, o), n in seen.items() if o == "result") > FAST_CASES // 4
    assert sum(n for (_, o), n in seen.items() if o == "error") > FAST_CASES // 10


# --- Hypothesis: events of any shape the JSON grammar allows ---------------------------------------------

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=12),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=6,
)
_times = st.one_of(
    st.floats(min_value=0, max_value=1e7),
    st.integers(min_value=-5, max_value=10**7),
    st.sampled_from(["__inf__", "__nan__", "__big__"]),
    _values,
)
_event = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "X", "X", "i", "s", "f", "M", "B"]),
        "cat": st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "gpu_memcpy", "user_annotation", "ac2g"]),
    },
    optional={
        "name": st.one_of(
            st.sampled_from(
                ["ProfilerStep#1", "aten::mm", "cudaLaunchKernel", "sm80_xmma_gemm", "ncclKernel_AllReduce"]
            ),
            _values,
        ),
        "ts": _times,
        "dur": _times,
        "pid": _values,
        "tid": _values,
        "id": _values,
        "args": st.one_of(
            _values,
            st.fixed_dictionaries(
                {},
                optional={
                    "correlation": _values,
                    "External id": _values,
                    "device": _values,
                    "stream": _values,
                    "grid": _values,
                    "block": _values,
                    "Collective name": _values,
                },
            ),
        ),
    },
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(events=st.lists(_event, min_size=1, max_size=25))
def test_events_of_any_shape(tmp_path_factory, events):
    text = json.dumps({"schemaVersion": 1, "traceEvents": events})
    for placeholder, token in (("__inf__", "Infinity"), ("__nan__", "NaN"), ("__big__", "1e400")):
        text = text.replace(f'"{placeholder}"', token)
    root = tmp_path_factory.mktemp("h")
    case = fuzzing.Case("hypothesis", "", {"t.json": text.encode()}, "t.json")
    outcome, message = fuzzing.run_case(case, root, timeout_s=30)
    assert outcome in ("result", "error"), f"{outcome}: {message}\n{text[:2000]}"
