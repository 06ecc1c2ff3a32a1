"""Small hostile files and a second local user against the newer surfaces: log keys that are not field
names, configuration in directories other people own, nsys exports that build gigabytes from a few
kilobytes, the ``--perfetto`` overlay, link targets, patterns, CSV lines and rank selections.

Each case is what such an input did before (a traceback, gigabytes of memory, minutes, a script run from a
link, a threshold set by another user): now each is one clear line, or the input is read within bounds.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tracedoc.logs.jsonlog import read_jsonl

ROOT = Path(__file__).resolve().parents[1]
NOBODY = 65534  # "another user": the tests run as any user, and the checks compare with os.getuid()


def tracedoc(*args, cwd=None, limit_as: int | None = None, timeout=120, env=None):
    def cap():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    base = {
        "PYTHONPATH": str(ROOT),
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/root"),
        "TRACEDOC_CACHE_DIR": os.environ.get("TRACEDOC_CACHE_DIR", "off"),
    }
    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=cap,
        cwd=cwd,
        env={**base, **(env or {})},
    )


# ---- log keys -------------------------------------------------------------------------------------------
ODD_KEYS = ['run"1/loss', "run\\1/loss", "run\x01/loss", "run\n1/loss", "run\u2028/loss"]


@pytest.mark.parametrize("key", ODD_KEYS)
def test_a_log_key_with_quotes_backslashes_or_control_characters_is_data(key):
    lines = [json.dumps({"step": i, key: 2.0 + 1 / i, "grad_norm": 1.0}) for i in range(1, 41)]
    lines.insert(5, "not json")  # the line-by-line path as well
    series = read_jsonl("odd.jsonl", ("\n".join(lines) + "\n").encode())
    assert series.fields_seen["loss"] == key
    assert series.columns["loss"].tolist() == [2.0 + 1 / i for i in range(1, 41)]
    assert series.warnings and "1 lines are not JSON objects" in series.warnings[0]


def test_a_log_key_that_is_not_a_field_name_reads_through_the_command(tmp_path):
    log = tmp_path / "odd.jsonl"
    log.write_text("".join(json.dumps({"step": i, 'run"1/loss': 2.0 + 1 / i}) + "\n" for i in range(1, 41)))
    proc = tracedoc("logs", log)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr


# ---- configuration from directories other people own -------------------------------------------------------
RAISE_STALL = "[tool.tracedoc.params]\nTD301.stall_threshold = 1.0\n"  # hides the example's io_bound finding


def project_under(tmp_path, owner=None, mode=None, file_owner=None, file_mode=None):
    """``tmp_path/shared/pyproject.toml`` (raising TD301's threshold) above the working directory."""
    shared = tmp_path / "shared"
    work = shared / "me" / "work"
    work.mkdir(parents=True)
    config = shared / "pyproject.toml"
    config.write_text(RAISE_STALL)
    if file_owner is not None:
        os.chown(config, file_owner, file_owner)
    if file_mode is not None:
        os.chmod(config, file_mode)
    if owner is not None:
        os.chown(shared, owner, owner)
    if mode is not None:
        os.chmod(shared, mode)
    return config, work


@pytest.mark.parametrize(
    "setup,why",
    [
        (dict(owner=NOBODY, file_owner=NOBODY), f"belongs to user id {NOBODY}"),
        (dict(owner=NOBODY), f"its directory belongs to user id {NOBODY}"),
        (dict(mode=0o777), "group or others may write its directory (mode 0777)"),
        (dict(file_mode=0o666), "group or others may write the file (mode 0666)"),
    ],
)
def test_a_config_that_another_user_could_write_is_skipped_and_said(tmp_path, setup, why):
    config, work = project_under(tmp_path, **setup)
    proc = tracedoc("analyze", "--example", "--fail-on", "io_bound", "--format", "json", cwd=work)
    assert proc.returncode == 3, proc.stderr  # the finding the file would hide is there
    assert f"{config}: not read: " in proc.stderr and why in proc.stderr
    assert proc.stderr.count("not read:") == 1 and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["config_files"] == []


def test_every_report_names_the_config_it_used(tmp_path):
    config, work = project_under(tmp_path)
    proc = tracedoc("analyze", "--example", "--fail-on", "io_bound", "--format", "json", cwd=work)
    assert proc.returncode == 0, proc.stderr  # the user's own file is read, and it hides the finding
    assert json.loads(proc.stdout)["config_files"] == [str(config)]
    for fmt in ("text", "md", "html"):
        out = tmp_path / f"report.{fmt}"
        proc = tracedoc("analyze", "--example", "--format", fmt, "-o", out, cwd=work)
        assert proc.returncode == 0, proc.stderr
        assert str(config) in out.read_text().replace("\\", ""), fmt  # Markdown escapes the underscores
    log = tmp_path / "train.jsonl"
    log.write_text("".join(json.dumps({"step": i, "loss": 2.0 + 1 / i}) + "\n" for i in range(1, 41)))
    for fmt in ("json", "text", "md", "html"):
        proc = tracedoc("logs", log, "--format", fmt, cwd=work)
        assert proc.returncode == 0 and str(config) in proc.stdout.replace("\\", ""), (fmt, proc.stderr)


# ---- the --perfetto overlay: read through the bounded reader, never at the report's cost ----------------------
def example_trace() -> Path:
    from tracedoc.cli.analyze import example_path

    return Path(example_path())


def damaged_copies(tmp_path):
    import gzip

    raw = gzip.decompress(example_trace().read_bytes())
    packed = gzip.compress(raw)
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(packed[: len(packed) * 9 // 10])  # cut off while written: the analysis reads what is there
    tail = tmp_path / "tail.json.gz"
    tail.write_bytes(packed + b"garbage after the gzip data")
    return {"cut": cut, "tail": tail}


@pytest.mark.parametrize("damage", ["cut", "tail"])
def test_a_damaged_trace_costs_the_overlay_not_the_report(tmp_path, damage):
    trace = damaged_copies(tmp_path)[damage]
    report, overlay = tmp_path / "report.html", tmp_path / "overlay.json"
    proc = tracedoc("analyze", trace, "-o", report, "--perfetto", overlay)
    assert "Traceback" not in proc.stderr, proc.stderr
    assert report.is_file() and "<html" in report.read_text()[:400]  # the report is written all the same
    if overlay.exists():  # the bytes before the damage made a whole trace: a valid overlay of them
        assert proc.returncode == 0, proc.stderr
        assert json.loads(overlay.read_text())["traceEvents"]
    else:
        assert proc.returncode == 1, proc.stderr
        assert f"--perfetto {overlay} not written; the report is written anyway (exit status 1)" in proc.stderr
        assert 'href="./overlay.json"' not in report.read_text()  # no link to a file that is not there
        assert not list(tmp_path.glob(".*tmp*"))  # no temporary file left behind


@pytest.mark.parametrize("swap", ["fifo", "dev-zero"])
def test_a_trace_swapped_after_the_analysis_is_refused_by_the_overlay(tmp_path, swap):
    import shutil

    from tracedoc.api import analyze
    from tracedoc.errors import TracedocError
    from tracedoc.render.perfetto import write_perfetto

    trace = tmp_path / "t.json.gz"
    shutil.copy(example_trace(), trace)
    result = analyze(str(trace))
    trace.unlink()
    if swap == "fifo":
        os.mkfifo(trace)  # reading would wait forever for a writer
    else:
        trace.symlink_to("/dev/zero")  # reading would never end
    with pytest.raises(TracedocError, match="not a trace file"):
        write_perfetto(result, str(tmp_path / "overlay.json"))
    assert not (tmp_path / "overlay.json").exists() and not list(tmp_path.glob(".*tmp*"))


def test_the_overlay_keeps_the_original_events_byte_for_byte_and_adds_its_tracks(tmp_path):
    import gzip

    from tracedoc.api import analyze
    from tracedoc.render.perfetto import write_perfetto

    trace = example_trace()
    original = json.loads(gzip.decompress(trace.read_bytes()))
    out = tmp_path / "o.json.gz"
    write_perfetto(analyze(str(trace)), str(out))
    doc = json.loads(gzip.decompress(out.read_bytes()))
    n = len(original["traceEvents"])
    assert doc["traceEvents"][:n] == original["traceEvents"]
    assert {k: v for k, v in doc.items() if k != "traceEvents"} == {
        k: v for k, v in original.items() if k != "traceEvents"
    }
    added = doc["traceEvents"][n:]
    assert any(e.get("name") == "process_name" and e["args"]["name"] == "tracedoc" for e in added)
    assert any(e.get("cat") == "tracedoc.finding" for e in added)


# ---- link targets and the HTML report's Content-Security-Policy ---------------------------------------------
def test_a_perfetto_name_that_is_a_url_is_a_local_file_link(tmp_path):
    import re

    name = "javascript:alert(1)"
    proc = tracedoc("analyze", example_trace(), "-o", "report.html", "--perfetto", name, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / name).is_file()
    page = (tmp_path / "report.html").read_text()
    hrefs = re.findall(r'href="([^"]*)"', page)
    assert "./javascript%3Aalert%281%29" in hrefs
    assert not any(h.lower().startswith("javascript:") for h in hrefs)


def test_the_report_allows_its_own_script_by_hash_and_nothing_inline():
    import base64
    import hashlib
    import re

    from tracedoc.api import analyze
    from tracedoc.render.html import render_html
    from tracedoc.render.viewmodel import local_href

    page = render_html(analyze(str(example_trace())), overlay_href="javascript:alert(1)")
    csp = re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1)
    script_src = re.search(r"script-src ([^;]*)", csp).group(1)
    assert "unsafe-inline" not in script_src
    (script,) = re.findall(r"<script>(.*?)</script>", page, flags=re.S)
    assert script_src == f"'sha256-{base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()}'"
    assert 'href="./javascript%3Aalert%281%29"' in page
    assert local_href("/abs/x y.json") == "file:///abs/x%20y.json" and local_href("file:/a/b") == "file:/a/b"


# ---- nsys exports that compute values as they are read --------------------------------------------------------
def nsys_mock() -> Path:
    from conftest import shared_traces

    return shared_traces() / "nsys" / "nsys2026_mock.sqlite"


def crafted_export(tmp_path, attack: str, n: int = 25_000_000) -> Path:
    """The mock export with its ``StringIds`` made hostile (each name ``hex(zeroblob(n))`` long when read)."""
    import shutil
    import sqlite3

    path = tmp_path / f"{attack}.sqlite"
    shutil.copy(nsys_mock(), path)
    con = sqlite3.connect(path)
    grow = f"hex(zeroblob({n}))"
    if attack == "generated":
        con.executescript(f"""ALTER TABLE StringIds RENAME TO S0;
            CREATE TABLE StringIds (id INTEGER PRIMARY KEY, raw TEXT,
                                    value TEXT GENERATED ALWAYS AS (raw || {grow}) VIRTUAL);
            INSERT INTO StringIds (id, raw) SELECT id, value FROM S0; DROP TABLE S0;""")
    elif attack == "stored":
        con.executescript("""ALTER TABLE StringIds RENAME TO S0;
            CREATE TABLE StringIds (id INTEGER PRIMARY KEY, raw TEXT,
                                    value TEXT GENERATED ALWAYS AS (raw || '') STORED);
            INSERT INTO StringIds (id, raw) SELECT id, value FROM S0; DROP TABLE S0;""")
    elif attack == "view":
        con.executescript(f"""ALTER TABLE StringIds RENAME TO S0;
            CREATE VIEW StringIds AS SELECT id, value || {grow} AS value FROM S0;""")
    elif attack == "trigger":
        con.executescript("CREATE TRIGGER grow AFTER INSERT ON StringIds BEGIN SELECT 1; END;")
    elif attack == "huge-value":
        con.execute(
            "UPDATE StringIds SET value = value || ? WHERE id = (SELECT demangledName FROM "
            "CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1)",
            ("x" * (17 << 20),),
        )
    con.commit()
    con.close()
    return path


@pytest.mark.parametrize(
    "attack,said",
    [
        ("generated", "table StringIds has a generated column ('value')"),
        ("stored", "table StringIds has a generated column ('value')"),
        ("view", "StringIds is a view, where an Nsight Systems export has a plain table"),
        ("trigger", "StringIds has a trigger ('grow'), where an Nsight Systems export has a plain table"),
        ("huge-value", "holds a value longer than 16,777,216 bytes"),
    ],
)
def test_an_export_that_computes_values_is_refused_in_one_line_within_memory(tmp_path, attack, said):
    # a generated column is refused before a row is read, so a short one shows it (writing 25 MB names takes s)
    path = crafted_export(tmp_path, attack, n=1000 if attack == "generated" else 25_000_000)
    proc = tracedoc("analyze", path, limit_as=3 << 30, timeout=120)
    assert proc.returncode == 1, proc.stderr
    assert said in proc.stderr and "Traceback" not in proc.stderr
    assert len([line for line in proc.stderr.splitlines() if line.startswith("tracedoc: error")]) == 1


def test_an_export_opened_by_the_reader_cannot_write_or_run_schema_functions(tmp_path):
    import sqlite3

    from tracedoc.ingest.nsys.db import MAX_VALUE_BYTES, _connect

    con = _connect(str(nsys_mock()))
    assert con.execute("PRAGMA trusted_schema").fetchone()[0] == 0
    assert con.execute("PRAGMA query_only").fetchone()[0] == 1
    assert con.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) == MAX_VALUE_BYTES
    with pytest.raises(sqlite3.DataError, match="too big"):
        con.execute("SELECT hex(zeroblob(?))", (MAX_VALUE_BYTES,)).fetchone()
    con.close()


# ---- patterns and rank selections checked before the work --------------------------------------------------
def test_a_huge_metrics_pattern_is_refused_at_once():
    proc = tracedoc("metrics", "[" * 50_000, timeout=60)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "a pattern of 50,000 characters is longer than the 200 allowed" in proc.stderr
    assert tracedoc("metrics", "[" * 200, timeout=60).returncode == 2  # within the bound: matches nothing


def rank_directory(tmp_path, ranks, named_only=()):
    """Copies of the example trace as rank files: its distributedInfo says rank ``r`` (or, for ranks in
    ``named_only``, the distributedInfo is removed and only the file name tells the rank)."""
    import gzip

    raw = gzip.decompress(example_trace().read_bytes())
    directory = tmp_path / "job"
    directory.mkdir()
    for r in ranks:
        text = raw.replace(b'"rank": 0,', f'"rank": {r},'.encode(), 1)
        if r in named_only:
            text = text.replace(b'"distributedInfo"', b'"distributedInfoX"', 1)
        (directory / f"rank{r}.json").write_bytes(text)
    return directory


def test_a_bad_rank_is_refused_before_the_analysis(tmp_path, monkeypatch, capsys):
    from tracedoc import cli, stages

    directory = rank_directory(tmp_path, [0, 1, 2], named_only=[2])
    assert stages.directory_ranks(str(directory)) == {0, 1, 2}
    monkeypatch.setattr("tracedoc.stages.read_ranks", lambda *a, **k: pytest.fail("the analysis ran"))
    for bad, said in ((7, "rank 7 is not in"), (-1, "rank -1 is negative")):
        assert cli.main(["analyze", str(directory), "--rank", str(bad)]) == 2
        err = capsys.readouterr().err
        assert said in err and "Traceback" not in err
    assert "ranks [0, 1, 2]" not in err  # a negative rank is refused without reading a file


def test_a_rank_told_only_by_the_analysis_is_checked_after_it(tmp_path):
    from tracedoc import stages

    directory = rank_directory(tmp_path, [0, 1])
    (directory / "rank1.json").rename(directory / "other.json")  # neither its head nor its name says
    (directory / "other.json").write_bytes(
        (directory / "other.json").read_bytes().replace(b'"distributedInfo"', b'"distributedInfoX"', 1)
    )
    assert stages.directory_ranks(str(directory)) is None
    proc = tracedoc("analyze", directory, "--rank", "5")
    assert proc.returncode == 2 and "rank 5 is not in" in proc.stderr and "Traceback" not in proc.stderr


# ---- CSV logs read a bounded line at a time -------------------------------------------------------------------
def test_a_csv_line_past_the_bound_is_an_error_naming_it(tmp_path):
    from tracedoc.logs.csvlog import MAX_LINE_CHARS

    log = tmp_path / "one-line.csv"
    with open(log, "w") as f:
        f.write("step,loss\n1,2.5\n2," + "9" * (MAX_LINE_CHARS * 10) + "\n")  # 40 MB on one line
    proc = tracedoc("logs", log, limit_as=2 << 30)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"line 3 is longer than {MAX_LINE_CHARS:,} characters" in proc.stderr


def test_a_csv_log_is_read_into_its_columns(tmp_path):
    from tracedoc.logs.reader import read_log

    log = tmp_path / "metrics.csv"
    rows = ["epoch,step,train_loss,val_loss"] + [f"0,{i},{2 + 1 / i},{'' if i % 5 else 2.1}" for i in range(1, 61)]
    log.write_text("\n".join(rows) + "\n0,61,1.9\n0,62,1")  # a short row, and a last line cut off
    series = read_log(log)
    assert series.format == "Lightning metrics.csv" and len(series) == 60
    assert series.columns["loss"].tolist() == pytest.approx([2 + 1 / i for i in range(1, 61)])
    assert any("cut off" in w for w in series.warnings) and any("1 rows do not have" in w for w in series.warnings)


# ---- the merged --perfetto timeline: names bounded -----------------------------------------------------------
def test_a_long_process_name_is_not_copied_into_every_thread_label():
    from tracedoc.render.perfetto_job import MAX_LABEL_CHARS, rank_events

    huge = "p" * (1 << 20)
    events = [
        {"ph": "M", "name": "process_name", "pid": 1, "args": {"name": huge}},
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 0, "args": {"name": huge}},
        {"ph": "M", "name": "process_name", "pid": [1], "args": {"name": {"odd": 1}}},
    ]
    events += [{"ph": "X", "name": "op", "pid": 1, "tid": t, "ts": t, "dur": 1} for t in range(2000)]
    events += [{"ph": "X", "name": "op", "pid": [1], "tid": {"t": 1}, "ts": 1, "dur": 1}]
    out = rank_events(3, 0, events, 0)
    labels = [e["args"]["name"] for e in out if e["ph"] == "M" and e["name"] == "thread_name"]
    assert len(labels) == 2002
    assert max(map(len, labels)) <= 2 * MAX_LABEL_CHARS + 3
    assert sum(map(len, labels)) < 2002 * (2 * MAX_LABEL_CHARS + 3)
