import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TRACES = SHARED / "traces"
sys.path.insert(0, str(Path(__file__).resolve().parent))


def shared_traces() -> Path:
    if not TRACES.is_dir():  # pragma: no cover - CI always has ../shared beside the checkout
        raise RuntimeError(f"the shared traces are missing: expected {TRACES} beside the checkout")
    return TRACES


def expected_rows() -> list[dict]:
    return json.loads((shared_traces() / "EXPECTED.json").read_text())["traces"]


@pytest.fixture
def builder():
    from trace_builder import TraceBuilder

    return TraceBuilder()


def pytest_addoption(parser):
    parser.addoption("--update-gold", action="store_true", default=False,
                     help="rewrite the gold files under tests/gold/ (and generated schema parts) from the current output")
