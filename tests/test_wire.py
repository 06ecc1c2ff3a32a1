"""What a rank task sends back (``tracedoc.fanout.wire``): plain data, read back equal, never code.

Covered: real rank results (a built job's ranks, and a shared trace's) come back equal, job tables
included (arrays by dtype and value, writable); cut, altered and forged bytes are refused with one
line and cost only their file in a fan-out; a forged array dtype or a pickle is refused, never run;
no ``pickle`` on the fan-out's path.
"""

from __future__ import annotations

import ast
import pickle
import re
import zlib
from pathlib import Path

import msgspec
import numpy as np
import pytest
from conftest import shared_traces
from job_builder import write_job

from tracedoc.fanout import tasks as ranktask
from tracedoc.fanout import wire

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def job_reads(tmp_path_factory):
    d = write_job(tmp_path_factory.mktemp("wire") / "run", n_ranks=2, steps=3, slow={1: 0.2})
    out = []
    for f in sorted(d.iterdir()):
        reads, failure = ranktask._guarded(str(f), {}, None, None)
        assert failure is None and reads
        out.extend(reads)
    return out


def assert_same_reads(sent, got):
    assert len(sent) == len(got)
    for a, b in zip(sent, got):
        assert b.result == a.result
        assert b.result.to_dict() == a.result.to_dict()
        assert b.sha256 == a.sha256 and b.overlay is None
        assert (a.tables is None) == (b.tables is None)
        if a.tables is None:
            continue
        for name in ("rank", "source", "groups", "types", "dtypes", "info"):
            assert getattr(b.tables, name) == getattr(a.tables, name), name
        for cols in ("collectives", "steps"):
            x, y = getattr(a.tables, cols), getattr(b.tables, cols)
            assert list(y) == list(x)
            for k in x:
                assert y[k].dtype == x[k].dtype and np.array_equal(y[k], x[k]), (cols, k)
                assert y[k].flags.writeable


def test_a_built_jobs_rank_results_come_back_equal(job_reads):
    assert any(r.tables is not None and len(r.tables) for r in job_reads)
    assert any(isinstance(v, tuple) for r in job_reads for v in r.tables.info.values())  # span_ns stays a tuple
    stripped = [r._replace(overlay=None) for r in job_reads]
    got, failure = wire.unpack(wire.pack(stripped, None))
    assert failure is None
    assert_same_reads(stripped, got)


def test_a_shared_traces_rank_result_comes_back_equal():
    path = shared_traces() / "kineto" / "a100_2rank_nccl_rank0.json.gz"
    reads, failure = ranktask._guarded(str(path), {}, None, None)
    assert reads[0].result.timeline  # op excerpts: the bulk of what travels
    got, _ = wire.unpack(wire.pack(reads, failure))
    assert_same_reads(reads, got)
    from tracedoc.model.evidence import ROW_TYPES

    typed = [name for name in got[0].result.evidence if name in ROW_TYPES and got[0].result.evidence[name]]
    assert typed  # typed evidence rows travel as plain rows and come back as their row types
    for name in typed:
        assert all(type(row) is ROW_TYPES[name] for row in got[0].result.evidence[name]), name


def test_a_failure_comes_back_as_sent():
    failure = {"source": "/x/rank3.json", "error": "/x/rank3.json: not a trace"}
    assert wire.unpack(wire.pack([], failure)) == ([], failure)


def test_free_form_values_keep_tuples_numpy_scalars_and_key_order():
    value = {
        "rows": [{"b": 1, "a": "k"}, {"b": 2, "a": "k"}, {"b": (3, 4), "a": "j"}],
        "mixed": [{"a": 1}, {"b": 2}],
        "t": (1, [2, (3,)]),
        "n": np.int64(7),
    }
    back = msgspec.msgpack.decode(wire._ENCODER.encode(wire._tagged(value)), ext_hook=wire._ext_hook)
    assert back == value
    assert [list(r) for r in back["rows"]] == [["b", "a"]] * 3
    assert type(back["t"]) is tuple and type(back["t"][1][1]) is tuple
    assert type(back["n"]) is np.int64


def _raw(blob: bytes) -> bytes:
    return zlib.decompress(blob)


@pytest.mark.parametrize("damage", ["cut", "flipped", "not_deflate", "empty", "pickle", "extra_field"])
def test_damaged_or_forged_bytes_are_one_clear_error(job_reads, damage):
    blob = wire.pack([job_reads[0]._replace(overlay=None)], None)
    if damage == "cut":
        bad = blob[: len(blob) // 2]
    elif damage == "flipped":  # a valid stream whose payload was altered
        raw = bytearray(_raw(blob))
        raw[len(raw) // 3 : len(raw) // 3 + 64] = b"\xc1" * 64  # 0xc1: never used by MessagePack
        bad = zlib.compress(bytes(raw))
    elif damage == "not_deflate":
        bad = b"hello, this is not deflate"
    elif damage == "empty":
        bad = b""
    elif damage == "pickle":  # the old format, or a payload that would run code under pickle
        bad = zlib.compress(pickle.dumps(([], {"source": "x", "error": "y"})))
    else:
        bad = zlib.compress(msgspec.msgpack.encode([wire.VERSION, [], None, "more"]))
    with pytest.raises(wire.WireError) as err:
        wire.unpack(bad)
    msg = str(err.value)
    assert msg and "\n" not in msg and "Traceback" not in msg


def _forged_array(read, dtype: str, shape: list[int], raw: bytes) -> bytes:
    """A real answer with one forged array among the rank's metrics (free-form values)."""
    answer = msgspec.msgpack.decode(_raw(wire.pack([read], None)))  # ext values stay as they are
    answer[1][0][1]["metrics"]["forged"] = msgspec.msgpack.Ext(
        wire.EXT_ARRAY, msgspec.msgpack.encode((dtype, shape, raw))
    )
    return zlib.compress(msgspec.msgpack.encode(answer))


@pytest.mark.parametrize(
    "dtype, shape, raw, says",
    [
        ("|O", [1], b"\0" * 8, "dtype '|O'"),  # object arrays would unpickle their items
        ("<i8", [3], b"\0" * 8, "in 8 bytes"),
        ("<i8", [-1], b"", "shape [-1]"),
    ],
)
def test_forged_arrays_are_refused(job_reads, dtype, shape, raw, says):
    read = job_reads[0]._replace(overlay=None)
    assert wire.unpack(_forged_array(read, "<i8", [1], b"\0" * 8))[0][0].result.metrics["forged"].tolist() == [0]
    with pytest.raises(wire.WireError, match=re.escape(says)):
        wire.unpack(_forged_array(read, dtype, shape, raw))


def test_a_damaged_answer_costs_only_its_file():
    done = ranktask.FanOut([])
    garbage, failed = b"\x78\x9c garbage", wire.pack([], {"source": "/run/rank1.json", "error": "bad"})
    ranktask.collect(done, "/run/rank0.json", garbage)
    ranktask.collect(done, "/run/rank1.json", failed)
    assert [f["source"] for f in done.failed] == ["/run/rank0.json", "/run/rank1.json"]
    assert done.failed[0]["error"].startswith("/run/rank0.json: not read: what its worker sent back cannot be read")
    assert done.received == {"/run/rank0.json": len(garbage), "/run/rank1.json": len(failed)}


def test_a_result_plain_data_cannot_carry_costs_only_its_file(job_reads, monkeypatch):
    read = job_reads[0]._replace(overlay=None)
    odd = read._replace(result=msgspec.structs.replace(read.result, metrics={**read.result.metrics, "x": 1 << 70}))
    monkeypatch.setattr(ranktask, "_guarded", lambda *a: ([odd], None))
    done = ranktask.FanOut([])
    ranktask.collect(done, "/run/rank0.json", ranktask.rank_task("/run/rank0.json", {}, None, None))
    assert done.outputs == []
    assert done.failed[0]["error"].startswith("/run/rank0.json: not read: its results cannot be sent back")


@pytest.mark.parametrize(
    "module",
    ["tracedoc/fanout/pool.py", "tracedoc/fanout/tasks.py", "tracedoc/fanout/wire.py", "tracedoc/fanout/cluster.py"],
)
def test_no_pickle_on_the_fan_outs_path(module):
    tree = ast.parse((ROOT / module).read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {m for m in names if m.split(".")[0] in ("pickle", "cPickle", "dill", "cloudpickle", "marshal")}
