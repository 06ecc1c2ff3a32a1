"""The reader with the compiled decoder scanning chunks in threads (``ingest/kineto/threaded.py``) gives
exactly the tables of the same file read chunk by chunk in one thread: every column equal, string ids
included (the chunks are the same, so strings are interned in the same order), the same warnings and
metadata; where a cut taken ahead is not an event boundary, the verified path takes over from that
chunk and still cuts where it would have. Skipped where the compiled module is not built (the
pure-Python decoder holds the GIL and uses worker processes instead, tested in ``test_reader_paths``)."""

from __future__ import annotations

import gzip
import hashlib
import json
import threading

import numpy as np
import pytest
from conftest import TRACES
from test_reader_paths import SHARED, read_both
from trace_builder import TraceBuilder, training_steps

from tracedoc import infile
from tracedoc.ingest.kineto import read_kineto, stream
from tracedoc.model import trace as M

try:
    from tracedoc.ingest.kineto import _kscan
except ImportError:
    _kscan = None

pytestmark = pytest.mark.skipif(
    _kscan is None,
    reason="the compiled Kineto decoder is not built (no C compiler at install); "
    "without it the reader uses worker processes, tested in test_reader_paths",
)


@pytest.fixture(autouse=True)
def compiled(monkeypatch):
    monkeypatch.setenv("TRACEDOC_DECODER", "compiled")
    monkeypatch.setattr(stream.os, "cpu_count", lambda: 2)  # one scanning thread, whatever the machine
    # the file hashed in its own thread whatever its size, so every test here reads that way too (the
    # sequential read it is compared with hashes as it reads)
    monkeypatch.setattr(infile, "HASH_THREAD_MIN_BYTES", 0)


def assert_identical(a, b, what: str) -> None:
    assert a.strings == b.strings, what
    for name in M.SCHEMAS:
        ta, tb = a.tables[name], b.tables[name]
        assert list(ta.columns) == list(tb.columns), (what, name)
        for col in ta.columns:
            x, y = ta[col], tb[col]
            assert x.dtype == y.dtype, (what, name, col)
            assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f"), f"{what}: {name}.{col}"
    assert a.warnings == b.warnings, what
    assert vars(a.meta) == vars(b.meta), what


def threads_used(monkeypatch) -> list[int]:
    calls: list[int] = []
    real = stream.read_threaded
    monkeypatch.setattr(stream, "read_threaded", lambda *a: calls.append(a[4]) or real(*a))
    return calls


@pytest.mark.shared
@pytest.mark.parametrize("name", SHARED)
def test_every_shared_trace_gives_identical_tables_with_scanning_threads(name, monkeypatch):
    calls = threads_used(monkeypatch)
    seq, par = read_both(str(TRACES / name), 64 << 10)
    assert not isinstance(seq, str), seq
    assert calls == [1]
    assert_identical(seq, par, name)
    # the threads are gone: a fork after the load (the critical path's child) copies no scanner
    assert not [t for t in threading.enumerate() if t.name.startswith("tracedoc-scan")]


@pytest.mark.shared
def test_damaged_copies_give_the_same_salvage_with_scanning_threads(tmp_path):
    from fuzz_kineto import KINETO_MUTATIONS
    from fuzzing import generate

    if not (TRACES / "kineto").is_dir():
        pytest.skip("no shared Kineto traces")
    for i, case in enumerate(generate(43, 30, tuple(KINETO_MUTATIONS))):
        p = case.write(tmp_path / str(i))
        seq, par = read_both(str(p), 16 << 10)
        what = f"{case.cls}: {case.detail}"
        if isinstance(seq, str) or isinstance(par, str):
            assert seq == par, what
        else:
            assert_identical(seq, par, what)


def test_a_cut_inside_a_string_hands_over_to_the_verified_path(tmp_path, monkeypatch):
    # Names holding `, {` (as a boundary does): the last one before many a chunk's end lies inside a
    # string, so the cut taken ahead does not decode and the verified path reads on from that chunk.
    b = TraceBuilder()
    training_steps(b, steps=6, kernels=8)
    doc = b.to_dict()
    tricky = ', {"ph": "X", "name": "x"}' * 40
    for k, ev in enumerate(doc["traceEvents"]):
        if ev.get("ph") == "X" and k % 3 == 0:
            ev.setdefault("args", {})["note"] = f"op {k}{tricky}"
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    handed = []
    real = stream._read_sequential
    monkeypatch.setattr(stream, "_read_sequential", lambda *a: handed.append(1) or real(*a))
    calls = threads_used(monkeypatch)
    for chunk in (1500, 4096, 9000):
        handed.clear()
        seq = read_kineto(str(p), chunk_bytes=chunk, workers=1)
        handed.clear()
        par = read_kineto(str(p), chunk_bytes=chunk, workers=2)
        assert handed, chunk  # the threaded reader handed over at least once
        assert_identical(seq, par, f"chunk {chunk}")
    assert calls == [1, 1, 1]


def test_the_file_is_hashed_in_a_thread_that_is_gone_after_the_load(tmp_path, monkeypatch):
    b = TraceBuilder()
    training_steps(b, steps=4, kernels=6)
    plain = b.write(tmp_path / "t.json")
    raw = plain.read_bytes()
    packed = tmp_path / "t.json.gz"
    packed.write_bytes(gzip.compress(raw))
    cut = tmp_path / "cut.json"  # cut off mid-write: salvaged, and still the hash of the bytes on disk
    cut.write_bytes(raw[: len(raw) * 2 // 3])
    started = []
    real = infile._Hasher.__init__
    monkeypatch.setattr(infile._Hasher, "__init__", lambda self, sha: started.append(1) or real(self, sha))
    for p in (plain, packed, cut):
        started.clear()
        t = read_kineto(str(p), chunk_bytes=2048)
        assert started == [1], p.name
        assert t.meta.sha256 == hashlib.sha256(p.read_bytes()).hexdigest(), p.name
        assert t.meta.sha256 == read_kineto(str(p), chunk_bytes=2048, workers=1).meta.sha256, p.name
        assert not [th for th in threading.enumerate() if th.name == "tracedoc-hash"], p.name
    # below the size it is hashed as it is read, in this thread
    monkeypatch.setattr(infile, "HASH_THREAD_MIN_BYTES", len(raw) + 1)
    started.clear()
    assert read_kineto(str(plain), chunk_bytes=2048).meta.sha256 == hashlib.sha256(raw).hexdigest()
    assert started == []


def test_a_hash_that_fails_in_its_thread_fails_the_read():
    class Broken:
        def update(self, data):
            raise MemoryError("no room to hash")

    h = infile._Hasher(Broken())
    for _ in range(3 * infile._Hasher.MAX_QUEUED):  # the thread goes on taking blocks, so none waits forever
        h.update(b"x" * 4096)
    with pytest.raises(MemoryError, match="no room"):
        h.finish()
    assert not h.thread.is_alive()


def test_one_worker_reads_without_threads(tmp_path, monkeypatch):
    b = TraceBuilder()
    training_steps(b, steps=3)
    p = b.write(tmp_path / "t.json")
    calls = threads_used(monkeypatch)
    read_kineto(str(p), chunk_bytes=4096, workers=1)
    monkeypatch.setenv("TRACEDOC_DECODE_WORKERS", "1")
    read_kineto(str(p), chunk_bytes=4096)
    assert calls == []
    monkeypatch.delenv("TRACEDOC_DECODE_WORKERS")
    read_kineto(str(p), chunk_bytes=4096)
    assert calls == [1]


def test_a_small_file_is_read_in_small_chunks_to_the_same_trace(tmp_path, monkeypatch):
    """Below ``SMALL_FILE_BYTES`` of JSON the default chunk is ``SMALL_CHUNK_BYTES`` (the scanning thread
    starts sooner); the trace is the one larger chunks give, string for string."""
    from test_reader_paths import assert_same_trace

    assert stream.chunk_bytes_for(stream.SMALL_FILE_BYTES - 1) == stream.SMALL_CHUNK_BYTES
    assert stream.chunk_bytes_for(stream.SMALL_FILE_BYTES) == stream.CHUNK_BYTES
    b = TraceBuilder()
    training_steps(b, steps=40, kernels=200)
    p = b.write(tmp_path / "t.json")
    assert 3 * stream.SMALL_CHUNK_BYTES < p.stat().st_size < stream.SMALL_FILE_BYTES
    chunks = []
    real = stream._read
    monkeypatch.setattr(stream, "_read", lambda src, chunk, *a: chunks.append(chunk) or real(src, chunk, *a))
    small = read_kineto(str(p))
    assert chunks == [stream.SMALL_CHUNK_BYTES]
    assert_same_trace(small, read_kineto(str(p), chunk_bytes=stream.CHUNK_BYTES), "default chunk")
