"""Minimised reproducers of damaged inputs: each ends in numbers with a counted warning, or one clear error.

Every trace here is built in the test (small, by hand), never copied from the shared traces.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import resource
import sqlite3
import time

import numpy as np
import pytest

from trace_builder import TraceBuilder, training_steps
from tracedoc.api import analyze
from tracedoc.checks import BUG_PREFIX
from tracedoc.errors import TraceError
from tracedoc.model.numbers import BAD_NUMBER, decimal_text_to_scaled_int


def small_trace() -> dict:
    b = TraceBuilder()
    training_steps(b, steps=3, kernels=5)
    return b.to_dict()


def kernels_of(doc: dict) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]


def write_with_tokens(path, doc: dict, tokens: dict[str, str]) -> str:
    """Write ``doc`` as JSON, then put raw tokens (``1e400``, ``Infinity``) where placeholders are."""
    text = json.dumps(doc)
    for placeholder, token in tokens.items():
        text = text.replace(f'"{placeholder}"', token)
    path.write_text(text)
    return str(path)


def clean(result) -> None:
    """The property every result must have: no invariant violation anywhere, valid JSON."""
    for r in result.ranks:
        assert not [w for w in r.warnings if w.startswith(BUG_PREFIX)], r.warnings
    json.loads(result.to_json(), parse_constant=lambda c: pytest.fail(f"JSON constant {c}"))


# --- numbers that cannot be times -------------------------------------------------------------------


def test_exact_parse_refuses_what_is_not_a_finite_int64():
    toks = [
        b"1712195495519689.047",
        b"1e400",
        b"Infinity",
        b"NaN",
        b"9223372036854775808",
        b"18446744073709551621",
        b"-9223372036854775809",
        b'"12"',
        b"null",
        b"1.5e3",
        b"9223372036854775.807",
        b"9999999999999999.999",
        b"-1712195495519689.047",
        b'{"": null}',
        b'"1 2"',
        b"7",
    ]
    got = decimal_text_to_scaled_int(toks).tolist()
    assert got[0] == 1712195495519689047  # the exact fast path is unchanged
    assert got[1:9] == [BAD_NUMBER] * 8
    assert got[9] == 1_500_000  # exponent form, exact
    assert got[10] == 9223372036854775807  # int64 max exactly
    assert got[11] == BAD_NUMBER  # 19 digits whose sum wraps int64: detected, not a negative time
    assert got[12] == -1712195495519689047
    assert got[13:] == [BAD_NUMBER, BAD_NUMBER, 7000]  # tokens with spaces inside do not shift the others


def test_plain_decimals_that_overflow_once_scaled_are_refused_too():
    # Only digits, dots and signs: the integer fast path, which must not wrap when it scales to ns.
    toks = [
        b"1712195495519689.047",
        b"9999999999999999",
        b"9223372036854775.808",
        b"-9223372036854775.807",
        b"12.3455",
        b"-12.3455",
        b"9223372036854775",
    ]
    got = decimal_text_to_scaled_int(toks).tolist()
    assert got[0] == 1712195495519689047
    assert got[1] == BAD_NUMBER  # 9,999,999,999,999,999,000 > int64 max
    assert got[2] == BAD_NUMBER  # one past int64 max
    assert got[3] == -9223372036854775807
    assert got[4:6] == [12346, -12346]  # half away from zero on the first dropped digit
    assert got[6] == 9223372036854775000


def test_number_tokens_agree_with_exact_decimal_arithmetic():
    # Every path (numpy's text parser, Python ints for 19+ digits, the digit-wise one) against Decimal,
    # worked token by token: round(value * 1000) half away from zero, BAD_NUMBER outside int64.
    from decimal import ROUND_HALF_UP, Decimal

    def exact(tok: bytes) -> int:
        try:
            v = int(Decimal(tok.decode()).scaleb(3).to_integral_value(rounding=ROUND_HALF_UP))
        except ArithmeticError:
            return BAD_NUMBER
        return v if abs(v) <= 2**63 - 1 else BAD_NUMBER

    rng = random.Random(7)
    odd = [
        b"-9223372036854775808",
        b"-9223372036854775.808",
        b"9000000000000000000",
        b"8999999999999999999",
        b"1712195495519689.047",
        b"0",
        b"-0.0005",
        b"1e3",
    ]
    for _ in range(400):
        toks = []
        for _ in range(rng.randint(1, 25)):
            tok = ("-" if rng.random() < 0.2 else "") + str(rng.randint(0, 10 ** rng.randint(0, 20)))
            if rng.random() < 0.5:
                tok += "." + "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 6)))
            toks.append(tok.encode())
        if rng.random() < 0.3:
            toks.insert(rng.randrange(len(toks) + 1), rng.choice(odd))
        assert decimal_text_to_scaled_int(toks).tolist() == [exact(t) for t in toks], toks


def test_tokens_of_one_form_agree_with_exact_decimal_arithmetic():
    # Columns whose tokens all have three decimals (Kineto's microseconds) or none are read in one text
    # parse: the same numbers as Decimal gives, and BAD_NUMBER past int64 (never a saturated value).
    from decimal import Decimal

    def exact(tok: bytes) -> int:
        v = int(Decimal(tok.decode()).scaleb(3))
        return v if abs(v) <= 2**63 - 1 else BAD_NUMBER

    rng = random.Random(11)
    near = [
        b"9223372036854775.807",
        b"-9223372036854775.807",
        b"9223372036854775.808",
        b"99999999999999999.999",
        b"9223372036854775",
        b"9223372036854776",
        b"-9223372036854776",
        b"99999999999999999999",
        b"0.000",
        b"-0",
    ]
    for _ in range(300):
        decimals = rng.random() < 0.6
        toks = []
        for _ in range(rng.randint(1, 30)):
            tok = ("-" if rng.random() < 0.1 else "") + str(rng.randint(0, 10 ** rng.randint(0, 17)))
            toks.append((tok + "." + f"{rng.randrange(1000):03d}" if decimals else tok).encode())
        if rng.random() < 0.3:
            pick = [t for t in near if (b"." in t) == decimals]
            toks.insert(rng.randrange(len(toks) + 1), rng.choice(pick))
        assert decimal_text_to_scaled_int(toks).tolist() == [exact(t) for t in toks], toks


@pytest.mark.parametrize(
    "token",
    ["1e400", "Infinity", "-Infinity", "NaN", "18446744073709551621", "9223372036854775808", '"soon"', "[1]", "null"],
)
def test_impossible_timestamps_are_dropped_and_counted(tmp_path, token):
    doc = small_trace()
    ks = kernels_of(doc)
    for i, k in enumerate(ks[:4]):
        k["ts"] = f"__tok{i}__"
    res = analyze(write_with_tokens(tmp_path / "t.json", doc, {f"__tok{i}__": token for i in range(4)}))
    rank = res.ranks[0]
    assert rank.metrics["kernel_count"] == len(ks) - 4
    warning = next(w for w in rank.warnings if "impossible timestamps" in w)
    assert "dropped 4 events" in warning
    if token in ("Infinity", "-Infinity", "NaN"):
        assert any("4 values are written as Infinity or NaN" in w for w in rank.warnings)
    clean(res)


def test_negative_durations_are_dropped_not_clipped(tmp_path):
    doc = small_trace()
    ks = kernels_of(doc)
    ks[0]["dur"] = -400.0
    ks[1]["dur"] = "__big__"
    res = analyze(write_with_tokens(tmp_path / "t.json", doc, {"__big__": "1e400"}))
    rank = res.ranks[0]
    assert rank.metrics["kernel_count"] == len(ks) - 2
    assert any("dropped 2 events with impossible timestamps" in w for w in rank.warnings)
    clean(res)


def test_ts_plus_dur_cannot_overflow(tmp_path):
    doc = small_trace()
    ks = kernels_of(doc)
    ks[0]["ts"], ks[0]["dur"] = 9.2e15, 9.2e15  # each in int64 ns, their sum is not
    res = analyze(write_with_tokens(tmp_path / "t.json", doc, {}))
    assert any("dropped 1 events" in w for w in res.ranks[0].warnings)
    assert res.ranks[0].window.end_ns >= res.ranks[0].window.start_ns
    clean(res)


def test_literal_infinity_everywhere_says_what_was_seen(tmp_path):
    doc = small_trace()
    for e in doc["traceEvents"]:
        if "ts" in e and e.get("ph") != "M":
            e["ts"] = "__inf__"
    path = write_with_tokens(tmp_path / "t.json", doc, {"__inf__": "Infinity"})
    with pytest.raises(TraceError) as info:
        analyze(path)
    msg = info.value.message()
    assert "cut off" not in msg
    assert "no events with a possible timestamp" in msg and "Infinity" in msg


# --- wrong types, optional fields, invalid text --------------------------------------------------------


@pytest.mark.parametrize(
    "field, value",
    [
        ("name", ["a", "b"]),
        ("name", {"k": 1}),
        ("cat", ["kernel"]),
        ("cat", {"x": 1}),
        ("pid", [1]),
        ("tid", {"t": 2}),
        ("ph", ["X"]),
    ],
)
def test_wrong_typed_fields_read_as_absent_and_counted(tmp_path, field, value):
    doc = small_trace()
    for k in kernels_of(doc)[:3]:
        k[field] = value
    res = analyze(write_with_tokens(tmp_path / "t.json", doc, {}))
    assert any("3 fields have the wrong JSON type" in w for w in res.ranks[0].warnings), res.ranks[0].warnings
    clean(res)


def test_optional_fields_on_some_events_only(tmp_path):
    doc = small_trace()
    rng = np.random.default_rng(3)
    for e in doc["traceEvents"]:
        for key in ("args", "dur", "pid", "tid", "id", "cat", "name"):
            if key in e and rng.random() < 0.3:
                del e[key]
        if rng.random() < 0.3 and isinstance(e.get("args"), dict):
            e["args"]["grid"] = [1, 2] if rng.random() < 0.5 else [1, 2, 3, 4]
    res = analyze(write_with_tokens(tmp_path / "t.json", doc, {}))
    clean(res)


def test_invalid_utf8_is_replaced_and_counted(tmp_path):
    doc = small_trace()
    kernels_of(doc)[0]["name"] = "__k__"
    doc["deviceProperties"][0]["name"] = "__dev__"
    text = json.dumps(doc).encode()
    text = text.replace(b'"__k__"', b'"gemm_\xff\xfe_kernel"').replace(b'"__dev__"', b'"A100\xc3"')
    text = text.replace(b'"traceName": "', b'"traceName": "\\ud800')
    path = tmp_path / "t.json"
    path.write_bytes(text)
    res = analyze(str(path))
    rank = res.ranks[0]
    assert any("4 invalid UTF-8 sequences" in w for w in rank.warnings), rank.warnings  # ff, fe, c3, \ud800
    assert "gemm_\ufffd\ufffd_kernel" in [k.name for k in rank.evidence["top_kernels"]]
    clean(res)


def test_deep_nesting_is_refused_with_a_message(tmp_path):
    doc = small_trace()
    text = json.dumps(doc).replace('"traceEvents": [', '"traceEvents": [' + "[" * 50_000 + "]" * 50_000 + ",", 1)
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(TraceError, match="nests arrays or objects more deeply than any trace"):
        analyze(str(path))


def test_damaged_metadata_is_read_as_unknown(tmp_path):
    doc = small_trace()
    doc["distributedInfo"] = {"rank": 2**70, "world_size": -3, "backend": ["nccl"]}
    doc["deviceProperties"] = [{"id": "zero", "computeMajor": [8], "totalGlobalMem": -1, "name": {"n": 1}}, "x"]
    doc["baseTimeNanoseconds"] = "__big__"
    doc["someCounter"] = "__huge__"
    res = analyze(write_with_tokens(tmp_path / "t.json", doc, {"__big__": "1e400", "__huge__": "2" + "0" * 30}))
    m = res.ranks[0].metrics
    assert m["world_size"] is None and m["compute_capability"] is None and m["device_memory_bytes"] is None
    assert res.ranks[0].rank is None
    clean(res)


def _cpu_s() -> float:
    """User + system CPU seconds of this process and of its children that have been waited for."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def test_long_names_are_classified_in_bounded_time(tmp_path):
    doc = small_trace()
    huge = "ab(" * (8 * 1024 * 1024 // 3)
    kernels_of(doc)[0]["name"] = huge
    next(e for e in doc["traceEvents"] if e.get("cat") == "cpu_op")["name"] = huge
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    # CPU time of this process and its decoding workers, which other processes on the cores do not
    # stretch as they do wall time: about 12 s here, 47 s before names were matched on a bounded prefix
    t0 = _cpu_s()
    res = analyze(str(path))
    elapsed = _cpu_s() - t0
    assert elapsed < 25, elapsed
    clean(res)


# --- gzip streams and malformed JSON ---------------------------------------------------------------------


def test_two_concatenated_traces_are_named_as_such(tmp_path):
    data = json.dumps(small_trace()).encode()
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(data) + gzip.compress(data))
    with pytest.raises(TraceError) as info:
        analyze(str(path))
    msg = info.value.message()
    assert "holds 2 gzip members" in msg and f"decompressed byte {len(data):,}" in msg
    assert "truncated" not in msg and "ends before" not in msg


def test_a_trace_split_over_gzip_members_reads_whole(tmp_path):
    data = json.dumps(small_trace()).encode()
    whole = tmp_path / "whole.json"
    whole.write_bytes(data)
    split = tmp_path / "split.json.gz"
    split.write_bytes(gzip.compress(data[:3000]) + gzip.compress(data[3000:]) + b"\0" * 512)
    a, b = analyze(str(whole)), analyze(str(split))
    assert a.ranks[0].metrics == b.ranks[0].metrics
    assert b.ranks[0].warnings == []


def test_malformed_json_mid_file_says_where_not_truncated(tmp_path):
    data = bytearray(json.dumps(small_trace()).encode())
    at = data.index(b'"ph"', len(data) // 2)
    data[at] = 0x01
    path = tmp_path / "t.json"
    path.write_bytes(bytes(data))
    res = analyze(str(path))
    warning = next(w for w in res.ranks[0].warnings if "malformed" in w)
    assert "\\x01" in warning and "ends before" not in warning
    clean(res)


@pytest.mark.parametrize("tail", [b"12.", b"1e", b"-", b"1.5E+"])
def test_a_file_cut_inside_a_number_is_cut_short_not_malformed(tmp_path, tail):
    # JSON read to its end inside a number ("12." or "1e") is reported by the decoder as an invalid
    # number at the last byte: the file was cut off while being written, and is named so.
    text = json.dumps(small_trace()).encode()
    at = text.index(b'"ts": ', len(text) // 2) + len(b'"ts": ')
    path = tmp_path / "t.json"
    path.write_bytes(text[:at] + tail)
    res = analyze(str(path))
    warning = next(w for w in res.ranks[0].warnings if "JSON" in w)
    assert "ends before the trace is complete" in warning and "malformed" not in warning, warning
    clean(res)


# --- special files ------------------------------------------------------------------------------------------


def test_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "t.json"
    os.mkfifo(fifo)
    t0 = time.perf_counter()
    with pytest.raises(TraceError, match=r"is a named pipe \(FIFO\), not a trace file"):
        analyze(str(fifo))
    assert time.perf_counter() - t0 < 5


# --- nsys exports --------------------------------------------------------------------------------------------


@pytest.fixture
def nsys_db(tmp_path):
    from test_nsys import T0, _base

    db = _base(tmp_path / "n.sqlite")
    db.gpu(0, "NVIDIA H100 80GB HBM3", 85_000_000_000, 132, 9, 0)
    for i in range(6):
        s = T0 + 1_000_000 + i * 100_000
        db.runtime(100, 100, s - 20_000, s - 15_000, i + 1, "cudaLaunchKernel_v7000")
        db.kernel(100, s, s + 60_000, i + 1, f"sm90_xmma_gemm_{i}")
    return db.close()


def _mutate(path: str, *sql: str) -> None:
    conn = sqlite3.connect(path)
    for s in sql:
        conn.execute(s)
    conn.commit()
    conn.close()


def test_nsys_rows_ending_before_they_start_are_dropped_and_counted(nsys_db):
    _mutate(
        nsys_db,
        'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = "start" - 1000 WHERE rowid <= 2',
        'UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET "end" = "start" - 1000000000 WHERE rowid = 3',
    )
    res = analyze(nsys_db)
    rank = res.ranks[0]
    assert rank.metrics["kernel_count"] == 4
    assert any("dropped 3 events with impossible timestamps" in w for w in rank.warnings)
    assert rank.metrics["kernel_median_ns"] == 60_000
    clean(res)


@pytest.mark.parametrize("value", ["'abc'", "1e400", "-1e400", "X'00ff'", "9223372036854775807"])
def test_nsys_garbage_in_integer_columns(nsys_db, value):
    _mutate(
        nsys_db,
        f'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = {value} WHERE rowid = 1',
        f'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "gridX" = {value} WHERE rowid = 2',
        f'UPDATE TARGET_INFO_GPU SET "totalMemory" = {value}, "smCount" = {value}',
    )
    clean(analyze(nsys_db))


def test_nsys_text_that_is_not_utf8_or_a_blob(nsys_db):
    _mutate(
        nsys_db,
        "UPDATE StringIds SET value = CAST(X'41ff42' AS TEXT) WHERE value LIKE 'sm90_xmma_gemm_1'",
        "UPDATE StringIds SET value = X'00ff41' WHERE value LIKE 'sm90_xmma_gemm_2'",
        "UPDATE TARGET_INFO_GPU SET name = X'4869ff'",
    )
    res = analyze(nsys_db)
    text = res.to_json()
    assert (
        "A\u00ffB" in json.loads(text)["ranks"][0]["evidence"]["top_kernels"][0]["name"]
        or "A\\u00ffB" in text
        or "A\u00ffB" in text
    )
    assert any("not valid UTF-8" in w for w in res.ranks[0].warnings)
    clean(res)


def test_nsys_wal_export_gets_no_side_files_and_stays_identical(nsys_db, tmp_path):
    _mutate(nsys_db, "PRAGMA journal_mode=WAL")
    before = open(nsys_db, "rb").read()
    listing = sorted(os.listdir(tmp_path))
    clean(analyze(nsys_db))
    assert sorted(os.listdir(tmp_path)) == listing  # no -shm / -wal created beside the input
    assert open(nsys_db, "rb").read() == before


def test_nsys_corrupt_page_whose_error_message_is_not_utf8(nsys_db):
    data = bytearray(open(nsys_db, "rb").read())
    # Garble the schema text on the first page: SQLite's error message then quotes invalid UTF-8.
    at = data.index(b"CREATE TABLE")
    data[at + 13 : at + 40] = bytes([0x8B]) * 27
    open(nsys_db, "wb").write(bytes(data))
    with pytest.raises(TraceError, match="cannot be read as an SQLite database"):
        analyze(nsys_db)


def test_duplicated_launch_calls_do_not_push_the_launch_share_past_the_window(tmp_path):
    doc = small_trace()
    base = analyze(write_with_tokens(tmp_path / "a.json", doc, {})).ranks[0].metrics["cpu_launch_overhead_fraction"]
    runtime = [e for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime"]
    for e in runtime:  # the same calls again on a second thread
        doc["traceEvents"].append({**e, "tid": e["tid"] + 1})
    res = analyze(write_with_tokens(tmp_path / "b.json", doc, {}))
    assert res.ranks[0].metrics["cpu_launch_overhead_fraction"] == pytest.approx(base)
    assert res.ranks[0].evidence["launch"][0].launch_calls == 2 * len(
        [e for e in runtime if e["name"].startswith("cudaLaunch")]
    )
    clean(res)


def test_events_without_a_name_match_no_name_pattern(tmp_path):
    doc = small_trace()
    ks = kernels_of(doc)
    for k in ks[:2]:
        del k["name"]
    # The last string interned (an event of another category, read last) is an NCCL kernel name: a
    # kernel without a name (id -1) must not borrow its class.
    doc["traceEvents"].append(
        {
            "ph": "X",
            "cat": "custom",
            "name": "ncclDevKernel_AllReduce",
            "ts": ks[0]["ts"],
            "dur": 1.0,
            "pid": 1,
            "tid": 1,
        }
    )
    res = analyze(write_with_tokens(tmp_path / "t.json", doc, {}))
    m = res.ranks[0].metrics
    assert m["kernel_count"] == len(ks)
    assert m["comm_fraction"] == 0.0
    clean(res)


def test_a_single_nameless_kernel(tmp_path):
    path = tmp_path / "t.json"
    path.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 0.0}]}')
    clean(analyze(str(path)))


@pytest.mark.parametrize(
    "field, value",
    [
        ("pid", [False]),
        ("tid", [[1, 2]]),
        ("args", {"device": [0]}),
        ("args", {"correlation": [[1], [2]]}),
        ("args", {"grid": [[1, 2, 3]]}),
    ],
)
def test_nested_lists_never_make_columns_of_another_shape(tmp_path, field, value):
    doc = small_trace()
    for k in kernels_of(doc):  # every kernel of the chunk: the fast whole-column path sees only lists
        k[field] = value if field != "args" else {**k.get("args", {}), **value}
    res = analyze(write_with_tokens(tmp_path / "t.json", doc, {}))
    assert res.ranks[0].metrics["kernel_count"] == len(kernels_of(doc))
    clean(res)


@pytest.mark.parametrize(
    "value",
    [
        "9223372036854775808",
        "-9223372036854775809",
        "1e300",
        '"99999999999999999999999"',
        '"stream 99999999999999999999"',
    ],
)
def test_ids_beyond_int64_read_as_absent(tmp_path, value):
    doc = small_trace()
    kernels_of(doc)[0]["pid"] = "__id__"
    kernels_of(doc)[1]["tid"] = "__id__"
    res = analyze(write_with_tokens(tmp_path / "t.json", doc, {"__id__": value}))
    assert res.ranks[0].metrics["kernel_count"] == len(kernels_of(doc))
    clean(res)


def test_a_utf8_byte_order_mark_is_skipped(tmp_path):
    data = json.dumps(small_trace()).encode()
    plain, bom = tmp_path / "a.json", tmp_path / "b.json"
    plain.write_bytes(data)
    bom.write_bytes(b"\xef\xbb\xbf \n" + data)
    assert analyze(str(bom)).ranks[0].metrics == analyze(str(plain)).ranks[0].metrics


def test_utf16_is_named(tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(json.dumps(small_trace()).encode("utf-16"))
    with pytest.raises(TraceError, match="is UTF-16 text; JSON traces are UTF-8"):
        analyze(str(path))


@pytest.mark.parametrize("value", ["-9223372036854775808", "-5", "-2"])
def test_nsys_negative_string_ids_are_no_name(nsys_db, value):
    _mutate(
        nsys_db,
        f'UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET "nameId" = {value} WHERE rowid <= 2',
        f'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "shortName" = {value}, "demangledName" = {value} WHERE rowid = 1',
    )
    res = analyze(nsys_db)
    assert res.ranks[0].metrics["kernel_count"] == 6
    assert (
        "" in [k.name for k in res.ranks[0].evidence["top_kernels"]] or len(res.ranks[0].evidence["top_kernels"]) == 6
    )
    clean(res)


def test_nsys_schema_text_that_is_not_utf8_is_corruption(nsys_db):
    data = bytearray(open(nsys_db, "rb").read())
    at = data.index(b"INTEGER")
    data[at + 6] = 0xFF  # the declared type of a column, in sqlite_master
    open(nsys_db, "wb").write(bytes(data))
    try:
        res = analyze(nsys_db)
    except TraceError as exc:
        assert "SQLite" in exc.message()
    else:
        clean(res)
