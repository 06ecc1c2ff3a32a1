"""The saved model's base: a typed record that is its own JSON form.

Every value tracedoc writes as JSON (a report, its ranks, verdicts, findings, the job view, a diff, a
trend, a log's result) is a ``Record``: a ``msgspec.Struct`` whose fields are the document's fields, so encoding,
decoding and the JSON schema (``tracedoc.schema``) all come from the type, never from hand-written
``to_dict``/``from_dict`` pairs. Records refuse unknown fields when read, as the schema does.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

R = TypeVar("R", bound="Record")


def _enc_hook(obj: Any) -> Any:
    """What msgspec does not know how to write: numpy scalars (their Python value), sets (sorted)."""
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, (set, frozenset)):
        return sorted(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


class Record(msgspec.Struct, forbid_unknown_fields=True):
    """A saved value: ``to_dict()`` is its JSON document as Python values, ``from_dict`` reads one back."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON document of this value, as dicts, lists and plain scalars."""
        return to_builtins(self)

    @classmethod
    def from_dict(cls: type[R], data: Any) -> R:
        """The value ``data`` (a JSON document read as Python values) describes; ``msgspec.ValidationError``
        names the field when it does not fit the type."""
        return msgspec.convert(data, cls)


def to_json_bytes(value: Any) -> bytes:
    """Records (and anything in them) as compact JSON."""
    return msgspec.json.encode(value, enc_hook=_enc_hook)


def to_builtins(value: Any) -> Any:
    """Records (and anything in them) as the Python values of their JSON: dicts, lists (tuples too),
    str, int, float, bool and None, exactly what reading the JSON gives."""
    return msgspec.json.decode(to_json_bytes(value))


def replace(record: R, **changes: Any) -> R:
    """A copy of ``record`` with some fields changed (the value itself is left as it is)."""
    return msgspec.structs.replace(record, **changes)
