"""GPU utilization / est. SM efficiency / est. achieved occupancy against the TensorBoard plugin.

``tbp_gpu_metrics_input.json`` and ``tbp_gpu_metrics_expected.json`` are the plugin's
``tb_plugin/test/gpu_metrics_{input,expected}.json``. The expected file is the input plus the plugin's
counter events, but its ``test_dump_gpu_metrics`` wrote those counters from hand-set values scaled up
"for easy to see in UI": the real SM efficiency values are 1/10 and the real utilization buckets 1/100
of what the file shows. Both series also start with a (1, 0) "baseline" pair at the first bucket start.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import tracedoc
from tracedoc.analyses.gputime.gpu_metrics import gpu_metrics, sm_efficiency_steps, utilization_buckets
from tracedoc.analyses.gputime.window import find_steps, find_window

KINETO = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "kineto"
INPUT = KINETO / "tbp_gpu_metrics_input.json"
EXPECTED = KINETO / "tbp_gpu_metrics_expected.json"

SM_EFF_SCALE = 10  # "Real data values are 1/10 of these" (plugin test_profiler.py, test_dump_gpu_metrics)
UTIL_SCALE = 100  # "Real data values are 1/100 of these"
US = 1000  # ns per µs

pytestmark = pytest.mark.skipif(
    not (INPUT.is_file() and EXPECTED.is_file()), reason="shared TensorBoard-plugin traces missing"
)


def _counters(events: list[dict], name: str, key: str) -> list[tuple[int, float]]:
    pts = [(int(e["ts"]) * US, float(e["args"][key])) for e in events if e.get("ph") == "C" and e.get("name") == name]
    # Drop the plugin's y-axis baseline: (first_ts, 1) then (first_ts, 0).
    assert pts[0][1] == 1 and pts[1] == (pts[0][0], 0)
    return pts[2:]


def _step_function(pts: list[tuple[int, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Counter events → change points; of several events at one ts the last one holds."""
    ts = np.array([p[0] for p in pts], dtype=np.int64)
    v = np.array([p[1] for p in pts], dtype=np.float64)
    last = np.append(ts[1:] != ts[:-1], True)
    ts, v = ts[last], v[last]
    keep = np.ones(v.size, dtype=bool)
    keep[1:] = v[1:] != v[:-1]
    return ts[keep], v[keep]


@pytest.fixture(scope="module")
def expected():
    ev = json.loads(EXPECTED.read_text())["traceEvents"]
    steps = [e for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")]
    assert len(steps) == 1
    kernels = [e for e in ev if e.get("ph") == "X" and e.get("cat") == "Kernel"]
    # Plugin steps span: CPU step extended to the end of the device work it launched (none runs past it).
    lo = int(steps[0]["ts"]) * US
    hi = max(int(steps[0]["ts"] + steps[0]["dur"]), max(int(k["ts"] + k["dur"]) for k in kernels)) * US
    prof = next(e for e in ev if e.get("cat") == "Trace" and e.get("name") == "PyTorch Profiler (0)")
    sm = _counters(ev, "GPU 0 Est. SM Efficiency", "Est. SM Efficiency")
    util = _counters(ev, "GPU 0 Utilization", "GPU Utilization")
    return {
        "lo": lo,
        "hi": hi,
        "sm": sm,
        "util": util,
        "trace_span": (int(prof["ts"]) * US, int(prof["ts"] + prof["dur"]) * US),
        "has_occupancy_arg": any("est. achieved occupancy %" in k.get("args", {}) for k in kernels),
    }


@pytest.fixture(scope="module")
def result():
    t = tracedoc.load(INPUT)
    w = find_window(t, find_steps(t))
    return t, w, gpu_metrics(t, w.start_ns, w.end_ns)


def test_window_is_plugin_steps_span(expected, result):
    _, w, _ = result
    assert (w.start_ns, w.end_ns) == (expected["lo"], expected["hi"])
    assert w.end_ns - w.start_ns == 13_410 * US


def test_sm_efficiency_timeline_matches_counters(expected, result):
    _, _, res = result
    assert [d["device"] for d in res] == [0]
    d = res[0]
    assert d["sm_count"] == 80
    exp_ts, exp_v = _step_function(expected["sm"])
    got_ts = np.array([p[0] for p in d["sm_efficiency_timeline"]], dtype=np.int64)
    got_v = np.array([p[1] for p in d["sm_efficiency_timeline"]], dtype=np.float64)
    np.testing.assert_array_equal(got_ts, exp_ts)
    np.testing.assert_allclose(got_v * SM_EFF_SCALE, exp_v, rtol=1e-12, atol=0)


def test_sm_efficiency_average_matches_counters(expected, result):
    _, _, res = result
    lo, hi = expected["lo"], expected["hi"]
    ts, v = _step_function(expected["sm"])
    seg = np.clip(np.minimum(ts[1:], hi) - np.maximum(ts[:-1], lo), 0, None)
    want = float(np.dot(v[:-1], seg)) / SM_EFF_SCALE / (hi - lo)
    assert res[0]["sm_efficiency"] == pytest.approx(want, rel=1e-12)
    # 0.7375 µs of SM-weighted kernel time over the 13 410 µs step span.
    assert res[0]["sm_efficiency"] == pytest.approx(0.7375 / 13_410, rel=1e-12)


def test_gpu_utilization_matches_buckets(expected, result):
    t, _, res = result
    lo, hi = expected["lo"], expected["hi"]
    buckets = expected["util"]
    edges = np.array([b[0] for b in buckets], dtype=np.int64)
    vals = np.array([b[1] for b in buckets[:-1]], dtype=np.float64) / UTIL_SCALE
    assert buckets[-1][1] == 0 and edges[-1] == expected["trace_span"][1]
    # Bucket timeline: same edges and values as the plugin's (de-scaled) counters.
    got = utilization_buckets(t, 0, *expected["trace_span"])
    assert [g[0] for g in got] == edges.tolist()
    np.testing.assert_allclose([g[1] for g in got[:-1]], vals, rtol=1e-12, atol=1e-15)
    # Every kernel of the SM-efficiency series lies inside the step span, so the busy time the buckets
    # add up to is all inside it: utilization = sum(value * bucket length) / span.
    sm_ts = [p[0] for p in expected["sm"]]
    assert lo <= min(sm_ts) and max(sm_ts) <= hi
    busy = float(np.dot(vals, np.diff(edges)))
    assert busy == pytest.approx(48 * US, rel=1e-12)
    assert res[0]["gpu_utilization"] == pytest.approx(busy / (hi - lo), rel=1e-12)
    assert res[0]["gpu_utilization"] == pytest.approx(48 / 13_410, rel=1e-12)


def test_occupancy_absent_like_the_plugin(expected, result):
    # The input kernels carry "theoretical occupancy %" only; the plugin reads "est. achieved occupancy %".
    assert not expected["has_occupancy_arg"]
    assert result[2][0]["est_occupancy"] is None


# -- hand-built fixtures ---------------------------------------------------------------------------


def _kernel(
    ts: float, dur: float, device: int = 0, stream: int = 7, bps: float | None = None, occ: float | None = None
) -> dict:
    args = {
        "device": device,
        "stream": stream,
        "correlation": int(ts * 10) + device,
        "grid": [1, 1, 1],
        "block": [128, 1, 1],
    }
    if bps is not None:
        args["blocks per SM"] = bps
    if occ is not None:
        args["est. achieved occupancy %"] = occ
    return {
        "ph": "X",
        "cat": "kernel",
        "name": "k",
        "pid": device,
        "tid": f"stream {stream}",
        "ts": ts,
        "dur": dur,
        "args": args,
    }


def _load(tmp_path: Path, kernels: list[dict]):
    doc = {
        "schemaVersion": 1,
        "deviceProperties": [
            {"id": i, "name": "GPU", "numSms": 80, "computeMajor": 8, "computeMinor": 0} for i in range(2)
        ],
        "traceEvents": kernels,
    }
    p = tmp_path / "t.json"
    p.write_text(json.dumps(doc))
    return tracedoc.load(p)


def _one(tmp_path, kernels, lo_us, hi_us, **kw) -> dict:
    res = gpu_metrics(_load(tmp_path, kernels), lo_us * US, hi_us * US, **kw)
    assert len(res) == 1
    return res[0]


def test_blocks_above_sm_count_cap_at_one(tmp_path):
    d = _one(tmp_path, [_kernel(1000, 100, bps=2.5, occ=50)], 1000, 1200)
    assert d["gpu_utilization"] == pytest.approx(0.5)
    assert d["sm_efficiency"] == pytest.approx(0.5)
    assert d["est_occupancy"] == pytest.approx(50)
    assert d["sm_efficiency_timeline"] == [(1000 * US, 1.0), (1100 * US, 0.0)]


def test_overlapping_kernels_sum_then_cap(tmp_path):
    ks = [_kernel(1000, 100, stream=7, bps=0.5, occ=40), _kernel(1050, 100, stream=8, bps=0.75, occ=20)]
    d = _one(tmp_path, ks, 1000, 1200)
    assert d["gpu_utilization"] == pytest.approx(150 / 200)
    assert d["sm_efficiency"] == pytest.approx((0.5 * 50 + 1.0 * 50 + 0.75 * 50) / 200)
    assert d["est_occupancy"] == pytest.approx((40 * 100 + 20 * 100) / 200)
    assert d["sm_efficiency_timeline"] == [(1000 * US, 0.5), (1050 * US, 1.0), (1100 * US, 0.75), (1150 * US, 0.0)]


def test_plugin_unit_test_case(tmp_path):
    """The plugin's own test_gpu_utilization numbers (device 1, steps span [100, 220) µs)."""
    ks = [
        _kernel(130, 10, device=1, stream=7, bps=0.5, occ=0.6),
        _kernel(135, 15, device=1, stream=8, bps=0.6, occ=0.1),
        _kernel(150, 0, device=1, stream=8, bps=0.3, occ=0.2),  # zero duration: no weight
        _kernel(145, 25, device=1, stream=7, bps=0.3, occ=1.0),
        _kernel(200, 20, device=1, stream=7, bps=10.5, occ=0.3),
    ]
    d = _one(tmp_path, ks, 100, 220)
    assert d["device"] == 1
    assert d["gpu_utilization"] == pytest.approx((40 + 20) / 120)
    assert d["sm_efficiency"] == pytest.approx((0.5 * 5 + 1.0 * 5 + 0.6 * 5 + 0.9 * 5 + 0.3 * 20 + 1.0 * 20) / 120)
    assert d["est_occupancy"] == pytest.approx((0.6 * 10 + 0.1 * 15 + 1.0 * 25 + 0.3 * 20) / (10 + 15 + 25 + 20))
    tl = [(t // US, v) for t, v in d["sm_efficiency_timeline"]]
    assert [t for t, _ in tl] == [130, 135, 140, 145, 150, 170, 200, 220]
    np.testing.assert_allclose([v for _, v in tl], [0.5, 1.0, 0.6, 0.9, 0.3, 0.0, 1.0, 0.0])


def test_kernel_partly_outside_window(tmp_path):
    ks = [_kernel(1050, 100, bps=0.5, occ=60), _kernel(1300, 100, bps=0.9, occ=10)]
    d = _one(tmp_path, ks, 1100, 1200)
    assert d["kernels_in_window"] == 1
    assert d["gpu_utilization"] == pytest.approx(0.5)
    assert d["sm_efficiency"] == pytest.approx(0.5 * 50 / 100)
    assert d["est_occupancy"] == pytest.approx(60)
    # Timeline covers every kernel (plugin behaviour) unless clipped.
    assert d["sm_efficiency_timeline"] == [(1050 * US, 0.5), (1150 * US, 0.0), (1300 * US, 0.9), (1400 * US, 0.0)]
    d = _one(tmp_path, ks, 1100, 1200, clip_timeline=True)
    assert d["sm_efficiency_timeline"] == [(1100 * US, 0.5), (1150 * US, 0.0)]


def test_kernels_only_outside_window(tmp_path):
    d = _one(tmp_path, [_kernel(1300, 100, bps=0.9, occ=10)], 1000, 1200)
    assert d["gpu_utilization"] == 0.0
    assert d["sm_efficiency"] is None and d["est_occupancy"] is None


def test_no_blocks_per_sm_or_occupancy_gives_none(tmp_path):
    d = _one(
        tmp_path, [_kernel(1000, 100), _kernel(1100, 50, bps=0.0), _kernel(1150, 10, bps=-1.0, occ=-5)], 1000, 1200
    )
    assert d["gpu_utilization"] == pytest.approx(160 / 200)
    assert d["sm_efficiency"] is None
    assert d["est_occupancy"] is None
    assert d["sm_efficiency_timeline"] == []


def test_per_device_split(tmp_path):
    res = gpu_metrics(
        _load(tmp_path, [_kernel(1000, 100, device=0, bps=0.5), _kernel(1000, 50, device=1, bps=2)]),
        1000 * US,
        1100 * US,
    )
    assert [(d["device"], d["sm_efficiency"]) for d in res] == [(0, pytest.approx(0.5)), (1, pytest.approx(0.5))]


def test_step_function_float_residue():
    # 0.1 + 0.2 - 0.1 - 0.2 is not exactly 0 in floating point; the gap after must read 0, not 3e-17.
    pts, vals = sm_efficiency_steps(np.array([0, 0, 20]), np.array([10, 10, 30]), np.array([0.1, 0.2, 0.3]))
    assert pts.tolist() == [0, 10, 20, 30]
    np.testing.assert_allclose(vals, [0.3, 0.0, 0.3, 0.0], rtol=1e-12, atol=0)
