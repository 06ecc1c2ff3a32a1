"""Output files: a temporary file nobody can plant, removed on signals mid-write; no output replaces an input."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from trace_builder import TraceBuilder, training_steps
from tracedoc.cli import main
from tracedoc.outfiles import TMP_PREFIX, write_atomic

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def trace(tmp_path):
    b = TraceBuilder()
    training_steps(b, steps=3, kernels=3)
    return b.write(tmp_path / "t.json")


def _leftovers(d: Path) -> list[Path]:
    return [p for p in d.iterdir() if p.name.startswith(TMP_PREFIX) or ".tmp-" in p.name]


def test_a_planted_link_at_the_old_temporary_name_is_never_followed(trace, tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep")
    out = tmp_path / "r.json"
    (tmp_path / f"r.json.tmp-{os.getpid()}").symlink_to(victim)  # where a predictable name would be
    assert main(["analyze", str(trace), "-f", "json", "--no-progress", "-o", str(out)]) == 0
    assert victim.read_text() == "keep"
    assert json.loads(out.read_text())["schema"] == "tracedoc.analysis"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(TMP_PREFIX)]


def test_the_written_file_gets_the_usual_mode_not_mkstemps_0600(tmp_path):
    out = tmp_path / "r.txt"
    write_atomic(str(out), "x")
    umask = os.umask(0)
    os.umask(umask)
    assert out.stat().st_mode & 0o777 == 0o666 & ~umask


_WRITER = r"""
import signal, sys, time
from tracedoc.outfiles import replace_atomically
# Ctrl-C raises KeyboardInterrupt as in an interactive run, even when this test runs in a background job
# (which starts its children with SIGINT ignored); SIGHUP has its default action even under nohup (which
# starts them with SIGHUP ignored), unless the test asks for the nohup case.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGHUP, signal.SIG_IGN if sys.argv[2] == "nohup" else signal.SIG_DFL)
if sys.argv[2] == "handler":
    signal.signal(signal.SIGTERM, lambda *a: (print("own handler ran", flush=True), sys.exit(7)))
def write(f):
    f.write(b"x" * (1 << 20))
    f.flush()
    print("writing", flush=True)
    time.sleep(30)
replace_atomically(sys.argv[1], write)
"""


def _start_writer(out: Path, mode: str = "plain") -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(out), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert proc.stdout.readline().strip() == "writing"
    assert _leftovers(out.parent), "the temporary file exists mid-write"
    return proc


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_a_signal_mid_write_removes_the_temporary_file(tmp_path, sig):
    out = tmp_path / "report.json"
    out.write_text("old")
    proc = _start_writer(out)
    proc.send_signal(sig)
    proc.communicate(timeout=60)
    assert proc.returncode != 0
    if sig != signal.SIGINT:  # the default action: the process ends by the signal itself
        assert proc.returncode == -sig
    assert _leftovers(tmp_path) == []
    assert out.read_text() == "old"  # the old file is untouched


def test_an_ignored_sighup_leaves_the_write_alone(tmp_path):
    """Under nohup SIGHUP is ignored: the temporary file stays (the program is still writing it) and the
    process goes on; a later SIGTERM still removes the file."""
    out = tmp_path / "report.json"
    proc = _start_writer(out, "nohup")
    proc.send_signal(signal.SIGHUP)
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=1)  # still writing: an ignored signal does not end it
    assert _leftovers(tmp_path), "the temporary file being written was removed"
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM
    assert _leftovers(tmp_path) == [] and not out.exists()


def test_a_signal_mid_write_still_reaches_the_programs_own_handler(tmp_path):
    out = tmp_path / "report.json"
    proc = _start_writer(out, "handler")
    proc.send_signal(signal.SIGTERM)
    stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 7 and "own handler ran" in stdout
    assert _leftovers(tmp_path) == [] and not out.exists()


def test_handlers_are_restored_after_a_write(tmp_path):
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)}
    write_atomic(str(tmp_path / "a.txt"), "x")
    assert {s: signal.getsignal(s) for s in before} == before


# -- no output replaces an input --------------------------------------------------------------------


def _run(args, capsys):
    rc = main(args)
    return rc, capsys.readouterr().err


def test_output_over_the_log_is_refused(trace, tmp_path, capsys):
    log = tmp_path / "train.jsonl"
    log.write_text("".join(json.dumps({"step": i, "loss": 2.0 - i / 100}) + "\n" for i in range(1, 40)))
    before = log.read_bytes()
    rc, err = _run(["analyze", str(trace), "--no-progress", "--log", str(log), "-f", "json", "-o", str(log)], capsys)
    assert rc == 2 and "--log input" in err and "Traceback" not in err
    assert log.read_bytes() == before
    rc, err = _run(["logs", str(log), "-f", "json", "-o", str(log)], capsys)
    assert rc == 2 and "the log being analysed" in err and log.read_bytes() == before


def test_output_over_the_model_config_and_a_log_config_is_refused(trace, tmp_path, capsys):
    model = tmp_path / "config.json"
    model.write_text(
        json.dumps(
            {
                "hidden_size": 64,
                "num_hidden_layers": 2,
                "num_attention_heads": 4,
                "vocab_size": 100,
                "intermediate_size": 128,
                "max_position_embeddings": 32,
            }
        )
    )
    before = model.read_bytes()
    rc, err = _run(
        [
            "analyze",
            str(trace),
            "--no-progress",
            "--model",
            str(model),
            "--tokens-per-step",
            "16",
            "-f",
            "json",
            "-o",
            str(model),
        ],
        capsys,
    )
    assert rc == 2 and "--model input" in err and model.read_bytes() == before
    log = tmp_path / "train.jsonl"
    log.write_text("".join(json.dumps({"step": i, "loss": 2.0}) + "\n" for i in range(1, 40)))
    rc, err = _run(["logs", str(log), "--config", str(model), "-f", "json", "-o", str(model)], capsys)
    assert rc == 2 and "--config input" in err and model.read_bytes() == before


def test_a_hard_link_to_an_input_is_that_input(trace, tmp_path, capsys):
    link = tmp_path / "other-name.json"
    os.link(trace, link)
    before = trace.read_bytes()
    rc, err = _run(["analyze", str(trace), "--no-progress", "-f", "json", "-o", str(link)], capsys)
    assert rc == 2 and "hard link" in err and trace.read_bytes() == before


def test_diff_never_replaces_a_rank_of_an_input_directory(trace, tmp_path, capsys):
    ranks = tmp_path / "ranks"
    ranks.mkdir()
    for r in range(2):
        (ranks / f"rank{r}.json").write_bytes(trace.read_bytes())
    before = (ranks / "rank0.json").read_bytes()
    rc, err = _run(["diff", str(trace), str(ranks), "-f", "json", "-o", str(ranks / "rank0.json")], capsys)
    assert rc == 2 and "inside the NEW input" in err and (ranks / "rank0.json").read_bytes() == before
    outside = tmp_path / "linked.json"  # a hard link from outside the directory to one of its ranks
    os.link(ranks / "rank1.json", outside)
    rc, err = _run(["diff", str(trace), str(ranks), "-f", "json", "-o", str(outside)], capsys)
    assert rc == 2 and "hard link" in err
    # a new file, or a file the directory's reader does not take, may be written there
    rc, err = _run(["diff", str(trace), str(ranks), "-f", "md", "-o", str(ranks / "diff.md")], capsys)
    assert rc == 0, err


def test_output_and_perfetto_on_one_path_are_refused_before_writing(trace, tmp_path, capsys):
    out = tmp_path / "both.json"
    rc, err = _run(["analyze", str(trace), "--no-progress", "-o", str(out), "--perfetto", str(out)], capsys)
    assert rc == 2 and "both -o and --perfetto" in err and not out.exists()
    rc, err = _run(["analyze", str(trace), "--no-progress", "--perfetto", str(trace)], capsys)
    assert rc == 2 and "the trace being analysed" in err


def test_a_gzip_bomb_given_to_diff_as_a_saved_report_is_refused_within_bounds(trace, tmp_path, capsys):
    import gzip
    import resource

    bomb = tmp_path / "bomb.report.json"
    with gzip.open(bomb, "wb", compresslevel=9) as f:
        f.write(b'{"schema": "tracedoc.analysis", "schema_version": 1, "ranks": [], "pad": "')
        for _ in range(512):  # 512 MiB of spaces, about 0.5 MB compressed
            f.write(b" " * (1 << 20))
        f.write(b'"}')
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rc, err = _run(["diff", str(trace), str(bomb), "-f", "json"], capsys)
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert rc == 1 and "gzip bomb" in err and "Traceback" not in err
    assert grew_mb < 300  # the limit is 64 MB inflated (0.5 MB x 128 is less)
