"""JSON training logs: JSON Lines (one object per step; also the ``steps.jsonl`` that ``tracedoc run``
writes) and Hugging Face ``trainer_state.json`` (its ``log_history``).

JSON Lines are decoded in one typed pass (msgspec, only the fields that map to canonical names), so
a million-line log reads in about a second. ``NaN``, ``Infinity`` and ``-Infinity`` literals, which
Python's ``json`` writes for non-finite floats, are values.
"""

from __future__ import annotations

import json
import os
from operator import attrgetter
from types import SimpleNamespace
from typing import Any

import msgspec
import numpy as np

from .errors import LogError, excerpt
from .records import Converted, PerGpu, build_series, usable_groups
from .series import LogSeries, list_columns, match_keys, to_float_column

SAMPLE_LINES = 2000  # the keys and value kinds of a log are read from its first lines
SAMPLE_BYTES = 4 * 2**20
PARALLEL_MIN_BYTES = 64 * 2**20  # below this a second process costs more than it saves
# bare non-finite literals -> strings the columns read back as floats; "-Infinity" first, as "-Inf"
_NONFINITE = ((b"-Infinity", b'"-Inf"'), (b"Infinity", b'"Infinity"'), (b"NaN", b'"NaN"'))
_MONITOR_TYPES = ("step", "interval", "summary")
_FLAGS = ("type", "rank", "profiled")
LLAMA_FACTORY = "LLaMA-Factory trainer_log.jsonl"
_LLAMA_FACTORY_KEYS = {"current_steps", "total_steps"}  # read as they are (strings, ints, booleans), not as numbers


def loads_lenient(text: bytes | str) -> Any:
    """Decode JSON that may hold NaN/Infinity literals; ValueError for anything else that is not JSON,
    nesting too deep to decode included."""
    try:
        return msgspec.json.decode(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply to decode") from None
    except msgspec.DecodeError:
        pass
    if isinstance(text, (bytes, bytearray, memoryview)):
        text = bytes(text).decode("utf-8", "replace")  # a damaged byte inside a string spoils only that string
    try:
        return json.loads(text, parse_int=_int_or_float)
    except RecursionError:
        raise ValueError("JSON nested too deeply to decode") from None


def _int_or_float(text: str) -> int | float:
    """An integer literal; one of more digits than Python converts is read as a float (inf)."""
    return int(text) if len(text) <= 4000 else float(text)


def quote_nonfinite(data: bytes) -> bytes:
    """Quote bare NaN/Infinity literals so that a strict decoder takes them; the columns read the strings
    back as floats. A line where this breaks a string that held those words is decoded leniently on its own."""
    if b"Inf" not in data:
        return data.replace(b"NaN", b'"NaN"')
    for bare, quoted in _NONFINITE:
        data = data.replace(bare, quoted)
    return data


def read_jsonl(source: str, data: bytes, jobs: int = 1, size: int | None = None) -> LogSeries:
    """Read JSON Lines; with ``jobs`` > 1 a large plain file is decoded in that many processes.

    ``data`` may be just the head of a file of ``size`` bytes: the workers read their own byte ranges,
    and the whole file is read here only if they cannot decode it.
    """
    size = len(data) if size is None else size
    warnings: list[str] = []
    sample: list[dict] = []
    for line in data[:SAMPLE_BYTES].split(b"\n")[:SAMPLE_LINES]:
        line = line.strip()
        if not line:
            continue
        try:
            obj = loads_lenient(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            sample.append(obj)
    if not sample:
        raise LogError(
            source,
            "no JSON object found in the first lines of this JSON Lines log",
            excerpt(data),
            'write one JSON object per line, e.g. {"step": 1, "loss": 2.3}',
        )
    keys: dict[str, None] = {}
    for obj in sample:
        keys.update(dict.fromkeys(obj))
    monitor = "schema" in keys and any(obj.get("type") in _MONITOR_TYPES for obj in sample)
    wanted = dict(match_keys(keys))
    extra = [k for k in _FLAGS if k in keys]
    if not usable_groups(keys):
        build_series(source, "JSON Lines", keys, lambda k: [], 0)  # raises, naming the fields seen
    attrs = list(wanted.values()) + [k for k in extra if k not in wanted.values()]
    kinds = {
        k: Any
        for k in attrs
        if k in _FLAGS
        or any(
            isinstance(obj.get(k), (list, dict, bool))
            or isinstance(obj.get(k), str)
            and obj.get(k) not in ("NaN", "Infinity", "-Infinity")
            for obj in sample
        )
    }
    columns = None
    if jobs > 1 and size >= PARALLEL_MIN_BYTES and _plain_file(source, size):
        columns = _decode_parallel(source, size, attrs, kinds, jobs)
    if columns is None and len(data) < size:
        with open(source, "rb") as fh:
            data = fh.read()
    if columns is None:
        columns = _decode_fast(data, attrs, kinds)
    if columns is None:  # some line does not decode: line by line, saying which
        columns = _columns(_decode_lines_one_by_one(source, data, attrs, kinds, warnings), attrs, kinds)
    columns = _interval_records_of_one_rank(columns, warnings)
    count = len(next(iter(columns.values()))) if columns else 0
    fmt = "tracedoc step monitor" if monitor else LLAMA_FACTORY if _LLAMA_FACTORY_KEYS <= keys.keys() else "JSON Lines"
    return build_series(source, fmt, wanted.values(), lambda k: columns[k], count, warnings=warnings)


def _interval_records_of_one_rank(columns: dict[str, Any], warnings: list[str]) -> dict[str, Any]:
    """The step monitor's step records, less the steps the profiler recorded (slowed by it), or where
    the file has none (written before them) its interval records; never its summaries. One rank where
    ranks share the file."""
    keep = None
    if "type" in columns:
        types = columns["type"]
        if "step" in types:
            flags = columns.get("profiled") or [None] * len(types)
            keep = np.fromiter(
                (t == "step" and p is not True for t, p in zip(types, flags)), dtype=bool, count=len(types)
            )
        else:
            keep = np.fromiter((t != "summary" for t in types), dtype=bool, count=len(types))
    if "rank" in columns:
        ranks = [r for r in columns["rank"] if isinstance(r, int)]
        if len(set(ranks)) > 1:
            first = min(ranks)
            warnings.append(f"records of {len(set(ranks))} ranks in one file; rank {first} is analysed")
            mine = np.fromiter(
                (r == first or r is None for r in columns["rank"]), dtype=bool, count=len(columns["rank"])
            )
            keep = mine if keep is None else keep & mine
    if keep is None or keep.all():
        return columns
    idx = np.flatnonzero(keep)

    def subset(col: Any) -> Any:
        if isinstance(col, Converted):
            return Converted(col.values[idx], col.present[idx])
        if isinstance(col, PerGpu):
            return PerGpu(col.mean[idx], col.minimum[idx], col.present[idx])
        return [col[i] for i in idx]

    return {k: subset(v) for k, v in columns.items()}


def _nameable(key: str) -> bool:
    """Whether a typed decoder can match this key as it is: msgspec refuses field names holding a quote, a
    backslash or a control character, so a log's keys are never made into one."""
    return not any(c in '"\\' or c < " " for c in key)


def _record_type(attrs: list[str], kinds: dict[str, Any]):
    """A typed record of these keys, or None when a key cannot be a field name (``_nameable``): such logs
    are decoded line by line into plain objects."""
    if not all(map(_nameable, attrs)):
        return None
    # scalars typed (faster than Any); lists (per-GPU values) and objects (the step monitor's summaries)
    # only where the sample showed them
    fields = [(f"f{i}", kinds.get(k, float | str | None), None) for i, k in enumerate(attrs)]
    return msgspec.defstruct("LogRecord", fields, rename={f"f{i}": k for i, k in enumerate(attrs)}, gc=False)


def _columns(rows: list, attrs: list[str], kinds: dict[str, Any]) -> dict[str, Any]:
    """Decoded records -> one column per key: a :class:`Converted` array where every value is a number."""
    columns: dict[str, Any] = {}
    for i, key in enumerate(attrs):
        get = attrgetter(f"f{i}")
        if key not in kinds:  # typed float | str | None: straight into an array when all are floats
            try:
                col = np.fromiter(map(get, rows), dtype=np.float64, count=len(rows))
            except (TypeError, ValueError):
                pass
            else:  # numpy reads None as NaN: a NaN is a logged NaN only where the record held a value
                present = np.ones(col.size, dtype=bool)
                nan_at = np.flatnonzero(np.isnan(col))
                if nan_at.size:
                    present[nan_at] = [get(rows[i]) is not None for i in nan_at.tolist()]
                columns[key] = Converted(col, present)
                continue
        columns[key] = list(map(get, rows))
    return columns


def _decode_fast(data: bytes, attrs: list[str], kinds: dict[str, Any]) -> dict[str, Any] | None:
    """One typed pass over all lines; None when some line does not decode or a key is not ``_nameable``."""
    struct = _record_type(attrs, kinds)
    if struct is None:
        return None
    decoder = msgspec.json.Decoder(struct)
    try:
        rows = _decode_around_nan(decoder, data)
        if rows is None:
            rows = decoder.decode_lines(quote_nonfinite(data))
    except (msgspec.DecodeError, RecursionError):  # a line that is not a record: the slow path says which
        return None
    return _columns(rows, attrs, kinds)


def _decode_around_nan(decoder: msgspec.json.Decoder, data: bytes, most: int = 1000) -> list | None:
    """With a few NaN lines, decode the stretches between them in place and only those lines quoted,
    instead of copying the whole log to quote them; None when there are none or too many."""
    if b"Inf" in data:
        return None
    hits, at = [], data.find(b"NaN")  # the first NaN of each line that has one
    while at >= 0:
        hits.append(at)
        if len(hits) > most:
            return None
        eol = data.find(b"\n", at)
        if eol < 0:
            break
        at = data.find(b"NaN", eol + 1)
    if not hits:
        return None
    view, rows, pos = memoryview(data), [], 0
    for hit in hits:
        start = data.rfind(b"\n", 0, hit) + 1
        end = data.find(b"\n", hit)
        end = len(data) if end < 0 else end
        rows.extend(decoder.decode_lines(view[pos:start]))
        rows.append(decoder.decode(quote_nonfinite(data[start:end])))
        pos = min(end + 1, len(data))
    rows.extend(decoder.decode_lines(view[pos:]))
    return rows


def _decode_chunk(path: str, start: int, end: int, attrs: list[str], kinds: dict[str, Any]) -> dict[str, Any] | None:
    """A worker's byte range -> columns, with per-GPU lists and summary objects reduced to arrays so that
    little but numpy arrays travel back."""
    with open(path, "rb") as fh:
        fh.seek(start)
        columns = _decode_fast(fh.read(end - start), attrs, kinds)
    if columns is None:
        return None
    for key, col in columns.items():
        if isinstance(col, list) and key not in _FLAGS:
            lists = list_columns(col)
            columns[key] = PerGpu(*lists) if lists is not None else Converted(*to_float_column(col))
    return columns


def _plain_file(path: str, size: int) -> bool:
    try:
        return os.path.getsize(path) == size  # not decompressed: byte ranges of the file are lines of the log
    except OSError:
        return False


def _decode_parallel(path: str, size: int, attrs: list[str], kinds: dict[str, Any], jobs: int) -> dict[str, Any] | None:
    """Decode ``jobs`` line-aligned byte ranges of the file in worker processes; None if any range fails."""
    import concurrent.futures as cf

    with open(path, "rb") as fh:
        bounds = [0]
        for k in range(1, jobs):
            fh.seek(max(bounds[-1], size * k // jobs))
            rest = fh.read(1 << 20)
            cut = rest.find(b"\n")
            if cut >= 0:
                bounds.append(fh.tell() - len(rest) + cut + 1)
        bounds.append(size)
    ranges = [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    try:
        with cf.ProcessPoolExecutor(max_workers=len(ranges)) as pool:
            parts = list(
                pool.map(
                    _decode_chunk, [path] * len(ranges), *zip(*ranges), [attrs] * len(ranges), [kinds] * len(ranges)
                )
            )
    except (OSError, cf.process.BrokenProcessPool):
        return None
    if any(p is None for p in parts):
        return None
    out: dict[str, Any] = {}
    for key in attrs:
        cols = [p[key] for p in parts]
        if all(isinstance(c, Converted) for c in cols):
            out[key] = Converted(np.concatenate([c.values for c in cols]), np.concatenate([c.present for c in cols]))
        elif all(isinstance(c, PerGpu) for c in cols):
            out[key] = PerGpu(*(np.concatenate([getattr(c, f) for c in cols]) for f in ("mean", "minimum", "present")))
        elif all(isinstance(c, list) for c in cols):
            out[key] = [v for c in cols for v in c]
        else:  # ranges disagree (lists in one, scalars in another): read it in one pass instead
            return None
    return out


def _decode_lines_one_by_one(
    source: str, data: bytes, attrs: list[str], kinds: dict[str, Any], warnings: list[str]
) -> list:
    struct = _record_type(attrs, kinds)
    decoder = msgspec.json.Decoder(struct) if struct is not None else None
    rows, bad_lines = [], []
    lines = data.split(b"\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if decoder is None:  # keys no typed record can name: plain objects, the keys' values in f0, f1, ...
            try:
                obj = loads_lenient(line)
            except ValueError:
                obj = None
            values = [obj.get(k) for k in attrs] if isinstance(obj, dict) else None
            if values is not None and not any(
                k not in kinds and isinstance(v, (dict, list)) for k, v in zip(attrs, values)
            ):  # as the typed record checks
                rows.append(SimpleNamespace(**{f"f{i}": v for i, v in enumerate(values)}))
            else:
                bad_lines.append(number)
            continue
        try:
            rows.append(decoder.decode(quote_nonfinite(line)))
        except (msgspec.DecodeError, RecursionError):
            try:  # odd spacing around NaN, or a string that held the word
                rows.append(msgspec.convert(loads_lenient(line), struct, strict=False))
            except (ValueError, msgspec.ValidationError, RecursionError):
                bad_lines.append(number)
    last = max((i for i, line in enumerate(lines, 1) if line.strip()), default=0)
    truncated = bool(bad_lines) and bad_lines[-1] == last and not data.rstrip(b" \t").endswith(b"\n")
    if truncated:
        bad_lines.pop()
        warnings.append(f"the last line ({last}) is cut off; it is left out")
    if bad_lines:
        first = bad_lines[0]
        seen = f"line {first}: {excerpt(lines[first - 1])}"
        if len(bad_lines) > len(rows):
            raise LogError(
                source,
                f"{len(bad_lines)} of {len(bad_lines) + len(rows)} lines are not JSON objects, "
                "so this is not a JSON Lines log (mixed formats?)",
                seen,
                "give tracedoc one log format per file",
            )
        warnings.append(f"{len(bad_lines)} lines are not JSON objects and are left out (first: {seen[:120]})")
    return rows


def read_trainer_state(source: str, obj: dict) -> LogSeries:
    """Hugging Face ``trainer_state.json``: train, eval and final entries of ``log_history``."""
    history = obj.get("log_history")
    if not isinstance(history, list) or not history:
        raise LogError(
            source,
            "trainer_state.json has an empty log_history",
            f"keys {sorted(obj)[:10]}",
            "set logging_steps so that the Trainer logs during training",
        )
    rows = [r for r in history if isinstance(r, dict) and "train_runtime" not in r]
    header = {k: v for k, v in obj.items() if k != "log_history" and not isinstance(v, (list, dict))}
    return records_series(source, "Hugging Face trainer_state.json", rows, header=header)


def records_series(source: str, fmt: str, rows: list[dict], header: dict | None = None) -> LogSeries:
    keys: dict[str, None] = {}
    for r in rows:
        keys.update(dict.fromkeys(r))
    return build_series(source, fmt, keys, lambda k: [r.get(k) for r in rows], len(rows), header=header)


def read_json_document(source: str, data: bytes) -> LogSeries:
    """A whole-file JSON document: trainer_state.json, or a list of step records."""
    try:
        obj = loads_lenient(data)
    except ValueError as exc:
        raise LogError(
            source,
            "is not valid JSON",
            f"{exc}; starts {excerpt(data)}",
            "a truncated trainer_state.json can be re-saved from the last checkpoint",
        ) from None
    if isinstance(obj, dict) and "log_history" in obj:
        return read_trainer_state(source, obj)
    if isinstance(obj, list) and obj and all(isinstance(r, dict) for r in obj):
        return records_series(source, "JSON records", obj)
    if isinstance(obj, dict) and any(isinstance(v, list) and len(v) > 1 for v in obj.values()):
        lengths = {len(v) for v in obj.values() if isinstance(v, list)}
        if len(lengths) == 1:  # columns: {"step": [...], "loss": [...]}
            n = lengths.pop()
            cols = {k: v for k, v in obj.items() if isinstance(v, list)}
            return build_series(source, "JSON columns", cols, lambda k: cols[k], n)
    shown = sorted(obj)[:10] if isinstance(obj, dict) else type(obj).__name__
    raise LogError(
        source,
        "is JSON but not a training log tracedoc knows",
        f"top level {shown}",
        "pass a trainer_state.json (with log_history), JSON Lines, or a list of step records",
    )
