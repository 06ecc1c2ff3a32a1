"""The byte source of a Kineto file: ``infile.InputStream`` (plain or gzip, bounded, regular files only)."""

from __future__ import annotations

from ...errors import TraceError
from ...infile import _inflate, InputStream  # noqa: F401  (_inflate: the inflater in use, for tests)


class _Source(InputStream):
    """A trace file's bytes: errors are ``TraceError``s about a "trace file"."""

    def __init__(self, path: str, limit: int | None = None):
        super().__init__(path, TraceError, "trace file", limit)


def concatenated_members(src: _Source) -> TraceError:
    """The error for a file of several gzip members whose joined content is not one trace."""
    n = len(src.member_starts) + 1
    return TraceError(
        src.path,
        f"holds {n} gzip members that do not form one JSON document (concatenated "
        "gzip files, e.g. `cat a.json.gz b.json.gz`)",
        f"the second member starts at decompressed byte {src.member_starts[0]:,}",
        "tracedoc reads one trace per file: analyse the original files, or a directory of them",
    )
