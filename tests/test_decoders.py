"""One truth for the Kineto reader's two decoders: the compiled scan (``_kscan``, used when built) and the
pure-Python one (msgspec structs) give the same tables, metadata and warnings, column by column with dtypes
and row order, on every shared trace, on the fuzz corpus and on hand-made events of every odd kind, in this
process and in worker processes. Chunks the scan is not sure to read exactly are declined (each reason
below) and decoded by msgspec. ``TRACEDOC_DECODER`` chooses (README: Environment).

Skipped where the compiled module is not built (no C compiler at install); CI builds it and runs the whole
suite once more with ``TRACEDOC_DECODER=python``.
"""

from __future__ import annotations

import gzip
import json
import random

import msgspec
import numpy as np
import pytest
from conftest import TRACES
from test_reader_paths import SHARED, assert_same_trace, parallel_small_files  # noqa: F401 - a fixture

from tracedoc.errors import TracedocError, UsageError
from tracedoc.ingest.kineto import read_kineto, rows

try:
    from tracedoc.ingest.kineto import _kscan
except ImportError:
    _kscan = None

pytestmark = pytest.mark.skipif(
    _kscan is None,
    reason="the compiled Kineto decoder is not built (no C compiler "
    "at install); the pure-Python decoder is tested by the rest of the suite",
)


class Counted:
    """``rows._load_scan`` counting the chunks the scan took and declined (in this process)."""

    def __init__(self, monkeypatch):
        self.took = self.declined = 0
        real = rows._load_scan

        def load():
            scan = real()
            if scan is None:
                return None

            def counted(*args):
                res = scan(*args)
                if res is None:
                    self.declined += 1
                else:
                    self.took += 1
                return res

            return counted

        monkeypatch.setattr(rows, "_load_scan", load)


def read_all(path: str, chunk: int, monkeypatch) -> dict:
    """The trace by each decoder, in this process and by two workers (or the error each raised)."""
    out = {}
    for decoder in ("python", "compiled"):
        monkeypatch.setenv("TRACEDOC_DECODER", decoder)
        for workers in (1, 2):
            try:
                out[decoder, workers] = read_kineto(path, chunk_bytes=chunk, workers=workers)
            except TracedocError as exc:
                out[decoder, workers] = str(exc)
    return out


def assert_all_same(out: dict, what: str) -> None:
    want = out["python", 1]
    for key, got in out.items():
        if isinstance(want, str) or isinstance(got, str):
            assert got == want, (what, key)
        else:
            assert_same_trace(want, got, f"{what} {key}")


@pytest.mark.shared
def test_every_shared_trace_reads_the_same_with_both_decoders(monkeypatch, parallel_small_files):  # noqa: F811
    counted = Counted(monkeypatch)
    for name in SHARED:
        path = str(TRACES / name)
        size = len(gzip.open(path).read()) if name.endswith(".gz") else (TRACES / name).stat().st_size
        out = read_all(path, max(16 << 10, size // 6), monkeypatch)
        assert not isinstance(out["python", 1], str), out["python", 1]
        assert_all_same(out, name)
    # the compiled scan reads the real traces' chunks itself, declining (almost) none
    assert counted.took >= 50 and counted.declined <= counted.took // 20, (counted.took, counted.declined)


@pytest.mark.shared
def test_the_fuzz_corpus_reads_the_same_with_both_decoders(tmp_path, monkeypatch, parallel_small_files):  # noqa: F811
    from fuzz_kineto import KINETO_MUTATIONS
    from fuzzing import generate

    if not (TRACES / "kineto").is_dir():
        pytest.skip("no shared Kineto traces")
    counted = Counted(monkeypatch)
    for i, case in enumerate(generate(41, 36, tuple(KINETO_MUTATIONS))):
        p = case.write(tmp_path / str(i))
        assert_all_same(read_all(str(p), 16 << 10, monkeypatch), f"{case.cls}: {case.detail}")
    assert counted.took and counted.declined  # damaged copies: both outcomes are exercised


KERNEL = (
    '{"ph": "X", "cat": "kernel", "name": "sgemm_128x64", "pid": 0, "tid": 7, "ts": 1000.500, "dur": 20.25, '
    '"args": {"External id": 11, "device": 0, "stream": 7, "correlation": 91, "registers per thread": 128, '
    '"shared memory": 49152, "blocks per SM": 1.25, "warps per SM": 8, "est. achieved occupancy %": 12, '
    '"grid": [108, 1, 1], "block": [256, 1, 1], "graph id": 3}}'
)
CPU_OP = (
    '{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 5, "tid": 5, "ts": 990.125, "dur": 30, '
    '"args": {"External id": 11, "Input Dims": [[64, 128], [128, 32]], "Input type": ["float", "float"], '
    '"Concrete Inputs": ["", ""], "flops": 524288, "Call stack": "a.py(1): f"}}'
)
RUNTIME = (
    '{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 5, "tid": 5, "ts": 995, '
    '"dur": 4.5, "args": {"External id": 11, "correlation": 91, "cbid": 211}}'
)
FLOWS = (
    '{"ph": "s", "id": 91, "pid": 5, "tid": 5, "ts": 995, "cat": "ac2g", "name": "ac2g"}, '
    '{"ph": "f", "id": 91, "pid": 0, "tid": 7, "ts": 1000.5, "cat": "ac2g", "name": "ac2g", "bp": "e"}'
)
OTHERS = (
    '{"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "pid": 5, "tid": 5, "ts": 999, "s": "t", '
    '"args": {"Device Type": 1, "Device Id": 0, "Bytes": 4096, "Total Allocated": 8192, '
    '"Total Reserved": 16384, "Addr": 140000}}, '
    '{"ph": "M", "name": "process_name", "pid": 5, "tid": 0, "args": {"name": "python3", "labels": "x"}}, '
    '{"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce", "pid": 0, "tid": 9, "ts": 1100, '
    '"dur": 50, "args": {"Collective name": "allreduce", "In msg nelems": 1024, "Out msg nelems": 1024, '
    '"Group size": 2, "dtype": "Float", "Process Group Name": "0", "Process Group Ranks": "[0, 1]", '
    '"Seq": 4}}, '
    '{"ph": "X", "cat": "cpu_op", "name": "record_param_comms", "pid": 5, "tid": 5, "ts": 1090, "dur": 3, '
    '"args": {"Input Dims": [[1024]], "Input type": ["float"]}}, '
    '{"ph": "X", "cat": "gpu_user_annotation", "name": "step", "pid": 0, "tid": 7, "ts": 990, "dur": 200}, '
    '{"ph": "X", "cat": "cuda_sync", "name": "Event Sync", "pid": 0, "tid": 7, "ts": 1200, "dur": 1, '
    '"args": {"wait_on_stream": 7}}, '
    '{"ph": "X", "cat": "my_spans", "name": "other", "pid": 5, "tid": 5, "ts": 980, "dur": 300}, '
    '{"ph": "C", "name": "counter", "pid": 5, "ts": 981, "args": {"v": 1}}'
)
BASE = [KERNEL, CPU_OP, RUNTIME, FLOWS, OTHERS]

# Values the scan reads itself though they are odd (the tables must still match the other decoder's).
ODD = {
    "string ids": ('"pid": 0, "tid": 7', '"pid": "stream 7", "tid": "worker thread"'),
    "digit-string device": ('"device": 0', '"device": "3"'),
    "float correlation": ('"correlation": 91, "registers', '"correlation": 91.5, "registers'),
    "null and true in int fields": ('"graph id": 3', '"graph id": null, "bytes": true'),
    "wide integer": ('"registers per thread": 128', '"registers per thread": 123456789012345678901234'),
    "odd grid and block": ('"grid": [108, 1, 1], "block": [256, 1, 1]', '"grid": [108, 1], "block": "256"'),
    "grid with white space": ('"grid": [108, 1, 1]', '"grid": [ 108 ,\\n1,1 ]'.replace("\\n", "\n")),
    "time with an exponent": ('"ts": 1000.500', '"ts": 1.0005e3'),
    "time as a string": ('"ts": 995, "dur": 4.5', '"ts": "995", "dur": 4.5'),
    "no time": ('"ts": 995, "dur": 4.5, ', ""),
    "negative and long durations": ('"dur": 20.25', '"dur": -0.00051'),
    "many decimals": ('"ts": 990.125', '"ts": 990.1234999999'),
    "escapes and non-ASCII text": ('"name": "aten::mm"', '"name": "aten::mm\\n\\u00e9 \u00e9 \u4e2d \\ud83d\\ude00"'),
    "escaped name shared by two events": ('"name": "cudaLaunchKernel"', '"name": "sgemm\\u005f128x64"'),
    "args null": ('"args": {"External id": 11, "correlation": 91, "cbid": 211}', '"args": null'),
    "list call stack and ranks": (
        '"Call stack": "a.py(1): f"',
        '"Call stack": ["a", "b"], "Process Group Ranks": [0, 1]',
    ),
    "number phase": ('"ph": "C"', '"ph": 5'),
    "list category": ('"cat": "my_spans"', '"cat": ["x"]'),
    "object name": ('"name": "other"', '"name": {"a": [1, 2.5, null]}'),
    "float pid": ('"pid": 5, "tid": 5, "ts": 995,', '"pid": 5.0, "tid": 5, "ts": 995,'),
    "big exponent float": ('"blocks per SM": 1.25', '"blocks per SM": 1.7976931348623157e308'),
    "unknown keys and nesting": ('"ph": "M",', '"ph": "M", "extra": {"a": [[[[1]]]], "b": "\\"q\\""},'),
    "empty args and strings": ('"args": {"wait_on_stream": 7}', '"args": {}, "cat2": ""'),
}
# Chunks the scan declines: each reason once. The reader still reads them (msgspec), the same either way.
DECLINED = {
    "invalid UTF-8": ('"name": "step"', b'"name": "st\xffep"'),
    "a control character in a string": ('"name": "step"', '"name": "st\x01ep"'),
    "a lone surrogate escape": ('"name": "step"', '"name": "st\\ud800ep"'),
    "an escaped key": ('"name": "step"', '"n\\u0061me": "step"'),
    "a key twice": ('"name": "step"', '"name": "step", "name": "again"'),
    "an args key twice": ('"wait_on_stream": 7', '"wait_on_stream": 7, "wait_on_stream": 8'),
    "args of another type": ('"args": {"wait_on_stream": 7}', '"args": [7]'),
    "NaN": ('"dur": 200', '"dur": NaN'),
    "Infinity": ('"ts": 1200', '"ts": -Infinity'),
    "a float beyond range": ('"blocks per SM": 1.25', '"blocks per SM": 1e400'),
    "deep nesting": ('"args": {"v": 1}', '"args": {"v": ' + "[" * 70 + "]" * 70 + "}"),
    "an entry that is not an object": (OTHERS, OTHERS + ", 7"),
    "a syntax error": ('"dur": 300', '"dur": 300,,'),
    "a leading zero": ('"dur": 300', '"dur": 0300'),
}


def _events(change: tuple) -> bytes:
    old, new = change
    text = ", ".join(BASE)
    assert old in text, old
    raw = text.encode()
    return raw.replace(old.encode(), new if isinstance(new, bytes) else new.encode(), 1)


def _trace(events: bytes) -> bytes:
    return b'{"schemaVersion": 1, "traceEvents": [' + events + b'], "deviceProperties": []}'


@pytest.mark.parametrize("what", sorted(ODD))
def test_odd_values_are_read_the_same(what, tmp_path, monkeypatch, parallel_small_files):  # noqa: F811
    events = _events(ODD[what])
    assert _kscan.scan(b"[" + events + b"]") is not None, what  # the scan reads these itself
    p = tmp_path / "t.json"
    p.write_bytes(_trace(events * 3))
    assert_all_same(read_all(str(p), 1024, monkeypatch), what)


@pytest.mark.parametrize("what", sorted(DECLINED))
def test_what_the_scan_is_not_sure_of_is_declined_and_read_the_same(what, tmp_path, monkeypatch, parallel_small_files):  # noqa: F811
    events = _events(DECLINED[what])
    assert _kscan.scan(b"[" + events + b"]") is None, what
    p = tmp_path / "t.json"
    p.write_bytes(_trace(events * 3))
    assert_all_same(read_all(str(p), 1024, monkeypatch), what)


def test_a_piece_is_scanned_in_place_as_the_array_around_it():
    """``scan(buf, end)`` reads ``buf[:end]`` as the inside of an array: the same columns as the bracketed
    copy, spans counted from ``buf``'s start; what the brackets would make invalid is declined."""
    piece = ", ".join(BASE).encode()
    buf = piece + b', {"ph": "X", "name": "cut here'
    framed, inside = _kscan.scan(b"[" + piece + b"]"), _kscan.scan(buf, len(piece))
    assert framed is not None and inside is not None
    a, b = rows.ScanRows(b"[" + piece + b"]", framed), rows.ScanRows(buf, inside)
    for field in ("name", "pid", "ts", "input_dims", "grid", "pg_ranks", "labels", "args_name"):
        assert a.values(field) == b.values(field), field
    assert _kscan.scan(b"  ", 2) is not None and _kscan.scan(b"  ", 2)[0] == 0  # as "[  ]"
    for bad in (piece + b",", piece + b"]", b"[" + piece, piece + b", 7"):
        assert _kscan.scan(bad, len(bad)) is None, bad[-12:]
    with pytest.raises(ValueError):
        _kscan.scan(piece, len(piece) + 1)


def test_the_base_events_fill_every_table():
    data = b"[" + ", ".join(BASE).encode() + b"]"
    assert _kscan.scan(data) is not None
    t = read_kineto_bytes(data)
    for name in (
        "gpu_ops",
        "cpu_ops",
        "runtime",
        "flows",
        "memory",
        "collectives",
        "op_shapes",
        "syncs",
        "gpu_annotations",
        "other_spans",
    ):
        assert len(t.tables[name]), name


def read_kineto_bytes(events: bytes):
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "t.json"
        p.write_bytes(b'{"traceEvents": ' + events + b"}")
        return read_kineto(str(p), workers=1)


def test_numbers_are_read_as_msgspec_reads_them():
    """Floats (correctly rounded either way), integers and times of random forms, against msgspec."""
    rng = random.Random(7)
    texts = []
    for _ in range(3000):
        k = rng.randrange(6)
        if k == 0:
            texts.append(repr(rng.uniform(-1e6, 1e6)))
        elif k == 1:
            texts.append(f"{rng.uniform(0, 100):.{rng.randrange(1, 20)}f}")
        elif k == 2:
            texts.append(f"{rng.random():.17e}".replace("e-0", "e-"))
        elif k == 3:
            texts.append(str(rng.randrange(-(10**18), 10**18)))
        elif k == 4:
            texts.append(f"{rng.randrange(10**15)}.{rng.randrange(10**6):06d}")
        else:
            texts.append(f"-{rng.randrange(10**15)}.{rng.randrange(10**4)}")

    def both(events: str):
        data = b"[" + events.encode() + b"]"
        return (
            rows.ScanRows(data, _kscan.scan(data)),
            rows.StructRows(msgspec.json.decode(data, type=list[rows.Event])),
        )

    scanned, structs = both(", ".join(f'{{"ph": "X", "args": {{"flops": {t}, "blocks per SM": {t}}}}}' for t in texts))
    for field in ("flops", "blocks_per_sm"):
        assert scanned.values(field) == structs.values(field)
        np.testing.assert_array_equal(scanned.float64(field), structs.float64(field))
    # times without an exponent are converted by the scan itself (others by the pure function)
    plain = [t for t in texts if "e" not in t and len(t.split(".")[0].lstrip("-")) <= 15]
    scanned, structs = both(", ".join(f'{{"ts": {t}, "dur": {t}}}' for t in plain))
    assert (scanned._tags("ts") == rows.T_RAW_NUM).all()
    for a, b in zip(scanned.times(), structs.times()):
        np.testing.assert_array_equal(a, b)


def test_the_environment_chooses_the_decoder(tmp_path, monkeypatch):
    p = tmp_path / "t.json"
    p.write_bytes(_trace(", ".join(BASE).encode()))
    counted = Counted(monkeypatch)
    monkeypatch.setenv("TRACEDOC_DECODER", "python")
    read_kineto(str(p), workers=1)
    assert counted.took == 0
    for value in ("auto", "compiled", ""):
        monkeypatch.setenv("TRACEDOC_DECODER", value)
        read_kineto(str(p), workers=1)
    assert counted.took == 3
    monkeypatch.setenv("TRACEDOC_DECODER", "fast")
    with pytest.raises(UsageError, match="TRACEDOC_DECODER"):
        read_kineto(str(p), workers=1)


def test_compiled_without_the_module_is_a_clear_error(tmp_path, monkeypatch):
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": [json.loads(KERNEL)]}))
    monkeypatch.setattr(rows, "_scan", False)  # as when the module failed to import
    monkeypatch.setenv("TRACEDOC_DECODER", "compiled")
    with pytest.raises(UsageError, match="not built"):
        read_kineto(str(p), workers=1)
    monkeypatch.setenv("TRACEDOC_DECODER", "auto")
    assert read_kineto(str(p), workers=1) is not None
