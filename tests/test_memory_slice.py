"""A trace that will not fit in memory is refused in one line before it is read; ``--steps A:B`` reads a
slice of it, and the report says so."""

from __future__ import annotations

import numpy as np
import pytest
from trace_builder import TraceBuilder, training_steps

from tracedoc.errors import TraceError, UsageError
from tracedoc.ingest import load
from tracedoc.ingest import memory as MEM
from tracedoc.ingest.kineto import stream, window
from tracedoc.ingest.kineto import read_kineto
from tracedoc.ingest.kineto.window import Steps, parse_steps

STEP_US = 10_000.0
START_US = 1_000_000.0


def six_steps(tmp_path, name="t.json"):
    b = TraceBuilder()
    training_steps(b, steps=6, step_us=STEP_US, kernels=6, kernel_us=1_000.0, start=START_US)
    return b.write(tmp_path / name)


@pytest.mark.parametrize(
    "text, want", [("2:4", (2, 4)), (" 3 ", (3, 3)), ("5:", (5, None)), (":7", (None, 7)), ("0:0", (0, 0))]
)
def test_step_ranges(text, want):
    assert tuple(parse_steps(text)) == want


@pytest.mark.parametrize(
    "text, says",
    [
        ("x", "not a range"),
        ("", "not a range"),
        (":", "not a range"),
        ("1:2:3", "not a range"),
        ("-1:2", "not a range"),
        ("1.5", "not a range"),
        ("4:2", "starts after it ends"),
    ],
)
def test_bad_step_ranges_are_usage_errors(text, says):
    with pytest.raises(UsageError) as e:
        parse_steps(text)
    assert says in str(e.value) and "--steps" in str(e.value)


def _texts(trace, ids):
    return [None if i < 0 else trace.strings[i] for i in ids.tolist()]


def _in_window(table, col, lo, hi):
    v = table[col]
    return (v >= lo) & (v < hi)


@pytest.mark.parametrize("gz", [False, True])
def test_a_slice_keeps_exactly_the_events_starting_in_its_steps(tmp_path, gz, monkeypatch):
    # small chunks in both passes: step events and cuts fall across chunk boundaries
    monkeypatch.setattr(window, "_CHUNK", 4096)
    monkeypatch.setattr(window, "_LOOK_BACK", 512)
    path = six_steps(tmp_path, "t.json.gz" if gz else "t.json")
    whole = read_kineto(str(path), chunk_bytes=2048, workers=1)
    for workers in (1, 2):
        part = read_kineto(str(path), chunk_bytes=2048, workers=workers, steps="2:3")
        lo, hi = int((START_US + STEP_US) * 1000), int((START_US + 3 * STEP_US) * 1000)
        for name, col in (
            ("cpu_ops", "start_ns"),
            ("gpu_ops", "start_ns"),
            ("runtime", "start_ns"),
            ("flows", "ts_ns"),
        ):
            t = whole.tables[name]
            keep = _in_window(t, col, lo, hi)
            assert keep.any() and not keep.all(), name
            for c in t.columns:
                if c in ("launch", "depth"):  # links and nesting are worked out within what was read
                    continue
                got, want = part.tables[name][c], t[c][keep]
                if c in ("name", "cat", "stack"):  # string ids: interned in the order read
                    got, want = _texts(part, got), _texts(whole, want)
                np.testing.assert_array_equal(got, want, err_msg=f"{name}.{c}")
        steps = [part.strings[i] for i in part.cpu_ops["name"] if part.strings[i].startswith("ProfilerStep")]
        assert steps == ["ProfilerStep#2", "ProfilerStep#3"]
        note = [w for w in part.warnings if "a slice of the trace" in w]
        assert len(note) == 1 and "steps 2 to 3 (2 of its 6" in note[0] and "left out" in note[0], part.warnings
    assert not any("slice" in w for w in whole.warnings)


def test_steps_outside_the_trace_or_a_trace_without_steps_say_what_there_is(tmp_path):
    path = six_steps(tmp_path)
    with pytest.raises(TraceError) as e:
        read_kineto(str(path), steps=Steps(40, 45))
    assert "has no steps in 40:45" in str(e.value) and "ProfilerStep#1 to #6" in str(e.value)
    b = TraceBuilder()
    b.kernel("k", 10.0, 5.0)
    bare = b.write(tmp_path / "bare.json")
    with pytest.raises(TraceError) as e:
        read_kineto(str(bare), steps="1:2")
    assert "no ProfilerStep#N events" in str(e.value)


def test_steps_on_an_nsys_export_is_a_usage_error(tmp_path):
    from tracedoc.ingest import SQLITE_MAGIC

    db = tmp_path / "x.sqlite"
    db.write_bytes(SQLITE_MAGIC + bytes(100))  # refused for the option before the file is read
    with pytest.raises(UsageError) as e:
        load(str(db), steps=Steps(1, 2))
    assert "--steps applies to torch.profiler traces only" in str(e.value)


def test_cli_reports_a_slice(tmp_path, capsys):
    from tracedoc.cli import main

    path = six_steps(tmp_path)
    out = tmp_path / "r.json"
    assert main(["analyze", str(path), "--steps", "4", "-o", str(out), "--no-progress"]) == 0
    import json

    doc = json.loads(out.read_text())
    assert any("a slice of the trace: step 4 (1 of its 6" in w for w in doc["ranks"][0]["warnings"])
    assert main(["analyze", str(path), "--steps", "9:x"]) == 2
    err = capsys.readouterr().err
    assert "--steps: '9:x' is not a range of step numbers" in err and "Traceback" not in err


# -- memory ---------------------------------------------------------------------------------------------


def test_mem_available_and_cgroup_limits_are_read(tmp_path):
    info = tmp_path / "meminfo"
    info.write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:    2048 kB\n")
    assert MEM.mem_available(str(info)) == 2048 * 1024
    assert MEM.mem_available(str(tmp_path / "none")) is None
    # cgroup v2: the tightest limit over the cgroup and its ancestors
    root = tmp_path / "cg"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "memory.max").write_text("1000000\n")
    (root / "a" / "memory.current").write_text("400000\n")
    (root / "a" / "b" / "memory.max").write_text("max\n")
    (root / "a" / "b" / "memory.current").write_text("5\n")
    proc = tmp_path / "cgroup"
    proc.write_text("0::/a/b\n")
    assert MEM.cgroup_headroom(str(proc), str(root)) == (1000000, 600000)
    # cgroup v1, no limit set: none
    (root / "memory" / "job").mkdir(parents=True)
    (root / "memory" / "job" / "memory.limit_in_bytes").write_text(str(MEM.UNLIMITED + 5))
    (root / "memory" / "job" / "memory.usage_in_bytes").write_text("10")
    proc.write_text("4:memory:/job\n1:cpu:/\n")
    assert MEM.cgroup_headroom(str(proc), str(root)) is None
    (root / "memory" / "job" / "memory.limit_in_bytes").write_text("3000")
    assert MEM.cgroup_headroom(str(proc), str(root)) == (3000, 2990)


def test_gzip_json_size_comes_from_a_plausible_trailer():
    assert MEM.json_bytes(100, False, 0) == 100
    assert MEM.json_bytes(100, True, 2_000) == 2_000
    assert MEM.json_bytes(100, True, 150) == 100 * MEM.GUESS_GZIP_RATIO  # wrapped past 4 GiB, or no trailer


def test_a_trace_that_does_not_fit_is_refused_in_one_line(monkeypatch, tmp_path):
    free = MEM.Free(1 << 30, ["MemAvailable 1.0 GiB", "cgroup memory.max 2.0 GiB, 1.0 GiB of it unused"])
    MEM.check_fits("t.json", 1 << 29, 1, free=free)  # 0.5 GiB needed: fits
    with pytest.raises(TraceError) as e:
        MEM.check_fits("t.json", 2 << 30, 2, free=free)
    msg = str(e.value)
    assert "\n" not in msg
    assert "needs about 2.0 GiB of memory to analyse its 2.0 GiB of JSON, more than is free (1.0 GiB)" in msg
    assert "MemAvailable 1.0 GiB" in msg and "cgroup memory.max 2.0 GiB" in msg and "--steps A:B" in msg
    MEM.check_fits("t.json", 2 << 30, 2, sliced=True, free=free)  # a slice needs its columns only
    MEM.check_fits("t.json", 2 << 30, 2, free=MEM.Free(None, []))  # nothing known: nothing refused
    monkeypatch.setenv("TRACEDOC_MEMORY_CHECK", "off")
    MEM.check_fits("t.json", 2 << 30, 2, free=free)


def test_the_cli_refuses_before_reading_and_a_slice_still_fits(monkeypatch, tmp_path, capsys):
    from tracedoc.cli import main

    path = six_steps(tmp_path)
    monkeypatch.setattr(stream, "MEMORY_CHECK_MIN_BYTES", 0)
    monkeypatch.setattr(MEM, "NEED_PER_JSON_BYTE", 1e6)  # this small trace "needs" some GiB
    monkeypatch.setattr(MEM, "free_memory", lambda: MEM.Free(512 << 20, ["MemAvailable 512.0 MiB"]))

    def refuse(*a, **k):
        raise AssertionError("events decoded after the refusal")

    with monkeypatch.context() as m:
        m.setattr(stream, "_read", refuse)
        assert main(["analyze", str(path), "--no-progress"]) == 1
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1 and "needs about" in lines[0] and "MemAvailable 512.0 MiB" in lines[0], err
    assert main(["analyze", str(path), "--steps", "1:2", "--no-progress", "-f", "json"]) == 0


def test_step_events_are_found_whatever_their_args_and_wherever_chunks_end(tmp_path, monkeypatch):
    """A step event whose args hold objects in a list (their ends look like an event's), keys in another
    order, and the same step on two threads (the window takes the earliest start and the latest end)."""
    import json

    events = []
    for n in range(1, 7):
        s = 1_000_000 + n * 1_000
        events.append(
            {
                "name": f"ProfilerStep#{n}",
                "ph": "X",
                "ts": s,
                "dur": 900,
                "cat": "user_annotation",
                "pid": 1,
                "tid": 1,
                "args": {"x": [{"a": 1}, {"b": {"c": [2, {"d": 3}]}}]},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": f"ProfilerStep#{n}",
                "pid": 1,
                "tid": 2,
                "ts": s - 10,
                "dur": 950,
            }
        )
        events.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": s + 5, "dur": 10})
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}, indent=1))
    for chunk in (97, 256, 1 << 20):
        monkeypatch.setattr(window, "_CHUNK", chunk)
        monkeypatch.setattr(window, "_LOOK_BACK", 64)
        w = window.find_window(str(p), Steps(2, 3))
        assert (w.start_ns, w.end_ns, w.steps, w.total) == (1_001_990_000, 1_003_940_000, 2, 6), chunk
