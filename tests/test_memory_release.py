"""Memory a large trace's analysis frees is given back: the load's pieces as each table is joined, then
before the first analysis and before a child is forked (``gcpause.release_free_memory``,
``gcpause.RELEASE_MIN_BYTES``)."""

from __future__ import annotations

import copy
import os
import sys

import numpy as np
import pytest
from trace_builder import TraceBuilder, training_steps

from tracedoc import gcpause
from tracedoc.analyses import analyze_trace
from tracedoc.analyses.core import pipeline
from tracedoc.analyses.core import offload as O
from tracedoc.errors import TraceError
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


def test_a_large_traces_analyses_start_from_live_memory_and_so_does_a_child(monkeypatch, tmp_path):
    b = TraceBuilder()
    training_steps(b, steps=4, kernels=6)
    trace = load(str(b.write(tmp_path / "t.json")))
    calls = []
    monkeypatch.setattr(pipeline, "release_free_memory", lambda: calls.append("analyses"))
    monkeypatch.setattr(O, "release_free_memory", lambda: calls.append("child"))
    small = analyze_trace(trace, workers=1)
    assert calls == []  # a small trace: nothing to give back
    monkeypatch.setattr(pipeline, "RELEASE_MIN_BYTES", 0)
    big = analyze_trace(trace, workers=1)
    assert calls == ["analyses"]  # once, before the first analysis; no child with workers=1
    assert big.metrics == small.metrics and big.evidence == small.evidence
    if not sys.platform.startswith("linux") or (os.cpu_count() or 1) < 2:
        return
    calls.clear()
    monkeypatch.setattr(O, "OFFLOAD_MIN_OPS", 0)
    monkeypatch.setattr(O.threading, "active_count", lambda: 1)
    monkeypatch.setattr(O, "child_fits", lambda trace: True)
    forked = analyze_trace(trace)
    assert calls == ["analyses", "child", "child"]  # and again just before each child is forked
    assert forked.metrics == small.metrics


def _hugepages_now(switch) -> bool:
    before = switch(True)
    switch(before)
    return before


def test_an_analysis_keeps_numpy_off_huge_pages_and_gives_the_setting_back(tmp_path, monkeypatch):
    """While a trace is analysed numpy asks for no 2 MB pages (zeroed and copied whole after a fork);
    the caller's setting comes back after, also when the analysis fails."""
    switch = gcpause._hugepage_switch()
    if switch is None:
        pytest.skip("this numpy has no huge-page switch")
    import tracedoc.api as api

    seen = []
    read_ranks = api.read_ranks

    def recording(*args, **kwargs):
        seen.append(_hugepages_now(switch))
        return read_ranks(*args, **kwargs)

    monkeypatch.setattr(api, "read_ranks", recording)
    b = TraceBuilder()
    training_steps(b, steps=2)
    path = b.write(tmp_path / "t.json")
    for caller_setting in (True, False):
        switch(caller_setting)
        api.analyze(path)
        assert seen[-1] is False and _hugepages_now(switch) is caller_setting
    switch(True)
    with pytest.raises(TraceError):
        api.analyze(tmp_path / "missing.json")
    assert _hugepages_now(switch) is True
