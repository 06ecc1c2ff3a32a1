"""``tracedoc logs`` end to end (every format, exit codes, escaping, no network), and a training log's
findings inside trace reports (``analyze --log``, a ``tracedoc run`` directory)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from tracedoc.api import analyze
from tracedoc.cli import example_path

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "tracedoc" / "schema" / "analysis.schema.json"


def tracedoc(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def write_log(path: Path, n=400, nan_at=(150,), spike_at=(250,), stall_every=50) -> Path:
    rng = np.random.default_rng(0)
    lines = []
    for step in range(1, n + 1):
        loss = 3.0 * np.exp(-step / 100) + 1.0 + rng.normal(0, 0.005)
        if step in spike_at:
            loss *= 2
        tps = 1000 + rng.normal(0, 5)
        if stall_every and step % stall_every == 0:
            tps = 250.0
        rec = {"step": step, "loss": float("nan") if step in nan_at else loss, "tokens_per_sec": tps}
        lines.append(json.dumps(rec))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_json_output_anomalies_and_findings(tmp_path):
    log = write_log(tmp_path / "train.jsonl")
    proc = tracedoc("logs", log, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    for a in doc["anomalies"]:
        assert a["kind"] in {
            "nan",
            "loss_spike",
            "throughput_dip",
            "periodic_stall",
            "grad_norm_spike",
            "divergence",
            "low_gpu_util",
            "lr_jump",
            "skipped_iterations",
            "loss_bump",
            "throughput_drift",
        }
        assert a["kind"] == "lr_jump" or (a["rule"].startswith("TD6") and a["criterion"]), a
        assert ("step" in a) != ("start_step" in a and "end_step" in a)
    nan = [a for a in doc["anomalies"] if a["kind"] == "nan"]
    assert [(a["step"], a["field"], a["rule"]) for a in nan] == [(150, "loss", "TD601")]
    assert [a["step"] for a in doc["anomalies"] if a["kind"] == "loss_spike"] == [250]
    assert [a["step"] for a in doc["anomalies"] if a["kind"] == "periodic_stall"] == list(range(50, 401, 50))
    assert doc["labels"][0] == "periodic_stall" and "unstable_training" in doc["labels"]
    finding = {f["rule_id"]: f for f in doc["findings"]}
    assert {"TD601", "TD602", "TD612"} <= set(finding)
    assert set(finding["TD612"]) == {
        "rule_id",
        "name",
        "title",
        "label",
        "severity",
        "message",
        "impact_fraction",
        "impact_ms_per_step",
        "confidence",
        "params",
        "fixes",
        "expect",
        "evidence",
        "what_if",
        "minor",
    }
    assert finding["TD612"]["what_if"] is None  # step-time what-ifs are for trace findings
    assert finding["TD612"]["minor"] is False  # and so is the 2% bar on their predicted gain
    assert doc["metrics"]["periodic_stall_period_steps"] == 50
    assert doc["input"]["format"] == "JSON Lines" and len(doc["input"]["sha256"]) == 64


def test_fail_on_and_errors(tmp_path):
    log = write_log(tmp_path / "train.jsonl")
    assert tracedoc("logs", log, "--fail-on", "unstable_training").returncode == 3
    clean = write_log(tmp_path / "clean.jsonl", nan_at=(), spike_at=(), stall_every=0)
    proc = tracedoc("logs", clean, "--fail-on", "warning")
    assert proc.returncode == 0, proc.stdout
    missing = tracedoc("logs", tmp_path / "nope.jsonl")
    assert missing.returncode == 1
    assert missing.stderr.startswith("tracedoc: error: ") and "Traceback" not in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    assert tracedoc("logs", log, "--window", "2").returncode == 2


def test_text_and_markdown(tmp_path):
    log = write_log(tmp_path / "train.jsonl")
    text = tracedoc("logs", log).stdout
    assert "Findings: periodic_stall, unstable_training" in text
    assert re.search(r"\n  loss_spike +step 250 ", text)
    out = tmp_path / "report.md"
    proc = tracedoc("logs", log, "--format", "md", "-o", out)
    assert proc.returncode == 0 and "wrote md report" in proc.stderr
    md = out.read_text()
    assert md.startswith("### tracedoc logs:") and "**Verdict:** `periodic_stall`, `unstable_training`" in md


def test_html_is_self_contained_with_charts_and_escaped(tmp_path):
    evil = tmp_path / "<img src=x onerror=alert(1)>.jsonl"
    write_log(evil)
    out = tmp_path / "report.html"
    proc = tracedoc("logs", evil, "--format", "html", "-o", out)
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert "<img src=x" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page), "no network fetches"
    assert "<script" not in page.lower()
    assert page.count("<svg") == 2  # loss, throughput
    assert 'class="ma"' in page and 'class="hline p10"' in page and 'class="hline p90"' in page  # MA, P10/P90 lines
    assert page.count('class="band-periodic_stall"') == 8  # stalls at 50, 100, ..., 400
    assert 'class="mark-nan"' in page and 'class="mark-loss_spike"' in page


def test_analyze_with_log_adds_its_findings(tmp_path):
    import jsonschema

    log = write_log(tmp_path / "train.jsonl")
    proc = tracedoc("analyze", "--example", "--log", log, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    verdict = doc["ranks"][0]["verdict"]
    ids = [f["rule_id"] for f in verdict["findings"]]
    assert {"TD601", "TD602", "TD612"} <= set(ids) and "TD301" in ids  # the trace's own finding stays
    assert "unstable_training" in verdict["labels"] and "io_bound" in verdict["labels"]
    nan = [a for a in doc["ranks"][0]["evidence"]["log_anomalies"] if a["kind"] == "nan"]
    assert [(a["step"], a["field"], a["source"]) for a in nan] == [(150, "loss", str(log))]
    jsonschema.validate(doc, json.loads(SCHEMA.read_text()))
    text = tracedoc("analyze", "--example", "--log", log).stdout
    assert "TD601" in text or "NaN/inf loss" in text


def test_run_directory_report_includes_its_step_log(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(example_path(), run / "rank0.pt.trace.json.gz")
    steps = []
    for i in range(1, 61):
        dur = 0.1 if i % 20 else 0.9  # the monitor's records: a slow interval every 20 steps
        steps.append(
            {
                "type": "interval",
                "schema": 1,
                "rank": 0,
                "pid": 1,
                "time": 0.0,
                "step": i,
                "steps": 1,
                "profiled_steps": 0,
                "step_time_s": {"mean": dur, "p50": dur, "p90": dur, "max": dur},
                "samples_per_s": 32 / dur,
                "tokens_per_s": None,
                "peak_mem_bytes": 1,
                "mem_source": "rss",
                "gpu_util_percent": None,
            }
        )
    steps.append(dict(steps[-1], type="summary", wall_s=9.0))
    (run / "steps.jsonl").write_text("".join(json.dumps(r) + "\n" for r in steps))
    result = analyze(run)
    ids = {f.rule_id for f in result.verdicts[0].findings}
    assert "TD612" in ids
    stalls = [a["step"] for a in result.ranks[0].evidence["log_anomalies"] if a["kind"] == "periodic_stall"]
    assert stalls == [20, 40, 60]


def test_run_directory_with_an_unreadable_step_log_warns(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(example_path(), run / "rank0.pt.trace.json.gz")
    (run / "steps.jsonl").write_text("")
    result = analyze(run)
    assert any("step log not analysed" in w for w in result.ranks[0].warnings)


def test_json_output_validates_against_the_log_schema(tmp_path):
    import jsonschema

    from tracedoc.logs.registry import LOG_METRICS

    schema = json.loads((ROOT / "tracedoc" / "schema" / "log.schema.json").read_text())
    props = schema["$defs"]["log_metrics"]["properties"]
    assert list(props) == list(LOG_METRICS)
    assert all(props[k]["description"] == f"[{m.unit}] {m.meaning}" for k, m in LOG_METRICS.items()), (
        "schema follows the table"
    )
    for log in (write_log(tmp_path / "train.jsonl"), write_log(tmp_path / "clean.jsonl", nan_at=(), spike_at=())):
        doc = json.loads(tracedoc("logs", log, "--format", "json").stdout)
        jsonschema.validate(doc, schema)


def test_markdown_escapes_log_strings(tmp_path):
    evil = tmp_path / "a|b`c@team<x>.jsonl"
    write_log(evil)
    md = tracedoc("logs", evil, "--format", "md").stdout
    assert "a\\|b\\`c&#64;&#8203;team&lt;x&gt;" in md and "@team" not in md and "<x>" not in md
    assert "| nan | step 150 |" in md


def test_html_charts_are_well_formed_svg_inside_their_box(tmp_path):
    import xml.etree.ElementTree as ET

    log = write_log(tmp_path / "train.jsonl")
    page = tracedoc("logs", log, "--format", "html").stdout
    svgs = re.findall(r"<svg.*?</svg>", page, re.S)
    assert len(svgs) == 2
    for svg in svgs:
        root = ET.fromstring(svg)
        _, _, w, h = map(float, root.get("viewBox").split())
        for line in root.iter("polyline"):
            pts = np.array([p.split(",") for p in line.get("points").split()], dtype=float)
            assert len(pts) > 10
            assert (
                (pts[:, 0] >= 0).all() and (pts[:, 0] <= w).all() and (pts[:, 1] >= 0).all() and (pts[:, 1] <= h).all()
            )
            assert np.all(np.diff(pts[:, 0]) >= 0), "x follows the steps"
