"""Memory a large trace's analysis frees is given back as it goes: the load's pieces once joined, and
after each analysis (``gcpause.release_free_memory``, ``pipeline.RELEASE_MIN_BYTES``)."""

from __future__ import annotations

import copy
import sys

import numpy as np
import pytest
from trace_builder import TraceBuilder, training_steps

from tracedoc import gcpause
from tracedoc.analyses import RANK_VALUES, analyze_trace, pipeline
from tracedoc.ingest import load
from tracedoc.model.trace import SCHEMAS, Table


def _rss_kb() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def _table(n: int, seed: int) -> Table:
    rng = np.random.default_rng(seed)
    return Table("gpu_ops", {c: rng.integers(0, 1000, n).astype(dt) for c, dt in SCHEMAS["gpu_ops"].items()})


def test_joining_pieces_that_are_consumed_gives_the_same_table_and_frees_the_pieces():
    parts = [_table(n, seed) for seed, n in enumerate((5, 0, 7, 3))]
    kept = copy.deepcopy(parts)
    joined = Table.concat("gpu_ops", parts, consume=True)
    expected = Table.concat("gpu_ops", kept)
    assert list(joined.columns) == list(expected.columns) == list(SCHEMAS["gpu_ops"])
    for c in expected.columns:
        assert joined[c].dtype == expected[c].dtype and np.array_equal(joined[c], expected[c])
    assert len(joined) == 15
    assert all(not p.columns for p in parts if p is not parts[1])  # the non-empty pieces were taken
    assert all(len(p) for p in kept if p is not kept[1])  # without consume the pieces stay whole


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_freed_heap_memory_goes_back_to_the_system():
    gcpause.release_free_memory()
    blocks = [bytearray(64 << 10) for _ in range(1600)]  # 100 MiB on the heap, below the mmap threshold
    for b in blocks:
        b[::4096] = b"\1" * len(b[::4096])  # touched: resident
    last = blocks[-1]  # the heap's top stays in use, so freeing the others cannot shrink it by itself
    del blocks
    before = _rss_kb()
    gcpause.release_free_memory()
    after = _rss_kb()
    assert before - after > 50 << 10, (before, after)
    assert last[0] == 1


def test_a_large_traces_analyses_give_back_memory_after_each_one(monkeypatch, tmp_path):
    b = TraceBuilder()
    training_steps(b, steps=4, kernels=6)
    trace = load(str(b.write(tmp_path / "t.json")))
    calls = []
    monkeypatch.setattr(pipeline, "release_free_memory", lambda: calls.append(1))
    small = analyze_trace(trace, workers=1)
    assert calls == []  # a small trace: nothing to give back
    monkeypatch.setattr(pipeline, "RELEASE_MIN_BYTES", 0)
    default = pipeline.default_request()
    order = pipeline.plan(default["metrics"], default["evidence"], RANK_VALUES + ("collective_calls",))
    big = analyze_trace(trace, workers=1)
    assert len(calls) == len(order) + 1  # before the first, then after each analysis (none in a child)
    assert big.metrics == small.metrics and big.evidence == small.evidence
