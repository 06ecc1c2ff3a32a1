"""Hand-edited saved reports and model configs: each either loads or fails in one line that names the field
and what was wrong with it, never a traceback; numbers outside their domain (the metric table's ranges,
durations and counts >= 0, steps that end after they start) are refused like wrong types."""

from __future__ import annotations

import copy
import json

import pytest
from trace_builder import TraceBuilder, training_steps

from tracedoc.api import analyze
from tracedoc.cli import main
from tracedoc.errors import TraceError, UsageError
from tracedoc.estimate.config import from_hf_config, load_model_spec
from tracedoc.result import AnalysisResult, load


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    d = tmp_path_factory.mktemp("typed")
    b = TraceBuilder()
    training_steps(b, steps=6, kernels=6, dataloader_us=2000.0)
    trace = b.write(d / "t.json")
    report = d / "base.json"
    analyze(trace).save(report)
    return report


def _edited(saved, tmp_path, edit) -> str:
    doc = json.loads(saved.read_text())
    edit(doc)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(doc))
    return str(path)


def _set(path: str, value):
    def edit(doc):
        node = doc
        keys = [int(k) if k.isdigit() else k for k in path.split("/")]
        for k in keys[:-1]:
            node = node[k]
        node[keys[-1]] = value

    return edit


# (path in the document, value, the field path and the words the one-line error must hold)
REFUSED = [
    ("ranks/0/metrics/gpu_busy_fraction", 7.5, "ranks[0].metrics.gpu_busy_fraction = 7.5 is outside [0, 1]"),
    ("ranks/0/metrics/step_time_p50_ns", -2_000_000, "ranks[0].metrics.step_time_p50_ns = -2000000 is negative"),
    ("ranks/0/metrics/idle_fraction", "0.2", "ranks[0].metrics.idle_fraction = '0.2' is not a number"),
    ("ranks/0/metrics/kernel_count", 2.5, "ranks[0].metrics.kernel_count = 2.5 is not a whole number"),
    (
        "ranks/0/metrics/dataloader_multiprocess",
        "yes",
        "ranks[0].metrics.dataloader_multiprocess = 'yes' is not a boolean",
    ),
    ("ranks/0/per_step/1/step_time_ns", -5, "ranks[0].per_step[1].step_time_ns = -5 is negative"),
    ("ranks/0/per_step/2/start_ns", "x", "ranks[0].per_step[2].start_ns = 'x' is not a number (a str)"),
    ("ranks/0/per_step/2/start_ns", None, "ranks[0].per_step[2].start_ns = None is missing"),
    (
        "ranks/0/per_step/0/start_ns",
        2**63,
        "ranks[0].per_step[0].start_ns = 9223372036854775808 is beyond the int64 nanoseconds",
    ),
    ("ranks/0/per_step/0/idle_ns", [1], "ranks[0].per_step[0].idle_ns = [1] is not a number (a list)"),
    (
        "ranks/0/evidence/kernel_totals/0/total_ns",
        {"v": 1},
        "ranks[0].evidence.kernel_totals[0].total_ns = {'v': 1} is not a number (a dict)",
    ),
    ("ranks/0/evidence/kernel_totals/0/name", None, "ranks[0].evidence.kernel_totals[0].name = None is not a name"),
    (
        "ranks/0/verdict/findings/0/impact_fraction",
        1.5,
        "ranks[0].verdict.findings[0].impact_fraction = 1.5 is outside [0, 1]",
    ),
    (
        "ranks/0/verdict/findings/0/what_if/step_ms_after",
        -1.0,
        "ranks[0].verdict.findings[0].what_if.step_ms_after = -1.0 is negative",
    ),
    ("ranks/0/window/kind", "1e400", "window kind '1e400' is not one of"),
    ("ranks/0/window/start_ns", "10", "$.ranks[0].window.start_ns"),
]


@pytest.mark.parametrize("path,value,words", REFUSED, ids=[f"{p}={v!r}"[-60:] for p, v, _ in REFUSED])
def test_a_value_of_the_wrong_type_or_outside_its_domain_is_refused_naming_its_field(
    saved, tmp_path, capsys, path, value, words
):
    edited = _edited(saved, tmp_path, _set(path, value))
    with pytest.raises(TraceError) as info:
        load(edited)
    assert words in str(info.value)
    # the command line: one line on stderr, exit 1, on either side of a diff
    for sides in ([str(saved), edited], [edited, str(saved)]):
        assert main(["diff", *sides, "-f", "json"]) == 1
        out = capsys.readouterr()
        assert out.out == "" and out.err.count("\n") == 1 and "Traceback" not in out.err
        assert out.err.startswith(f"tracedoc: error: {edited}: ") and words in out.err


def test_a_step_that_ends_before_it_starts_is_refused(saved, tmp_path):
    def edit(doc):
        row = doc["ranks"][0]["per_step"][0]
        row["end_ns"] = row["start_ns"] - 1

    with pytest.raises(TraceError, match=r"ranks\[0\]\.per_step\[0\]\.end_ns = -?\d+ is before its start_ns"):
        load(_edited(saved, tmp_path, edit))


def test_values_inside_their_domain_load_and_diff(saved, tmp_path, capsys):
    # a hand edit that keeps every value possible is a report like any other
    def edit(doc):
        doc["ranks"][0]["metrics"]["gpu_busy_fraction"] = 1.0
        doc["ranks"][0]["metrics"]["kernel_count"] = 36.0  # an integral number for a count
        doc["ranks"][0]["metrics"]["comm_overlap_fraction"] = None  # not measurable

    edited = _edited(saved, tmp_path, edit)
    result = load(edited)
    assert result.ranks[0].metrics["gpu_busy_fraction"] == 1.0
    assert main(["diff", str(saved), edited, "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    busy = next(m for m in doc["pairs"][doc["focus"]]["metrics"] if m["name"] == "gpu_busy_fraction")
    assert busy["after"] == 1.0


def test_deeply_nested_values_are_refused_not_a_recursion_error(saved, tmp_path):
    deep: object = 1
    for _ in range(200):
        deep = [deep]
    doc = json.loads(saved.read_text())
    doc["ranks"][0]["evidence"]["top_gaps"] = [{"note": deep}]
    with pytest.raises(TraceError, match="nested deeper than"):
        AnalysisResult.from_dict(copy.deepcopy(doc), "deep.json")


def test_what_tracedoc_writes_loads(saved):
    # the domains are those check_rank keeps on every fresh result, so a report written by tracedoc loads
    assert load(saved) == analyze(saved.with_name("t.json"))


# -- model configs ----------------------------------------------------------------------------------

LLAMA = {
    "model_type": "llama",
    "hidden_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "intermediate_size": 688,
    "vocab_size": 1000,
    "max_position_embeddings": 128,
    "tie_word_embeddings": False,
}

BAD_CONFIGS = [
    ("num_attention_heads", 0, "num_attention_heads must be positive"),
    ("hidden_size", "4096", "hidden_size must be a whole number (saw '4096' (a string))"),
    ("hidden_size", -4096, "hidden_size must be positive"),
    ("num_hidden_layers", 2.5, "num_hidden_layers must be a whole number (saw 2.5"),
    ("intermediate_size", [688], "intermediate_size must be a whole number (saw [688] (a list))"),
    ("vocab_size", True, "vocab_size must be a whole number (saw True (a boolean))"),
    ("vocab_size", 10**30, "vocab_size must be positive and at most 16,777,216"),
    ("max_position_embeddings", {"v": 1}, "max_position_embeddings must be a whole number"),
    ("num_key_value_heads", 3, "attention heads are not a multiple of key/value heads"),
    ("tie_word_embeddings", "false", "tie_word_embeddings must be true or false"),
    ("model_type", 7, "model_type must be a string"),
]


@pytest.mark.parametrize("key,value,words", BAD_CONFIGS, ids=[f"{k}={v!r}"[:40] for k, v, _ in BAD_CONFIGS])
def test_a_bad_model_config_field_is_one_usage_error_naming_it(tmp_path, key, value, words):
    cfg = dict(LLAMA, **{key: value})
    with pytest.raises(UsageError) as info:
        from_hf_config(cfg, "config.json")
    assert str(info.value).startswith("config.json: ") and words in str(info.value)


def test_nan_in_a_model_config_file_is_refused_on_the_command_line(saved, tmp_path, capsys):
    trace = saved.with_name("t.json")
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(LLAMA).replace('"hidden_size": 256', '"hidden_size": NaN'))
    rc = main(["analyze", str(trace), "--model", str(cfg), "--tokens-per-step", "256", "-f", "json"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "hidden_size must be a whole number (saw nan" in err
    cfg.write_text(json.dumps(LLAMA))
    assert main(["analyze", str(trace), "--model", str(cfg), "--tokens-per-step", "256", "-f", "json"]) in (0, 3)


@pytest.mark.parametrize(
    "params,words",
    [
        ("hidden=4096,layers=32,heads=0,vocab=32000", "--model heads=0: num_heads must be positive"),
        ("hidden=4096,layers=nan,heads=32,vocab=32000", "--model layers=nan: num_layers must be a whole number"),
        ("hidden=4096,layers=inf,heads=32,vocab=32000", "--model layers=inf: num_layers must be a whole number"),
        ("hidden=4096,layers=-2,heads=32,vocab=32000", "--model layers=-2: num_layers must be positive"),
        ("hidden=4096,layers=32,heads=32,vocab=32000,colour=red", "is not a known model param (saw colour)"),
        ("hidden=4096,layers=32,heads=32,vocab=32000,family=bert", "is not a model family"),
        ("hidden=4096,layers=32,heads=32,vocab=32000,swiglu=maybe", "gated_mlp must be true or false"),
    ],
)
def test_bad_model_params_name_the_param(params, words):
    with pytest.raises(UsageError) as info:
        load_model_spec(params)
    assert words in str(info.value)


def test_good_params_and_integral_numbers_still_read():
    spec = load_model_spec("hidden=4096,layers=32,heads=32,kv_heads=8,ffn=14336,vocab=128256,swiglu=true")
    assert (spec.num_heads, spec.num_kv_heads, spec.head_dim, spec.gated_mlp) == (32, 8, 128, True)
    assert from_hf_config(dict(LLAMA, hidden_size=256.0)).hidden_size == 256


def test_a_step_row_without_its_window_measured_counts_its_span(saved, tmp_path, capsys):
    edited = _edited(saved, tmp_path, _set("ranks/0/per_step/1/window_ns", None))
    assert main(["diff", str(saved), edited, "-f", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["step_delta_ns"] == 0 and sum(a["delta_ns"] for a in doc["attribution"]) == 0
