"""The compiled scan reads 8 bytes at a time where it can (a run of plain ASCII in a string, a run of digits,
a string's hash): at every length and with the byte that ends a fast run at every position of a word, it
reads what msgspec reads, and declines what it declined before (a control character, invalid UTF-8)."""

from __future__ import annotations

import random

import msgspec
import numpy as np
import pytest

from tracedoc.ingest.kineto import rows

try:
    from tracedoc.ingest.kineto import _kscan
except ImportError:
    _kscan = None

pytestmark = pytest.mark.skipif(
    _kscan is None,
    reason="the compiled Kineto decoder is not built (no C compiler at install); the pure-Python "
    "decoder is tested by the rest of the suite",
)


def _both(events: list[str]):
    data = b"[" + ", ".join(events).encode() + b"]"
    scan = _kscan.scan(data)
    assert scan is not None
    return rows.ScanRows(data, scan), rows.StructRows(msgspec.json.decode(data, type=list[rows.Event]))


def _integers() -> list[str]:
    rng = random.Random(11)
    out = []
    for n in range(1, 20):
        digits = ["9" * n, "1" + "0" * (n - 1), "".join(rng.choice("0123456789") for _ in range(n)).lstrip("0") or "0"]
        for d in digits:
            out += [d, "-" + d]
    return out


def test_integers_of_every_length():
    texts = _integers()
    scanned, structs = _both([f'{{"ph": "X", "args": {{"flops": {t}, "Seq": {t}}}}}' for t in texts])
    for field in ("flops", "seq"):
        assert scanned.values(field) == structs.values(field)


def test_times_of_every_length():
    rng = random.Random(5)
    texts = []
    for n in range(1, 19):
        whole = "".join(rng.choice("0123456789") for _ in range(n)).lstrip("0") or "0"
        for frac in ("", ".5", ".125", ".1234567", ".9999"):
            texts += [whole + frac, "-" + whole + frac]
    scanned, structs = _both([f'{{"ts": {t}, "dur": {t}}}' for t in texts])
    for a, b in zip(scanned.times(), structs.times()):
        np.testing.assert_array_equal(a, b)


SPECIALS = ['\\"', "\\\\", "\\n", "\\u00e9", "\\ud83d\\ude00", "é", "€", "😀", "a"]


@pytest.mark.parametrize("special", SPECIALS)
def test_strings_with_a_special_at_every_position(special):
    names = [f"{'x' * k}{special}{'y' * (n - k)}" for n in range(0, 33) for k in range(0, n + 1)]
    events = [f'{{"ph": "X", "name": "{s}", "cat": "z{s}"}}' for s in names]  # cat: one byte further on
    scanned, structs = _both(events)
    for field in ("name", "cat"):
        assert scanned.values(field) == structs.values(field)


@pytest.mark.parametrize("bad", [b"\x01", b"\x1f", b"\xff", b"\xc3", b"\xed\xa0\x80"])
def test_a_bad_byte_at_every_position_is_declined(bad):
    for n in range(0, 24):
        for k in range(0, n + 1):
            text = b"q" * k + bad + b"r" * (n - k)
            assert _kscan.scan(b'[{"ph": "X", "name": "' + text + b'"}]') is None, (n, k)


def test_many_long_names_keep_their_order_of_first_appearance():
    """Every distinct string gets the code of its first appearance whatever the hash (8 bytes at a time)."""
    rng = random.Random(3)
    pool = ["".join(rng.choice("abcdefgh_<>:, ") for _ in range(rng.randrange(1, 300))) for _ in range(3000)]
    names = [rng.choice(pool) for _ in range(20000)]
    scanned, structs = _both([f'{{"ph": "X", "name": "{s}"}}' for s in names])
    assert scanned.values("name") == structs.values("name") == names
    distinct = scanned._arrays[5]
    assert distinct == list(dict.fromkeys(["X", *names]))  # each event's "ph" comes before its name
