"""Event boundaries in damaged buffers: the fast search finds exactly what trying every boundary finds,
and a damaged stretch costs a few decodes, not one per boundary in it."""

from __future__ import annotations

import json
import random

import msgspec
import pytest

from trace_builder import TraceBuilder, training_steps
from tracedoc.ingest.kineto import cuts
from tracedoc.ingest.kineto import stream
from tracedoc.ingest.kineto.cuts import DAMAGED, cut_and_decode, cuts_backward, salvage
from tracedoc.ingest.kineto.decode import _decode_events
from tracedoc.ingest.kineto.rows import decode_piece


def events_text(steps: int = 3, kernels: int = 4) -> bytes:
    """The inside of a traceEvents array: events joined by ``, `` (no brackets)."""
    b = TraceBuilder()
    training_steps(b, steps=steps, kernels=kernels)
    return ", ".join(json.dumps(e) for e in b.to_dict()["traceEvents"]).encode()


def salvage_by_trying_every_boundary(buf: bytes):
    """The reference: the whole buffer, then every boundary from the last, each as is and without a
    trailing ``]}``; the first that decodes."""
    ends = [len(buf.rstrip())] + [comma for comma, _ in cuts_backward(buf)]
    for end in ends:
        piece = buf[:end].rstrip().rstrip(b"]}").rstrip()
        for candidate in (buf[:end], piece):
            try:
                return _decode_events(b"[" + candidate + b"]"), end
            except msgspec.DecodeError:
                continue
    return None


def damage(rng: random.Random, text: bytes) -> bytes:
    b = bytearray(text)
    pos = rng.randrange(len(b))
    kind = rng.randrange(5)
    if kind == 0:
        b[pos] ^= 0xFF
    elif kind == 1:
        b[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 12)))
    elif kind == 2:
        b[pos] = ord(rng.choice('{}[],:"'))
    elif kind == 3:
        b[pos:pos] = b", 7"  # an entry that is not an event object
    else:
        del b[pos:]
    return bytes(b)


def test_salvage_keeps_what_trying_every_boundary_keeps():
    rng = random.Random(2)
    text = events_text(steps=2, kernels=2)
    for _ in range(400):
        buf = damage(rng, text)
        if rng.random() < 0.3:
            buf = damage(rng, buf)
        want = salvage_by_trying_every_boundary(buf)
        got = salvage(buf)
        assert (got is None) == (want is None), buf
        if got is not None:
            assert got[1] == want[1] and len(got[0]) == len(want[0]), buf


def test_cut_and_decode_agrees_with_trying_boundaries_and_says_when_reading_on_cannot_help():
    rng = random.Random(4)
    text = events_text(steps=2, kernels=2)
    for _ in range(400):
        buf = damage(rng, text)
        got = cut_and_decode(buf)
        decodable = []
        for comma, brace in cuts_backward(buf):
            try:
                decodable.append((len(_decode_events(b"[" + buf[:comma] + b"]")), brace))
            except msgspec.DecodeError:
                pass
        if isinstance(got, tuple):  # the last boundary that decodes, if it is among the first tried
            assert (len(got[0]), got[1]) == decodable[0], buf
        elif got is DAMAGED:  # then no longer buffer could decode past the damage either
            for extra in (b", {}", b', {"ph": "X", "ts": 1, "dur": 1}'):
                assert not isinstance(cut_and_decode(buf + extra), tuple), buf


def test_a_damaged_stretch_costs_a_few_decodes_not_one_per_boundary(monkeypatch):
    text = events_text(steps=40, kernels=20)
    middle = len(text) // 2
    buf = text[:middle] + b"\x00garbage{" + text[middle:]
    calls = [0]

    def counted(buf, end):
        calls[0] += 1
        return decode_piece(buf, end)

    monkeypatch.setattr(cuts, "decode_piece", counted)
    after = sum(1 for comma, _ in cuts_backward(buf) if comma > middle)
    assert after > 500  # trying each would take that many decodes
    good = salvage(buf)
    assert good is not None and good[1] <= middle and calls[0] <= 12
    calls[0] = 0
    assert cut_and_decode(buf[middle - 5 :]) is DAMAGED and calls[0] <= 12


@pytest.mark.parametrize("where", [0.3, 0.7])
def test_a_damaged_file_is_read_to_the_damage_and_no_further(tmp_path, where, monkeypatch):
    # The streaming reader stops trying boundaries once the bytes held are malformed before all of
    # them: the rest of the file is kept for the count of dropped bytes, and decoded at most once.
    monkeypatch.setattr(stream, "PARALLEL_MIN_BYTES", 1 << 40)
    b = TraceBuilder()
    training_steps(b, steps=60, kernels=20)
    parts = [json.dumps(e).encode() for e in b.to_dict()["traceEvents"]]
    text = b", ".join(parts)
    cut = int(len(text) * where)
    ends = [sum(len(x) + 2 for x in parts[: i + 1]) - 2 for i in range(len(parts))]
    before = sum(1 for e in ends if e <= cut)  # whole events before the damage
    doc = b'{"traceEvents": [' + text[:cut] + b"\x07oops" + text[cut:] + b"]}"
    p = tmp_path / "t.json"
    p.write_bytes(doc)
    calls, decoded = [0], [0]

    def counted(buf, end):
        calls[0] += 1
        decoded[0] += end
        return decode_piece(buf, end)

    monkeypatch.setattr(cuts, "decode_piece", counted)
    trace = stream.read_kineto(str(p), chunk_bytes=4096)
    assert decoded[0] <= 4 * len(doc)  # each byte a few times, not once per chunk read after the damage
    assert f"the JSON is malformed after event {before:,} " in trace.meta.truncated, trace.meta.truncated
    assert calls[0] <= 2 * len(doc) // 4096 + 20  # a few per chunk, not one per boundary after the damage
