"""One truth for the reader's two paths: a trace decoded in pieces by worker processes (the pure-Python
decoder's parallel path) gives exactly the
tables, metadata and warnings of the same trace decoded chunk by chunk in this process, every column
compared value by value with its dtype and row order, on every shared trace and on damaged copies of
them (``fuzz_kineto``'s mutations).

``TRACEDOC_DECODE_WORKERS=1`` forces the in-process path everywhere (README: Environment); these tests
compare the two paths directly.
"""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from conftest import TRACES, shared_names

from tracedoc.errors import TracedocError
from tracedoc.ingest.kineto import LABEL_ID_BASE, read_kineto, stream
from tracedoc.ingest.kineto.columns import _STRING_COLS
from tracedoc.model import trace as M

SHARED = [f"kineto/{n}" for n in shared_names("kineto", "*.json*")] + [
    f"h100/{n}" for n in shared_names("h100", "*.json.gz")
]


@pytest.fixture(autouse=True)
def python_decoder(monkeypatch):
    """Worker processes decode only with the pure-Python decoder (the compiled one scans in threads
    instead: ``test_threaded_reader``)."""
    monkeypatch.setenv("TRACEDOC_DECODER", "python")


@pytest.fixture
def parallel_small_files(monkeypatch):
    """Worker processes for any file, so that small traces take the parallel path too."""
    for name in ("PARALLEL_MIN_BYTES", "PARALLEL_MIN_GZIP_BYTES", "PARALLEL_MIN_GZIP_JSON_BYTES"):
        monkeypatch.setattr(stream, name, 1)


def _as_text(trace, col: str, values: np.ndarray) -> list:
    """A column of string ids as the strings (ids depend on the order pieces were interned in)."""
    if col in _STRING_COLS:
        return [None if i < 0 else trace.strings[i] for i in values.tolist()]
    return [("label", trace.strings[LABEL_ID_BASE - v]) if v <= LABEL_ID_BASE else v for v in values.tolist()]


def assert_same_trace(a, b, what: str) -> None:
    assert sorted(a.strings) == sorted(b.strings), what
    assert list(a.tables) == list(b.tables), what
    for name in M.SCHEMAS:
        ta, tb = a.tables[name], b.tables[name]
        assert list(ta.columns) == list(tb.columns), (what, name)
        for col in ta.columns:
            x, y = ta[col], tb[col]
            assert x.dtype == y.dtype, (what, name, col, x.dtype, y.dtype)
            if col in _STRING_COLS or col in ("pid", "tid"):
                assert _as_text(a, col, x) == _as_text(b, col, y), f"{what}: {name}.{col}"
            else:
                np.testing.assert_array_equal(x, y, err_msg=f"{what}: {name}.{col}")
    assert a.warnings == b.warnings, what
    assert vars(a.meta) == vars(b.meta), what


def read_both(path: str, chunk: int):
    """The trace read in this process and by two workers (or the error each raised)."""
    out = []
    for workers in (1, 2):
        try:
            out.append(read_kineto(path, chunk_bytes=chunk, workers=workers))
        except TracedocError as exc:
            out.append(str(exc))
    return out


@pytest.mark.shared
@pytest.mark.parametrize("name", SHARED)
def test_every_shared_trace_reads_the_same_on_both_paths(name, parallel_small_files):
    path = str(TRACES / name)
    size = len(gzip.open(path).read()) if name.endswith(".gz") else (TRACES / name).stat().st_size
    chunk = max(16 << 10, size // 6)  # several pieces per worker, each at least a few events
    seq, par = read_both(path, chunk)
    assert not isinstance(seq, str), seq
    assert_same_trace(seq, par, name)


@pytest.mark.shared
def test_the_fuzz_corpus_reads_the_same_on_both_paths(tmp_path, parallel_small_files):
    """Damaged and hostile copies of the shared traces: the same salvage, warnings and errors."""
    from fuzz_kineto import KINETO_MUTATIONS
    from fuzzing import generate

    shared_traces = TRACES / "kineto"
    if not shared_traces.is_dir():
        pytest.skip("no shared Kineto traces")
    read = 0
    for i, case in enumerate(generate(41, 36, tuple(KINETO_MUTATIONS))):
        p = case.write(tmp_path / str(i))
        seq, par = read_both(str(p), 16 << 10)
        what = f"{case.cls}: {case.detail}"
        if isinstance(seq, str) or isinstance(par, str):
            assert seq == par, what
            assert "does not exist" not in seq
        else:
            assert_same_trace(seq, par, what)
            read += 1
    assert read >= 18  # most damaged copies are salvaged, not refused


def test_the_environment_can_force_decoding_in_this_process(tmp_path, monkeypatch, parallel_small_files):
    from trace_builder import TraceBuilder, training_steps

    from tracedoc.errors import UsageError

    b = TraceBuilder()
    training_steps(b, steps=4)
    path = b.write(tmp_path / "t.json")
    calls = []
    real = stream._read_parallel
    monkeypatch.setattr(stream, "_read_parallel", lambda *a: calls.append(a[4]) or real(*a))
    # A thread another test left running (a server's, a client's) would make the reader decode here rather
    # than fork (see ``_worker_count``): this test is about the environment variable, so it sees one thread.
    monkeypatch.setattr(stream.threading, "active_count", lambda: 1)
    read_kineto(str(path), chunk_bytes=4096)
    if (stream.os.cpu_count() or 1) >= 2:  # a small file decoded by worker processes (as configured above)
        assert calls and calls[-1] >= 2
    calls.clear()
    monkeypatch.setenv("TRACEDOC_DECODE_WORKERS", "1")
    one = read_kineto(str(path), chunk_bytes=4096)
    assert calls == []
    monkeypatch.delenv("TRACEDOC_DECODE_WORKERS")
    assert_same_trace(one, read_kineto(str(path), chunk_bytes=4096), "forced")
    monkeypatch.setenv("TRACEDOC_DECODE_WORKERS", "two")
    with pytest.raises(UsageError) as e:
        read_kineto(str(path), chunk_bytes=4096)
    assert "TRACEDOC_DECODE_WORKERS" in str(e.value)
