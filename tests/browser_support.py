"""Debian's Chromium driven by Playwright (no browser download), shared by the browser tests.

Importing this module skips the importing test module, with the reason, when Playwright or Chromium
is missing (CI installs Chromium via apt). Tests get a browser from the ``browser`` fixture
(tests/conftest.py): one Chromium per test module.
"""

from __future__ import annotations

import contextlib
import shutil
from pathlib import Path

import pytest

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")

CHROMIUM = next(
    (
        p
        for p in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser"))
        if p and Path(p).exists()
    ),
    None,
)
if CHROMIUM is None:
    pytest.skip("Chromium is not installed (apt-get install -y chromium)", allow_module_level=True)

OUTPUT = Path(__file__).resolve().parent / "_output"  # screenshots (git-ignored)
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@contextlib.contextmanager
def chromium():
    """A headless Chromium, closed on leaving."""
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()
