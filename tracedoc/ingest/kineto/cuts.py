"""Event boundaries in a buffer of Kineto events: found backward, verified by decoding.

A boundary is a comma, white space and an opening brace (``, {``); one inside a string or a nested
object looks the same, so a boundary counts only once the events before it decode. JSON is read left
to right: a syntax error at byte q means no prefix reaching past q can decode, so every boundary
after q is ruled out at once. A damaged stretch of any length therefore costs one decode, not one per
boundary in it (which made a gzip file with one flipped byte in its middle take hours).
"""

from __future__ import annotations

import msgspec

from .decode import _MALFORMED_AT_RE
from .rows import StructRows, decode_piece

_JSON_SPACE = b" \t\n\r\x0b\x0c"  # what the boundary pattern's \s matches
_TRIES = 9  # boundaries tried per chunk before reading on (a boundary inside a nested object fails)


class Damaged:
    """The bytes are malformed before every boundary in them: reading on cannot help."""


DAMAGED = Damaged()


def cuts_backward(buf: bytes, end: int | None = None):
    """Candidate event boundaries in ``buf[:end]``, the last first: (position of the comma, position of
    the brace). Found with ``rfind`` from the end, since the boundary wanted is the last one."""
    end = len(buf) if end is None else end
    while True:
        brace = buf.rfind(b"{", 0, end)
        if brace < 0:
            return
        k = brace - 1
        while k >= 0 and buf[k] in _JSON_SPACE:
            k -= 1
        if k >= 0 and buf[k] == 0x2C:  # ","
            yield k, brace
        end = brace


def find_cut(buf: bytes) -> tuple[int, int] | None:
    """The last event boundary in ``buf`` (unverified): end of the piece before it, start of the rest."""
    return next(cuts_backward(buf), None)


def _error_at(exc: msgspec.DecodeError) -> int | None:
    """Where in the decoded text ``b"[" + piece + b"]"`` a syntax error lies, as a position in
    ``piece``; None for errors without a position (input cut short)."""
    m = _MALFORMED_AT_RE.search(str(exc))
    return int(m.group(1)) - 1 if m else None


def _decode_prefix(buf: bytes, end: int) -> tuple[StructRows | None, int | None]:
    """The events of ``buf[:end]``, or None and the position of a syntax error inside it (None if the
    text is cut short there, or the error is at its end: a boundary inside a nested object).

    Repairs made while decoding (invalid UTF-8, NaN literals) only lengthen the text, so a position
    read from the repaired text is never before the real one: no valid boundary is ruled out.
    ``msgspec.ValidationError`` (an entry that is not an event object) propagates."""
    try:
        return decode_piece(buf, end), None
    except msgspec.ValidationError:
        raise
    except msgspec.DecodeError as exc:
        at = _error_at(exc)
        return None, at if at is not None and at < end else None


def _brace_bound(buf: bytes, bad: int) -> int:
    """A bound on the brace of every boundary whose comma is at or before ``bad``: only white space lies
    between a boundary's comma and its brace."""
    j = bad + 1
    while j < len(buf) and buf[j] in _JSON_SPACE:
        j += 1
    return j + 1 if j < len(buf) and buf[j] == 0x7B else bad + 1


def cut_and_decode(buf: bytes) -> tuple[StructRows, int] | Damaged | None:
    """Decode the events before the last boundary in ``buf`` that decodes; return them and where the
    rest starts. None: no boundary decodes yet (read on). ``DAMAGED``: none decodes, and the bytes
    held are malformed (a syntax error, an entry that is not an event object), which more bytes
    cannot mend: the caller keeps the rest of the file for the tail's salvage."""
    bad = None  # position of a syntax error: no boundary after it can decode
    invalid = False
    tries = 0
    restart = True
    while restart and tries < _TRIES:
        restart = False
        for comma, brace in cuts_backward(buf, None if bad is None else _brace_bound(buf, bad)):
            if bad is not None and comma > bad:
                continue
            if tries >= _TRIES:
                break
            tries += 1
            try:
                events, at = _decode_prefix(buf, comma)
            except msgspec.ValidationError:
                invalid = True
                continue
            if events is not None:
                return events, brace
            if at is not None:
                bad = at
                restart = True
                break
    return DAMAGED if bad is not None or invalid else None


def salvage(buf: bytes) -> tuple[StructRows, int] | None:
    """The longest prefix of ``buf`` that is a sequence of whole events, and where it ends."""
    bad = None

    def attempt(end: int) -> StructRows | None:
        nonlocal bad
        piece = len(buf[:end].rstrip().rstrip(b"]}").rstrip())
        for candidate in (end, piece):
            try:
                events, at = _decode_prefix(buf, candidate)
            except msgspec.ValidationError:
                continue
            if events is not None:
                return events
            if at is not None:
                bad = at if bad is None else min(bad, at)
        return None

    whole = len(buf.rstrip())
    events = attempt(whole)
    if events is not None:
        return events, whole
    restart = True
    while restart:
        restart = False
        for comma, _ in cuts_backward(buf, None if bad is None else _brace_bound(buf, bad)):
            if bad is not None and comma > bad:
                continue
            before = bad
            events = attempt(comma)
            if events is not None:
                return events, comma
            if bad != before:  # a syntax error further back: search again below it
                restart = True
                break
    return None
