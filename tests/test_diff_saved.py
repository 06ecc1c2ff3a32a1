"""Saved diffs and trends: ``tracedoc diff --format json`` is the result record itself, in ns; it loads back
into an equal value that renders as the fresh one did, and one written by schema version 1 (in ms) loads
through a migration and renders as the version that wrote it printed it.

The version-1 fixtures (``gold/reports/v1_diff.json.gz``, ``v1_trend.json.gz``) and the text beside them
(``v1_diff.txt``, ``v1_trend.txt``) were written by tracedoc 0.1.0 at schema version 1, from the two
three-rank H100 jobs (balanced, and rank 0 slow): ``tracedoc diff job3_balanced_shifted
job3_slow0_shifted`` (and ``... job3_balanced_shifted`` again for the trend), JSON and text.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import jsonschema
import pytest
from trace_builder import TraceBuilder, training_steps

from tracedoc.api import diff, trend
from tracedoc.diff import DiffResult, load
from tracedoc.diff.trend import TrendResult
from tracedoc.errors import TraceError
from tracedoc.render import renderer

GOLD = Path(__file__).resolve().parent / "gold" / "reports"
SCHEMAS = Path(__file__).resolve().parents[1] / "tracedoc" / "schema"


def _v1(name: str) -> dict:
    return json.loads(gzip.decompress((GOLD / f"{name}.json.gz").read_bytes()))


def _schema(name: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(json.loads((SCHEMAS / f"{name}.schema.json").read_text()))


def _trace(path: Path, dl_us: float, steps: int = 6) -> Path:
    b = TraceBuilder()
    training_steps(b, steps=steps, kernels=8, dataloader_us=dl_us, step_us=12_000.0)
    return b.write(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    d = tmp_path_factory.mktemp("saved")
    return [_trace(d / "slow.json", 8000.0), _trace(d / "fast.json", 0.0), _trace(d / "mid.json", 3000.0)]


def test_a_version_1_diff_loads_in_ns_and_renders_as_the_version_that_wrote_it(tmp_path):
    old = _v1("v1_diff")
    assert (old["schema"], old["schema_version"]) == ("tracedoc.diff", 1)
    path = tmp_path / "old.json.gz"
    path.write_bytes((GOLD / "v1_diff.json.gz").read_bytes())
    d = load(path)
    assert isinstance(d, DiffResult) and d.schema_version == 2
    # the ms of version 1 as integer ns, summing exactly as a fresh diff's do
    assert d.before.step_ns == round(old["step_ms"]["before"] * 1e6) and d.after.step_ns == round(
        old["step_ms"]["after"] * 1e6
    )
    assert sum(a.delta_ns for a in d.attribution) == d.step_delta_ns == d.after.step_ns - d.before.step_ns
    for side in (d.before, d.after, *(s for p in d.pairs for s in (p.before, p.after))):
        assert sum(side.category_ns.values()) == side.step_ns
    assert d.comm_split is not None and sum(d.after.comm_split) == d.after.category_ns["exposed_comm"]
    # the pairs whole, the focus pair with the top level's tables; its predictions apart from the job's
    assert len(d.pairs) == len(old["ranks"]) == 3 and d.focus_pair.rank_before == old["focus"]["rank_before"]
    assert [p.rows_kept for p in d.pairs] == [50 if i == d.focus else 5 for i in range(3)]
    assert len(d.focus_pair.kernels) == len(old["kernels"]) and len(d.focus_pair.metrics) == len(old["metrics"])
    assert len(d.predictions) == len(old["predictions"]) and len(d.job_predictions) == 3
    first = old["predictions"][0]
    assert d.predictions[0].predicted_after_ns == round(first["predicted_after_ms"] * 1e6)
    kernel = old["kernels"][0]
    assert d.focus_pair.kernels[0].time_after_ns == pytest.approx(kernel["ms_after"] * 1e6)
    # every output as version 1 printed it; and the migrated document is one of version 2
    assert renderer("text", "diff").render(d) == (GOLD / "v1_diff.txt").read_text()
    assert renderer("md", "diff").render(d) and renderer("html", "diff").render(d)
    assert not list(_schema("diff").iter_errors(d.to_dict()))


def test_a_version_1_trend_loads_without_the_split_it_did_not_keep():
    old = _v1("v1_trend")
    t = TrendResult.from_dict(old, where="v1_trend.json")
    assert t.schema_version == 2 and t.base.step_ns == round(old["base_step_ms"] * 1e6) and t.base.category_ns is None
    assert [r.delta_ns for r in t.runs] == [r.step_ns - t.base.step_ns for r in t.runs]
    assert renderer("text", "trend").render(t) == (GOLD / "v1_trend.txt").read_text()
    assert "<svg" in renderer("html", "trend").render(t)  # the chart shows its figures without the split
    assert not list(_schema("trend").iter_errors(t.to_dict()))


def test_a_saved_diff_is_the_record_and_loads_back_equal(runs, tmp_path):
    d = diff(runs[0], runs[1])
    out = tmp_path / "d.json"
    d.save(out)
    doc = json.loads(out.read_text())
    assert doc == d.to_dict() and doc["schema_version"] == 2
    assert not list(_schema("diff").iter_errors(doc))
    back = load(out)
    assert back == d
    for fmt in ("text", "md", "html"):
        assert renderer(fmt, "diff").render(back) == renderer(fmt, "diff").render(d), fmt


def test_a_saved_trend_is_the_record_and_loads_back_equal(runs, tmp_path):
    t = trend(*runs)
    out = tmp_path / "t.json"
    t.save(out)
    doc = json.loads(out.read_text())
    assert "diffs" not in doc and not list(_schema("trend").iter_errors(doc))
    back = load(out)
    assert isinstance(back, TrendResult) and back == t
    assert sum(back.runs[0].category_ns.values()) == back.runs[0].step_ns
    for fmt in ("text", "md", "html"):
        assert renderer(fmt, "trend").render(back) == renderer(fmt, "trend").render(t), fmt


def test_what_is_not_a_saved_diff_is_refused_in_one_line(runs, tmp_path):
    doc = diff(runs[0], runs[1]).to_dict()
    with pytest.raises(TraceError, match="schema version 3; this tracedoc reads versions 1 to 2"):
        DiffResult.from_dict({**doc, "schema_version": 3})
    with pytest.raises(TraceError, match="is not a saved tracedoc diff"):
        DiffResult.from_dict({**doc, "schema": "tracedoc.analysis"})
    with pytest.raises(TraceError, match="missing or malformed field.*step_ns"):
        DiffResult.from_dict({**doc, "before": {**doc["before"], "step_ns": "fast"}})
    with pytest.raises(TraceError, match="focus = 7 with 1 pairs"):
        DiffResult.from_dict({**doc, "focus": 7})
    with pytest.raises(TraceError, match="before.category_ns has compute; expected compute, exposed_comm"):
        DiffResult.from_dict({**doc, "before": {**doc["before"], "category_ns": {"compute": 1}}})
    old = _v1("v1_diff")
    del old["ranks"][0]["composition_ms"]
    with pytest.raises(TraceError, match="missing or malformed field"):
        DiffResult.from_dict(old)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(TraceError, match="is not valid JSON"):
        load(bad)
