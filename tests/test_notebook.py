"""Notebook use: short reprs, a verdict card, evidence tables and trace tables as DataFrames."""

import shutil

import pandas as pd
import pytest

from tracedoc import analyze
from tracedoc.cli import example_path
from tracedoc.ingest import load
from tracedoc.model.trace import COPY_HTOD, KERNEL, MEMCPY, MEM_PAGEABLE


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    d = tmp_path_factory.mktemp("job")
    for r in (0, 1):
        shutil.copy(example_path(), d / f"rank{r}.pt.trace.json.gz")
    return analyze(str(d), jobs=1)


@pytest.fixture(scope="module")
def single():
    return analyze(example_path())


def test_reprs_of_a_two_rank_result_are_short(two_ranks):
    assert len(two_ranks.ranks) == 2
    assert len(repr(two_ranks)) < 500
    assert "2 ranks" in repr(two_ranks) and "io_bound" in repr(two_ranks)
    for r in two_ranks.ranks:
        assert len(repr(r)) <= 400 and len(repr(r.verdict)) < 400
        assert all(len(repr(f)) < 300 for f in r.verdict.findings)
    assert len(repr(two_ranks.job)) < 100
    assert len(two_ranks.job.df()) == 2


def test_verdict_card_is_compact_html(single):
    card = single._repr_html_()
    assert card.startswith("<div") and card.endswith("</div>")
    assert "io_bound" in card and "confidence" in card and "fix:" in card
    assert len(card) < 8000 and "<script" not in card


def test_result_renders_itself(single):
    assert single.to_text().startswith("tracedoc · ")
    assert single.to_markdown().lstrip().startswith("#")
    html = single.to_html()
    assert html.lstrip().lower().startswith("<!doctype html")


def test_evidence_tables_as_dataframes(single):
    df = single.table("top_kernels")
    assert isinstance(df, pd.DataFrame) and len(df) == len(single.focus.evidence["top_kernels"])
    assert {"name", "count", "total_ns"} <= set(df.columns)
    with pytest.raises(KeyError, match="tables: .*top_gaps"):
        single.table("kernels")
    f = single.focus.verdict.findings[0]
    if f.evidence:
        name = next(iter(f.evidence))
        assert len(f.table(name)) == len(f.evidence[name])
    with pytest.raises(KeyError, match="no evidence table"):
        f.table("nope")


def test_trace_repr_and_readable_enum_columns():
    t = load(example_path())
    assert len(repr(t)) < 500 and "gpu_ops" in repr(t)
    assert "<table>" in t._repr_html_()
    g = t.df("gpu_ops")
    assert isinstance(g["kind"].dtype, pd.CategoricalDtype)
    raw = t.df("gpu_ops", raw=True)
    expect = {KERNEL: "kernel", MEMCPY: "memcpy"}
    for code, name in expect.items():
        assert (g["kind"] == name).sum() == (raw["kind"] == code).sum()
    copies = raw["copy_kind"] == COPY_HTOD
    assert (g.loc[copies, "copy_kind"] == "HtoD").all()
    pageable = raw["src_kind"] == MEM_PAGEABLE
    assert (g.loc[pageable, "src_kind"] == "Pageable").all()
    assert len(t.kernels_df) == int((raw["kind"] == KERNEL).sum())
    assert t.df("cpu_ops")["kind"].isin(["cpu_op", "user_annotation", "python_function", "other"]).all()


def test_unknown_table_lists_the_valid_ones():
    t = load(example_path())
    with pytest.raises(KeyError, match="tables: gpu_ops, cpu_ops"):
        t.df("steps")
