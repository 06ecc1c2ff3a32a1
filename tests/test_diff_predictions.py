"""tracedoc diff checks the base run's what-if predictions against the run that followed.

Hand-built loops (``test_diff._loop``): per step ``dl_us`` of DataLoader wait, then 20 kernels of 400 us;
step = 8021 + dl_us. The base report's io_bound finding replays the steps without the DataLoader waits:
predicted 8.021 ms. Whatever the new run measures is its median completion interval: 8021 + its dl_us.
"""

from __future__ import annotations

import json

import pytest
from test_diff import _capture, _loop

from tracedoc.api import analyze, diff
from tracedoc.cli import main
from tracedoc.render.diff import render_diff_html, render_diff_md, render_diff_text


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("pred")
    return {dl: _loop(d / f"dl{dl}.json", dl_us=float(dl)) for dl in (0, 1000, 3000)}


def _io(d):
    checks = [p for p in d.to_dict()["predictions"] if p["label"] == "io_bound"]
    assert len(checks) == 1, d.to_dict()["predictions"]
    return checks[0]


def test_fix_made_prediction_against_measurement(runs):
    d = diff(runs[3000], runs[0])
    p = _io(d)
    assert p["status"] == "gone"
    assert (p["predicted_before_ms"], p["predicted_after_ms"]) == pytest.approx((11.021, 8.021))
    assert (p["measured_before_ms"], p["measured_after_ms"]) == pytest.approx((11.021, 8.021))
    assert p["impact_before_ms"] == pytest.approx(3.0) and p["impact_after_ms"] is None
    assert p["error_ms"] == pytest.approx(0.0, abs=1e-9)
    assert "io_bound fix predicted 11.0 → 8.0 ms; measured 8.0 ms (finding gone" in render_diff_text(d)


def test_fix_half_made_is_reduced_and_the_prediction_is_off_by_what_is_left(runs):
    d = diff(runs[3000], runs[1000])
    p = _io(d)
    # 3 ms of wait per step -> 1 ms: the rule still fires, explaining 1 ms of the 9.021 ms step
    assert p["status"] == "reduced"
    assert p["impact_before_ms"] == pytest.approx(3.0) and p["impact_after_ms"] == pytest.approx(1.0)
    assert p["measured_after_ms"] == pytest.approx(9.021)
    assert p["error_ms"] == pytest.approx(9.021 - 8.021)
    text = render_diff_text(d)
    assert "io_bound fix predicted 11.0 → 8.0 ms; measured 9.0 ms (finding reduced, 3.0 → 1.0 ms per step; " \
           "prediction off by +1.00 ms, +12.5%)" in text


def test_fix_not_made_still_present_and_grew(runs):
    same = _io(diff(runs[3000], runs[3000]))
    assert same["status"] == "still_present" and same["error_ms"] is None
    assert same["measured_after_ms"] == pytest.approx(11.021) and same["predicted_after_ms"] == pytest.approx(8.021)
    assert "io_bound fix predicted 11.0 → 8.0 ms if fixed; still present, measured 11.0 ms" in \
        render_diff_text(diff(runs[3000], runs[3000]))
    # 1 ms of wait -> 3 ms: grew beyond the noise floor (2% of the 9.021 ms base step)
    worse = diff(runs[1000], runs[3000])
    p = _io(worse)
    assert p["status"] == "grew" and p["error_ms"] is None
    assert (p["predicted_before_ms"], p["predicted_after_ms"], p["measured_after_ms"]) == \
        pytest.approx((9.021, 8.021, 11.021))
    assert "io_bound fix predicted 9.0 → 8.0 ms if fixed; grew (1.0 → 3.0 ms per step), measured 11.0 ms" \
        in render_diff_text(worse)


def test_a_base_without_predictions_has_none(runs):
    d = diff(runs[0], runs[3000])
    # the clean loop's only finding (compute_bound) does not model its fix: nothing to check
    assert d.to_dict()["predictions"] == []
    assert "predictions, checked" not in render_diff_text(d)


def test_every_format_shows_the_check_and_a_saved_base_report_works(runs, tmp_path, capsys):
    base = tmp_path / "base.json"
    analyze(runs[3000]).save(base)
    d = diff(base, runs[0])
    assert d.before_kind == "report" and _io(d)["status"] == "gone"
    md = render_diff_md(d)
    assert "### The base run's predictions, checked" in md
    assert "| **io\\_bound** (TD301) | 11.0 → 8.0 | gone | 8.0 | +0.00 ms, +0.0% |" in md
    html = render_diff_html(d)
    assert "predictions, checked</h2>" in html and "<td class=\"down\">gone</td>" in html
    assert main(["diff", str(base), str(runs[1000]), "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["predictions"][0]["status"] == "reduced"
    assert doc["ranks"][0]["predictions"] == doc["predictions"]
    table = d.table("predictions")
    assert table["status"].tolist() == ["gone"] and table["measured_after_ms"].iloc[0] == pytest.approx(8.021)


def test_captured_cpu_runs_dataloader_sleep_prediction(tmp_path):
    # 8 samples per batch x 2 ms of sleep in __getitem__: ~16 ms of DataLoader wait per step, then none.
    before = _capture(tmp_path / "before", 0.002)
    after = _capture(tmp_path / "after", 0.0)
    d = diff(before, after)
    doc = d.to_dict()
    checks = [p for p in doc["predictions"] if p["label"] == "io_bound"]
    assert len(checks) == 1, doc["predictions"]
    p = checks[0]
    # the loop still waits a little on a DataLoader without the sleep (collation, worker hand-off): the finding
    # goes, or stays with a share much smaller than before
    assert p["status"] in ("gone", "reduced"), p
    assert p["impact_after_ms"] is None or p["impact_after_ms"] < 0.5 * p["impact_before_ms"], p
    # the numbers the check shows are the diff's steps and the base report's what-if, not recomputed
    assert p["measured_before_ms"] == pytest.approx(doc["step_ms"]["before"])
    assert p["measured_after_ms"] == pytest.approx(doc["step_ms"]["after"])
    what_if = next(f.what_if for f in analyze(before).ranks[0].verdict.findings if f.label == "io_bound")
    assert p["predicted_after_ms"] == pytest.approx(what_if["step_ms_after"])
    assert p["error_ms"] == pytest.approx(p["measured_after_ms"] - p["predicted_after_ms"])
    # the prediction explains most of the change the fix made: nearer the measured step than the base was
    gain = p["predicted_before_ms"] - p["predicted_after_ms"]
    assert gain > 0.5 * 16.0, p
    assert abs(p["error_ms"]) < 0.5 * gain, p
    text = render_diff_text(d)
    assert "io_bound fix predicted" in text
