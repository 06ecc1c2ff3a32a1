"""Typed evidence rows: the tables readers spell by field are frozen row types, in a fresh result and in
a saved report read back, with the saved JSON unchanged; a misspelt field fails where it is written."""

from __future__ import annotations

import json

import msgspec
import pytest
from trace_builder import TraceBuilder, training_steps

from tracedoc.api import analyze
from tracedoc.errors import TraceError
from tracedoc.model.evidence import ROW_TYPES, KernelTotal, OperatorTotal, check_fields, row_keys, typed_rows
from tracedoc.result import load


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    d = tmp_path_factory.mktemp("rows")
    b = TraceBuilder()
    training_steps(b, steps=4, kernels=4)
    gib = 1 << 30
    b.cpu_op("aten::empty", 1_000_100.0, 1_000_200.0)  # the memory tables: an allocation, a free, a curve
    b.memory(1_000_150.0, 2 * gib, 3 * gib, 4 * gib)
    b.memory(1_020_000.0, -gib, 2 * gib, 4 * gib)
    return analyze(b.write(d / "t.json")), d


def _typed_tables(rank) -> dict[str, list]:
    return {name: rows for name, rows in rank.evidence.items() if name in ROW_TYPES and rows}


def test_a_fresh_result_holds_typed_rows(fresh):
    result, _ = fresh
    tables = _typed_tables(result.ranks[0])
    assert {"kernel_totals", "top_kernels", "operator_totals", "top_operators"} <= set(tables)
    assert {"memory_top_allocs", "memory_per_device", "memory_curve"} <= set(tables)
    for name, rows in tables.items():
        assert all(type(r) is ROW_TYPES[name] for r in rows), name
    with pytest.raises(AttributeError):  # frozen: a row is a value
        tables["kernel_totals"][0].count = 1


def test_a_saved_report_reads_back_into_typed_rows_and_writes_the_same_json(fresh):
    result, d = fresh
    path = d / "saved.json"
    result.save(path)
    back = load(path)
    for name, rows in _typed_tables(back.ranks[0]).items():
        assert all(type(r) is ROW_TYPES[name] for r in rows), name
        assert rows == result.ranks[0].evidence[name]
    for finding in back.ranks[0].verdict.findings:
        for name, rows in finding.evidence.items():
            assert name not in ROW_TYPES or all(type(r) is ROW_TYPES[name] for r in rows)
    assert json.loads(back.to_json()) == json.loads(path.read_text())
    assert msgspec.json.encode(back.ranks[0].evidence) == msgspec.json.encode(
        json.loads(path.read_text())["ranks"][0]["evidence"]
    )


def test_a_row_with_an_unknown_field_in_a_saved_report_is_refused_in_one_line(fresh, tmp_path):
    result, _ = fresh
    doc = json.loads(result.to_json())
    doc["ranks"][0]["evidence"]["kernel_totals"][0]["totl_ns"] = 5
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceError) as info:
        load(path)
    text = str(info.value)
    assert "malformed evidence row in ranks[0]" in text and "evidence.kernel_totals[0]" in text and "totl_ns" in text


@pytest.mark.parametrize("row", [5, "top", [1, 2], None])
def test_a_row_that_is_no_object_in_a_saved_report_is_refused_in_one_line(fresh, tmp_path, row):
    result, _ = fresh
    doc = json.loads(result.to_json())
    doc["ranks"][0]["evidence"]["idle_causes"][0] = row
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceError, match=r"evidence.idle_causes\[0\]"):
        load(path)


def test_a_misspelt_field_fails_where_it_is_written():
    with pytest.raises(TypeError, match="totl_ns"):
        KernelTotal(name="gemm", kind="kernel", category="compute", count=1, totl_ns=5)
    with pytest.raises(AttributeError, match="totl_ns: not a field of KernelTotal"):
        check_fields(KernelTotal, ("name", "totl_ns"), "a column list")
    with pytest.raises(msgspec.ValidationError, match=r"evidence.kernel_totals\[1\].*totl_ns"):
        typed_rows(
            "kernel_totals",
            [
                {"name": "a", "kind": "kernel", "category": "compute", "count": 1, "total_ns": 2},
                {"name": "b", "kind": "kernel", "category": "compute", "count": 1, "totl_ns": 2},
            ],
        )


def test_omitted_defaults_stay_omitted():
    plain = OperatorTotal(name="aten::mm", calls=1, cpu_ns=5, gpu_ops=1, gpu_ns=3)
    region = OperatorTotal(
        name="Torch-Compiled Region: 0/0", calls=1, cpu_ns=5, gpu_ops=0, gpu_ns=0, content="ab", content_kernels=2
    )
    assert plain.to_dict() == {"name": "aten::mm", "calls": 1, "cpu_ns": 5, "gpu_ops": 1, "gpu_ns": 3}
    assert row_keys(plain) == list(plain.to_dict()) and row_keys(region) == list(region.to_dict())


def test_a_row_written_before_a_field_existed_reads_it_as_null(fresh, tmp_path):
    # an earlier release's top_gaps rows had no device_idle_ns: not measured then, as a metric added since
    result, _ = fresh
    doc = json.loads(result.to_json())
    gaps = doc["ranks"][0]["evidence"]["top_gaps"]
    assert gaps, "the fixture has gaps"
    for row in gaps:
        del row["device_idle_ns"]
    path = tmp_path / "older.json"
    path.write_text(json.dumps(doc))
    back = load(path)
    assert [g.device_idle_ns for g in back.ranks[0].evidence["top_gaps"]] == [None] * len(gaps)
    assert [g.gap_ns for g in back.ranks[0].evidence["top_gaps"]] == [g["gap_ns"] for g in gaps]
    # a field that cannot be null is still required
    del doc["ranks"][0]["evidence"]["top_gaps"][0]["cause"]
    path.write_text(json.dumps(doc))
    with pytest.raises(TraceError, match=r"evidence.top_gaps\[0\].*cause"):
        load(path)
