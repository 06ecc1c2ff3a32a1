"""Where the shared real traces are: ``TRACEDOC_SHARED`` names either the folder that holds ``traces/``
or the traces folder itself; unset, ``../shared/traces`` beside the checkout."""

from __future__ import annotations

import os
from pathlib import Path

MARKER = "EXPECTED.json"  # every copy of the shared traces has it at its top


def traces_dir(default_shared: Path) -> tuple[Path, str]:
    """The traces folder and, for when it holds no traces, the reason to give (what was expected)."""
    given = os.environ.get("TRACEDOC_SHARED")
    if not given:
        traces = default_shared / "traces"
        return traces, (
            f"the shared real traces are not at {traces} (a checkout with ../shared beside it has "
            "them; TRACEDOC_SHARED=DIR points elsewhere: DIR is the traces folder or the one above it)"
        )
    path = Path(given).expanduser()
    for candidate in (path / "traces", path):
        if (candidate / MARKER).is_file():
            return candidate, ""
    return path / "traces", (
        f"TRACEDOC_SHARED={given} holds no shared traces: expected {MARKER} in that folder "
        f"(the traces folder) or in its traces/ subfolder (the folder above it)"
    )
