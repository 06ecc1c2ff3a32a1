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

    base = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root"),
            "TRACEDOC_CACHE_DIR": os.environ.get("TRACEDOC_CACHE_DIR", "off")}
    return subprocess.run([sys.executable, "-m", "tracedoc", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, preexec_fn=cap, cwd=cwd, env={**base, **(env or {})})


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
