"""Hostile logs and configs: bounded reading, linear parsing, safe YAML, numbers of any size.

Each case is what a hostile or broken input did before: read forever (``/dev/zero``), inflate a small
gzip file into gigabytes, take seconds per line in a regular expression, expand a YAML alias bomb,
crash on deep nesting or a 5,000-digit number, show a step of 1e400 as -9223372036854775808, report a
negative step time, or refuse logs that are fine. Times are CPU seconds of this process (the machine
may be shared), with bounds far above what linear parsing needs.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tracedoc.api import analyze_log
from tracedoc.logs import source
from tracedoc.logs.config import read_config
from tracedoc.logs.errors import LogError
from tracedoc.logs.reader import read_log

ROOT = Path(__file__).resolve().parents[1]
HUGE = "9" * 5000


def cpu_seconds(fn, *args, **kw):
    t0 = time.process_time()
    out = fn(*args, **kw)
    return time.process_time() - t0, out


def tracedoc(*args, limit_as: int | None = None, timeout=60):
    def cap():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=cap,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


def jsonl(path: Path, n: int = 60) -> Path:
    path.write_text("".join(json.dumps({"step": i, "loss": 2.0 + 1 / i}) + "\n" for i in range(1, n + 1)))
    return path


# ---- non-regular files ------------------------------------------------------------------------------
@pytest.mark.parametrize("target", ["/dev/zero", "fifo"])
def test_logs_refuses_devices_and_pipes_at_once_even_under_a_memory_cap(tmp_path, target):
    if target == "fifo":
        target = tmp_path / "pipe.log"
        os.mkfifo(target)
    t0 = time.perf_counter()
    proc = tracedoc("logs", target, limit_as=2 * 2**30, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "not a log file" in proc.stderr and "Traceback" not in proc.stderr
    assert time.perf_counter() - t0 < 30  # no read, no hashing thread left reading


def test_config_refuses_devices(tmp_path):
    log = jsonl(tmp_path / "l.jsonl")
    proc = tracedoc("logs", log, "--config", "/dev/zero")
    assert proc.returncode == 1 and "/dev/zero: is a character device, not a config file" in proc.stderr
    with pytest.raises(LogError, match="not a config file"):
        read_config("/dev/zero")


# ---- gzip ---------------------------------------------------------------------------------------------
def test_gzip_inflation_is_bounded_with_a_clear_error(tmp_path):
    bomb = tmp_path / "bomb.jsonl.gz"
    bomb.write_bytes(gzip.compress(b" " * (100 * 2**20), compresslevel=9))  # 100 MB of spaces in ~100 KB
    assert bomb.stat().st_size < 200_000
    t0 = time.process_time()
    with pytest.raises(LogError, match="gzip bomb"):
        read_log(bomb)
    assert time.process_time() - t0 < 5.0


def test_gzip_limit_follows_memory(monkeypatch):
    assert source.memory_budget() >= 64 * 2**20
    monkeypatch.setattr(source, "MEMORY_SHARE", 10**9)  # a machine with almost no memory to spare
    assert source.memory_budget() == 64 * 2**20


def test_plain_file_larger_than_the_budget_is_refused(tmp_path):
    path = jsonl(tmp_path / "l.jsonl", n=2000)
    with pytest.raises(LogError, match="more than tracedoc reads into memory"):
        source.read_bounded(str(path), "log", max_bytes=1000)


def test_inflating_whitespace_is_linear(tmp_path):
    """60 MB of whitespace (and one 60 MB string) in a small .gz (under the 64 MiB any .gz may inflate to)
    inflate in blocks joined once: CPU time proportional to the output, well under a second per 60 MB."""
    for name, payload in (
        ("ws", b" \n\t" * (20 * 2**20)),
        ("str", b'{"step": 1, "s": "' + b"x" * (60 * 2**20) + b'"}\n'),
    ):
        path = tmp_path / f"{name}.gz"
        path.write_bytes(gzip.compress(payload, compresslevel=1))
        cpu, data = cpu_seconds(source.read_bounded, str(path), "log", 10**9)
        assert data == payload
        assert cpu < 3.0, f"{name}: {cpu:.2f} s"


def test_truncated_gzip_log_keeps_its_complete_lines(tmp_path):
    z = gzip.compress("".join(json.dumps({"step": i, "loss": 1.0}) + "\n" for i in range(1, 5001)).encode())
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(z[: len(z) * 2 // 3])
    series = read_log(path)
    assert 1000 < len(series) < 5000 and series.step[0] == 1
    assert series.warnings[0].startswith("the gzip stream ends early")


# ---- linear parsing -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "line",
    [
        "[Rank 0] step=10, skipped=0, lr=[1e-4] loss " + "a/" * 12_000,  # key-like runs the old pair pattern retried
        "step 5 loss " + "OVERFLOW! " * 2_400,
        "step 5 loss: " + "1" * 24_000 + "x",
        "step\t" + " " * 24_000 + "loss: 1",
    ],
)
def test_a_24_kb_deepspeed_line_parses_in_linear_time(tmp_path, line):
    head = (
        "[2024-01-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, lr=[1e-4], "
        "mom=[(0.9, 0.95)]\n"
    )
    path = tmp_path / "ds.log"
    path.write_text(head + (line + "\n") * 20)
    cpu, series = cpu_seconds(read_log, path)
    assert cpu < 2.0, f"{cpu:.2f} s for 20 lines of {len(line)} characters"
    assert series.format == "DeepSpeed"


def test_60_kb_of_whitespace_in_megatron_arguments(tmp_path):
    text = (
        "------------------------ arguments ------------------------\n"
        "  " + " " * 60_000 + "tensor_model_parallel_size ...... 2\n"
        "  seq_length ...................................... " + " " * 60_000 + "4096\n"
        "-------------------- end of arguments ---------------------\n"
        + "".join(
            f" iteration {i:8d}/    1000 | elapsed time per iteration (ms): 1000.0 | lm loss: 2.0E+00 |\n"
            for i in range(10, 310, 10)
        )
    )
    path = tmp_path / "megatron.log"
    path.write_text(text)
    cpu, series = cpu_seconds(read_log, path)
    assert cpu < 2.0 and series.header["seq_length"] == 4096
    cfg = tmp_path / "args.txt"
    cfg.write_text(text[:-200])
    cpu, (settings, kind) = cpu_seconds(read_config, str(cfg))
    assert cpu < 2.0 and kind == "Megatron arguments" and settings["seq_length"] == 4096


def test_long_lines_are_cut_with_a_warning(tmp_path):
    path = tmp_path / "titan.log"
    path.write_text(
        "".join(f"[titan] step: {i}  loss: 2.5  grad_norm: 1.0  tps: 9,000{' pad' * 5000}\n" for i in range(1, 41))
    )
    series = read_log(path)
    assert len(series) == 40 and any("longer than 8,192 characters" in w for w in series.warnings)


# ---- YAML and other configs ------------------------------------------------------------------------------
def _alias_bomb() -> str:
    levels = "".join(f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join(["*" + chr(97 + i)] * 9) + "]\n" for i in range(8))
    return 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + levels


@pytest.mark.parametrize(
    "name, text, match",
    [
        ("bomb.yaml", _alias_bomb(), "alias bomb"),
        (
            "list.yaml",
            "a: &a [" + ",".join(["x"] * 1000) + "]\n" + "".join(f"k{i}: *a\n" for i in range(3000)),
            "alias bomb",
        ),
        ("self.yaml", "a: &a [1, *a]\n", "self-referencing anchor"),
        ("selfmap.yaml", "b: &b {x: *b}\n", "self-referencing anchor"),
        ("deep.yaml", "a: " + "[" * 50_000 + "]" * 50_000 + "\n", "nested"),
        ("evil.yaml", "a: !!python/object/apply:os.system ['echo pwned']\n", "not valid YAML"),
    ],
)
def test_hostile_yaml_is_refused_quickly(tmp_path, name, text, match):
    assert len(text) < 200_000
    path = tmp_path / name
    path.write_text(text)
    t0 = time.process_time()
    with pytest.raises(LogError, match=match):
        read_config(str(path))
    assert time.process_time() - t0 < 2.0


def test_yaml_with_ordinary_anchors_reads(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(
        "defaults: &d\n  micro_batch_size: 2\n  seq_length: 4096\ntrain:\n  <<: *d\n  global_batch_size: 64\n"
    )
    settings, kind = read_config(str(path))
    assert kind == "YAML config" and settings["seq_length"] == 4096 and settings["global_batch_size"] == 64


def test_toml_config(tmp_path):
    path = tmp_path / "llama3_8b.toml"
    path.write_text(
        "[parallelism]\ntensor_parallel_degree = 2\npipeline_parallel_degree = 1\n"
        "[training]\nseq_len = 8192\nlocal_batch_size = 1\n"
    )
    settings, kind = read_config(str(path))
    assert kind == "TOML config" and settings["parallelism_tensor_parallel_degree"] == 2 and settings["seq_len"] == 8192


@pytest.mark.parametrize(
    "name, text",
    [
        ("n.json", f'{{"world_size": {HUGE}, "tensor_model_parallel_size": 2, "train_batch_size": 1e400}}'),
        ("n.yaml", f"world_size: {HUGE}\ntensor_model_parallel_size: 2\n"),
        ("n.txt", f"--world-size {HUGE} --tensor-model-parallel-size 2"),
        ("n.toml", f"world_size = {HUGE}\n"),
        ("n.env", f"WORLD_SIZE={HUGE}\n"),
        ("deep.json", '{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"),
    ],
)
def test_huge_numbers_and_deep_json_in_configs(tmp_path, name, text):
    log = jsonl(tmp_path / "l.jsonl")
    path = tmp_path / name
    path.write_text(text)
    proc = tracedoc("logs", log, "--config", path, "--format", "json")
    assert "Traceback" not in proc.stderr and proc.returncode in (0, 1), proc.stderr
    if proc.returncode == 0:
        doc = json.loads(proc.stdout)
        assert doc["metrics"]["config_world_size"] is None  # not a world size anyone has
    else:
        assert proc.stderr.startswith("tracedoc: error: ") and len(proc.stderr.strip().splitlines()) == 1


# ---- numbers and shapes in logs ----------------------------------------------------------------------------
def test_a_step_of_1e400_is_refused_with_a_message(tmp_path):
    path = tmp_path / "l.jsonl"
    rows = [{"step": i, "loss": 2.0} for i in range(1, 51)] + [{"step": 1e400, "loss": 2.0}]
    path.write_text("".join(json.dumps(r).replace("Infinity", "1e400") + "\n" for r in rows))
    assert "1e400" in path.read_text()
    result = analyze_log(path)
    assert result.metrics["log_last_step"] == 50 and result.metrics["log_first_step"] == 1
    assert any("not a step number" in w and "(first: inf;" in w for w in result.warnings)
    assert not any("np." in w for w in result.warnings)  # a plain number, not numpy's repr
    path.write_text(f'{{"step": 1e400, "loss": 1}}\n{{"step": {HUGE}, "loss": 1}}\n')
    with pytest.raises(LogError, match="holds no logged steps"):
        read_log(path)


@pytest.mark.parametrize(
    "text",
    [
        "".join(f'{{"step": {i}, "loss": {HUGE if i == 7 else 2.0}, "tokens_per_sec": 1000}}\n' for i in range(1, 60)),
        "step,loss\n" + "".join(f"{i},{HUGE if i == 7 else 2.0}\n" for i in range(1, 60)),
        "".join(
            f" iteration {i:8d}/ 1000 | elapsed time per iteration (ms): {HUGE if i == 70 else 1000.0} | "
            f"lm loss: {HUGE if i == 50 else 2.0} |\n"
            for i in range(10, 600, 10)
        ),
    ],
)
def test_5000_digit_numbers_in_logs(tmp_path, text):
    path = tmp_path / ("l.csv" if text.startswith("step,") else "l.log")
    path.write_text(text)
    result = analyze_log(path)
    assert result.metrics["loss_nonfinite_count"] == 1  # past float's range: inf, a non-finite loss
    st = result.metrics["step_time_p50_s"]
    assert st is None or st > 0


def test_step_time_p50_is_never_negative(tmp_path):
    path = tmp_path / "l.jsonl"
    rng = np.random.default_rng(0)
    path.write_text(
        "".join(
            json.dumps({"step": i, "loss": 2.0, "step_time_s": float(-abs(rng.normal(0.5, 0.01))) if i % 2 else 0.5})
            + "\n"
            for i in range(1, 201)
        )
    )
    result = analyze_log(path)
    assert result.metrics["step_time_p50_s"] == pytest.approx(0.5)
    assert any("zero or negative" in w for w in result.warnings)
    path.write_text("".join(json.dumps({"step": i, "loss": 2.0, "step_time_s": -0.5}) + "\n" for i in range(1, 201)))
    assert analyze_log(path).metrics["step_time_p50_s"] is None


def test_jsonl_whose_first_line_is_over_64_kb(tmp_path):
    path = tmp_path / "l.jsonl"
    first = json.dumps({"step": 0, "loss": 3.0, "config": {"note": "x" * 200_000}})
    path.write_text(first + "\n" + "".join(json.dumps({"step": i, "loss": 2.0}) + "\n" for i in range(1, 50)))
    series = read_log(path)
    assert series.format == "JSON Lines" and len(series) == 50


def test_hf_console_log_beginning_with_loss_dicts(tmp_path):
    path = tmp_path / "out.log"
    path.write_text(
        "".join(
            f"{{'loss': {2 - i / 100}, 'grad_norm': 1.0, 'learning_rate': 2e-05, 'epoch': {i / 30:.2f}}}\n"
            for i in range(30)
        )
    )
    assert read_log(path).format == "Hugging Face Trainer console"


@pytest.mark.parametrize(
    "payload",
    [
        b'{"step": 1, "loss": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n" + b'{"step": 2, "loss": 1.0}\n' * 40,
        b"[" * 100_000 + b"]" * 100_000,
        b'{"log_history": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    ],
)
def test_deep_json_in_logs(tmp_path, payload):
    path = tmp_path / "l.json"
    path.write_bytes(payload)
    try:
        series = read_log(path)
    except LogError as exc:
        assert "nested too deeply" in str(exc) or "not JSON objects" in str(exc), str(exc)
    else:
        assert len(series) >= 1


@pytest.mark.parametrize(
    "text",
    [
        "step,loss\n1,2.0\n2,\x003.0\n3,1.0\n" * 5,  # NUL bytes
        'step,loss,note\n1,2.0,"' + "x" * 300_000 + '"\n2,1.0,a\n',  # a field past csv's default limit
        'step,loss\n1,"2.0\n2,1.0\n3,0.5\n',  # an unclosed quote
        "step;loss;lr\r\n1;2,5;0,1\r\n2;2,4;0,1\r\n3;2,3;0,1\r\n",  # semicolons, CRLF
        "\ufeffstep\tloss\n1\t2.0\n2\t1.9\n",  # BOM and tabs
        "step,loss\n" + ",".join(["1"] * 5000) + "\n2,1.0\n",
    ],
)
def test_csv_edge_cases(tmp_path, text):
    path = tmp_path / "l.csv"
    path.write_text(text)
    try:
        series = read_log(path)
    except LogError:
        return
    assert len(series) >= 1 and (series.step >= 0).all()
