"""Notebook use of a diff and of a training log's result: short reprs (no arrays or whole tables), a compact
HTML card, and their tables as DataFrames."""

from __future__ import annotations

import pandas as pd
import pytest
from log_fixtures import llmc_main_log
from trace_builder import TraceBuilder, training_steps

from tracedoc.api import analyze_log, diff
from tracedoc.logs.report import LogResult


def _trace(path, dl_us: float, steps: int = 6):
    b = TraceBuilder()
    training_steps(b, steps=steps, kernels=8, dataloader_us=dl_us, step_us=12_000.0)
    return b.write(path)


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    d = tmp_path_factory.mktemp("nb")
    return diff(_trace(d / "before.json", 8000.0), _trace(d / "after.json", 0.0))


@pytest.fixture(scope="module")
def log(tmp_path_factory):
    p = tmp_path_factory.mktemp("nblog") / "main.log"
    p.write_text(llmc_main_log(n=2000, spike_at=900))
    return analyze_log(p)


def test_diff_repr_is_one_short_line(pair):
    text = repr(pair)
    assert text.startswith("<DiffResult before.json → after.json:") and "\n" not in text and len(text) <= 300
    assert "ms per step" in text and pair.verdict in text
    assert "array" not in text and "intervals_ns" not in text
    assert all(len(repr(p)) < 120 for p in pair.pairs)


def test_diff_card_and_tables(pair):
    card = pair._repr_html_()
    assert card.startswith("<div") and card.endswith("</div>") and len(card) < 8000
    assert "tracedoc diff" in card and "dataloader" in card and "io_bound fix predicted" in card
    att = pair.table("attribution")
    assert isinstance(att, pd.DataFrame) and list(att.columns) == ["category", "before_ns", "after_ns", "delta_ns"]
    # the table is the JSON document's attribution, row for row
    doc = pair.to_dict()
    assert att["delta_ns"].tolist() == [r["delta_ns"] for r in doc["attribution"]]
    assert att["delta_ns"].sum() == doc["step_delta_ns"]
    metrics = pair.table("metrics")
    assert {"name", "before", "after", "delta", "change"} <= set(metrics.columns)
    assert len(pair.table("kernels")) == len(pair.focus_pair.kernels)
    ranks = pair.table("ranks")
    assert len(ranks) == 1 and ranks["delta_ns"].iloc[0] == doc["step_delta_ns"]
    with pytest.raises(KeyError, match="tables: attribution"):
        pair.table("nope")


def test_log_repr_card_and_tables(log):
    text = repr(log)
    assert text.startswith("<LogResult main.log (") and "\n" not in text and len(text) <= 300
    assert f"{len(log.anomalies)} anomalies" in text
    card = log._repr_html_()
    assert card.startswith("<div") and card.endswith("</div>") and len(card) < 8000
    anomalies = log.table("anomalies")
    assert len(anomalies) == len(log.anomalies) and "kind" in anomalies.columns
    metrics = log.table("metrics")
    assert dict(zip(metrics["metric"], metrics["value"]))["log_points"] == log.metrics["log_points"]
    cols = log.df()
    assert len(cols) == log.metrics["log_points"] and "step" in cols.columns and "loss" in cols.columns
    assert cols["step"].iloc[0] == log.metrics["log_first_step"]
    with pytest.raises(KeyError, match="tables: anomalies"):
        log.table("nope")


def test_saved_log_result_has_the_same_views_but_no_columns(log):
    saved = LogResult.from_dict(log.to_dict())
    assert repr(saved) == repr(log)
    assert saved._repr_html_() == log._repr_html_()
    with pytest.raises(KeyError, match="saved report"):
        saved.df()


@pytest.fixture(scope="module")
def trend_result(tmp_path_factory):
    from tracedoc.api import trend

    d = tmp_path_factory.mktemp("nbtrend")
    return trend(_trace(d / "base.json", 8000.0), _trace(d / "run2.json", 4000.0), _trace(d / "run3.json", 0.0))


@pytest.fixture(scope="module")
def analysis(tmp_path_factory):
    from tracedoc.api import analyze

    return analyze(_trace(tmp_path_factory.mktemp("nbone") / "one.json", 8000.0))


SURFACE = ("_repr_html_", "to_text", "to_markdown", "to_html", "to_json", "save", "table")


@pytest.mark.parametrize("which", ["analysis", "pair", "log", "trend_result"])
def test_every_result_offers_the_same_surface(which, request, tmp_path):
    import json

    r = request.getfixturevalue(which)
    assert all(callable(getattr(r, m, None)) for m in SURFACE)
    assert repr(r).startswith("<") and "\n" not in repr(r)
    card = r._repr_html_()
    assert card.startswith("<div") and card.endswith("</div>")
    text = r.to_text(width=80)
    assert text.strip() and max(len(line) for line in text.splitlines()) <= 80
    assert r.to_markdown().lstrip().startswith("#")
    page = r.to_html()
    assert page.lstrip().lower().startswith("<!doctype html>") and "</html>" in page
    json.loads(r.to_json())
    names = r.table()  # no name: the names of the tables there are, each of which opens
    assert isinstance(names, list) and names
    assert all(isinstance(r.table(n), pd.DataFrame) for n in names)
    for ext, check in (
        (".html", lambda s: "<html" in s),
        (".md", lambda s: s.lstrip().startswith("#")),
        (".json", lambda s: isinstance(json.loads(s), dict)),
        (".txt", lambda s: "tracedoc" in s),
    ):
        path = tmp_path / f"out{ext}"
        r.save(path)
        assert check(path.read_text(encoding="utf-8")), ext
    r.save(tmp_path / "any.report", format="md")
    assert (tmp_path / "any.report").read_text(encoding="utf-8").lstrip().startswith("#")


def test_trend_card_draws_the_chart(trend_result):
    card = trend_result._repr_html_()
    assert "<svg" in card and card.count('class="bar"') == 3 and "<script" not in card


def test_the_package_namespace_is_the_api():
    import tracedoc

    assert dir(tracedoc) == sorted(tracedoc.__all__)
    assert not {"Any", "annotations", "version"} & set(dir(tracedoc))
