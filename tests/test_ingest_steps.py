"""Ingest steps every reader shares: the launch linker, CPU nesting depth, and the name vocabulary."""

from __future__ import annotations

import numpy as np
from trace_builder import TraceBuilder

from tracedoc.analyses.host import dataloader
from tracedoc.ingest.depth import set_cpu_depths
from tracedoc.ingest.kineto import read_kineto
from tracedoc.ingest.launches import link_by_correlation
from tracedoc.ingest.steps import count_dataloader_ranges, mark_steps
from tracedoc.model import trace as M
from tracedoc.model.trace import Table, Trace

I64 = np.int64


def test_linker_keys_on_process_and_correlation():
    # Two processes both number their launches from 7: each GPU op belongs to its own process's call.
    calls_proc = np.array([100, 200, 100, 200], dtype=I64)
    calls_corr = np.array([7, 7, 8, 9], dtype=I64)
    gpu_proc = np.array([200, 100, 100, 200, 300], dtype=I64)
    gpu_corr = np.array([7, 7, 8, 8, 7], dtype=I64)
    got = link_by_correlation(gpu_proc, gpu_corr, calls_proc, calls_corr)
    # (200, 8) has no call, and process 300 made no calls
    assert got.tolist() == [1, 0, 2, -1, -1]


def test_linker_without_the_gpu_process_joins_on_correlation_alone():
    calls_proc = np.array([100, 100], dtype=I64)
    calls_corr = np.array([5, 6], dtype=I64)
    got = link_by_correlation(np.full(3, -1, dtype=I64), np.array([6, 5, -1], dtype=I64), calls_proc, calls_corr)
    assert got.tolist() == [1, 0, -1]


def test_kineto_trace_links_through_the_shared_linker(tmp_path):
    b = TraceBuilder()
    b.kernel("k0", 100.0, 10.0)
    b.kernel("k1", 200.0, 10.0)
    t = read_kineto(str(b.write(tmp_path / "t.json")), workers=1)
    g, r = t.gpu_ops, t.runtime
    assert (g["launch"] >= 0).all()
    assert (r["correlation"][g["launch"]] == g["correlation"]).all()


def _cpu_trace(rows: list[tuple[int, int, int, int]]) -> Trace:
    pid, tid, s, e = (np.array(col, dtype=I64) for col in zip(*rows))
    n = len(rows)
    cpu = Table(
        "cpu_ops",
        {
            "kind": np.full(n, M.USER_ANNOTATION),
            "pid": pid,
            "tid": tid,
            "name": np.zeros(n),
            "start_ns": s,
            "end_ns": e,
        },
    )
    return Trace(source="t", strings=["x"], tables={**M.empty_tables(), "cpu_ops": cpu})


def test_cpu_depth_counts_open_ancestors_per_thread():
    # thread 1: [0,100) holds [10,50) which holds [20,30); [60,90) is a sibling. thread 2 starts at 0 again.
    t = _cpu_trace([(1, 1, 0, 100), (1, 1, 10, 50), (1, 1, 20, 30), (1, 1, 60, 90), (1, 2, 15, 25)])
    set_cpu_depths(t)
    assert t.cpu_ops["depth"].tolist() == [0, 1, 2, 1, 0]


def test_cpu_depth_groups_nest_among_themselves():
    # group 1 ranges overlap group 0 ranges without nesting in them
    t = _cpu_trace([(1, 1, 0, 100), (1, 1, 10, 50), (1, 1, 40, 120), (1, 1, 45, 60)])
    set_cpu_depths(t, np.array([0, 0, 1, 1]))
    assert t.cpu_ops["depth"].tolist() == [0, 1, 0, 1]


def _named_trace(names: list[str]) -> Trace:
    n = len(names)
    cpu = Table(
        "cpu_ops",
        {
            "kind": np.full(n, M.USER_ANNOTATION),
            "pid": np.ones(n),
            "tid": np.ones(n),
            "name": np.arange(n),
            "start_ns": np.arange(n) * 100,
            "end_ns": np.arange(n) * 100 + 50,
        },
    )
    return Trace(source="t", strings=list(names), tables={**M.empty_tables(), "cpu_ops": cpu})


def test_one_dataloader_vocabulary_for_readers_and_analyses():
    names = [
        "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
        "enumerate(DataPipe)#x.__next__",
        "my_dataloader_wait",
        "datapipes/iter/combinatorics.py(12): shuffle",
        "forward",
    ]
    t = _named_trace(names)
    spans, _, seen = dataloader.dataloader_spans(t)
    # what the reader counts is what the idle analysis attributes to the input pipeline
    assert count_dataloader_ranges(t) == len(seen) == 3
    assert "forward" not in seen and not any("datapipes/" in s for s in seen)


def test_mark_steps_prefers_profiler_steps_then_the_most_frequent_family():
    t = _named_trace(["iteration 1", "iteration 2", "train_step 1", "train_step 2", "train_step 3", "forward"])
    mark_steps(t, None)
    assert t.meta.step_names == ["train_step 1", "train_step 2", "train_step 3"]
    t = _named_trace(["ProfilerStep#1", "train_step 1", "train_step 2"])
    mark_steps(t, None)
    assert t.meta.step_names == ["ProfilerStep#1"]
    t = _named_trace(["fwd 1", "fwd 2", "train_step 1"])
    mark_steps(t, "fwd")
    assert t.meta.step_names == ["fwd 1", "fwd 2"]
