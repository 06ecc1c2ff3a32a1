"""The in-memory trace model every reader produces and every analysis consumes.

A ``Trace`` is a set of columnar tables (numpy arrays of equal length) plus a string table and
metadata (``model.meta.TraceMeta``). Times are int64 nanoseconds on the trace's own clock;
``meta.time_origin_ns`` maps them to the Unix epoch when the source says how. Names are int32 ids
into ``Trace.strings``.
Missing integers are ``-1``; missing floats are NaN.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass, field

from typing import TYPE_CHECKING

import numpy as np

from .groups import distinct
from .literals import PatternAnswers, pattern_of
from .meta import TraceMeta

if TYPE_CHECKING:
    import pandas as pd

# GPU op kinds
KERNEL, MEMCPY, MEMSET = 0, 1, 2
GPU_KIND_NAMES = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset"}

# CPU op kinds
CPU_OP, USER_ANNOTATION, PYTHON_FUNCTION, CPU_OTHER = 0, 1, 2, 3
CPU_KIND_NAMES = {
    CPU_OP: "cpu_op",
    USER_ANNOTATION: "user_annotation",
    PYTHON_FUNCTION: "python_function",
    CPU_OTHER: "other",
}

# Runtime call kinds
RUNTIME, DRIVER, RUNTIME_OTHER = 0, 1, 2
RUNTIME_KIND_NAMES = {RUNTIME: "runtime", DRIVER: "driver", RUNTIME_OTHER: "other"}

# Memcpy directions and memory kinds (numbering follows CUPTI, as nsys exports do)
COPY_UNKNOWN, COPY_HTOD, COPY_DTOH, COPY_DTOD, COPY_PTOP = 0, 1, 2, 8, 10
COPY_KIND_NAMES = {
    COPY_UNKNOWN: "unknown",
    COPY_HTOD: "HtoD",
    COPY_DTOH: "DtoH",
    COPY_DTOD: "DtoD",
    COPY_PTOP: "PtoP",
    11: "HtoD (unified)",
    12: "DtoH (unified)",
    13: "DtoD (unified)",
}
MEM_PAGEABLE, MEM_PINNED, MEM_DEVICE, MEM_MANAGED = 0, 1, 2, 4
MEM_KIND_NAMES = {
    -1: "unknown",
    MEM_PAGEABLE: "Pageable",
    MEM_PINNED: "Pinned",
    MEM_DEVICE: "Device",
    3: "Array",
    MEM_MANAGED: "Managed",
}

# Schemas: column name -> dtype. Every table carries exactly these columns.
SCHEMAS: dict[str, dict[str, str]] = {
    "gpu_ops": {
        "kind": "uint8",
        "device": "int32",
        "stream": "int64",
        "start_ns": "int64",
        "end_ns": "int64",
        "name": "int32",
        "correlation": "int64",
        "external_id": "int64",
        "pid": "int64",
        "grid_x": "int32",
        "grid_y": "int32",
        "grid_z": "int32",
        "block_x": "int32",
        "block_y": "int32",
        "block_z": "int32",
        "registers": "int32",
        "shared_mem": "int64",
        "blocks_per_sm": "float64",
        "warps_per_sm": "float64",
        "est_occupancy": "float64",
        "bytes": "int64",
        "copy_kind": "int8",
        "src_kind": "int8",
        "dst_kind": "int8",
        "graph_id": "int64",
        "launch": "int64",  # row in ``runtime`` of the call that launched it, -1 if unknown
    },
    "cpu_ops": {
        "kind": "uint8",
        "pid": "int64",
        "tid": "int64",
        "name": "int32",
        "start_ns": "int64",
        "end_ns": "int64",
        "external_id": "int64",
        "depth": "int16",
        "stack": "int32",
    },
    "runtime": {
        "kind": "uint8",
        "pid": "int64",
        "tid": "int64",
        "name": "int32",
        "start_ns": "int64",
        "end_ns": "int64",
        "correlation": "int64",
        "external_id": "int64",
        "cbid": "int32",
    },
    "gpu_annotations": {
        "device": "int32",
        "stream": "int64",
        "name": "int32",
        "start_ns": "int64",
        "end_ns": "int64",
        "external_id": "int64",
    },
    "syncs": {  # GPU-side sync/wait markers (not GPU work)
        "device": "int32",
        "stream": "int64",
        "name": "int32",
        "start_ns": "int64",
        "end_ns": "int64",
        "correlation": "int64",
        "wait_on_stream": "int64",
    },
    "flows": {
        "id": "int64",
        "phase": "uint8",
        "cat": "int32",
        "pid": "int64",
        "tid": "int64",
        "ts_ns": "int64",
    },
    "memory": {
        "ts_ns": "int64",
        "device_type": "int16",
        "device_id": "int32",
        "bytes": "int64",
        "total_allocated": "int64",
        "total_reserved": "int64",
        "addr": "int64",
        "pid": "int64",
        "tid": "int64",
    },
    "collectives": {  # collective metadata carried by record_param_comms ops and NCCL kernels
        "source": "uint8",
        "row": "int64",
        "external_id": "int64",
        "collective": "int32",
        "in_nelems": "int64",
        "out_nelems": "int64",
        "group_size": "int64",
        "dtype": "int32",
        "pg_name": "int32",
        "pg_ranks": "int32",
        "seq": "int64",  # pg_ranks: "0,1,2,3"; seq: per-group sequence number
    },
    "op_shapes": {  # recorded shapes of matmul/conv/attention cpu ops (JSON text as string ids)
        "row": "int64",
        "dims": "int32",
        "types": "int32",
        "concrete": "int32",
        "flops": "float64",
    },
    "other_spans": {  # X events of categories tracedoc does not analyse (kept so reports can say so)
        "cat": "int32",
        "name": "int32",
        "pid": "int64",
        "tid": "int64",
        "start_ns": "int64",
        "end_ns": "int64",
    },
}

FLOW_START, FLOW_STEP, FLOW_END = 0, 1, 2
COLLECTIVE_FROM_CPU_OP, COLLECTIVE_FROM_KERNEL = 0, 1


def _missing(dtype: str):
    if dtype.startswith("float"):
        return np.nan
    return 0 if dtype.startswith("uint") else -1


# Name patterns look at most this many leading characters of a string (real kernel names, C++
# templates included, stay under ~6,000): an 8 MB name in a damaged file costs what a long one does.
MATCH_CHARS = 16_384
_MATCHED_PART = operator.itemgetter(slice(None, MATCH_CHARS))  # s[:MATCH_CHARS], applied in C


def _used_ids(ids: np.ndarray, n: int) -> np.ndarray:
    """The distinct ids in ``[0, n)`` of a column of string ids, ascending."""
    ids = np.asarray(ids)
    if ids.dtype.kind not in "iu":
        used = distinct(ids)
        return used[(used >= 0) & (used < n)].astype(np.int64)
    seen = np.zeros(n, dtype=bool)
    seen[ids[(ids >= 0) & (ids < n)]] = True
    return np.flatnonzero(seen)


def _set_of(predicate) -> frozenset | None:
    """The frozenset whose membership test ``predicate`` is (an answer that cannot change), else None."""
    owner = getattr(predicate, "__self__", None)
    if type(owner) is frozenset and getattr(predicate, "__name__", None) == "__contains__":
        return owner
    return None


class Table:
    """Equal-length numpy columns with a fixed schema."""

    __slots__ = ("name", "columns")

    def __init__(self, name: str, columns: dict[str, np.ndarray] | None = None):
        schema = SCHEMAS[name]
        columns = columns or {}
        n = len(next(iter(columns.values()))) if columns else 0
        out = {}
        for col, dtype in schema.items():
            if col in columns:
                arr = np.asarray(columns[col]).astype(dtype, copy=False)
            else:
                arr = np.full(n, _missing(dtype), dtype=dtype)
            if len(arr) != n:
                raise ValueError(f"table {name}: column {col} has {len(arr)} rows, expected {n}")
            out[col] = arr
        unknown = set(columns) - set(schema)
        if unknown:
            raise ValueError(f"table {name}: unknown columns {sorted(unknown)}")
        self.name = name
        self.columns = out

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def __getitem__(self, col: str) -> np.ndarray:
        return self.columns[col]

    def __setitem__(self, col: str, values: np.ndarray) -> None:
        dtype = SCHEMAS[self.name][col]
        self.columns[col] = np.asarray(values).astype(dtype, copy=False)

    def take(self, rows: np.ndarray) -> "Table":
        return Table(self.name, {c: a[rows] for c, a in self.columns.items()})

    @classmethod
    def concat(cls, name: str, parts: list["Table"], consume: bool = False) -> "Table":
        """The rows of ``parts``, in order. ``consume``: each column's pieces are taken out of the parts as
        that column is joined, so they are freed then (a load holds its columns and one column's pieces,
        not its columns twice); the parts are left without columns."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return cls(name)
        if len(parts) == 1:
            return parts[0]
        take = (lambda p, c: p.columns.pop(c)) if consume else (lambda p, c: p.columns[c])
        return cls(name, {c: np.concatenate([take(p, c) for p in parts]) for c in SCHEMAS[name]})

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.columns.values())


_STRING_COLUMNS = {"name", "stack", "cat", "collective", "dtype", "pg_name", "pg_ranks", "dims", "types", "concrete"}


@dataclass
class Trace:
    """One rank's trace: tables, strings and metadata."""

    source: str
    strings: list[str]
    tables: dict[str, Table]
    meta: TraceMeta = field(default_factory=TraceMeta)
    warnings: list[str] = field(default_factory=list)

    def __getattr__(self, item: str) -> Table:
        tables = self.__dict__.get("tables")
        if tables is not None and item in tables:
            return tables[item]
        raise AttributeError(item)

    # -- convenience -------------------------------------------------------------------------
    def string(self, sid: int) -> str:
        return self.strings[sid] if 0 <= sid < len(self.strings) else ""

    def string_ids(self, predicate, ids: np.ndarray | None = None) -> np.ndarray:
        """Boolean lookup array over the string table: ``mask[name_ids]`` tests many rows at once.

        The predicate sees at most the first ``MATCH_CHARS`` characters of each string, so a
        pattern's cost is bounded however long a name in the file is. The array has one entry more
        than the table, always False, so that ``mask[-1]`` (a row without a name) matches nothing.

        With ``ids`` (a column of string ids), the predicate runs only on the distinct strings that
        column uses and every other entry is False: a table of per-event strings (NVTX op names with
        an ``op_id``) costs one call per string a column holds, not one per string in the trace.
        The predicate's result is taken for its truth, so a compiled pattern's ``search`` or
        ``match`` can be passed as it is (no Python-level wrapper call per string).

        For a pattern method the answer per string is kept with the trace, so asking again
        (the same pattern over the same or another column) tests only strings not seen before, and
        strings that lack a text every match needs are never handed to the pattern
        (``model.literals``). The kept answers assume strings are only appended to the table or the
        table replaced, never a string changed in place. A frozenset's ``__contains__`` asked of the
        whole table is answered once per trace and kept the same way (its answer cannot change).
        """
        strings = self.strings
        n = len(strings)
        mask = np.zeros(n + 1, dtype=bool)
        used = None if ids is None else _used_ids(ids, n)
        pattern = pattern_of(predicate)
        members = _set_of(predicate)
        if members is not None and used is None:
            kept = self.__dict__.setdefault("_set_answers", {})
            answer = kept.get(members)
            if answer is None or answer[0] is not strings or len(answer[1]) != n + 1:
                mask[:-1] = np.fromiter(map(members.__contains__, map(_MATCHED_PART, strings)), dtype=bool, count=n)
                kept[members] = (strings, mask)
                return mask.copy()
            return answer[1].copy()
        if pattern is None:
            todo = strings if used is None else list(map(strings.__getitem__, used.tolist()))
            found = np.fromiter(map(bool, map(predicate, map(_MATCHED_PART, todo))), dtype=bool, count=len(todo))
            if used is None:
                mask[:-1] = found
            else:
                mask[used] = found
            return mask
        answers = self.__dict__.get("_pattern_answers")
        if answers is None or answers.strings is not strings or answers.n != n:
            answers = self.__dict__["_pattern_answers"] = PatternAnswers(strings, MATCH_CHARS)
        matched = answers.matched(predicate, pattern, used)
        if used is None:
            mask[:-1] = matched[:-1]
        else:
            mask[used] = matched[used]
        return mask

    @property
    def rank(self) -> int | None:
        return self.meta.rank

    def __repr__(self) -> str:
        rows = ", ".join(f"{len(t):,} {name}" for name, t in self.tables.items() if len(t))
        rank = f" rank {self.rank}" if self.rank is not None else ""
        text = f"<Trace {self.source.rsplit('/', 1)[-1]!r}{rank}: {rows or 'no rows'}"
        return (text[:380] + "…" if len(text) > 380 else text) + (
            f"; {len(self.warnings)} warnings>" if self.warnings else ">"
        )

    def _repr_html_(self) -> str:
        from html import escape

        rows = "".join(
            f"<tr><td>{escape(name)}</td><td style='text-align:right'>{len(t):,}</td></tr>"
            for name, t in self.tables.items()
            if len(t)
        )
        rank = f", rank {self.rank}" if self.rank is not None else ""
        return (
            f"<div><b>Trace</b> {escape(self.source)}{rank} · {len(self.strings):,} strings"
            f"<table><tr><th>table</th><th>rows</th></tr>{rows}</table></div>"
        )

    def df(self, table: str, raw: bool = False) -> pd.DataFrame:
        """A pandas view of one table (``trace.df("gpu_ops")``).

        String-id columns become categoricals of their text, and enum-like columns (``kind``,
        ``copy_kind``, ``src_kind``, ``dst_kind``) categoricals of readable names ("kernel", "HtoD",
        "Pinned"); ``raw=True`` keeps those as their integer codes.
        """
        if table not in self.tables:
            raise KeyError(f"no table {table!r} in this trace; tables: {', '.join(self.tables)}")
        import pandas as pd

        t = self.tables[table]
        cats = pd.Index(self.strings) if self.strings else pd.Index([], dtype=object)
        data = {}
        for col, arr in t.columns.items():
            names = None if raw else _ENUM_COLUMNS.get((table, col))
            if col in _STRING_COLUMNS:
                data[col] = (
                    pd.Categorical.from_codes(
                        np.where(arr < len(self.strings), arr, -1), categories=cats, validate=False
                    )
                    if len(cats)
                    else pd.Categorical([None] * len(arr))
                )
            elif names is not None:
                data[col] = _enum_categorical(arr, names)
            else:
                data[col] = arr
        out = pd.DataFrame(data)
        if "start_ns" in out and "end_ns" in out:
            out["dur_ns"] = out["end_ns"] - out["start_ns"]
        return out

    # DataFrame accessors for the common tables
    @property
    def kernels_df(self) -> pd.DataFrame:
        df = self.df("gpu_ops")
        return df[df["kind"] == GPU_KIND_NAMES[KERNEL]].reset_index(drop=True)

    @property
    def gpu_ops_df(self) -> pd.DataFrame:
        return self.df("gpu_ops")

    @property
    def cpu_ops_df(self) -> pd.DataFrame:
        return self.df("cpu_ops")

    @property
    def runtime_df(self) -> pd.DataFrame:
        return self.df("runtime")

    @property
    def memory_df(self) -> pd.DataFrame:
        return self.df("memory")

    def summary(self) -> dict[str, int]:
        return {name: len(t) for name, t in self.tables.items()}


_ENUM_COLUMNS: dict[tuple[str, str], dict[int, str]] = {
    ("gpu_ops", "kind"): GPU_KIND_NAMES,
    ("gpu_ops", "copy_kind"): COPY_KIND_NAMES,
    ("gpu_ops", "src_kind"): MEM_KIND_NAMES,
    ("gpu_ops", "dst_kind"): MEM_KIND_NAMES,
    ("cpu_ops", "kind"): CPU_KIND_NAMES,
    ("runtime", "kind"): RUNTIME_KIND_NAMES,
}


def _enum_categorical(codes: np.ndarray, names: dict[int, str]) -> pd.Categorical:
    """Integer codes as a categorical of their names; a code with no name keeps its number as text,
    and -1 (missing) is NaN unless it has a name."""
    import pandas as pd

    values = distinct(codes)
    labels = [names.get(int(v), str(int(v))) if (int(v) != -1 or -1 in names) else None for v in values]
    categories = list(
        dict.fromkeys([*(n for k, n in names.items() if k != -1 or -1 in names), *(x for x in labels if x is not None)])
    )
    index = {c: i for i, c in enumerate(categories)}
    lut = np.array([index[x] if x is not None else -1 for x in labels], dtype=np.int64)
    return pd.Categorical.from_codes(
        lut[np.searchsorted(values, codes)] if len(codes) else np.zeros(0, np.int64), categories=categories
    )


def empty_tables() -> dict[str, Table]:
    return {name: Table(name) for name in SCHEMAS}


class StringTable:
    """Interns strings to dense int32 ids while reading."""

    def __init__(self):
        self.ids: dict[str, int] = {}
        self.strings: list[str] = []

    def intern(self, s: str) -> int:
        sid = self.ids.get(s)
        if sid is None:
            sid = self.ids[s] = len(self.strings)
            self.strings.append(s)
        return sid

    def intern_many(self, values: list) -> np.ndarray:
        """Ids for a list of strings (None -> -1), hashing each distinct value once.

        Raises ``TypeError`` for an unhashable value (a list or object where a name belongs): the
        reader decides what such a field means (it reads it as absent and counts it)."""
        if not values:
            return np.zeros(0, dtype=np.int32)
        known, strings = self.ids, self.strings
        distinct = dict.fromkeys(values)  # first-appearance order, as ids are handed out
        distinct.pop(None, None)
        if set(map(type, distinct)) <= {str}:  # texts already (the common case): no conversion, no NaN
            added = list(itertools.filterfalse(known.__contains__, distinct))
            known.update(zip(added, itertools.count(len(strings))))
            strings.extend(added)
            return np.fromiter(map(known.get, values, itertools.repeat(-1)), dtype=np.int32, count=len(values))
        present = [v for v in distinct if v == v]
        texts = list(map(str, present))
        added = [t for t in dict.fromkeys(texts) if t not in known]  # new ids handed out in that order
        known.update(zip(added, range(len(strings), len(strings) + len(added))))
        strings.extend(added)
        ids = dict(zip(present, map(known.__getitem__, texts)))
        return np.fromiter(map(ids.get, values, itertools.repeat(-1)), dtype=np.int32, count=len(values))
