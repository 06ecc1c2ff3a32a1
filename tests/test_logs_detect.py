"""Generated logs with known NaN, spike, plateau, dip, stall, divergence and schedule positions: the
analyses must find exactly those, and nothing in plain noise."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tracedoc.api import analyze_log
from tracedoc.logs import detect
from tracedoc.logs.analysis import LogOptions, analyze_series
from tracedoc.logs.reader import read_log


def write_jsonl(path, columns: dict[str, np.ndarray], steps=None) -> str:
    n = len(next(iter(columns.values())))
    steps = np.arange(1, n + 1) if steps is None else steps
    with open(path, "w") as fh:
        for i in range(n):
            rec = {"step": int(steps[i])}
            for k, v in columns.items():
                x = v[i]
                rec[k] = x.tolist() if isinstance(x, np.ndarray) else (None if x is None else float(x))
            fh.write(json.dumps(rec) + "\n")
    return str(path)


def where(a: dict) -> tuple[int, int]:
    return (a["step"], a["step"]) if "step" in a else (a["start_step"], a["end_step"])


def kinds(result, kind):
    return [where(a) for a in result.anomalies if a["kind"] == kind]


def decaying_loss(n: int, rng, noise=0.01) -> np.ndarray:
    t = np.arange(1, n + 1)
    base = 2.0 + 3.0 * np.exp(-t / (n / 5))
    return base * (1 + rng.normal(0, noise, n))


def test_spike_plateau_and_nan_positions(tmp_path):
    rng = np.random.default_rng(1)
    loss = decaying_loss(2000, rng)
    loss[699] *= 1.5  # step 700: one isolated point far above
    loss[1199:1219] *= 1.4  # steps 1200-1219: a plateau, then back
    loss[1499:1503] = np.nan  # steps 1500-1503
    result = analyze_log(write_jsonl(tmp_path / "l.jsonl", {"loss": loss}))
    assert kinds(result, "loss_spike") == [(700, 700), (1200, 1219)]
    assert kinds(result, "nan") == [(1500, 1503)]
    spikes = [a for a in result.anomalies if a["kind"] == "loss_spike"]
    assert spikes[0]["persistent"] is False and spikes[1]["persistent"] is False
    assert result.metrics["loss_nonfinite_count"] == 4
    assert result.metrics["divergence"] is False
    assert {"TD601", "TD602"} <= {f.rule_id for f in result.findings}


def test_noise_is_not_a_spike(tmp_path):
    rng = np.random.default_rng(7)
    loss = decaying_loss(20_000, rng, noise=0.01)
    med = np.median(loss[-500:])
    loss[15_000] = med * 1.035  # a noisy point, 3.5 sigma up, is still noise
    result = analyze_log(write_jsonl(tmp_path / "l.jsonl", {"loss": loss}))
    assert kinds(result, "loss_spike") == []
    assert result.labels == []


def test_persistent_level_shift_is_one_episode(tmp_path):
    rng = np.random.default_rng(3)
    loss = 2.0 * (1 + rng.normal(0, 0.005, 1000))
    loss[600:] += 0.5  # from step 601 the loss sits 25% higher for good
    result = analyze_log(write_jsonl(tmp_path / "l.jsonl", {"loss": loss}))
    spikes = [a for a in result.anomalies if a["kind"] == "loss_spike"]
    assert len(spikes) == 1
    assert where(spikes[0])[0] == 601
    assert spikes[0]["persistent"] is True


def test_throughput_dip_and_periodic_stall_positions(tmp_path):
    rng = np.random.default_rng(2)
    n = 2000
    steps = np.arange(1, n + 1)
    tps = 10_000 + rng.normal(0, 100, n)
    tps[steps % 100 == 0] = 4000  # a checkpoint every 100 steps
    tps[(steps >= 1450) & (steps <= 1549)] = 6000  # a 100-step dip
    result = analyze_log(write_jsonl(tmp_path / "t.jsonl", {"tokens_per_sec": tps}))
    warm = max(3, n // 100)
    assert result.metrics["periodic_stall_period_steps"] == 100
    # step 1500 lies inside the dip (an episode 1450-1549 that does not start on the period)
    assert kinds(result, "periodic_stall") == [(s, s) for s in range(100, n + 1, 100) if s > warm and s != 1500]
    assert kinds(result, "throughput_dip") == [(1450, 1549)]
    # time lost, worked out from the generated values: 100 steps at 6000 instead of the median
    p50 = np.percentile(tps[warm:], 50)
    total = np.sum(1 / tps[warm:])
    assert result.metrics["throughput_dip_lost_fraction"] == pytest.approx(100 * (1 / 6000 - 1 / p50) / total, rel=1e-6)
    stall_lost = sum(1 / 4000 - 1 / p50 for s in range(100, n + 1, 100) if s > warm and not 1450 <= s <= 1549) / total
    assert result.metrics["periodic_stall_lost_fraction"] == pytest.approx(stall_lost, rel=1e-6)
    assert result.metrics["throughput_p10"] == pytest.approx(np.percentile(tps[warm:], 10))
    assert {"periodic_stall", "throughput_regression"} <= set(result.labels)


def test_steady_throughput_has_no_dips(tmp_path):
    rng = np.random.default_rng(4)
    tps = 10_000 + rng.normal(0, 150, 5000)  # +-1.5% noise: P10 is only ~2% under the median
    result = analyze_log(write_jsonl(tmp_path / "t.jsonl", {"tokens_per_sec": tps}))
    assert kinds(result, "throughput_dip") == [] and kinds(result, "periodic_stall") == []
    assert result.metrics["throughput_dip_lost_fraction"] == 0.0


def test_step_time_gives_throughput_in_steps_per_second(tmp_path):
    st = np.full(300, 0.5)
    st[149] = 2.0
    result = analyze_log(write_jsonl(tmp_path / "t.jsonl", {"step_time_s": st}))
    assert result.metrics["throughput_unit"] == "steps/s"
    assert result.metrics["throughput_p50"] == pytest.approx(2.0)
    assert kinds(result, "throughput_dip") == [(150, 150)]


def test_no_throughput_field_is_said_not_guessed(tmp_path):
    loss = decaying_loss(200, np.random.default_rng(0))
    result = analyze_log(write_jsonl(tmp_path / "l.jsonl", {"loss": loss}))
    assert result.metrics["throughput_logged"] is False
    assert result.metrics["throughput_p50"] is None and result.metrics["throughput_dip_count"] is None
    assert any("no throughput or step-time field" in n for n in result.analysis.notes)


def test_divergence_start_and_no_divergence_when_healthy(tmp_path):
    rng = np.random.default_rng(5)
    n = 2000
    loss = decaying_loss(n, rng)
    healthy = analyze_log(write_jsonl(tmp_path / "h.jsonl", {"loss": loss.copy()}))
    assert healthy.metrics["divergence"] is False
    lowest = loss[999]
    loss[1000:] = lowest * (1 + np.linspace(0, 0.6, n - 1000)) * (1 + rng.normal(0, 0.01, n - 1000))
    result = analyze_log(write_jsonl(tmp_path / "d.jsonl", {"loss": loss}))
    assert result.metrics["divergence"] is True
    # the smoothed minimum is found at block resolution (n / 50 = 40 steps)
    assert abs(result.metrics["divergence_start_step"] - 1000) <= 80
    assert "TD603" in {f.rule_id for f in result.findings}


def test_loss_ending_in_nan_is_divergence(tmp_path):
    loss = decaying_loss(400, np.random.default_rng(6))
    loss[350:] = np.nan
    result = analyze_log(write_jsonl(tmp_path / "l.jsonl", {"loss": loss}))
    div = [a for a in result.anomalies if a["kind"] == "divergence"]
    assert div and div[0]["to_nan"] is True and div[0]["start_step"] == 351


def test_grad_norm_spikes(tmp_path):
    rng = np.random.default_rng(8)
    g = 1.0 + rng.normal(0, 0.05, 1000)
    for s in (300, 600, 900):
        g[s - 1] = 12.0
    result = analyze_log(write_jsonl(tmp_path / "g.jsonl", {"grad_norm": g}))
    assert kinds(result, "grad_norm_spike") == [(300, 300), (600, 600), (900, 900)]
    assert "TD604" in {f.rule_id for f in result.findings}


def test_low_gpu_utilisation_episode_from_per_gpu_lists(tmp_path):
    n = 600
    util = np.tile([95.0, 90.0], (n, 1))
    util[299:349] = [30.0, 20.0]  # steps 300-349
    result = analyze_log(write_jsonl(tmp_path / "u.jsonl", {"gpu_util": util}))
    assert kinds(result, "low_gpu_util") == [(300, 349)]
    assert result.metrics["low_gpu_util_fraction"] == pytest.approx(50 / (n - 6))
    series = read_log(tmp_path / "u.jsonl")
    assert series.columns["gpu_util_min_percent"][299] == 20.0 and series.columns["gpu_util_percent"][0] == 92.5


def test_megatron_style_counters_in_jsonl(tmp_path):
    n = 100
    nan_it = np.zeros(n)
    nan_it[[19, 59]] = [1, 2]
    loss = decaying_loss(n, np.random.default_rng(0))
    result = analyze_log(
        write_jsonl(tmp_path / "m.jsonl", {"loss": loss, "nan_iterations": nan_it}, steps=np.arange(10, 10 * n + 1, 10))
    )
    assert [a["step"] for a in result.anomalies if a["kind"] == "nan"] == [200, 600]
    assert result.metrics["nan_iterations"] == 3


@pytest.mark.parametrize(
    "kind, want",
    [
        ("cosine", "warm-up to step 100, then cosine decay"),
        ("linear", "warm-up to step 100, then linear decay"),
        ("step", "warm-up to step 100, then step decay"),
    ],
)
def test_lr_schedule_shapes(kind, want):
    steps = np.arange(1, 1001)
    peak, warm = 3e-4, 100
    t = np.clip((steps - warm) / (1000 - warm), 0, 1)
    decay = {
        "cosine": 0.5 * (1 + np.cos(np.pi * t)),
        "linear": 1 - t,
        "step": np.where(t < 0.33, 1.0, np.where(t < 0.66, 0.1, 0.01)),
    }[kind]
    lr = np.where(steps <= warm, peak * steps / warm, peak * decay)
    assert detect.lr_schedule(steps, lr)["shape"] == want


def test_lr_jump_after_the_peak(tmp_path):
    steps = np.arange(1, 501)
    lr = 1e-3 * (1 - steps / 600)
    lr[300:] = 1e-3 * (1 - (steps[300:] - 250) / 600)  # a resume that restarted the scheduler at step 301
    result = analyze_log(write_jsonl(tmp_path / "lr.jsonl", {"lr": lr}))
    assert [a["step"] for a in result.anomalies if a["kind"] == "lr_jump"] == [301]


def centred_mean(x: np.ndarray, window: int) -> np.ndarray:
    """The definition, point by point: the mean of the finite points within window // 2 on each side,
    the half-width shrinking to the distance from the nearer end."""
    n, h = x.size, window // 2
    out = np.full(n, np.nan)
    for i in range(n):
        k = min(h, i, n - 1 - i)
        seg = x[i - k : i + k + 1]
        seg = seg[np.isfinite(seg)]
        if seg.size:
            out[i] = seg.mean()
    return out


def test_moving_average_is_the_centred_mean():
    rng = np.random.default_rng(9)
    x = rng.normal(0, 1, 500)
    x[[10, 200]] = np.nan
    np.testing.assert_allclose(detect.moving_average(x, 20), centred_mean(x, 20))


def test_moving_average_has_no_kink_where_its_window_fills():
    """On a straight falling line the moving average is the line itself, at the start too: a trailing
    mean would lag by half the points it has, bending where its window fills."""
    x = 5.0 - 0.01 * np.arange(300)
    np.testing.assert_allclose(detect.moving_average(x, 50), x, atol=1e-12)
    trailing = pd.Series(x).rolling(50, min_periods=1).mean().to_numpy()
    assert np.max(np.abs(trailing - x)) > 0.2  # what it replaced


def test_trailing_reference_matches_a_direct_median():
    rng = np.random.default_rng(10)
    x = rng.normal(5, 1, 400)
    w = 40
    med, mad = detect.trailing_reference(x, w)
    block = w // 2
    for i in range(w, 400, 7):
        start = w + (i - w) // block * block  # the reference refreshes at block starts
        window = x[start - w : start]
        assert med[i] == pytest.approx(np.median(window))
        assert mad[i] == pytest.approx(np.median(np.abs(window - np.median(window))))
    assert np.isnan(med[:w]).all()


def test_window_option_changes_the_moving_average(tmp_path):
    loss = decaying_loss(400, np.random.default_rng(11))
    series = read_log(write_jsonl(tmp_path / "l.jsonl", {"loss": loss}))
    a = analyze_series(series, LogOptions(window=10))
    np.testing.assert_allclose(a.charts["loss_ma"], centred_mean(loss, 10))
