"""The base of every evidence row type."""

from __future__ import annotations

from ..record import Record


class Row(Record, frozen=True, kw_only=True):
    """One row of an evidence table."""
