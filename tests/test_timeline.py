"""Timeline excerpts: runs of ops narrower than a pixel merge into one block."""

import numpy as np

from tracedoc.analyses.gputime.timeline import _downsample
from tracedoc.model.trace import KERNEL, MEMCPY, Table, Trace


def test_short_ops_merge_into_runs_worked_by_hand():
    ops = [  # start, end, kind, name
        (0, 100, KERNEL, "A"),
        (105, 108, KERNEL, "b"),
        (110, 112, MEMCPY, "c"),
        (115, 118, MEMCPY, "d"),
        (200, 200, KERNEL, "e"),
        (300, 400, KERNEL, "f"),
        (401, 403, KERNEL, "g"),
        (500, 502, MEMCPY, "h"),
        (505, 507, KERNEL, "i"),
    ]
    names = [o[3] for o in ops]
    gpu = Table(
        "gpu_ops",
        {
            "start_ns": np.array([o[0] for o in ops]),
            "end_ns": np.array([o[1] for o in ops]),
            "kind": np.array([o[2] for o in ops]),
            "name": np.arange(len(ops)),
        },
    )
    trace = Trace(source="hand", strings=names, tables={"gpu_ops": gpu})
    comm = np.zeros(len(ops), dtype=bool)
    comm[6] = True  # "g" is a communication kernel
    got = _downsample(trace, np.arange(len(ops)), comm, 0, 1000, 10)
    assert got == [
        {"start": 0, "end": 100, "name": "A", "cat": "compute"},
        # b, c, d: each under 10 ns and starting under 10 ns after the one before; two copies outvote a kernel
        {"start": 105, "end": 118, "name": "3 short ops", "cat": "memcpy", "merged": 3},
        {"start": 200, "end": 201, "name": "e", "cat": "compute"},  # alone: drawn at least 1 ns wide
        {"start": 300, "end": 400, "name": "f", "cat": "compute"},
        {"start": 401, "end": 403, "name": "g", "cat": "communication"},  # a wide op before it starts no run
        {"start": 500, "end": 507, "name": "2 short ops", "cat": "compute", "merged": 2},  # a tie: the lower code
    ]
    assert _downsample(trace, np.zeros(0, dtype=np.int64), comm, 0, 1000, 10) == []
