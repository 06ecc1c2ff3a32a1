"""Seeded hostile inputs for the surfaces a local attacker reaches with small files, and their properties.

Three surfaces, beside ``fuzz_surfaces.py``'s saved reports, configs and expressions:

- ``nsys``: an Nsight Systems export whose schema or values were made hostile: a column replaced by a
  generated one (VIRTUAL or STORED, computing ``hex(zeroblob(N))`` or a copy), a table replaced by a view
  of itself, a trigger, values of 1 KB to 17 MB, NULLs, BLOBs where text belongs, integers at the edges of
  int64; given to ``tracedoc analyze``;
- ``perfetto``: a Kineto trace given to ``tracedoc analyze -o report.json --perfetto overlay.json``: a
  process name of up to 1 MiB, thousands of thread ids, pids and tids that are lists, objects or huge
  strings, entries of ``traceEvents`` that are not objects, odd top-level values, the gzip cut short or
  followed by garbage; and the merged timeline's ``rank_events`` on such events;
- ``logkeys``: a JSON Lines log whose keys hold quotes, backslashes, control characters, bidirectional
  controls, 10,000 characters, or collide after normalising, given to ``tracedoc logs``.

``run_case`` runs each in this process and classifies it as ``fuzz_surfaces`` does (``result``, ``error``:
one ``tracedoc: error:`` line, ``traceback``, ``hang``, ``violation``) plus ``memory``: a ``MemoryError``, or
the process's peak RSS past ``MEMORY_BOUND_MB`` after the case. A ``--perfetto`` run must write its report
whenever the analysis succeeded, and an overlay it writes must be JSON no larger than
``OVERLAY_BOUND(input)``.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import random
import resource
import shutil
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fuzzing import Hang, fingerprint, time_limit

OUTCOMES = ("result", "error", "traceback", "hang", "violation", "memory")
SURFACES = ("nsys", "perfetto", "logkeys")
MEMORY_BOUND_MB = 3000  # the campaign's whole process; a case that takes it past this is "memory"
# the tables the nsys reader reads (most cases change one of these; the rest, any table of the export)
READ_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "META_DATA_CAPTURE",
    "META_DATA_EXPORT",
    "NVTX_EVENTS",
    "OSRT_API",
    "PROCESSES",
    "StringIds",
    "TARGET_INFO_CUDA_DEVICE",
    "TARGET_INFO_GPU",
    "TARGET_INFO_SESSION_START_TIME",
    "ThreadNames",
)
ODD_KEY_PARTS = (
    '"',
    "\\",
    "\x00",
    "\x01",
    "\n",
    "\x1b[2J",
    "\u202e",
    "\u2028",
    "'",
    "/",
    ".",
    " ",
    "💥",
    "{",
    "}",
    ":",
    ",",
    "[",
    "]",
)


def overlay_bound(input_bytes: int) -> int:
    """The most bytes an overlay of a trace of ``input_bytes`` (inflated) may take: the original events
    plus tracedoc's tracks, which are bounded by the analysis's own caps."""
    return 2 * input_bytes + (64 << 20)


@dataclass
class Case:
    surface: str
    cls: str
    detail: str
    data: bytes = b""
    name: str = "x"
    sql: list = field(default_factory=list)  # nsys: statements applied to a copy of the base export
    events: list | None = None  # perfetto_job: rank_events' input


# -- generators -------------------------------------------------------------------------------------


def generate(seed: int, n: int, bases: dict) -> Iterator[Case]:
    """``n`` cases over the surfaces in a fixed rotation. ``bases``: ``make_bases``'s paths and tables."""
    rng = random.Random(seed)
    for i in range(n):
        surface = SURFACES[i % len(SURFACES)]
        if surface == "nsys":
            yield _nsys_case(rng, bases["nsys_tables"])
        elif surface == "perfetto":
            yield _perfetto_case(rng, bases["kineto"])
        else:
            yield _logkeys_case(rng)


def _nsys_case(rng: random.Random, tables: dict[str, list[tuple[str, str]]]) -> Case:
    """Statements on a copy of the base export; ``tables``: each table's (column, declared type)."""
    read = [t for t in READ_TABLES if t in tables]
    table = rng.choice(read if read and rng.random() < 0.8 else sorted(tables))
    cols = tables[table]
    col, decl = rng.choice(cols)
    n = rng.choice((10, 1000, 1 << 20, 25_000_000, 400_000_000))
    q = f'"{table}"'
    kind = rng.choice(
        ("generated", "stored", "view", "trigger", "huge", "huge", "null", "blob", "int_edge", "text_in_int", "two")
    )
    if kind in ("generated", "stored"):
        how = "VIRTUAL" if kind == "generated" else "STORED"
        expr = rng.choice((f"hex(zeroblob({n}))", f'"{col}_raw"', f'"{col}_raw" || hex(zeroblob({n}))'))
        if how == "STORED":  # SQLite adds only VIRTUAL columns to a table in place; a STORED one: a new table
            body = ", ".join(f'"{c}"' for c, _ in cols)
            sql = [
                f'ALTER TABLE {q} RENAME TO "_t0"',
                f'CREATE TABLE {q} ({body}, "_extra" TEXT GENERATED ALWAYS AS (1) STORED)',
                f'INSERT INTO {q} ({body}) SELECT {body} FROM "_t0"',
                'DROP TABLE "_t0"',
            ]
        else:
            sql = [
                f'ALTER TABLE {q} RENAME COLUMN "{col}" TO "{col}_raw"',
                f'ALTER TABLE {q} ADD COLUMN "{col}" GENERATED ALWAYS AS ({expr}) VIRTUAL',
            ]
        return Case("nsys", kind, f"{table}.{col} {how} {expr[:40]}", sql=sql)
    if kind == "view":
        grow = rng.choice(("", f", hex(zeroblob({n})) AS _grow"))
        sql = [f'ALTER TABLE {q} RENAME TO "_t0"', f'CREATE VIEW {q} AS SELECT *{grow} FROM "_t0"']
        return Case("nsys", kind, f"view {table}{grow[:30]}", sql=sql)
    if kind == "trigger":
        return Case(
            "nsys", kind, f"trigger on {table}", sql=[f'CREATE TRIGGER "_t" AFTER INSERT ON {q} BEGIN SELECT 1; END']
        )
    if kind == "huge":
        size = rng.choice((1 << 10, 1 << 20, 17 << 20))
        rows = 1 if size > (1 << 20) else rng.choice((1, 5, 50))
        return Case(
            "nsys",
            kind,
            f"{table}.{col} = {size:,} chars x {rows}",
            sql=[
                (
                    f'UPDATE {q} SET "{col}" = ? WHERE rowid IN (SELECT rowid FROM {q} LIMIT {rows})',
                    (rng.choice("x\u00e9\u202e\x00") * size,),
                )
            ],
        )
    if kind == "null":
        return Case("nsys", kind, f"{table}.{col} = NULL", sql=[f'UPDATE {q} SET "{col}" = NULL'])
    if kind == "blob":
        return Case(
            "nsys",
            kind,
            f"{table}.{col} = BLOB",
            sql=[(f'UPDATE {q} SET "{col}" = ?', (bytes(rng.randrange(256) for _ in range(64)),))],
        )
    if kind == "int_edge":
        v = rng.choice((2**63 - 1, -(2**63), -1, 0, 2**62))
        return Case("nsys", kind, f"{table}.{col} = {v}", sql=[(f'UPDATE {q} SET "{col}" = ?', (v,))])
    if kind == "text_in_int":
        v = rng.choice(("abc", "9" * 400, "1e400", "", "nan"))
        return Case("nsys", kind, f"{table}.{col} = {v[:20]!r} ({decl})", sql=[(f'UPDATE {q} SET "{col}" = ?', (v,))])
    other = rng.choice(sorted(tables))  # two at once: a view of one table, a generated column in another
    c2 = rng.choice(tables[other])[0]
    sql = [
        f'ALTER TABLE "{other}" RENAME COLUMN "{c2}" TO "{c2}_raw"',
        f'ALTER TABLE "{other}" ADD COLUMN "{c2}" GENERATED ALWAYS AS ("{c2}_raw") VIRTUAL',
    ]
    if other != table:
        sql += [f'ALTER TABLE {q} RENAME TO "_t1"', f'CREATE VIEW {q} AS SELECT * FROM "_t1"']
    return Case("nsys", "two", f"view {table}, generated {other}.{c2}", sql=sql)


def _perfetto_case(rng: random.Random, base: dict) -> Case:
    doc = json.loads(json.dumps(base))
    events = doc["traceEvents"]
    kind = rng.choice(
        ("long_name", "many_tids", "odd_ids", "not_objects", "odd_top", "deep_args", "cut", "tail", "no_events", "job")
    )
    detail = kind
    if kind == "long_name":
        size = rng.choice((1 << 10, 1 << 16, 1 << 20))
        events.append(
            {
                "ph": "M",
                "name": rng.choice(("process_name", "thread_name")),
                "pid": events[0].get("pid"),
                "tid": events[0].get("tid"),
                "args": {"name": rng.choice("p\u202e\x1b") * size},
            }
        )
        detail = f"name of {size:,}"
    elif kind == "many_tids":
        n = rng.choice((100, 2000, 20_000))
        proto = next(e for e in events if e.get("ph") == "X")
        events += [dict(proto, tid=10_000 + t) for t in range(n)]
        detail = f"{n:,} tids"
    elif kind == "odd_ids":
        for e in rng.sample(events, min(len(events), rng.choice((1, 10, 200)))):
            e[rng.choice(("pid", "tid"))] = rng.choice(([1], {"a": 1}, "x" * 10_000, None, 2**70, -1, 1.5, True))
    elif kind == "not_objects":
        for _ in range(rng.choice((1, 10, 100))):
            events.insert(rng.randrange(len(events) + 1), rng.choice((1, "x", None, [1], [[[]]], True)))
    elif kind == "odd_top":
        doc[rng.choice(("deviceProperties", "distributedInfo", "extra", "displayTimeUnit"))] = rng.choice(
            ([1] * 1000, "z" * 100_000, None, {"rank": "x"}, -1)
        )
    elif kind == "deep_args":
        v: object = 1
        for _ in range(rng.choice((50, 500, 5000))):
            v = [v]
        rng.choice(events)["args"] = {"deep": v}
    elif kind == "no_events":
        doc["traceEvents"] = rng.choice(({"a": 1}, "x", None, []))
    if kind == "job":
        return Case(
            "perfetto", kind, f"rank_events of {len(events):,} mutated events", events=_mutated_events(rng, events)
        )
    data = _dumps(doc)
    packed = gzip.compress(data, compresslevel=1)
    if kind == "cut":
        packed = packed[: rng.randrange(len(packed) // 2, len(packed))]
    elif kind == "tail":
        packed += rng.choice((b"garbage", b"\x1f\x8b\x08\x00junk", b"\0" * 100))
    return Case("perfetto", kind, detail, data=packed, name="t.json.gz")


def _mutated_events(rng: random.Random, events: list) -> list:
    out = list(events)
    out.append({"ph": "M", "name": "process_name", "pid": out[0].get("pid"), "args": {"name": "q" * (1 << 20)}})
    for e in rng.sample(out, min(len(out), 50)):
        if isinstance(e, dict):
            e[rng.choice(("pid", "tid", "ts", "id", "args"))] = rng.choice(([1], {"a": 1}, "x" * 1000, None, 2**70))
    return out


def _dumps(doc) -> bytes:
    import sys

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20_000))
    try:
        return json.dumps(doc).encode()
    finally:
        sys.setrecursionlimit(limit)


def _logkeys_case(rng: random.Random) -> Case:
    def key(base: str) -> str:
        parts = rng.sample(ODD_KEY_PARTS, rng.randrange(1, 4))
        kind = rng.random()
        if kind < 0.1:
            return base + "x" * 10_000
        return (
            "".join(parts) + rng.choice(("", "run", "train")) + rng.choice(("/", "\\", ".")) + base + "".join(parts[:1])
        )

    keys = [key(b) for b in rng.sample(["loss", "lr", "grad_norm", "tokens_per_sec", "step", "epoch", "loss"], 4)]
    if rng.random() < 0.3:
        keys.append("step")
    lines = []
    for i in range(1, rng.choice((3, 40, 300))):
        rec = {
            k: rng.choice((2.0 + 1 / i, i, "NaN", None, "x", [1.0, 2.0], True)) if rng.random() < 0.2 else 2.0 + 1 / i
            for k in keys
        }
        if "step" in keys:
            rec["step"] = i
        lines.append(json.dumps(rec, ensure_ascii=rng.random() < 0.5))
    if rng.random() < 0.2:
        lines.insert(rng.randrange(len(lines) + 1), rng.choice(("not json", "{", '{"a": NaN}', "[]")))
    return Case("logkeys", "keys", repr(keys[0][:40]), data=("\n".join(lines) + "\n").encode(), name="log.jsonl")


# -- running ----------------------------------------------------------------------------------------


def make_bases(root: Path, nsys_export: Path) -> dict:
    """The base export's copy and its tables' columns, and a small Kineto trace (the shipped example)."""
    from tracedoc.cli.analyze import example_path

    root.mkdir(parents=True, exist_ok=True)
    base = root / "base.sqlite"
    shutil.copy(nsys_export, base)
    base.chmod(0o644)
    con = sqlite3.connect(base)
    names = [
        r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    ]
    tables = {t: [(r[1], r[2]) for r in con.execute(f'PRAGMA table_info("{t}")')] for t in names}
    con.close()
    kineto = json.loads(gzip.decompress(Path(example_path()).read_bytes()))
    return {"nsys": base, "nsys_tables": {t: c for t, c in tables.items() if c}, "kineto": kineto}


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def run_case(case: Case, root: Path, bases: dict, timeout_s: int = 30) -> tuple[str, str]:
    """Write ``case`` under ``root``, run its command in this process, return (outcome, message)."""
    root.mkdir(parents=True, exist_ok=True)
    if case.surface == "perfetto" and case.events is not None:
        return _run_rank_events(case, timeout_s)
    overlay = report = None
    if case.surface == "nsys":
        path = root / "export.sqlite"
        shutil.copy(bases["nsys"], path)
        con = sqlite3.connect(path)
        try:
            for stmt in case.sql:
                con.execute(*stmt) if isinstance(stmt, tuple) else con.execute(stmt)
            con.commit()
        except sqlite3.Error as exc:  # a statement this table does not take: the case is the plain export
            con.rollback()
            case.detail += f" (not applied: {exc})"
        finally:
            con.close()
        args = ["analyze", str(path), "--no-progress", "-f", "json", "-j", "1"]
    else:
        path = root / case.name
        path.write_bytes(case.data)
        if case.surface == "perfetto":
            report, overlay = root / "out" / "report.json", root / "out" / "overlay.json"
            report.parent.mkdir()
            args = ["analyze", str(path), "--no-progress", "-j", "1", "-o", str(report), "--perfetto", str(overlay)]
        else:
            args = ["logs", str(path), "--format", "json", "-j", "1"]
    before = fingerprint(path.parent) if case.surface != "perfetto" else {path.name: path.read_bytes()}
    outcome, message, stdout, stderr, rc = _run_main(args, timeout_s)
    if outcome != "ok":
        return outcome, message
    after = fingerprint(path.parent) if case.surface != "perfetto" else {path.name: path.read_bytes()}
    if after != before:
        return "violation", "an input changed"
    if _peak_mb() > MEMORY_BOUND_MB:
        return "memory", f"peak RSS {_peak_mb():.0f} MB after this case"
    if case.surface == "perfetto" and rc in (0, 1, 3) and "wrote" not in stderr and report is not None:
        if not report.exists() and "not written; the report is written anyway" in stderr:
            return "violation", "the overlay's failure cost the report"
    if overlay is not None and overlay.exists():
        size = overlay.stat().st_size
        raw = gzip.decompress(case.data) if case.data[:2] == b"\x1f\x8b" else case.data
        if size > overlay_bound(len(raw)):
            return "violation", f"overlay of {size:,} bytes from {len(raw):,} of trace"
        try:
            json.loads(overlay.read_bytes())
        except ValueError as exc:
            return "violation", f"the overlay is not JSON: {str(exc)[:120]}"
    if rc in (1, 2):
        errors = [ln for ln in stderr.splitlines() if ln.startswith("tracedoc: error: ")]
        if len(errors) != 1:
            return "traceback", f"exit {rc} with {len(errors)} error lines: {stderr[-300:]}"
        if len(errors[0]) > 1000:
            return "violation", f"an error line of {len(errors[0]):,} characters"
        return "error", errors[0][:200]
    if case.surface in ("nsys", "logkeys"):
        try:
            json.loads(stdout, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c)))
        except ValueError as exc:
            return "violation", f"invalid JSON output: {str(exc)[:200]}"
    return "result", ""


def _run_main(args: list[str], timeout_s: int) -> tuple[str, str, str, str, int]:
    import warnings

    from tracedoc.cli import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with (
            time_limit(timeout_s),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
            warnings.catch_warnings(),
        ):
            warnings.simplefilter("ignore")
            try:
                rc = main(args)
            except SystemExit as exc:  # argparse
                rc = exc.code
    except Hang:
        return "hang", f"no answer within {timeout_s} s", "", "", -1
    except MemoryError:
        return "memory", "MemoryError", "", "", -1
    except Exception as exc:  # noqa: BLE001 - what this harness is for
        return "traceback", f"{type(exc).__name__}: {str(exc)[:300]}", "", "", -1
    stdout, stderr = out.getvalue(), err.getvalue()
    if "Traceback" in stderr or rc not in (0, 1, 2, 3):
        return "traceback", f"exit {rc}: {stderr[-300:]}", stdout, stderr, rc
    return "ok", "", stdout, stderr, rc


def _run_rank_events(case: Case, timeout_s: int) -> tuple[str, str]:
    import orjson

    from tracedoc.render.perfetto_job import MAX_LABEL_CHARS, rank_events

    try:  # the events as the merged timeline gets them: orjson's reading of a file
        events = orjson.loads(_dumps(case.events))
    except orjson.JSONDecodeError as exc:
        return "error", f"not JSON: {exc}"
    try:
        with time_limit(timeout_s):
            out = rank_events(3, 0, events, 1000)
            data = orjson.dumps(out)
    except Hang:
        return "hang", f"no answer within {timeout_s} s"
    except MemoryError:
        return "memory", "MemoryError"
    except Exception as exc:  # noqa: BLE001 - what this harness is for
        return "traceback", f"{type(exc).__name__}: {str(exc)[:300]}"
    labels = [e["args"]["name"] for e in out if e.get("ph") == "M" and e.get("name") == "thread_name"]
    if labels and max(map(len, labels)) > 2 * MAX_LABEL_CHARS + 3:
        return "violation", f"a thread label of {max(map(len, labels)):,} characters"
    del data
    return "result", ""
