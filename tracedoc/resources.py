"""Locate the data directories tracedoc ships outside the package: rule files and report templates.

In a source checkout (or an editable install) they are the top-level ``rules/`` and
``reports/templates/`` next to the ``tracedoc`` package. A wheel force-includes them as
``tracedoc/_data/rules`` and ``tracedoc/_data/templates`` (see ``pyproject.toml``). This module is the
only place that knows both layouts; everything else calls :func:`data_dir`.
"""

from __future__ import annotations

from pathlib import Path

from .errors import TracedocError

# kind -> path of the directory in a source checkout, relative to the repository root
_SOURCE_LAYOUT: dict[str, tuple[str, ...]] = {
    "rules": ("rules",),
    "templates": ("reports", "templates"),
}

_PACKAGE_DIR = Path(__file__).resolve().parent


def data_dir(kind: str) -> Path:
    """Return the directory holding the shipped data of ``kind`` ("rules" or "templates").

    We prefer the source checkout's top-level directory, recognised by a ``pyproject.toml`` beside
    the package (so that an unrelated ``rules/`` in site-packages is never picked up), and fall back
    to the copy inside an installed wheel.
    """
    if kind not in _SOURCE_LAYOUT:
        known = ", ".join(sorted(_SOURCE_LAYOUT))
        raise ValueError(f"unknown data kind {kind!r}; expected one of: {known}")
    root = _PACKAGE_DIR.parent
    source = root.joinpath(*_SOURCE_LAYOUT[kind])
    if source.is_dir() and (root / "pyproject.toml").is_file():
        return source
    installed = _PACKAGE_DIR / "_data" / kind
    if installed.is_dir():
        return installed
    raise TracedocError(
        "tracedoc installation",
        f"cannot find the {kind} directory",
        f"neither {source} nor {installed} exists",
        "reinstall tracedoc from a wheel, or run it from a source checkout",
    )
