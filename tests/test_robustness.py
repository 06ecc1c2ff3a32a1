"""Damaged inputs never crash: every cut or corrupted copy of a real trace gives numbers or a clear error."""

import gzip
import random

import pytest

from conftest import shared_traces
from tracedoc.cli import main

SOURCES = ["cuda_event_sync.json.gz", "h100_2026_format.json", "dlrm_128rank_rank0.json.gz"]


def raw(name: str) -> bytes:
    data = (shared_traces() / "kineto" / name).read_bytes()
    return gzip.decompress(data) if name.endswith(".gz") else data


def analyse_in_process(path, capsys) -> tuple[int, str]:
    rc = main(["analyze", str(path), "--format", "json", "--no-progress"])
    err = capsys.readouterr().err
    return rc, err


@pytest.mark.parametrize("name", SOURCES)
def test_truncated_anywhere(name, tmp_path, capsys):
    data = raw(name)
    rng = random.Random(name)
    cuts = sorted(rng.sample(range(1, len(data)), 12)) + [len(data) // 2, len(data) - 1]
    for cut in cuts:
        if not data[cut:].strip():
            continue  # only trailing whitespace removed: the JSON is complete
        p = tmp_path / f"cut{cut}.json"
        p.write_bytes(data[:cut])
        rc, err = analyse_in_process(p, capsys)
        assert rc in (0, 1), (cut, err)
        if rc == 1:
            assert err.startswith("tracedoc: error: ") and str(p) in err, (cut, err)
        else:
            assert "cut" in err or "ends" in err, (cut, err)  # the truncation is reported


@pytest.mark.parametrize("name", SOURCES[:2])
def test_corrupted_bytes(name, tmp_path, capsys):
    data = bytearray(raw(name))
    rng = random.Random(7)
    for i in range(10):
        damaged = bytearray(data)
        for _ in range(3):
            pos = rng.randrange(len(damaged))
            damaged[pos] = rng.choice(b'{}[]",:0x\\')
        p = tmp_path / f"bad{i}.json"
        p.write_bytes(bytes(damaged))
        rc, err = analyse_in_process(p, capsys)
        assert rc in (0, 1), err
        if rc == 1:
            assert err.startswith("tracedoc: error: "), err
