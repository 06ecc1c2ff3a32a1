"""Database access: a read-only connection, the tables and columns a given export has, lenient text.

An export is data, never code: it is opened read-only (``mode=ro``, ``immutable``, ``query_only``) with
``trusted_schema`` off, every string or BLOB SQLite hands back is bounded (``MAX_VALUE_BYTES``, a
connection limit), and what an export never holds but a crafted file could use to compute values as they
are read is refused where the reader expects a table: a generated column (``PRAGMA table_xinfo``, hidden
2 or 3), a view, a trigger.
"""

from __future__ import annotations

import itertools
import os
import operator
import sqlite3
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from ...errors import TraceError
from ...infile import open_regular
from ...model.groups import distinct

_FETCH_ROWS = 1 << 18
# The longest string or BLOB read from an export: kernel names with long template arguments take a few
# KB; a value past this is what a crafted file computes (``hex(zeroblob(N))``), not a name.
MAX_VALUE_BYTES = 16 << 20
_AGAIN = "export it again with `nsys export --type sqlite --force-overwrite true REPORT.nsys-rep`"
# A corrupt page can garble SQLite's error message itself (it quotes schema text): that is corruption too.
_DB_ERRORS = (sqlite3.DatabaseError, UnicodeDecodeError)


def _decode_text(raw: bytes) -> str:
    """UTF-8 when valid; otherwise Latin-1, which maps every byte, so one stray byte (old Windows
    exports carry OEM/ANSI code-page text) never fails the read. An accented letter from another
    code page may come out as a different accented letter."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1", errors="replace")


class _Db:
    """A read-only connection plus the table/column names the file actually has."""

    def __init__(self, path: str):
        self.path = path
        self.warnings: list[str] = []
        wal = f"{path}-wal"
        if os.path.isfile(wal) and os.path.getsize(wal) > 0:
            self.warnings.append(
                f"{path}: a write-ahead log ({os.path.basename(wal)}, {os.path.getsize(wal):,} "
                "bytes) lies beside the export and was not read (the export is opened "
                "read-only and never changed); if the export was still being written, "
                "export it again"
            )
        self.not_utf8 = 0  # texts read as Latin-1
        self.conn = _connect(path)
        try:
            self.conn.text_factory = self._lenient_text
            rows = self.conn.execute(
                "SELECT type, name, tbl_name FROM sqlite_master WHERE type IN ('table', 'view', 'trigger')"
            ).fetchall()
            self.conn.text_factory = str
        except _DB_ERRORS as exc:
            self.conn.close()
            raise _corrupt(path, exc) from None
        self.tables = {name for kind, name, _ in rows if kind == "table"}
        # names the reader may ask for that are not plain tables: a view, a table with a trigger
        self._not_tables = {name: "is a view" for kind, name, _ in rows if kind == "view"}
        self._not_tables.update({table: f"has a trigger ({name!r})" for kind, name, table in rows if kind == "trigger"})
        self._cols: dict[str, list[str]] = {}

    def close(self) -> None:
        self.conn.close()

    def text_warnings(self) -> list[str]:
        """How many texts were not UTF-8 (read as Latin-1), as a warning."""
        n = self.not_utf8
        if not n:
            return []
        return [
            f"{self.path}: {n:,} strings are not valid UTF-8; they were read as Latin-1 (a name may show "
            "a different accented letter)"
        ]

    def _lenient_text(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.not_utf8 += 1
            return _decode_text(raw)

    def _plain(self, value: Any) -> Any:
        """A BLOB where text belongs is decoded like text."""
        return self._lenient_text(value) if isinstance(value, bytes) else value

    def has(self, table: str) -> bool:
        self._expect_table(table)
        return table in self.tables

    def _expect_table(self, table: str) -> None:
        why = self._not_tables.get(table)
        if why is not None:
            raise TraceError(
                self.path,
                f"{table} {why}, where an Nsight Systems export has a plain table",
                None,
                f"pass an export written by nsys itself; {_AGAIN}",
            )

    def columns(self, table: str) -> list[str]:
        if table not in self._cols:
            self._expect_table(table)
            if table not in self.tables:
                self._cols[table] = []
            else:  # hidden: 0 a column, 1 a virtual table's hidden column, 2 or 3 a generated column
                rows = self.small(f"PRAGMA table_xinfo({_q(table)})")
                generated = [str(r[1]) for r in rows if r[6] in (2, 3)]
                if generated:
                    raise TraceError(
                        self.path,
                        f"table {table} has a generated column ({generated[0]!r}), which an "
                        "Nsight Systems export never has: its values would be computed as they are read",
                        None,
                        f"pass an export written by nsys itself; {_AGAIN}",
                    )
                self._cols[table] = [str(r[1]) for r in rows if r[6] == 0]
        return self._cols[table]

    def pick(self, table: str, *candidates: str) -> str | None:
        cols = set(self.columns(table))
        for c in candidates:
            if c in cols:
                return c
        return None

    def small(self, sql: str, params: Iterable = ()) -> list[tuple]:
        """All rows of a small query, decoding text leniently."""
        rows = self._leniently(lambda: self.conn.execute(sql, tuple(params)).fetchall())
        if bytes not in set(map(type, itertools.chain.from_iterable(rows))):  # valid UTF-8 and no BLOBs
            return rows
        return [tuple(map(self._plain, row)) for row in rows]

    def _leniently(self, fetch: Callable[[], Any]) -> Any:
        """``fetch()``; where SQLite cannot decode some text as UTF-8 (old Windows exports), ``fetch()``
        again with text decoded leniently. Any other database error: the file is damaged."""
        try:
            return fetch()
        except sqlite3.OperationalError as exc:
            if "decode" not in str(exc).lower():
                raise _corrupt(self.path, exc) from None
        except _DB_ERRORS as exc:
            raise _corrupt(self.path, exc) from None
        self.conn.text_factory = self._lenient_text
        try:
            return fetch()
        except _DB_ERRORS as exc:
            raise _corrupt(self.path, exc) from None
        finally:
            self.conn.text_factory = str

    def execute(self, sql: str, params: Iterable = ()) -> sqlite3.Cursor:
        try:
            return self.conn.execute(sql, tuple(params))
        except _DB_ERRORS as exc:
            raise _corrupt(self.path, exc) from None

    def count(self, table: str) -> int:
        self._expect_table(table)
        return int(self.execute(f"SELECT COUNT(*) FROM {_q(table)}").fetchone()[0])

    def read(
        self, table: str, ints: dict[str, tuple], texts: dict[str, tuple] | None = None, where: str = ""
    ) -> dict[str, Any]:
        """Columns of ``table``: ``ints`` as int64 arrays (NULL/missing -> default), ``texts`` as lists.

        ``ints`` maps an output name to ``(default, candidate column, ...)``; the first candidate
        the table has is read, and a table without any gets the default in every row.
        """
        texts = texts or {}
        self._expect_table(table)
        exprs, names = [], []
        for out, (default, *cands) in ints.items():
            col = self.pick(table, *cands)
            exprs.append(f"CAST(COALESCE({_q(col)}, {int(default)}) AS INTEGER)" if col else str(int(default)))
            names.append(out)
        text_names = []
        for out, cands in texts.items():
            col = self.pick(table, *cands)
            exprs.append(f"CAST({_q(col)} AS TEXT)" if col else "NULL")  # a BLOB comes back as text
            text_names.append(out)
        sql = f"SELECT {', '.join(exprs)} FROM {_q(table)}" + (f" WHERE {where}" if where else "")
        arr, text_cols = self._leniently(lambda: self._fetch(sql, len(names), len(text_names)))
        out: dict[str, Any] = {name: arr[:, i] for i, name in enumerate(names)}
        out.update(zip(text_names, text_cols))
        return out

    def _fetch(self, sql: str, k: int, n_text: int) -> tuple[np.ndarray, list[list]]:
        """Rows in chunks: integer columns flattened straight into int64 (no per-row numpy work)."""
        cur = self.execute(sql)
        int_parts: list[np.ndarray] = []
        text_cols: list[list] = [[] for _ in range(n_text)]
        head = operator.itemgetter(slice(0, k))
        while True:
            try:
                rows = cur.fetchmany(_FETCH_ROWS)
            except sqlite3.OperationalError:
                raise  # read() tells a text-decoding failure from the rest
            except _DB_ERRORS as exc:
                raise _corrupt(self.path, exc) from None
            if not rows:
                break
            flat = itertools.chain.from_iterable(map(head, rows) if n_text else rows)
            int_parts.append(np.fromiter(flat, dtype=np.int64, count=len(rows) * k).reshape(len(rows), k))
            for j in range(n_text):
                text_cols[j].extend(map(operator.itemgetter(k + j), rows))
        arr = np.concatenate(int_parts) if int_parts else np.zeros((0, k), dtype=np.int64)
        return arr, text_cols

    def strings(self, ids: np.ndarray) -> dict[int, str]:
        """``StringIds`` values of the given ids (looked up through the primary key, in batches)."""
        ids = [int(i) for i in distinct(ids) if i >= 0]
        out: dict[int, str] = {}
        if not ids or not self.has("StringIds"):
            return out
        vcol = self.pick("StringIds", "value", "text") or "value"
        for lo in range(0, len(ids), 500):
            batch = ids[lo : lo + 500]
            marks = ",".join("?" * len(batch))
            for sid, value in self.small(
                f"SELECT id, CAST({_q(vcol)} AS TEXT) FROM StringIds WHERE id IN ({marks})", batch
            ):
                if isinstance(sid, int):
                    out[sid] = "" if value is None else str(value)
        return out

    def key_values(self, *tables: str) -> dict[str, str]:
        for t in tables:
            if self.has(t) and {"name", "value"} <= set(self.columns(t)):
                return {str(n): str(v) for n, v in self.small(f"SELECT name, value FROM {_q(t)}") if n is not None}
        return {}


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _connect(path: str) -> sqlite3.Connection:
    open_regular(path, TraceError, "trace file").close()  # a pipe or a device: refused before SQLite opens it
    uri = Path(path).resolve().as_uri()
    # mode=ro never writes the database; immutable=1 also makes SQLite skip locking and the
    # write-ahead log, so no -shm/-wal file is ever created beside the input (a WAL-mode export would
    # get both under mode=ro alone).
    conn = None
    try:
        conn = sqlite3.connect(uri + "?mode=ro&immutable=1", uri=True)
        # Functions that are not innocuous may not run from the schema; nothing is ever written; no value
        # longer than MAX_VALUE_BYTES is made (SQLite refuses it: "string or blob too big").
        conn.execute("PRAGMA trusted_schema = OFF")
        conn.execute("PRAGMA query_only = ON")
        if hasattr(conn, "setlimit"):  # Python 3.11+
            conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        conn.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        return conn
    except _DB_ERRORS as exc:
        if conn is not None:
            conn.close()
        raise _corrupt(path, exc) from None


def _corrupt(path: str, exc: Exception | None) -> TraceError:
    if exc is not None and "too big" in str(exc):
        return TraceError(
            path,
            f"holds a value longer than {MAX_VALUE_BYTES:,} bytes, more than any name or "
            "field of an Nsight Systems export",
            str(exc),
            f"pass an export written by nsys itself; {_AGAIN}",
        )
    return TraceError(
        path,
        "cannot be read as an SQLite database: it is corrupt or incomplete",
        str(exc) if exc else None,
        "export it again with `nsys export --type sqlite --force-overwrite true REPORT.nsys-rep` "
        "and check that the copy finished",
    )


def _check_kind(db: _Db) -> None:
    """Reject nvprof databases and SQLite files that are not nsys exports."""
    t = db.tables
    if "CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL" in t or any(
        "_id_" in db.columns(x) for x in ("CUPTI_ACTIVITY_KIND_KERNEL", "StringTable") if x in t
    ):
        raise TraceError(
            db.path,
            "is an nvprof database, not an Nsight Systems export",
            "table CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL / `_id_` columns",
            "profile with Nsight Systems (`nsys profile -o run python train.py`), export with "
            "`nsys export --type sqlite run.nsys-rep`, or capture a torch.profiler trace",
        )
    nsys_like = "StringIds" in t or any(x.startswith(("CUPTI_", "NVTX_")) for x in t)
    if not nsys_like:
        shown = ", ".join(sorted(t)[:6]) or "no tables"
        raise TraceError(
            db.path,
            "is an SQLite database but not an Nsight Systems export",
            f"tables: {shown}",
            "pass the file written by `nsys export --type sqlite`, or a torch.profiler JSON trace",
        )
