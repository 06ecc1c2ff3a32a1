"""tracedoc diff checks the base run's what-if predictions against the run that followed.

Hand-built loops (``test_diff._loop``): per step ``dl_us`` of DataLoader wait, then 20 kernels of 400 us;
step = 8021 + dl_us. The base report's io_bound finding replays the steps without the DataLoader waits:
predicted 8.021 ms. Whatever the new run measures is its median completion interval: 8021 + its dl_us.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_diff import _capture, _loop

from tracedoc.api import analyze, diff
from tracedoc.cli import main
from tracedoc.model.record import to_builtins
from tracedoc.render.diff import render_diff_html, render_diff_md, render_diff_text


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("pred")
    return {dl: _loop(d / f"dl{dl}.json", dl_us=float(dl)) for dl in (0, 1000, 3000)}


def _flat(text: str) -> str:
    """Text with its wrapped lines joined (sentences wrap at the width)."""
    return " ".join(text.split())


def _in_ms(check: dict) -> dict:
    """A saved check (ns) with its times as ms, as the reports show them."""
    return {
        (k[:-3] + "_ms" if k.endswith("_ns") else k): (v / 1e6 if k.endswith("_ns") and v is not None else v)
        for k, v in check.items()
    }


def _checks(d) -> list[dict]:
    """The diff's checks of the base's predictions (the job's, then the focus pair's), times in ms."""
    return [_in_ms(p) for p in to_builtins(d.predictions)]


def _io(d):
    checks = [p for p in _checks(d) if p["label"] == "io_bound"]
    assert len(checks) == 1, _checks(d)
    return checks[0]


def test_fix_made_prediction_against_measurement(runs):
    d = diff(runs[3000], runs[0])
    p = _io(d)
    assert p["status"] == "gone"
    assert (p["predicted_before_ms"], p["predicted_after_ms"]) == pytest.approx((11.021, 8.021))
    assert (p["measured_before_ms"], p["measured_after_ms"]) == pytest.approx((11.021, 8.021))
    assert p["impact_before_ms"] == pytest.approx(3.0) and p["impact_after_ms"] is None
    assert p["error_ms"] == pytest.approx(0.0, abs=1e-9)
    assert "io_bound fix predicted 11.0 → 8.0 ms; measured 8.0 ms (finding gone" in _flat(render_diff_text(d))


def test_fix_half_made_is_reduced_and_the_prediction_is_off_by_what_is_left(runs):
    d = diff(runs[3000], runs[1000])
    p = _io(d)
    # 3 ms of wait per step -> 1 ms: the rule still fires, explaining 1 ms of the 9.021 ms step
    assert p["status"] == "reduced"
    assert p["impact_before_ms"] == pytest.approx(3.0) and p["impact_after_ms"] == pytest.approx(1.0)
    assert p["measured_after_ms"] == pytest.approx(9.021)
    assert p["error_ms"] == pytest.approx(9.021 - 8.021)
    text = _flat(render_diff_text(d))
    assert (
        "io_bound fix predicted 11.0 → 8.0 ms; measured 9.0 ms (finding reduced, 3.0 → 1.0 ms per step; "
        "prediction off by +1.00 ms, +12.5%)" in text
    )


def test_fix_not_made_still_present_and_grew(runs):
    same = _io(diff(runs[3000], runs[3000]))
    assert same["status"] == "still_present" and same["error_ms"] is None
    assert same["measured_after_ms"] == pytest.approx(11.021) and same["predicted_after_ms"] == pytest.approx(8.021)
    assert "io_bound fix predicted 11.0 → 8.0 ms if fixed; still present, measured 11.0 ms" in _flat(
        render_diff_text(diff(runs[3000], runs[3000]))
    )
    # 1 ms of wait -> 3 ms: grew beyond the noise floor (2% of the 9.021 ms base step)
    worse = diff(runs[1000], runs[3000])
    p = _io(worse)
    assert p["status"] == "grew" and p["error_ms"] is None
    assert (p["predicted_before_ms"], p["predicted_after_ms"], p["measured_after_ms"]) == pytest.approx(
        (9.021, 8.021, 11.021)
    )
    assert "io_bound fix predicted 9.0 → 8.0 ms if fixed; grew (1.0 → 3.0 ms per step), measured 11.0 ms" in _flat(
        render_diff_text(worse)
    )


def test_a_base_without_predictions_has_none(runs):
    d = diff(runs[0], runs[3000])
    # the clean loop's only finding (compute_bound) does not model its fix: nothing to check
    assert d.predictions == [] and d.to_dict()["job_predictions"] == []
    assert "predictions, checked" not in _flat(render_diff_text(d))


def test_every_format_shows_the_check_and_a_saved_base_report_works(runs, tmp_path, capsys):
    base = tmp_path / "base.json"
    analyze(runs[3000]).save(base)
    d = diff(base, runs[0])
    assert d.before_kind == "report" and _io(d)["status"] == "gone"
    md = render_diff_md(d)
    assert "### The base run's predictions, checked" in md
    assert "| **io\\_bound** (TD301) | 11.0 → 8.0 | gone | 8.0 | +0.00 ms, +0.0% |" in md
    html = render_diff_html(d)
    assert "predictions, checked</h2>" in html and '<td class="down">gone</td>' in html
    assert main(["diff", str(base), str(runs[1000]), "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["job_predictions"] == [] and doc["pairs"][0]["predictions"][0]["status"] == "reduced"
    table = d.table("predictions")
    assert table["status"].tolist() == ["gone"] and table["measured_after_ns"].iloc[0] == 8_021_000


def test_captured_cpu_runs_dataloader_sleep_prediction(tmp_path):
    # 8 samples per batch x 2 ms of sleep in __getitem__: ~16 ms of DataLoader wait per step, then none.
    before = _capture(tmp_path / "before", 0.002)
    after = _capture(tmp_path / "after", 0.0)
    d = diff(before, after)
    doc = d.to_dict()
    checks = [p for p in _checks(d) if p["label"] == "io_bound"]
    assert len(checks) == 1, _checks(d)
    p = checks[0]
    # the loop still waits a little on a DataLoader without the sleep (collation, worker hand-off): the finding
    # goes, or stays with a share much smaller than before
    assert p["status"] in ("gone", "reduced"), p
    assert p["impact_after_ms"] is None or p["impact_after_ms"] < 0.5 * p["impact_before_ms"], p
    # the numbers the check shows are the diff's steps and the base report's what-if, not recomputed
    assert p["measured_before_ms"] == doc["before"]["step_ns"] / 1e6
    assert p["measured_after_ms"] == doc["after"]["step_ns"] / 1e6
    what_if = next(f.what_if for f in analyze(before).ranks[0].verdict.findings if f.label == "io_bound")
    assert p["predicted_after_ms"] == pytest.approx(what_if["step_ms_after"])
    assert p["error_ms"] == pytest.approx(p["measured_after_ms"] - p["predicted_after_ms"])
    # the prediction explains most of the change the fix made: nearer the measured step than the base was
    gain = p["predicted_before_ms"] - p["predicted_after_ms"]
    assert gain > 0.5 * 16.0, p
    assert abs(p["error_ms"]) < 0.5 * gain, p
    assert "io_bound fix predicted" in render_diff_text(d)


# -- a series of runs ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def series(runs, tmp_path_factory):
    tiny = _loop(tmp_path_factory.mktemp("series") / "tiny.json", tiny=300)
    return [runs[3000], runs[0], tiny]


def test_three_run_trend_each_against_the_first(series):
    from tracedoc.api import trend

    t = trend(*series)
    doc = t.to_dict()
    assert doc["schema"] == "tracedoc.trend" and doc["schema_version"] == 2 and doc["base"]["step_ns"] == 11_021_000
    r2, r3 = doc["runs"]
    # run 2: the DataLoader wait gone, 11.021 -> 8.021 ms
    assert (r2["step_ns"], r2["delta_ns"]) == (8_021_000, -3_000_000)
    assert {a["category"]: a["delta_ns"] for a in r2["attribution"] if a["delta_ns"]} == {"dataloader": -3_000_000}
    # run 3: no wait, but 300 tiny kernels: 8021 + 10 x 299 + 2 = 11013 us; -3 ms DataLoader, +0.6 ms compute
    # (300 x 2 us) and +2.392 ms host_launch (299 gaps of 8 us): -0.008 ms in all, within noise
    assert (r3["step_ns"], r3["delta_ns"]) == (11_013_000, -8_000)
    att = {a["category"]: a["delta_ns"] for a in r3["attribution"] if a["delta_ns"]}
    assert att == {"compute": 600_000, "dataloader": -3_000_000, "host_launch": 2_392_000}
    assert sum(att.values()) == r3["delta_ns"] and sum(r3["category_ns"].values()) == r3["step_ns"]
    assert (r2["verdict"], r3["verdict"]) == ("improvement", "within_noise")
    # each run's check of the base's prediction: the wait went in both; run 3 is slower for another reason
    assert [p["status"] for p in r2["predictions"]] == ["gone"] and r2["predictions"][0]["error_ns"] == 0
    assert r3["predictions"][0]["status"] == "gone"
    assert r3["predictions"][0]["error_ns"] == 11_013_000 - 8_021_000
    assert t.table("runs")["step_ns"].tolist() == [11_021_000, 8_021_000, 11_013_000]
    assert "3 runs against dl3000.json" in repr(t)


def test_trend_in_every_format_from_the_command_line(series, tmp_path, capsys):
    import jsonschema

    paths = [str(p) for p in series]
    assert main(["diff", *paths]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    head = next(line for line in lines if line.startswith("run "))
    assert head.split() == [
        "run",
        "name",
        "step",
        "ms",
        "Δ",
        "ms",
        "Δ",
        "%",
        "verdict",
        "compute",
        "dataloader",
        "host_launch",
    ]
    assert max(len(line) for line in lines) <= 100
    assert "run 2: gone io_bound; new compute_bound" in text and "run 3: gone io_bound; new small_batch_bound" in text
    row3 = next(line for line in lines if line.startswith("3 "))
    assert row3.split()[:9] == ["3", "tiny.json", "11.013", "-0.008", "-0.1%", "within", "noise", "+0.600", "-3.000"]
    assert "run 3: io_bound fix predicted 11.0 → 8.0 ms; measured 11.0 ms (finding gone" in _flat(text)
    assert main(["diff", *paths, "-f", "md"]) == 0
    md = capsys.readouterr().out
    assert "| 2 | dl0.json | 8.021 | -3.000 | -27.2% | improvement | +0.000 | -3.000 | +0.000 | dataloader |" in md
    out = tmp_path / "trend.html"
    assert main(["diff", *paths, "-o", str(out)]) == 0
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") and '<td class="name">tiny.json</td>' in html
    assert "predictions, checked against each run" in html
    assert main(["diff", *paths, "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    schema = json.loads((Path(__file__).resolve().parents[1] / "tracedoc" / "schema" / "trend.schema.json").read_text())
    jsonschema.validate(doc, schema)
    # the gate holds for every run: run 3's host_launch grew by 2.392 ms
    assert main(["diff", *paths, "--fail-if", "host_launch_ms > 1"]) == 3
    err = capsys.readouterr().err
    assert "gate failed: run 3 (" in err and "run 2" not in err
