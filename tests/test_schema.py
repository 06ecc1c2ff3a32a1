"""The JSON Schema of ``--format json`` (tracedoc/schema/analysis.schema.json) is valid Draft 2020-12,
lists every registered metric, and real outputs validate against it.

The schema's ``metrics`` properties are generated from ``registry.METRICS``; ``pytest --update-gold``
rewrites them when a metric is added.
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

from tracedoc.analyses.registry import METRICS
from tracedoc.api import analyze
from tracedoc.cli import example_path

SCHEMA_PATH = Path(__file__).resolve().parents[1] / "tracedoc" / "schema" / "analysis.schema.json"
_TYPES = {"bool": "boolean", "name": "string", "count": "integer"}


def load_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())


def metric_properties() -> dict:
    """What the schema must say about each metric: its JSON type (or null) and unit + meaning."""
    return {name: {"type": [m.json_type, "null"], "description": f"[{m.unit}] {m.meaning}"}
            for name, m in METRICS.items()}


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


def test_schema_lists_every_registered_metric(request):
    schema = load_schema()
    want = metric_properties()
    if request.config.getoption("--update-gold"):
        schema["$defs"]["metrics"]["properties"] = want
        schema["$defs"]["metrics"]["required"] = list(want)
        SCHEMA_PATH.write_text(json.dumps(schema, indent=2) + "\n")
    metrics = schema["$defs"]["metrics"]
    assert metrics["properties"] == want, "run pytest --update-gold to regenerate the metrics from the registry"
    assert metrics["required"] == list(METRICS)
    assert metrics["additionalProperties"] is False


def test_schema_describes_every_top_level_and_rank_field():
    schema = load_schema()
    for name, prop in schema["properties"].items():
        assert prop.get("description"), f"top-level field {name!r} has no description"
    assert set(schema["required"]) == set(schema["properties"])
    rank = schema["$defs"]["rank"]
    optional = {"timeline"}  # only with --timeline; its description says so
    assert set(rank["required"]) | optional == set(rank["properties"])
    assert all("Optional" in rank["properties"][name]["description"] for name in optional)
    for name, prop in rank["properties"].items():
        target = schema["$defs"][prop["$ref"].rsplit("/", 1)[1]] if "$ref" in prop else prop
        assert target.get("description") or prop.get("description"), f"rank field {name!r} has no description"
    for name in ("window", "verdict", "finding", "health", "evidence", "environment", "timeline"):
        assert name in schema["$defs"], name


def test_top_level_fields_match_to_dict(validator):
    doc = analyze(example_path()).to_dict()
    schema = load_schema()
    assert set(doc) == set(schema["properties"])
    assert set(doc["ranks"][0]) == set(schema["$defs"]["rank"]["properties"])
    assert set(doc["ranks"][0]["verdict"]) == set(schema["$defs"]["verdict"]["properties"])


def test_example_json_from_the_cli_validates(validator):
    proc = subprocess.run([sys.executable, "-m", "tracedoc", "analyze", "--example", "--format", "json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert_valid(validator, doc)
    assert doc["ranks"][0]["verdict"]["findings"], "the example has findings, so the finding schema was exercised"


@pytest.mark.parametrize("name", ["dlrm_128rank_rank0.json.gz", "a100_2rank_nccl_rank0.json.gz", "a100_alexnet.json.gz",
                                  "cpu_only_gloo_rank34.pt.trace.json.gz", "mi250_rocm_minitoy.json.gz",
                                  "v100_resnet_ns_rank0.pt.trace.json.gz"])
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
    rank_schema = load_schema()["$defs"]["rank"]
    assert "timeline" not in rank_schema["required"] and "Optional" in rank_schema["properties"]["timeline"]["description"]
    from tracedoc.result import AnalysisResult

    again = AnalysisResult.from_dict(doc)  # a report without the timeline reads back, with an empty one
    assert again.ranks[0].timeline == {}
