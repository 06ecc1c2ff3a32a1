"""Reading inputs safely: regular files only, bounded gzip inflation, buffers that grow linearly, and no
content quoted from behind a link that leaves its directory. Bombs and odd files are made here, small."""

from __future__ import annotations

import gzip
import json
import os
import random
import time

import pytest

from trace_builder import TraceBuilder, training_steps
from tracedoc import infile
from tracedoc.api import analyze
from tracedoc.errors import TraceError, TracedocError
from tracedoc.infile import InputStream, excerpt, inflate_limit, read_input
from tracedoc.ingest import load
from tracedoc.ingest.kineto import read_kineto

fork_only = pytest.mark.skipif(
    "fork" not in __import__("multiprocessing").get_all_start_methods(),
    reason="the rank pool inherits the patched limit through fork",
)


def trace_doc(rank: int | None = None) -> dict:
    b = TraceBuilder(rank=rank, world_size=4) if rank is not None else TraceBuilder()
    training_steps(b, steps=3, kernels=4)
    return b.to_dict()


def trace_bytes(rank: int | None = None) -> bytes:
    return json.dumps(trace_doc(rank)).encode()


def bomb(padding: int) -> bytes:
    """A valid trace with ``padding`` bytes of white space inside: tiny compressed, large inflated."""
    text = trace_bytes()
    at = text.index(b'"traceEvents": [') + len(b'"traceEvents": [')
    return gzip.compress(text[:at] + b" " * padding + text[at:], compresslevel=9)


@pytest.fixture
def small_limits(monkeypatch):
    """Inflation limits scaled down so a bomb of a few MB trips them (real sizes: 64 MiB floor)."""
    monkeypatch.setattr(infile, "INFLATE_FLOOR_BYTES", 256 << 10)


# --- non-regular files ------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".json", ".json.gz", ".sqlite"])
def test_every_trace_reader_refuses_a_fifo_at_once(tmp_path, suffix):
    fifo = tmp_path / f"t{suffix}"
    os.mkfifo(fifo)
    t0 = time.perf_counter()
    for read in (load, lambda p: read_kineto(str(p)), lambda p: InputStream(str(p))):
        with pytest.raises(TraceError, match=r"is a named pipe \(FIFO\)"):
            read(fifo)
    from tracedoc.ingest.nsys.db import _connect

    with pytest.raises(TraceError, match=r"is a named pipe \(FIFO\)"):
        _connect(str(fifo))
    assert time.perf_counter() - t0 < 5  # nothing waited for a writer


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_device_is_refused_before_it_is_read():
    for read in (load, read_kineto, InputStream, read_input):
        with pytest.raises(TraceError, match="is a character device"):
            read("/dev/zero")


def test_read_input_refuses_a_directory_with_the_callers_error(tmp_path):
    class ConfigError(TracedocError):
        pass

    with pytest.raises(ConfigError, match="is a directory, not a config file"):
        read_input(str(tmp_path), ConfigError, "config file")


def test_odd_entries_of_a_job_directory_are_named_in_warnings(tmp_path):
    d = tmp_path / "job"
    d.mkdir()
    for r in (0, 1):
        (d / f"rank{r}.json").write_bytes(trace_bytes(r))
    os.mkfifo(d / "rank2.json")
    (d / "rank3.json").mkdir()
    os.symlink(d / "rank4.json", d / "rank4.json")  # a link to itself: a loop
    os.symlink(d / "missing.json", d / "rank5.json.gz")
    with pytest.warns(UserWarning) as caught:
        res = analyze(d, jobs=1)
    assert [r.rank for r in res.ranks] == [0, 1]
    said = {str(w.message).split(":")[0]: str(w.message) for w in caught}
    assert "named pipe (FIFO)" in said[str(d / "rank2.json")]
    assert "a directory" in said[str(d / "rank3.json")]
    assert "symbolic link loop" in said[str(d / "rank4.json")]
    assert "broken symbolic link" in said[str(d / "rank5.json.gz")]


# --- bounded inflation ------------------------------------------------------------------------------------


def test_the_inflation_limit_follows_the_compressed_size_and_the_memory():
    floor, ratio = infile.INFLATE_FLOOR_BYTES, infile.MAX_REAL_RATIO
    assert inflate_limit(1000, memory=1 << 40) == floor  # small files are never refused
    assert inflate_limit(10 << 20, memory=1 << 40) == (10 << 20) * ratio
    assert inflate_limit(10 << 20, memory=1 << 30) == 1 << 30  # no more than the machine holds
    assert infile.MAX_REAL_RATIO < infile.DEFLATE_MAX_RATIO


def test_a_gzip_bomb_is_refused_with_a_clear_error(tmp_path, small_limits):
    p = tmp_path / "bomb.json.gz"
    p.write_bytes(bomb(4 << 20))  # about 4 KB inflating to 4 MB: a ratio no trace has
    assert os.path.getsize(p) < 16 << 10
    with pytest.raises(TraceError, match=r"inflates past [\d,]+ bytes, more than a real trace file .*gunzip -k") as err:
        analyze(str(p))
    assert "gzip bomb" in str(err.value)
    ok = tmp_path / "ok.json.gz"  # a real trace of the same inflated size per compressed byte passes
    ok.write_bytes(gzip.compress(trace_bytes()))
    assert analyze(str(ok)).ranks


def test_read_input_bounds_inflation_and_plain_size(tmp_path, small_limits):
    p = tmp_path / "x.gz"
    p.write_bytes(gzip.compress(b"a" * (1 << 20)))
    with pytest.raises(TraceError, match="inflates past"):
        read_input(str(p))
    assert read_input(str(p), limit=2 << 20) == b"a" * (1 << 20)
    q = tmp_path / "x.txt"
    q.write_bytes(b"b" * 5000)
    with pytest.raises(TraceError, match="larger than 4,096 bytes"):
        read_input(str(q), max_bytes=4096)
    cut = tmp_path / "cut.gz"
    cut.write_bytes(gzip.compress(random.Random(7).randbytes(50_000))[:20_000])
    with pytest.raises(TraceError, match="is a damaged file"):
        read_input(str(cut))
    seen = []
    assert len(read_input(str(cut), on_truncated=seen.append)) > 0 and "ends early" in seen[0]


@pytest.mark.parametrize("claimed", [3_000_000, 20_000 * 1000])
def test_a_cut_gzip_whose_last_bytes_read_as_a_large_size_is_damaged_not_a_bomb(tmp_path, small_limits, claimed):
    """A file cut off mid-write ends in compressed data, not in a gzip trailer; its last four bytes are any
    number, which (about 1 time in 250 for random data) reads as an inflated size above the bound. That is
    no evidence of a bomb: only inflating past the bound is."""
    cut = tmp_path / "cut.gz"
    data = gzip.compress(random.Random(11).randbytes(50_000))[:20_000]
    cut.write_bytes(data[:-4] + claimed.to_bytes(4, "little"))
    assert claimed > infile.inflate_limit(cut.stat().st_size)
    with pytest.raises(TraceError, match="is a damaged file"):
        read_input(str(cut))


@fork_only
def test_a_bomb_among_the_ranks_costs_only_its_rank(tmp_path, small_limits):
    d = tmp_path / "job"
    d.mkdir()
    (d / "rank0.json").write_bytes(trace_bytes(0))
    (d / "rank1.json.gz").write_bytes(bomb(4 << 20))
    with pytest.warns(UserWarning, match="rank file not analysed"):
        res = analyze(d, jobs=1)
    assert [r.rank for r in res.ranks] == [0]
    assert "inflates past" in res.failed[str(d / "rank1.json.gz")]


# --- buffers grow linearly -------------------------------------------------------------------------------


class _Counting:
    """Wraps a function of a buffer, adding up the bytes of every buffer it is handed."""

    def __init__(self, fn):
        self.fn, self.seen = fn, 0

    def __call__(self, buf, *a, **k):
        self.seen += len(buf)
        return self.fn(buf, *a, **k)


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("filler", ["white space", "one long string"])
def test_one_long_event_or_run_of_white_space_is_read_in_linear_time(tmp_path, monkeypatch, workers, filler):
    from tracedoc.ingest.kineto import stream

    doc = trace_doc()
    size = 3 << 20
    if filler == "one long string":
        doc["traceEvents"][1]["args"] = {"note": "x" * size}
        text = json.dumps(doc).encode()
    else:
        text = json.dumps(doc).encode()
        at = text.index(b'"traceEvents": [') + len(b'"traceEvents": [')
        text = b" " * size + text[:at] + b" " * size + text[at:]
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(text))
    searched = {}
    for name in ("cut_and_decode", "find_cut"):
        searched[name] = _Counting(getattr(stream, name))
        monkeypatch.setattr(stream, name, searched[name])
    monkeypatch.setattr(stream, "PARALLEL_MIN_GZIP_BYTES", 1)
    monkeypatch.setattr(stream, "PARALLEL_MIN_GZIP_JSON_BYTES", 1)
    trace = read_kineto(str(p), chunk_bytes=32 << 10, workers=workers)
    assert len(trace.gpu_ops) == 12
    # each byte is looked at a bounded number of times: with a buffer that grew by one chunk per read,
    # the searches would add up to size**2 / chunk (about 150 times the file)
    assert sum(c.seen for c in searched.values()) < 8 * len(text)


def test_a_long_head_is_searched_in_linear_time(tmp_path, monkeypatch):
    from tracedoc.ingest.kineto import stream

    doc = trace_doc()
    doc = {"pad": "y" * (3 << 20), **doc}
    p = tmp_path / "t.json.gz"
    p.write_bytes(gzip.compress(json.dumps(doc).encode()))
    seen = [0]
    real = stream._EVENTS_KEY_RE

    class Key:
        def search(self, buf, *a):
            seen[0] += len(buf)
            return real.search(buf, *a)

    monkeypatch.setattr(stream, "_EVENTS_KEY_RE", Key())
    trace = read_kineto(str(p), chunk_bytes=32 << 10, workers=1)
    assert len(trace.gpu_ops) == 12
    assert seen[0] < 4 * (3 << 20)


# --- what errors may quote ---------------------------------------------------------------------------


def test_excerpts_are_short_and_escaped():
    got = excerpt(b"\x1b[2J\x1b]0;owned\x07 \xe2\x80\xae evil" + b"z" * 500)
    assert "\x1b" not in got and "\u202e" not in got and "\\x1b" in got and got.endswith("...")
    assert len(got) < 80
    assert "not shown" in excerpt(b"secret", hidden=True) and "secret" not in excerpt(b"secret", hidden=True)


@fork_only
@pytest.mark.parametrize(
    "content",
    [
        b"SECRET_TOKEN=hunter2\0HOME=/root\0",
        b'{"SECRET_TOKEN": "hunter2"}',
        b'{"traceEvents": [{"ph": "X", "SECRET_TOKEN": hunter2',
    ],
)
def test_a_rank_linked_out_of_its_directory_is_not_quoted(tmp_path, content):
    outside = tmp_path / "private"
    outside.write_bytes(content)
    d = tmp_path / "job"
    d.mkdir()
    (d / "rank0.json").write_bytes(trace_bytes(0))
    os.symlink(outside, d / "rank4.json")
    with pytest.warns(UserWarning) as caught:
        res = analyze(d, jobs=1)
    said = json.dumps(json.loads(res.to_json())) + "\n".join(str(w.message) for w in caught)
    for r in res.ranks:
        said += "\n".join(r.warnings)
    assert "hunter2" not in said and "SECRET_TOKEN" not in said
    if str(d / "rank4.json") in res.failed:
        assert "not shown" in res.failed[str(d / "rank4.json")] or "SECRET" not in res.failed[str(d / "rank4.json")]


def test_a_file_read_directly_is_quoted_only_as_an_escaped_excerpt(tmp_path):
    p = tmp_path / "t.json"
    p.write_bytes(b"\x1b[2J\x1b[31mFAKE VERDICT: all good\x1b[0m" + b"x" * 1000)
    with pytest.raises(TraceError, match="is not JSON") as err:
        analyze(str(p))
    msg = str(err.value)
    assert "\x1b" not in msg and "\\x1b" in msg and len(msg) < 400


@fork_only
def test_each_input_file_is_sniffed_once(tmp_path, monkeypatch, capsys):
    """``ingest.sniff`` opens a file's first bytes to tell its format; the stages after it (the CLI's --rank
    checks, the rank reader, the loader) take its answer instead of opening the file again. Every sniffing
    open is written to a log, by the rank workers too (forked with the patch): one per analysed file."""
    from nsys_builder import NsysDb

    import tracedoc.ingest as ingest
    from tracedoc.cli import main

    opened = tmp_path / "sniffed.txt"
    real = ingest.open_regular

    def counted(path, *args, **kwargs):
        with open(opened, "a") as f:
            f.write(os.path.basename(path) + "\n")
        return real(path, *args, **kwargs)

    def sniffed() -> list[str]:
        names = opened.read_text().split() if opened.exists() else []
        opened.unlink(missing_ok=True)
        return sorted(names)

    monkeypatch.setattr(ingest, "open_regular", counted)
    one = tmp_path / "one.json"
    one.write_bytes(trace_bytes())
    assert main(["analyze", str(one), "--no-progress", "-f", "json", "-o", str(tmp_path / "r1.json")]) == 0
    assert sniffed() == ["one.json"]
    run = tmp_path / "run"
    run.mkdir()
    for rank in range(3):
        (run / f"rank{rank}.pt.trace.json").write_bytes(trace_bytes(rank))
    assert (
        main(
            [
                "analyze",
                str(run),
                "--rank",
                "1",
                "-j",
                "2",
                "--no-progress",
                "-f",
                "json",
                "-o",
                str(tmp_path / "r2.json"),
            ]
        )
        == 0
    )
    assert sniffed() == ["rank0.pt.trace.json", "rank1.pt.trace.json", "rank2.pt.trace.json"]
    db = NsysDb(tmp_path / "two.sqlite")  # an export of two processes: --rank picks one of them
    db.session(1_000_000_000, 1_100_000_000, 1_763_700_000_000_000_000)
    for pid in (200, 300):
        db.process(pid, f"rank-{pid}")
        db.thread(pid, pid, "python3")
        for corr in (1, 2):
            s = 1_000_000_000 + corr * 100_000
            db.runtime(pid, pid, s, s + 10_000, corr, "cudaLaunchKernel_v7000")
            db.kernel(pid, s + 20_000, s + 50_000, corr, f"k{corr}", device=0)
    assert (
        main(["analyze", db.close(), "--rank", "1", "--no-progress", "-f", "json", "-o", str(tmp_path / "r3.json")])
        == 0
    ), capsys.readouterr().err
    assert sniffed() == ["two.sqlite"]
