"""Analyses run in a forked child beside the others: the same result as in one process, a failed
child recomputed here, and no child where forking is unsafe or pointless."""

from __future__ import annotations

import copy
import json
import os
import sys
import threading

import numpy as np
import pytest
from trace_builder import TraceBuilder, training_steps

from tracedoc.analyses import analyze_trace, read_rank
from tracedoc.analyses.core import offload as O
from tracedoc.analyses.core.registry import ANALYSES, ContractError
from tracedoc.ingest import load

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="analyses are offloaded on Linux only")


@pytest.fixture
def trace(tmp_path):
    b = TraceBuilder()
    training_steps(b, steps=6, kernels=12, dataloader_us=2_000.0)
    return load(str(b.write(tmp_path / "t.json")))


@pytest.fixture
def children(monkeypatch):
    """Offload whatever the size, and record each child started: the analysis it ran and whether its
    result came back (False: the analysis was run again here). (Threads other tests leave idle in this
    process, such as a capture loop, would keep any child from starting.)"""
    monkeypatch.setattr(O, "OFFLOAD_MIN_OPS", 0)
    monkeypatch.setattr(O.threading, "active_count", lambda: 1)
    started = []
    start, result = O._Child.__init__, O._Child.result

    def spy_start(self, entry, trace, inputs):
        start(self, entry, trace, inputs)
        self.record = {"analysis": entry.name, "returned": None, "in_file": self.in_file}
        started.append(self.record)

    def spy_result(self):
        produced = result(self)
        self.record["returned"] = produced is not None
        return produced

    monkeypatch.setattr(O._Child, "__init__", spy_start)
    monkeypatch.setattr(O._Child, "result", spy_result)
    return started


def comparable(rank) -> str:
    """The rank's whole JSON object, as a report would carry it."""
    return json.dumps(rank.to_dict(), sort_keys=True)


OFFLOADED = ["critical_path.step_critical_paths", "flops.roofline.op_roofline"]


def test_offloaded_analyses_equal_the_ones_computed_here(trace, children):
    here = read_rank(copy.deepcopy(trace), workers=1)
    assert children == []
    apart = read_rank(copy.deepcopy(trace))
    assert sorted(c["analysis"] for c in children) == OFFLOADED
    assert all(c["returned"] for c in children)
    assert apart.result.critical_path.available and len(apart.result.critical_path.steps) == 6
    assert apart.result.evidence["roofline"]
    assert comparable(apart.result) == comparable(here.result)
    assert apart.result == here.result
    # metrics, tables and warnings in the order they have when every analysis runs here
    assert list(apart.result.metrics) == list(here.result.metrics)
    assert list(apart.result.evidence) == list(here.result.evidence)
    assert apart.result.warnings == here.result.warnings
    # the overlay, not in the JSON
    a, h = apart.overlay.critical_path.segments, here.overlay.critical_path.segments
    assert a.keys() == h.keys() and all(np.array_equal(a[k], h[k]) for k in a)
    assert a["start_ns"].size


@pytest.mark.parametrize("transport", ["memfd", "pipe", "refused"])
def test_the_answer_comes_back_whole_through_a_file_or_a_pipe(trace, children, monkeypatch, transport):
    """Where Linux has no in-memory files (or refuses one) the answer comes through a pipe: the same result either way,
    each child's answer read whole (the pipe's 64 KB at a time while the child writes)."""
    if transport == "pipe":
        monkeypatch.delattr(os, "memfd_create", raising=False)
    elif transport == "refused":

        def refused(*args):
            raise PermissionError(1, "Operation not permitted")

        monkeypatch.setattr(os, "memfd_create", refused, raising=False)
    elif not hasattr(os, "memfd_create"):
        pytest.skip("this Python has no os.memfd_create")
    here = read_rank(copy.deepcopy(trace), workers=1)
    apart = read_rank(copy.deepcopy(trace))
    assert sorted(c["analysis"] for c in children) == OFFLOADED and all(c["returned"] for c in children)
    assert all(c["in_file"] == (transport == "memfd") for c in children)
    assert comparable(apart.result) == comparable(here.result)


def test_a_child_that_fails_is_recomputed_here(trace, children, monkeypatch):
    parent = os.getpid()
    entry = ANALYSES["critical_path.step_critical_paths"]
    real = entry.run

    def only_here(t, inputs):
        if os.getpid() != parent:
            os._exit(3)  # dies without a result, as a killed child would
        return real(t, inputs)

    monkeypatch.setitem(ANALYSES, entry.name, entry.__class__(**{**entry.__dict__, "run": only_here}))
    expected = analyze_trace(copy.deepcopy(trace), workers=1)
    got = analyze_trace(copy.deepcopy(trace))
    assert {c["analysis"]: c["returned"] for c in children} == {OFFLOADED[0]: False, OFFLOADED[1]: True}
    assert comparable(got) == comparable(expected)


def test_an_error_in_an_offloaded_analysis_surfaces_as_it_would_here(trace, children, monkeypatch):
    entry = ANALYSES["critical_path.step_critical_paths"]

    def broken(t, inputs):
        raise ContractError("broken on purpose")

    monkeypatch.setitem(ANALYSES, entry.name, entry.__class__(**{**entry.__dict__, "run": broken}))
    with pytest.raises(ContractError, match="broken on purpose"):
        analyze_trace(copy.deepcopy(trace))
    assert {c["analysis"]: c["returned"] for c in children}[entry.name] is False  # any other child: stopped


def test_no_child_for_one_worker_a_small_trace_or_a_threaded_caller(trace, monkeypatch):
    assert not O.worth_offloading(trace, 1)
    assert not O.worth_offloading(trace, None)  # a few hundred ops: below OFFLOAD_MIN_OPS
    monkeypatch.setattr(O, "OFFLOAD_MIN_OPS", 0)
    with monkeypatch.context() as alone:
        alone.setattr(O.threading, "active_count", lambda: 1)
        assert O.worth_offloading(trace, None) == ((os.cpu_count() or 1) > 1)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert not O.worth_offloading(trace, None)
    finally:
        stop.set()
        other.join()


def test_no_child_when_the_memory_free_would_not_hold_it(trace, monkeypatch):
    from tracedoc.ingest import memory as MEM

    monkeypatch.setattr(O, "OFFLOAD_MIN_OPS", 0)
    monkeypatch.setattr(O.threading, "active_count", lambda: 1)
    if (os.cpu_count() or 1) < 2 or not O.sys.platform.startswith("linux"):
        pytest.skip("no child is forked here whatever the memory")
    need = O.CHILD_NEED_PER_TABLE_BYTE * sum(t.nbytes for t in trace.tables.values())
    monkeypatch.setattr(MEM, "free_memory", lambda: MEM.Free(need, ["MemAvailable"]))
    assert O.worth_offloading(trace, None)
    monkeypatch.setattr(MEM, "free_memory", lambda: MEM.Free(need - 1, ["MemAvailable"]))
    assert not O.worth_offloading(trace, None)
    monkeypatch.setattr(MEM, "free_memory", lambda: MEM.Free(None, []))  # not known: as before
    assert O.worth_offloading(trace, None)


def test_the_childs_answer_is_plain_data_rebuilt_into_declared_types():
    """What comes back through the pipe is decoded as MessagePack into the analysis's declared value types:
    a pickle, an array of objects or an undeclared value is refused (the parent then recomputes), never run."""
    import pickle

    import msgspec

    from tracedoc.analyses.critical_path import CriticalPath, PathOverlay
    from tracedoc.analyses.core.registry import Produced

    types = {"critical_path": CriticalPath, "critical_path_overlay": PathOverlay}
    overlay = PathOverlay({"start_ns": np.arange(3, dtype=np.int64)}, ["main"], [("cpu", 1, 2)])
    sent = Produced(
        values={"critical_path": CriticalPath(available=False, reason="r"), "critical_path_overlay": overlay}
    )
    back = O.decode(O.encode(sent), types)
    assert back.values["critical_path"] == sent.values["critical_path"]
    got = back.values["critical_path_overlay"]
    assert type(got) is PathOverlay and got.chain_keys == [("cpu", 1, 2)]
    assert got.segments["start_ns"].dtype == np.int64 and got.segments["start_ns"].tolist() == [0, 1, 2]
    with pytest.raises((msgspec.DecodeError, ValueError)):
        O.decode(pickle.dumps(sent), types)
    with pytest.raises((msgspec.DecodeError, ValueError)):
        O.decode(O.encode(Produced(values={"critical_path": sent.values["critical_path"]})), types)
    forged = msgspec.msgpack.Ext(1, msgspec.msgpack.encode(("|O", [1], b"\x00" * 8)))
    answer = {
        "metrics": {},
        "evidence": {},
        "values": {"critical_path": {"available": False}, "x": forged},
        "warnings": [],
    }
    with pytest.raises((msgspec.DecodeError, ValueError)):
        O.decode(msgspec.msgpack.encode(answer), types)
    with pytest.raises(TypeError):
        O.encode(Produced(values={"critical_path": object()}))
