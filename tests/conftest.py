import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from shared_dir import traces_dir  # noqa: E402

TRACES, _WHY_MISSING = traces_dir(ROOT.parent / "shared")
# CI sets this: there the shared traces must be present, and a run without them fails instead of skipping.
REQUIRE_SHARED = os.environ.get("TRACEDOC_REQUIRE_SHARED", "") not in ("", "0")
MISSING_REASON = _WHY_MISSING
# The validated rule set is cached between processes (tracedoc/engine/rulecache.py): tests and the
# processes they start use a cache of their own, never the user's.
_CACHE_DIR = tempfile.mkdtemp(prefix="tracedoc-test-cache-")
os.environ["TRACEDOC_CACHE_DIR"] = _CACHE_DIR


def have_shared() -> bool:
    return (TRACES / "EXPECTED.json").is_file()


def shared_traces() -> Path:
    """The shared traces folder; inside a test without it, the test is skipped with the reason."""
    if not have_shared():
        pytest.skip(MISSING_REASON)
    return TRACES


def shared_names(sub: str, pattern: str = "*") -> list[str]:
    """File names under the shared traces' ``sub`` folder, for parametrising ([] without the folder)."""
    return sorted(p.name for p in (TRACES / sub).glob(pattern)) if have_shared() else []


def expected_rows() -> list[dict]:
    """EXPECTED.json's rows ([] without the shared traces: parametrised tests then skip)."""
    if not have_shared():
        return []
    return json.loads((TRACES / "EXPECTED.json").read_text())["traces"]


def pytest_sessionstart(session):
    if REQUIRE_SHARED and not have_shared():
        raise pytest.UsageError(f"TRACEDOC_REQUIRE_SHARED is set but {MISSING_REASON}")
    if os.environ.get("TRACEDOC_SHARED") and not have_shared():  # a folder was named: never skip in silence
        raise pytest.UsageError(MISSING_REASON)


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)


def pytest_configure(config):
    config.addinivalue_line("markers", "shared: reads the shared real traces (skipped, with the reason, without them)")


def pytest_runtest_setup(item):
    if item.get_closest_marker("shared") is not None and not have_shared():
        pytest.skip(MISSING_REASON)


def pytest_collection_modifyitems(config, items):
    """Parametrised tests over the shared traces get an explicit skip reason when the traces are absent."""
    if have_shared():
        return
    for item in items:
        if any(m.kwargs.get("reason", "").startswith("got empty parameter set") for m in item.iter_markers("skip")):
            item.add_marker(pytest.mark.skip(reason=MISSING_REASON), append=False)


@pytest.fixture
def builder():
    from trace_builder import TraceBuilder

    return TraceBuilder()


def pytest_addoption(parser):
    parser.addoption(
        "--update-gold",
        action="store_true",
        default=False,
        help="rewrite the gold files under tests/gold/ (and generated schema parts) from the current output",
    )


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium for the browser tests (tests/browser_support.py), one per test module."""
    from browser_support import chromium

    with chromium() as b:
        yield b
