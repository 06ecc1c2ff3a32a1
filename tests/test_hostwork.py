"""What the host did while the GPU waited: CPU ops and Python frames by self time, on a real
torch.profiler recording (with_stack) of a CPU loop whose Python work is known."""

from __future__ import annotations

import numpy as np
import pytest

import tracedoc
from tracedoc.analyses.host.late_work import parents, work_in
from tracedoc.model import intervals as iv
from tracedoc.model import trace as M


def _busy_python(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def _record(path) -> None:
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    # Small matrices and a long pure-Python loop: the ops run inside the loop's caller, whose Python self
    # time includes them, so they must stay far below the loop even on a crowded machine (a 256 x 256 mm
    # and 60,000 iterations put the caller first once, at load 12).
    a = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU], with_stack=True, record_shapes=True) as prof:
        for _ in range(4):
            with torch.profiler.record_function("step"):
                _busy_python(300_000)  # pure Python: the frame that holds the thread
                for _ in range(3):
                    a = torch.mm(a, a).tanh()
    prof.export_chrome_trace(str(path))


def test_self_time_names_the_python_that_holds_the_thread(tmp_path):
    path = tmp_path / "cpu.pt.trace.json"
    _record(path)
    trace = tracedoc.load(path)
    c = trace.cpu_ops
    py = c["kind"] == M.PYTHON_FUNCTION
    assert py.any(), "with_stack recorded Python frames"
    steps = np.flatnonzero(c["name"] == trace.string_ids(lambda s: s == "step").nonzero()[0][0])
    spans = iv.union(c["start_ns"][steps], c["end_ns"][steps])
    # the thread that ran the loop (a CPU trace has no launching thread; other threads may wait meanwhile)
    main = (c["pid"][steps[:1]], c["tid"][steps[:1]])
    frames = work_in(trace, spans, (M.PYTHON_FUNCTION,), top=5, threads=main)
    # the innermost Python work, by self time: _busy_python, not the frames around it (this test, pytest)
    assert "_busy_python" in frames[0].name
    assert frames[0].calls == 4
    assert all(f.self_ns <= f.total_ns for f in frames)
    # its self time is most of its own time (it calls nothing recorded), and no frame's time exceeds the steps'
    assert frames[0].self_ns >= 0.9 * frames[0].total_ns
    assert max(f.total_ns for f in frames) <= iv.total(spans)
    ops = work_in(trace, spans, (M.CPU_OP,), top=5, threads=main)
    assert {"aten::mm", "aten::tanh"} <= {o.name for o in ops}


def test_parents_follow_the_recorded_nesting(tmp_path):
    """Python frames nest among themselves, and operators among themselves (a record_function range
    begins inside the __enter__ frame that opens it and outlives it, so the two kinds are nested apart)."""
    path = tmp_path / "cpu.pt.trace.json"
    _record(path)
    trace = tracedoc.load(path)
    c = trace.cpu_ops
    for kinds in ((M.PYTHON_FUNCTION,), (M.CPU_OP, M.USER_ANNOTATION)):
        rows = np.flatnonzero(np.isin(c["kind"], kinds))
        parent = parents(trace, rows)
        has = parent >= 0
        assert has.any()
        child, p = rows[has], parent[has]
        # every op with a parent lies inside it, on its thread; the outermost have none
        assert np.all(c["start_ns"][p] <= c["start_ns"][child]) and np.all(c["end_ns"][p] >= c["end_ns"][child])
        assert np.all(c["tid"][p] == c["tid"][child])
