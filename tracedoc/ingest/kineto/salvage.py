"""The end of a Kineto file: trailing keys, and every complete event of a file cut off mid-write."""

from __future__ import annotations

import msgspec

from ...errors import TraceError
from ...infile import excerpt
from ...model.trace import Trace
from .columns import _Reader
from .cuts import salvage
from .decode import _MALFORMED_AT_RE, _decode_any, _decode_top, decode_metadata
from .metadata import _finish
from .rows import decode_chunk
from .source import _Source, concatenated_members


def _decode_tail(rest: bytes, bare_array: bool, reader: _Reader, path: str) -> tuple[dict, str | None]:
    """Decode what follows the last cut: the final events and, for object traces, trailing keys."""
    if bare_array:
        body = rest.rstrip()
        for candidate in (b"[" + body, b"[" + body.rstrip(b",") + b"]"):
            try:
                reader.add(decode_chunk(candidate))
                return {}, None
            except msgspec.ValidationError as exc:
                raise TraceError(
                    path,
                    "is a JSON array whose entries are not trace events",
                    str(exc),
                    "pass a Chrome trace written by torch.profiler",
                ) from None
            except msgspec.DecodeError:
                pass
    else:
        try:
            top = _decode_top(b'{"traceEvents":[' + rest, reader)
        except msgspec.DecodeError:
            top = None
        if top is not None:
            try:
                evs = decode_chunk(bytes(top.pop("traceEvents")))
            except msgspec.ValidationError as exc:
                raise TraceError(
                    path,
                    "has a traceEvents entry that is not an event object",
                    str(exc),
                    "the file is not a Chrome trace written by torch.profiler",
                ) from None
            reader.add(evs)
            return decode_metadata(top, reader), None
    # The file stops mid-event, or is damaged: keep every complete event before that point.
    good = salvage(rest)
    if good is not None:
        evs, upto = good
        reader.add(evs)
    else:
        upto = 0
    return {}, _damage(rest, upto, reader)


def _damage(rest: bytes, upto: int, reader: _Reader) -> str:
    """Say what follows the last whole event: the JSON just ends (a cut) or it is malformed there."""
    dropped = rest[upto:]
    try:
        _decode_any(b"[" + dropped.lstrip(b", \t\r\n"))
        what = None
    except msgspec.DecodeError as exc:
        what = str(exc)
    except (RecursionError, UnicodeDecodeError) as exc:
        what = type(exc).__name__
    at = _MALFORMED_AT_RE.search(what or "")
    pos = max(0, int(at.group(1)) - 1) if at else 0
    lead = len(dropped) - len(dropped.lstrip(b", \t\r\n"))
    # counted from the first byte after the separator: where the last cut fell (before or after the comma
    # and white space following the last whole event) depends on how the file was split into pieces
    n_dropped = len(dropped) - lead
    # The input ends there (a number cut to "12." or "1e" reads as malformed at the end): a cut
    cut_short = at is not None and lead + pos >= len(dropped.rstrip())
    if what is None or "truncated" in what or cut_short:
        return (
            f"the JSON ends before the trace is complete; read {reader.n_events:,} events "
            f"and dropped {n_dropped:,} trailing bytes"
        )
    snippet = excerpt(dropped[lead + pos : lead + pos + 30], reader.hides_content, 30)
    return (
        f"the JSON is malformed after event {reader.n_events:,} ({what.split(' (')[0]}: saw {snippet}); read the "
        f"{reader.n_events:,} events before it and dropped the {n_dropped:,} bytes from there on"
    )


def _read_whole(path: str, data: bytes, src: _Source, reader: _Reader) -> Trace:
    """Fallback for files without a findable ``traceEvents`` array: decode the document at once."""
    try:
        top = _decode_top(data, reader)
    except msgspec.DecodeError as exc:
        try:
            _decode_any(data)
        except msgspec.DecodeError:
            if src.member_starts:
                raise concatenated_members(src) from None
            if src.truncated_reason:
                raise TraceError(
                    path, "is cut off before any trace events", src.truncated_reason, "capture the trace again"
                ) from None
            raise TraceError(
                path,
                "is not valid JSON",
                str(exc),
                "pass a torch.profiler trace (.json / .json.gz); if the profiler was killed mid-write, capture again",
            ) from None
        raise TraceError(
            path,
            "is JSON but not a trace",
            "a top-level value that is not an object",
            "pass a torch.profiler trace with a traceEvents array",
        ) from None
    if "traceEvents" not in top:
        keys = src.excerpt(", ".join(list(top)[:6]), 200) if src.hides_content else ", ".join(list(top)[:6])
        keys = keys or "no keys"
        raise TraceError(
            path,
            "is JSON but not a Chrome/Kineto trace: it has no traceEvents array",
            f"top-level keys: {keys}",
            "pass the file torch.profiler wrote (export_chrome_trace or tensorboard_trace_handler)",
        )
    try:
        reader.add(decode_chunk(bytes(top.pop("traceEvents"))))
    except msgspec.ValidationError as exc:
        raise TraceError(
            path,
            "has a traceEvents value that is not a list of event objects",
            str(exc),
            "pass the file torch.profiler wrote",
        ) from None
    return _finish(reader, decode_metadata(top, reader), path, src.truncated_reason)
