"""The shipped example trace is what tests/make_example.py builds, and `analyze --example` works."""

import gzip
import json
import subprocess
import sys

import make_example
from tracedoc.cli import example_path


def test_shipped_example_matches_its_builder():
    shipped = json.loads(gzip.open(example_path()).read())
    assert shipped == json.loads(json.dumps(make_example.build().to_dict()))


def test_analyze_example_command():
    proc = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", "--example"], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "Verdict: io_bound" in proc.stdout
    assert "DataLoader" in proc.stdout
