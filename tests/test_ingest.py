"""Kineto reader: every generation and form, exact timestamps, chunking, and bad input."""

import gzip
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import tracedoc
from conftest import shared_traces
from trace_builder import TraceBuilder, training_steps
from tracedoc.errors import TraceError
from tracedoc.ingest.kineto import LABEL_ID_BASE, read_kineto
from tracedoc.model import trace as M


def small_trace(**kw) -> TraceBuilder:
    b = TraceBuilder(**kw)
    training_steps(b, steps=2, kernels=4)
    return b


def test_json_and_gz_and_bare_array_read_the_same(tmp_path):
    b = small_trace()
    plain = b.write(tmp_path / "t.json")
    gz = b.write(tmp_path / "t.pt.trace.json.gz")
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(b.to_dict()["traceEvents"]))
    bare_open = tmp_path / "bare_open.json"  # Chrome allows the closing bracket to be missing
    bare_open.write_text(json.dumps(b.to_dict()["traceEvents"])[:-1])
    traces = [tracedoc.load(p) for p in (plain, gz, bare, bare_open)]
    for t in traces:
        assert len(t.gpu_ops) == 8 and len(t.runtime) == 8
        assert np.array_equal(t.gpu_ops["start_ns"], traces[0].gpu_ops["start_ns"])
    assert traces[0].meta.rank == 0
    assert not traces[3].warnings or "ignored" not in traces[3].warnings[0]


def test_tiny_chunks_and_worker_processes_give_identical_tables(tmp_path):
    b = small_trace()
    b.cpu_op("labelled thread", 1.0, 2.0, tid="PyTorch Profiler")  # non-numeric tid, remapped across chunks
    b.cpu_op("negative tid", 1.0, 2.0, tid=-19360190)
    p = b.write(tmp_path / "t.json")
    whole = read_kineto(str(p), workers=1)
    for chunk, workers in ((64, 1), (300, 1), (4096, 1), (300, 2), (1000, 3)):
        part = read_kineto(str(p), chunk_bytes=chunk, workers=workers)
        for name in M.SCHEMAS:
            a, c = whole.tables[name], part.tables[name]
            assert len(a) == len(c), name
            for col in M.SCHEMAS[name]:
                av, cv = a[col], c[col]
                if col in ("name", "stack", "cat", "collective", "dtype", "pg_name"):
                    av = [whole.string(int(i)) for i in av]
                    cv = [part.string(int(i)) for i in cv]
                    assert av == cv
                elif col in ("pid", "tid"):  # text labels get ids from each read's own string table
                    assert label_text(whole, av) == label_text(part, cv), (name, col)
                else:
                    assert np.array_equal(av, cv, equal_nan=True), (name, col)


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="fork only")
def test_no_decode_workers_are_forked_while_another_thread_runs(tmp_path, monkeypatch):
    # A fork copies only the calling thread: with a notebook's or progress bar's thread about, the
    # file is decoded in this process (workers started as fresh interpreters would run the caller's
    # unguarded main script again).
    import threading

    from tracedoc.ingest.kineto import stream
    from tracedoc.ingest.kineto.source import _Source

    monkeypatch.setattr(stream, "PARALLEL_MIN_BYTES", 1)
    p = str(small_trace().write(tmp_path / "t.json"))
    src = _Source(p)
    try:
        with monkeypatch.context() as alone:  # threads other tests leave idle in this process do not count
            alone.setattr(threading, "active_count", lambda: 1)
            assert stream._worker_count(src, stream.CHUNK_BYTES) == min(4, os.cpu_count() or 1)
        stop = threading.Event()
        other = threading.Thread(target=stop.wait)
        other.start()
        try:
            assert stream._worker_count(src, stream.CHUNK_BYTES) == 1
            trace = read_kineto(p)
        finally:
            stop.set()
            other.join()
    finally:
        src.close()
    assert len(trace.gpu_ops) == 8 and len(trace.runtime) == 8


def test_gzip_source_inflates_no_more_than_each_read_asks(tmp_path, monkeypatch):
    # A highly compressed block must not inflate all at once (and be copied again on each later read):
    # the inflater never hands back more than the read asked for, and the pieces join to the file's
    # content, across two members and zero padding, and up to the cut of a truncated file.
    from tracedoc.ingest.kineto import source
    from tracedoc.ingest.kineto.source import _Source

    asked, inflated, real = [0], [], source._inflate.decompressobj

    class Counted:  # the decompressor, recording how much each call produced
        def __init__(self, wbits):
            self._z = real(wbits)

        def decompress(self, data, max_length=0):
            out = self._z.decompress(data, max_length)
            inflated.append((len(out), asked[0]))
            return out

        def __getattr__(self, name):
            return getattr(self._z, name)

    monkeypatch.setattr(source._inflate, "decompressobj", Counted)

    rng = np.random.default_rng(3)
    first = b"".join(b'{"name": "k%d", "ts": %d},' % (i % 7, i) for i in range(60_000))
    second = bytes(rng.integers(32, 127, 300_000, dtype=np.uint8))
    whole = gzip.compress(first) + gzip.compress(second) + b"\0" * 512
    path = tmp_path / "t.json.gz"
    for blob, want, cut in ((whole, first + second, None), (whole[: len(whole) // 3], None, "ends early")):
        path.write_bytes(blob)
        src = _Source(str(path))
        src._BLOCK = 4096
        got, sizes = [], [1, 5000, 65536, 300_000, 7]
        for i in range(10_000):
            n = asked[0] = sizes[i % len(sizes)]
            piece = src.read(n)
            assert len(piece) <= n
            if not piece:
                break
            got.append(piece)
        data = b"".join(got)
        src.close()
        assert inflated and all(out <= n for out, n in inflated)
        if want is not None:
            assert data == want and src.member_starts == [len(first)] and src.truncated_reason is None
            assert src.trailer_size == 0  # zero padding hides the trailer: the size is a hint only
        else:
            assert cut in src.truncated_reason and first.startswith(data) and len(data) > 0


def test_gzip_reads_the_same_with_zlib_where_isal_is_missing(tmp_path):
    # isal is the fast inflater; without its wheel the standard zlib reads the same trace, and a
    # cut-off or corrupt stream is reported the same way by either
    b = TraceBuilder()
    training_steps(b, steps=2, kernels=3)
    raw = json.dumps(b.to_dict()).encode()
    good, cut = tmp_path / "t.json.gz", tmp_path / "cut.json.gz"
    packed = gzip.compress(raw)
    good.write_bytes(packed)
    cut.write_bytes(packed[: len(packed) // 2])
    code = (
        "import sys, json\n"
        "if sys.argv[1] == 'zlib': sys.modules['isal'] = None\n"
        "from tracedoc.ingest.kineto import source, read_kineto\n"
        "t = read_kineto(sys.argv[2]); c = read_kineto(sys.argv[3])\n"
        "print(json.dumps([source._inflate.__name__, len(t.gpu_ops), int(t.gpu_ops['start_ns'].sum()), "
        "len(c.gpu_ops) + len(c.cpu_ops), c.meta.truncated]))"
    )
    out = {}
    for which in ("zlib", "default"):
        r = subprocess.run(
            [sys.executable, "-c", code, which, str(good), str(cut)], capture_output=True, text=True, timeout=120
        )
        assert r.returncode == 0, r.stderr
        out[which] = json.loads(r.stdout)
    assert out["zlib"][0] == "zlib"
    assert out["zlib"][1:] == out["default"][1:]
    assert out["zlib"][1] == 6 and out["zlib"][4]  # the cut file is read up to its cut and marked truncated


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="fork only")
def test_gzip_decode_workers_are_chosen_by_the_json_size_in_the_trailer(tmp_path, monkeypatch):
    import threading

    from tracedoc.ingest.kineto import stream
    from tracedoc.ingest.kineto.source import _Source

    p = tmp_path / "t.json.gz"
    raw = json.dumps(small_trace().to_dict()).encode()
    p.write_bytes(gzip.compress(raw))
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    for limit, parallel in ((len(raw), True), (len(raw) + 1, False)):
        monkeypatch.setattr(stream, "PARALLEL_MIN_GZIP_JSON_BYTES", limit)
        src = _Source(str(p))
        try:
            assert src.trailer_size == len(raw)
            assert stream._worker_count(src, stream.CHUNK_BYTES) == (min(4, os.cpu_count() or 1) if parallel else 1)
        finally:
            src.close()
    p.write_bytes(gzip.compress(raw)[:-4] + (2**32 - 1).to_bytes(4, "little"))  # no trailer a real file has
    src = _Source(str(p))
    src.close()
    assert src.trailer_size == 0


def label_text(trace, ids):
    return [trace.string(int(LABEL_ID_BASE - i)) if i <= LABEL_ID_BASE else int(i) for i in ids]


def test_minified_trace_with_tiny_chunks(tmp_path):
    b = small_trace()
    p = tmp_path / "min.json"
    p.write_text(json.dumps(b.to_dict(), separators=(",", ":")))
    t = read_kineto(str(p), chunk_bytes=100)
    assert len(t.gpu_ops) == 8


def test_ns_precision_absolute_timestamps_are_exact(tmp_path):
    p = tmp_path / "ns.json"
    p.write_text(
        '{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, '
        '"ts": 1712195495519689.047, "dur": 1.281, "args": {"device": 0, "stream": 7}}]}'
    )
    t = tracedoc.load(p)
    assert int(t.gpu_ops["start_ns"][0]) == 1712195495519689047
    assert int(t.gpu_ops["end_ns"][0]) == 1712195495519689047 + 1281


def test_relative_timestamps_keep_base_time(tmp_path):
    b = small_trace(base_time_ns=1_700_000_000_000_000_000)
    t = tracedoc.load(b.write(tmp_path / "rel.json"))
    assert t.meta.time_origin_ns == 1_700_000_000_000_000_000
    assert t.gpu_ops["start_ns"].max() < 10**13  # stored relative to the origin


def test_legacy_categories_string_tids_and_lowercase_external_id(tmp_path):
    b = small_trace(legacy=True)
    t = tracedoc.load(b.write(tmp_path / "legacy.json"))
    g = t.gpu_ops
    assert len(g) == 8 and set(g["stream"].tolist()) == {7}
    assert (g["external_id"] >= 0).all()
    assert (g["launch"] >= 0).all()
    assert len(t.cpu_ops) > 0 and (t.cpu_ops["kind"] == M.CPU_OP).any()


def test_launch_links_fall_back_to_flows_without_correlation(tmp_path):
    b = TraceBuilder()
    b.kernel("k1", 100.0, 5.0, link=False)
    b.kernel("k2", 200.0, 5.0, link=False)
    t = tracedoc.load(b.write(tmp_path / "flows.json"))
    launch = t.gpu_ops["launch"]
    assert (launch >= 0).all()
    # Each kernel links to the launch call 10 us before it (the builder's default).
    assert np.array_equal(t.runtime["start_ns"][launch], t.gpu_ops["start_ns"] - 10_000)


def test_cpu_depths(tmp_path):
    b = TraceBuilder()
    b.cpu_op("outer", 0.0, 100.0)
    b.cpu_op("mid", 10.0, 50.0)
    b.cpu_op("inner", 10.0, 20.0)
    b.cpu_op("sibling", 60.0, 70.0)
    b.cpu_op("other_thread", 15.0, 30.0, tid=2)
    t = tracedoc.load(b.write(tmp_path / "d.json"))
    depth = {t.string(int(n)): int(d) for n, d in zip(t.cpu_ops["name"], t.cpu_ops["depth"])}
    assert depth == {"outer": 0, "mid": 1, "inner": 2, "sibling": 1, "other_thread": 0}


def test_memcpy_kinds_from_names(tmp_path):
    b = TraceBuilder()
    b.memcpy(0.0, 10.0, "HtoD", "Pageable", "Device")
    b.memcpy(20.0, 10.0, "DtoH", "Device", "Pinned")
    t = tracedoc.load(b.write(tmp_path / "m.json"))
    g = t.gpu_ops
    assert g["copy_kind"].tolist() == [M.COPY_HTOD, M.COPY_DTOH]
    assert g["src_kind"].tolist() == [M.MEM_PAGEABLE, M.MEM_DEVICE]
    assert g["dst_kind"].tolist() == [M.MEM_DEVICE, M.MEM_PINNED]


@pytest.mark.parametrize(
    "name",
    [
        "mi250_rocm_minitoy.json.gz",
        "mtia_inference_rank0.json.gz",
        "cpu_only_gloo_rank34.pt.trace.json.gz",
        "h100_2026_format.json",
    ],
)
def test_other_platforms_read_without_error(name):
    t = tracedoc.load(shared_traces() / "kineto" / name)
    assert t.meta.events > 0
    if name.startswith("mtia"):
        assert "mtia_ccp_events" in t.meta.other_categories
        assert len(t.gpu_ops) == 0
    if name.startswith("mi250"):
        assert len(t.gpu_ops) > 0 and "AMD" in t.meta.devices[0].name


def test_dataframe_accessors():
    t = tracedoc.load(shared_traces() / "kineto" / "a100_alexnet.json.gz")
    k = t.kernels_df
    assert len(k) == 79
    assert {"name", "start_ns", "end_ns", "dur_ns", "stream"} <= set(k.columns)
    assert k["name"].astype(str).str.len().min() > 0


# -- bad input ----------------------------------------------------------------------------------


def run_cli(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def assert_clean_error(proc, *needles):
    assert proc.returncode != 0
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if line.startswith("tracedoc: error")]
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_not_json(tmp_path):
    p = tmp_path / "notes.json"
    p.write_text("hello, this is not json")
    assert_clean_error(run_cli("analyze", str(p)), str(p), "not JSON")


def test_json_that_is_not_a_trace(tmp_path):
    p = tmp_path / "config.json"
    p.write_text('{"lr": 0.1, "batch_size": 32}')
    assert_clean_error(run_cli("analyze", str(p)), str(p), "no traceEvents", "lr")


def test_empty_file(tmp_path):
    p = tmp_path / "empty.json"
    p.write_text("")
    assert_clean_error(run_cli("analyze", str(p)), str(p), "empty")


def test_empty_trace_events(tmp_path):
    p = tmp_path / "none.json"
    p.write_text('{"schemaVersion": 1, "traceEvents": []}')
    proc = run_cli("analyze", str(p))
    assert_clean_error(proc, str(p), "no events")


def test_corrupt_gzip(tmp_path):
    p = tmp_path / "bad.json.gz"
    p.write_bytes(b"\x1f\x8b\x08\x00" + os.urandom(200))
    assert_clean_error(run_cli("analyze", str(p)), str(p), "gzip")


def test_truncated_trace_reads_events_before_the_cut_and_warns(tmp_path):
    b = small_trace()
    data = json.dumps(b.to_dict(), indent=1).encode()
    full = tracedoc.load(b.write(tmp_path / "full.json"))
    cut = tmp_path / "cut.json"
    cut.write_bytes(data[: int(len(data) * 0.7)])
    t = tracedoc.load(cut)
    assert 0 < t.meta.events < full.meta.events
    assert t.meta.truncated
    proc = run_cli("analyze", str(cut))
    assert proc.returncode == 0, proc.stderr
    assert "warning" in proc.stderr and "cut" in proc.stderr and str(cut) in proc.stderr
    # Truncated gzip stream as well.
    gz = tmp_path / "cut.json.gz"
    gz.write_bytes(gzip.compress(data)[: int(len(gzip.compress(data)) * 0.7)])
    t = tracedoc.load(gz)
    assert 0 < t.meta.events < full.meta.events and t.meta.truncated


def test_nonexistent_path(tmp_path):
    assert_clean_error(run_cli("analyze", str(tmp_path / "nope.json")), "nope.json", "does not exist")


def test_directory_without_traces(tmp_path):
    (tmp_path / "README.txt").write_text("x")
    assert_clean_error(run_cli("analyze", str(tmp_path)), str(tmp_path), "no trace files")


def test_nsys_report_needs_export(tmp_path):
    p = tmp_path / "run.nsys-rep"
    p.write_bytes(b"\x00" * 10)
    assert_clean_error(run_cli("analyze", str(p)), "nsys export --type sqlite")


def test_python_api_raises_trace_error(tmp_path):
    p = tmp_path / "x.json"
    p.write_text("[1, 2")
    with pytest.raises(TraceError):
        tracedoc.load(p)


def test_sha256_is_computed_while_reading(tmp_path):
    import hashlib

    b = small_trace()
    for path, kw in (
        (b.write(tmp_path / "a.json"), {}),
        (b.write(tmp_path / "a.json.gz"), {}),
        (b.write(tmp_path / "b.json"), {"chunk_bytes": 300, "workers": 2}),
    ):
        t = read_kineto(str(path), **kw)
        assert t.meta.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    result = tracedoc.analyze(tmp_path / "a.json.gz")
    assert (
        result.hashes[str(tmp_path / "a.json.gz")] == hashlib.sha256((tmp_path / "a.json.gz").read_bytes()).hexdigest()
    )


def test_events_with_odd_args_keep_their_other_fields(tmp_path):
    p = tmp_path / "odd.json"
    p.write_text(
        '{"traceEvents": ['
        '{"ph": "X", "cat": "kernel", "name": "a", "pid": 0, "tid": 7, "ts": 1, "dur": 2, "args": "oops"},'
        '{"ph": "X", "cat": "kernel", "name": "b", "pid": 0, "tid": 7, "ts": 5, "dur": 2, "args": [1]},'
        '{"ph": "X", "cat": "kernel", "name": "c", "pid": 0, "tid": 7, "ts": 9, "dur": 2,'
        ' "args": {"correlation": 4, "stream": 9}}]}'
    )
    t = tracedoc.load(p)
    g = t.gpu_ops
    assert [t.string(int(n)) for n in g["name"]] == ["a", "b", "c"]
    assert g["correlation"].tolist() == [-1, -1, 4] and g["stream"].tolist() == [7, 7, 9]
    assert any("2 events have an args value" in w for w in t.warnings)


def test_array_of_non_events_is_an_error(tmp_path):
    p = tmp_path / "nums.json"
    p.write_text('{"traceEvents": [1, 2, 3]}')
    with pytest.raises(TraceError, match="not an event object"):
        tracedoc.load(p)


def test_intern_many_hands_out_ids_in_first_appearance_order():
    """ "b" is known (id 0); new texts get 1, 2, ... in the order they first appear; None and NaN
    are no name (-1); 1 and "1" are one text."""
    import math

    from tracedoc.model.trace import StringTable

    st = StringTable()
    st.intern("b")
    got = st.intern_many(["c", None, "b", 1, "c", math.nan, "1", "a"])
    assert got.dtype == np.int32 and got.tolist() == [1, -1, 0, 2, 1, -1, 2, 3]
    assert st.strings == ["b", "c", "1", "a"] and st.ids == {"b": 0, "c": 1, "1": 2, "a": 3}
    assert st.intern_many([]).size == 0
    assert st.intern_many(["d", None, "a", "d", "e"]).tolist() == [4, -1, 3, 4, 5]  # texts only
    assert st.strings == ["b", "c", "1", "a", "d", "e"] and st.ids["e"] == 5
    with pytest.raises(TypeError):
        st.intern_many([["not", "hashable"]])


def test_event_boundaries_found_backwards_are_the_boundary_pattern_matches():
    """The reader looks for event boundaries from the end of a chunk with rfind; it must find
    exactly the matches of the boundary pattern (a comma, white space, a brace), last first."""
    import random
    import re

    from tracedoc.ingest.kineto.cuts import cuts_backward, find_cut

    boundary = re.compile(rb",\s*\{")
    rng = random.Random(5)
    alphabet = b',{} \n\t\r\x0b\x0c"a:'
    for _ in range(2000):
        buf = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        want = [(m.start(), m.end() - 1) for m in boundary.finditer(buf)][::-1]
        assert list(cuts_backward(buf)) == want, buf
        assert find_cut(buf) == (want[0] if want else None)


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="fork only")
@pytest.mark.parametrize("compress", [False, True])
def test_the_end_of_a_file_decoded_by_workers_gives_the_same_tables(tmp_path, monkeypatch, compress):
    # The workers also decode the file's last chunk, cut at unverified boundaries; keys after the
    # events that look like a boundary (a list of objects) leave that piece to this process, whose
    # tables must come out as a sequential read's.
    from tracedoc.ingest.kineto import stream

    monkeypatch.setenv("TRACEDOC_DECODER", "python")  # worker processes: the pure-Python decoder's parallel path
    monkeypatch.setattr(stream, "PARALLEL_MIN_GZIP_BYTES", 1)
    monkeypatch.setattr(stream, "PARALLEL_MIN_GZIP_JSON_BYTES", 1)
    b = TraceBuilder()
    training_steps(b, steps=6, kernels=12)
    doc = b.to_dict()
    doc.pop("deviceProperties", None)
    doc["deviceProperties"] = [{"id": 0, "name": "GPU 0"}, {"id": 1, "name": "GPU 1"}]  # after traceEvents
    p = tmp_path / ("t.json.gz" if compress else "t.json")
    text = json.dumps(doc).encode()
    p.write_bytes(gzip.compress(text) if compress else text)
    whole = read_kineto(str(p), workers=1)
    pieces = []
    real = stream._tail_pieces

    def recorded(rest, *a):
        out = real(rest, *a)
        pieces.append((out[0], rest[out[1] :]))
        return out

    monkeypatch.setattr(stream, "_tail_pieces", recorded)
    for chunk in (1500, 4000, len(text) // 3):
        part = read_kineto(str(p), chunk_bytes=chunk, workers=2)
        for name in M.SCHEMAS:
            assert len(whole.tables[name]) == len(part.tables[name]), (chunk, name)
            for col in ("start_ns", "end_ns", "ts_ns", "external_id", "correlation"):
                if col in whole.tables[name].columns:
                    assert np.array_equal(whole.tables[name][col], part.tables[name][col]), (chunk, name, col)
        assert part.meta.devices == whole.meta.devices and part.meta.events == whole.meta.events
        assert part.warnings == whole.warnings
    assert any(len(done) > 1 for done, _ in pieces)  # the tail went to the workers in several pieces
    # and its last boundary lay inside the list after the events: that piece fell back to this process
    assert any(after.startswith(b'{"id": 1') for _, after in pieces)


def test_grid_and_block_read_as_integer_triples_whatever_their_shape(tmp_path):
    """Launch dimensions are read from their JSON text in one pass when every value is three integers, and
    value by value otherwise; either way a row holds the three integers, -1 where one is missing or is
    not an integer within int64."""
    grids = [[432, 1, 1], None, [8, 4], [[1, 2, 3]], "x", [7, 8, 9, 10], [2**63, 1, 1], [-3, 0, 2], [5, 6, 7]]
    expected = [
        (432, 1, 1),
        (-1, -1, -1),
        (8, 4, -1),
        (-1, -1, -1),
        (-1, -1, -1),
        (7, 8, 9),
        (-1, 1, 1),
        (-3, 0, 2),
        (5, 6, 7),
    ]
    events = []
    for i, g in enumerate(grids):
        args = {"device": 0, "stream": 7, "correlation": i + 1, "block": [128, 1, 1]}
        if g is not None:
            args["grid"] = g
        events.append(
            {"ph": "X", "cat": "kernel", "name": f"k{i}", "pid": 0, "tid": 7, "ts": 10.0 * i, "dur": 5.0, "args": args}
        )
    path = tmp_path / "t.json"
    clean = tmp_path / "clean.json"
    path.write_text(json.dumps({"traceEvents": events}))
    clean.write_text(json.dumps({"traceEvents": [e for e, g in zip(events, grids) if g in ([432, 1, 1], [5, 6, 7])]}))
    g = tracedoc.load(path).gpu_ops
    rows = list(zip(g["grid_x"].tolist(), g["grid_y"].tolist(), g["grid_z"].tolist()))
    assert rows == expected
    assert set(zip(g["block_x"].tolist(), g["block_y"].tolist(), g["block_z"].tolist())) == {(128, 1, 1)}
    g = tracedoc.load(clean).gpu_ops  # only lists of three: the one-pass reading
    assert list(zip(g["grid_x"].tolist(), g["grid_y"].tolist(), g["grid_z"].tolist())) == [(432, 1, 1), (5, 6, 7)]
