"""The JSON Schemas of ``--format json`` (tracedoc/schema/*.schema.json) are generated from the result
types and the metric table (``tracedoc.schemagen``), are valid Draft 2020-12, describe every field, and
real outputs validate against them.

``python -m tracedoc.schemagen`` (or ``pytest --update-gold``) writes them again after a type or a
metric changes; the drift test fails until it has.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from conftest import shared_traces
from trace_builder import TraceBuilder, training_steps

from tracedoc import schemagen
from tracedoc.analyses.core.registry import METRICS
from tracedoc.api import analyze
from tracedoc.cli import example_path

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "tracedoc" / "schema" / "analysis.schema.json"


def load_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def metric_properties() -> dict:
    """What the schema must say about each metric: its JSON type (or null) and unit + meaning."""
    return {
        name: {"type": [m.json_type, "null"], "description": f"[{m.unit}] {m.meaning}"} for name, m in METRICS.items()
    }


@pytest.fixture(scope="module")
def validator():
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def assert_valid(validator, doc: dict) -> None:
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in errors[:10])


def test_schema_is_draft_2020_12():
    schema = load_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("name", sorted(schemagen.SCHEMAS))
def test_schema_files_are_generated_from_the_types(request, name):
    """The drift test: the files are exactly what the types and the metric table generate."""
    path = schemagen.SCHEMA_DIR / name
    want = schemagen.render(name)
    if request.config.getoption("--update-gold"):
        path.write_text(want, encoding="utf-8")
    assert path.read_text(encoding="utf-8") == want, (
        f"{name} is stale: run `python -m tracedoc.schemagen` to generate it from the types again"
    )


def test_schema_lists_every_metric_of_the_table():
    metrics = load_schema()["$defs"]["metrics"]
    assert metrics["properties"] == metric_properties()
    assert metrics["required"] == list(METRICS)
    assert metrics["additionalProperties"] is False


def test_schema_describes_every_field():
    """Every field of every type says what it holds (the comment beside it in the type's definition)."""
    for name in schemagen.SCHEMAS:
        schema = json.loads((schemagen.SCHEMA_DIR / name).read_text())
        for where, node in [("top level", schema), *schema["$defs"].items()]:
            for field, prop in node.get("properties", {}).items():
                target = schema["$defs"][prop["$ref"].rsplit("/", 1)[1]] if "$ref" in prop else prop
                assert prop.get("description") or target.get("description"), (
                    f"{name}: {where}.{field} has no description"
                )
    schema = load_schema()
    rank = schema["$defs"]["RankResult"]
    assert set(rank["required"]) == set(rank["properties"]) - {"timeline"}  # only with --timeline
    assert "--timeline" in rank["properties"]["timeline"]["description"]
    assert set(schema["required"]) == set(schema["properties"])


def test_top_level_fields_match_to_dict(validator):
    doc = analyze(example_path()).to_dict()
    schema = load_schema()
    assert set(doc) == set(schema["properties"])
    assert set(doc["ranks"][0]) == set(schema["$defs"]["RankResult"]["properties"])
    assert set(doc["ranks"][0]["verdict"]) == set(schema["$defs"]["Verdict"]["properties"])


def test_example_json_from_the_cli_validates(validator):
    proc = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", "--example", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert_valid(validator, doc)
    assert doc["ranks"][0]["verdict"]["findings"], "the example has findings, so the finding schema was exercised"


@pytest.mark.parametrize(
    "name",
    [
        "dlrm_128rank_rank0.json.gz",
        "a100_2rank_nccl_rank0.json.gz",
        "a100_alexnet.json.gz",
        "cpu_only_gloo_rank34.pt.trace.json.gz",
        "mi250_rocm_minitoy.json.gz",
        "v100_resnet_ns_rank0.pt.trace.json.gz",
    ],
)
def test_shared_traces_validate(validator, name):
    assert_valid(validator, json.loads(analyze(shared_traces() / "kineto" / name).to_json()))


def test_directory_of_ranks_validates(validator, tmp_path):
    for rank in (0, 1):
        b = TraceBuilder(rank=rank, world_size=2)
        training_steps(b, steps=3, kernels=6)
        b.nccl(1_000_000.0 + 9_000.0, 500.0)
        b.write(tmp_path / f"rank{rank}.pt.trace.json.gz")
    doc = json.loads(analyze(tmp_path, jobs=1).to_json())
    assert [r["rank"] for r in doc["ranks"]] == [0, 1]
    assert_valid(validator, doc)


def test_schema_rejects_a_missing_metric(validator):
    doc = analyze(example_path()).to_dict()
    doc = json.loads(json.dumps(doc, default=str))
    del doc["ranks"][0]["metrics"]["gpu_busy_fraction"]
    assert not validator.is_valid(doc)


def test_json_leaves_the_timeline_out_unless_asked(validator, tmp_path, capsys):
    from tracedoc.cli import main

    assert main(["analyze", "--example", "-f", "json"]) == 0
    small = capsys.readouterr().out
    assert main(["analyze", "--example", "-f", "json", "--timeline"]) == 0
    full = capsys.readouterr().out
    doc, doc_full = json.loads(small), json.loads(full)
    assert all("timeline" not in r for r in doc["ranks"])
    assert all(r["timeline"]["excerpts"] for r in doc_full["ranks"])
    assert len(small) < len(full)
    assert_valid(validator, doc)
    assert_valid(validator, doc_full)
    rank_schema = load_schema()["$defs"]["RankResult"]
    assert "timeline" not in rank_schema["required"]
    from tracedoc.result import AnalysisResult

    again = AnalysisResult.from_dict(doc)  # a report without the timeline reads back, with an empty one
    assert again.ranks[0].timeline == {}
