"""The Perfetto overlay: the original trace's events unchanged, plus tracedoc's tracks, in Chrome
trace JSON that chrome://tracing and ui.perfetto.dev accept."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import shared_traces
from test_critical_path import comm_loop, dataloader_loop

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *args], capture_output=True, text=True, env=env, timeout=300
    )


def _read(path: Path) -> dict:
    raw = path.read_bytes()
    return json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)


def check_chrome_trace(doc: dict, added: list) -> None:
    """The format checks chrome://tracing applies to the events tracedoc adds."""
    assert isinstance(doc["traceEvents"], list)
    for e in added:
        assert e["ph"] in ("X", "M", "s", "f"), e
        assert isinstance(e["pid"], int) and isinstance(e["name"], str), e
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and e["dur"] >= 0 and "tid" in e, e
        if e["ph"] in ("s", "f"):
            assert isinstance(e["ts"], (int, float)) and isinstance(e["id"], str), e


def _slices_by_track(events: list) -> dict:
    out = defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            out[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e.get("dur", 0)))
    return out


def test_overlay_keeps_every_original_event_and_adds_tracks(tmp_path):
    src = comm_loop(tmp_path, False, dataloader_us=2000.0)
    original = _read(src)
    html, overlay = tmp_path / "report.html", tmp_path / "report.perfetto.json"
    proc = _cli("analyze", str(src), "-f", "html", "-o", str(html), "--perfetto", str(overlay))
    assert proc.returncode == 0, proc.stderr
    doc = _read(overlay)
    n = len(original["traceEvents"])
    assert doc["traceEvents"][:n] == original["traceEvents"]
    assert {k: v for k, v in doc.items() if k != "traceEvents"} == {
        k: v for k, v in original.items() if k != "traceEvents"
    }
    added = doc["traceEvents"][n:]
    check_chrome_trace(doc, added)
    names = {e["args"]["name"] for e in added if e["ph"] == "M" and e["name"] in ("process_name", "thread_name")}
    assert {"tracedoc", "GPU idle · by cause", "critical path"} <= names
    assert any(name.startswith("finding · comm_bound") for name in names)
    # the critical path of each step: slices that do not overlap and cover the step
    result = json.loads(_cli("analyze", str(src), "-f", "json").stdout)["ranks"][0]["critical_path"]
    path = [e for e in added if e.get("cat") == "tracedoc.critical_path" and e["ph"] == "X"]
    for row in result["steps"]:
        mine = sorted((e["ts"], e["ts"] + e["dur"]) for e in path if e["args"]["step"] == row["step"])
        assert all(b[0] >= a[1] - 1e-6 for a, b in zip(mine, mine[1:]))
        covered_us = sum(b - a for a, b in mine)
        assert covered_us == pytest.approx((row["step_ns"] - row["idle_ns"]) / 1000, abs=0.01 * row["step_ns"] / 1000)
    # flow arrows start and end on slices of the original tracks (launch call -> kernel, kernel -> sync)
    tracks = _slices_by_track(original["traceEvents"])
    flows = [e for e in added if e["ph"] in ("s", "f")]
    assert flows and {e["id"] for e in flows if e["ph"] == "s"} == {e["id"] for e in flows if e["ph"] == "f"}
    for e in flows:
        assert any(a - 1e-3 <= e["ts"] <= b + 1e-3 for a, b in tracks[(e["pid"], e["tid"])]), e
    page = html.read_text()
    assert 'href="./report.perfetto.json"' in page  # a relative path, never a URL scheme
    assert "critical path" in page


def test_overlay_of_a_gzipped_output(tmp_path):
    src = dataloader_loop(tmp_path, 4000.0)
    out = tmp_path / "overlay.json.gz"
    proc = _cli("analyze", str(src), "--perfetto", str(out))
    assert proc.returncode == 0, proc.stderr
    doc = _read(out)
    assert any(e.get("name") == "idle: dataloader" for e in doc["traceEvents"])


def test_overlay_needs_one_trace_file(tmp_path):
    for rank in (0, 1):
        dataloader_loop(tmp_path, 1000.0).rename(tmp_path / f"rank{rank}.pt.trace.json.gz")
    proc = _cli("analyze", str(tmp_path), "-j", "1", "--perfetto", str(tmp_path / "o.json"))
    assert proc.returncode == 2
    assert "--perfetto" in proc.stderr and "one trace file" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.shared
def test_overlay_of_a_real_trace(tmp_path):
    src = shared_traces() / "kineto" / "v100_resnet_ns_rank0.pt.trace.json.gz"
    out = tmp_path / "resnet.perfetto.json"
    proc = _cli("analyze", str(src), "--perfetto", str(out))
    assert proc.returncode == 0, proc.stderr
    original, doc = _read(src), _read(out)
    n = len(original["traceEvents"])
    assert doc["traceEvents"][:n] == original["traceEvents"]
    check_chrome_trace(doc, doc["traceEvents"][n:])
    cats = {e.get("cat") for e in doc["traceEvents"][n:]}
    assert {"tracedoc.critical_path", "tracedoc.idle"} <= cats


def test_critical_path_slices_are_named_after_what_they_cover(tmp_path):
    src = dataloader_loop(tmp_path, 4000.0)
    out = tmp_path / "overlay.json.gz"
    proc = _cli("analyze", str(src), "--perfetto", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:2] == b"\x1f\x8b"  # .gz: compressed
    doc = _read(out)
    path = [e for e in doc["traceEvents"] if e.get("cat") == "tracedoc.critical_path" and e["ph"] == "X"]
    named = [e for e in path if "op" in e.get("args", {})]
    assert named and len(named) >= len(path) // 2
    originals = {(e.get("pid"), e.get("tid")): [] for e in _read(src)["traceEvents"] if e.get("ph") == "X"}
    for e in _read(src)["traceEvents"]:
        if e.get("ph") == "X":
            originals[(e.get("pid"), e.get("tid"))].append(e)
    for e in named:
        category, _, shown = e["name"].partition(": ")
        assert category in ("compute", "cpu", "memcpy", "launch_overhead", "comm", "comm_wait", "comm_transfer")
        mid = e["ts"] + e["dur"] / 2
        # the op is one of the original trace's events running at the slice's middle
        assert any(
            o["name"] == e["args"]["op"] and o["ts"] <= mid <= o["ts"] + o.get("dur", 0)
            for track in originals.values()
            for o in track
        )
        assert shown and len(shown) <= len(e["args"]["op"])
