"""Seeded mutations of real traces, and the one property every mutant must satisfy.

``generate(seed, n)`` yields ``Case`` values: a mutation class, what was done, and the files to write
(a trace, or a directory of ranks). ``run_case(path)`` analyses one written case in this process and
classifies the outcome:

- ``result``: numbers, every invariant of ``tracedoc.checks`` holds, the JSON is valid JSON;
- ``error``: one ``TracedocError`` (the CLI prints it as one line);
- ``traceback``: any other exception (a crash the user would see);
- ``hang``: no answer within the time limit;
- ``violation``: numbers that break an invariant, JSON with NaN/Infinity, or an input file changed.

The tests run a few hundred cases; ``benchmarks/fuzz_campaign.py`` runs thousands and prints a table.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from fuzz_kineto import KINETO_MUTATIONS
from shared_dir import traces_dir

TRACES = traces_dir(Path(__file__).resolve().parents[2] / "shared")[0]
# Small real traces (tens of KB of JSON): fast to analyse thousands of times.
KINETO_SOURCES = (
    "h100_2026_format.json",
    "triton_example.json.gz",
    "cuda_event_sync.json.gz",
    "cpu_only_gloo_rank34.pt.trace.json.gz",
    "cuda_event_sync_multi_stream.json.gz",
    "mi250_rocm_minitoy.json.gz",
)
NSYS_SOURCES = ("nsys2026_mock.sqlite", "nsys2022_con_kernel.sqlite")
OUTCOMES = ("result", "error", "traceback", "hang", "violation")
FIFO = object()  # a file entry that is a named pipe, not bytes
SUBDIR = object()  # a file entry that is an (empty) directory


@dataclass
class Case:
    cls: str
    detail: str
    files: dict[str, object] = field(default_factory=dict)  # relative name -> bytes | FIFO | SUBDIR
    target: str = ""  # relative path analysed; "" is the case directory itself

    def write(self, root: Path) -> Path:
        root.mkdir(parents=True, exist_ok=True)
        for name, content in self.files.items():
            p = root / name
            if content is FIFO:
                os.mkfifo(p)
            elif content is SUBDIR:
                p.mkdir()
            else:
                p.write_bytes(content)  # type: ignore[arg-type]
        return root / self.target if self.target else root


def have_sources() -> bool:
    return all((TRACES / "kineto" / n).is_file() for n in KINETO_SOURCES) and all(
        (TRACES / "nsys" / n).is_file() for n in NSYS_SOURCES
    )


_cache: dict[str, bytes] = {}


def kineto_json(name: str) -> bytes:
    if name not in _cache:
        data = (TRACES / "kineto" / name).read_bytes()
        _cache[name] = gzip.decompress(data) if name.endswith(".gz") else data
    return _cache[name]


# --- nsys databases ---------------------------------------------------------------------------------

_NSYS_TABLES = (
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    "NVTX_EVENTS",
    "OSRT_API",
)
_GARBAGE = (
    "'abc'",
    "X'00ff'",
    "1e400",
    "-1e400",
    "9223372036854775807",
    "-9223372036854775808",
    "NULL",
    "-5",
    "1.5",
    "''",
    "CAST(X'ff' AS TEXT)",
)


def _some(rng: random.Random, k: int, of: int) -> str:
    """A deterministic SQL condition true for about k in ``of`` rows (SQLite's random() is unseeded)."""
    return f"(rowid * {rng.randrange(1, 997, 2)} + {rng.randrange(of)}) % {of} < {k}"


def _update(conn: sqlite3.Connection, sql: str) -> None:
    try:
        conn.execute(sql)
    except sqlite3.IntegrityError:  # a NOT NULL or CHECK column: the file stays as it was
        pass


def mutate_nsys(rng: random.Random, src: Path) -> tuple[str, str, bytes]:
    """One mutated copy of an nsys export: (class, detail, bytes)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.sqlite"
        shutil.copyfile(src, path)
        os.chmod(path, 0o644)
        cls = rng.choice(["nsys_text", "nsys_int_garbage", "nsys_end_before_start", "nsys_schema", "nsys_file"])
        conn = sqlite3.connect(path)
        tables = [
            t
            for t in _NSYS_TABLES
            if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (t,)).fetchone()
        ]
        table = rng.choice(tables)
        cols = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
        detail = ""
        if cls == "nsys_text":
            kind = rng.choice(["invalid-utf8", "blob", "huge", "null"])
            value = {
                "invalid-utf8": "CAST(X'41ff42c3' AS TEXT)",
                "blob": "X'00ff41'",
                "huge": "'" + "x(" * 50_000 + "'",
                "null": "''",
            }[kind]
            frac = rng.choice([0.01, 0.2, 1.0])
            _update(conn, f"UPDATE StringIds SET value = {value} WHERE {_some(rng, int(frac * 1000), 1000)}")
            if "text" in cols and table == "NVTX_EVENTS":
                _update(conn, f"UPDATE NVTX_EVENTS SET text = {value} WHERE text IS NOT NULL")
            detail = f"StringIds {kind} in {frac:.0%} of rows"
        elif cls == "nsys_int_garbage":
            col = rng.choice([c for c in cols if c not in ("text",)])
            value = rng.choice(_GARBAGE)
            _update(conn, f'UPDATE "{table}" SET "{col}" = {value} WHERE {_some(rng, rng.randint(1, 10), 10)}')
            detail = f"{table}.{col} = {value}"
        elif cls == "nsys_end_before_start":
            k = rng.choice([1, 10, 1000, 10**9])
            _update(conn, f'UPDATE "{table}" SET "end" = "start" - {k} WHERE {_some(rng, rng.randint(1, 10), 10)}')
            detail = f"{table}: end = start - {k}"
        elif cls == "nsys_schema":
            kind = rng.choice(["drop-table", "drop-strings", "empty-table", "wal"])
            if kind == "drop-table":
                conn.execute(f'DROP TABLE "{table}"')
            elif kind == "drop-strings":
                conn.execute("DROP TABLE StringIds")
            elif kind == "empty-table":
                conn.execute(f'DELETE FROM "{table}"')
            else:
                conn.execute("PRAGMA journal_mode=WAL")
            detail = f"{kind} {table}"
        conn.commit()
        conn.close()
        data = path.read_bytes()
    if cls == "nsys_file":
        kind = rng.choice(["truncated", "page-flip", "header-only"])
        if kind == "truncated":
            data = data[: rng.randrange(100, len(data))]
        elif kind == "page-flip":
            b = bytearray(data)
            for _ in range(rng.randint(1, 20)):
                b[rng.randrange(100, len(b))] = rng.randrange(256)
            data = bytes(b)
        else:
            data = data[:100]
        detail = kind
    return cls, detail, data


# --- directories of ranks and special files ---------------------------------------------------------


def directory_case(rng: random.Random) -> Case:
    a, b = rng.sample(KINETO_SOURCES, 2)
    good = {"rank0.json": kineto_json(a), "rank1.json": kineto_json(b)}
    kind = rng.choice(
        [
            "empty-rank",
            "corrupt-gzip",
            "corrupt-sqlite",
            "truncated-rank",
            "not-a-trace",
            "duplicate-rank",
            "mixed-formats",
            "subdir",
            "fifo-rank",
            "all-bad",
        ]
    )
    files: dict[str, object] = dict(good)
    if kind == "empty-rank":
        files["rank2.json"] = b""
    elif kind == "corrupt-gzip":
        files["rank2.json.gz"] = b"\x1f\x8b\x08\x00" + bytes(rng.randrange(256) for _ in range(200))
    elif kind == "corrupt-sqlite":
        files["rank2.sqlite"] = b"SQLite format 3\x00" + bytes(rng.randrange(256) for _ in range(3000))
    elif kind == "truncated-rank":
        files["rank2.json"] = kineto_json(a)[: rng.randrange(1, 2000)]
    elif kind == "not-a-trace":
        files["rank2.json"] = b'{"loss": [1.0, 0.5]}'
    elif kind == "duplicate-rank":
        files["rank_1.json.gz"] = gzip.compress(kineto_json(b))
    elif kind == "mixed-formats":
        files["rank2.sqlite"] = (TRACES / "nsys" / rng.choice(NSYS_SOURCES)).read_bytes()
    elif kind == "subdir":
        files["rank2.json"] = SUBDIR
    elif kind == "fifo-rank":
        files["rank2.json"] = FIFO
    else:
        files = {"rank0.json": b"", "rank1.json.gz": b"\x1f\x8b garbage"}
    return Case("directory", kind, files, "")


def special_case(rng: random.Random) -> Case:
    kind = rng.choice(["fifo", "directory-named-json", "empty", "whitespace", "nul-bytes"])
    if kind == "fifo":
        return Case("special_file", kind, {"t.json": FIFO}, "t.json")
    if kind == "directory-named-json":
        return Case("special_file", kind, {"t.json": SUBDIR}, "t.json")
    content = {"empty": b"", "whitespace": b" \n\t" * 100, "nul-bytes": b"\0" * 1000}[kind]
    return Case("special_file", kind, {"t.json": content}, "t.json")


CLASSES = tuple(KINETO_MUTATIONS) + ("nsys", "directory", "special_file")


def generate(seed: int, n: int, classes: tuple[str, ...] = CLASSES) -> Iterator[Case]:
    """``n`` cases, the classes taken in turn, every choice from ``random.Random(seed)``."""
    rng = random.Random(seed)
    for i in range(n):
        cls = classes[i % len(classes)]
        if cls == "nsys":
            src = rng.choice(NSYS_SOURCES)
            sub, detail, data = mutate_nsys(rng, TRACES / "nsys" / src)
            yield Case(sub, f"{src}: {detail}", {"t.sqlite": data}, "t.sqlite")
        elif cls == "directory":
            yield directory_case(rng)
        elif cls == "special_file":
            yield special_case(rng)
        else:
            src = rng.choice(KINETO_SOURCES)
            detail, data = KINETO_MUTATIONS[cls](rng, kineto_json(src))
            name = "t.json.gz" if cls == "gzip" else "t.json"
            yield Case(cls, f"{src}: {detail}", {name: data}, name)


# --- running one case ---------------------------------------------------------------------------------


def _run_cli(path: Path) -> tuple[str, str]:
    """``tracedoc analyze PATH --format json`` in this process: ("result", stdout) or the outcome and stderr."""
    import contextlib
    import io

    from tracedoc.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["analyze", str(path), "--format", "json", "--no-progress", "-j", "2"])
    stderr = err.getvalue()
    if "Traceback" in stderr:
        return "traceback", stderr[-300:]
    if rc in (1, 2):
        errors = [ln for ln in stderr.splitlines() if ln.startswith("tracedoc: error: ")]
        return ("error", errors[0]) if len(errors) == 1 else ("traceback", f"exit {rc}: {stderr[-300:]}")
    if rc not in (0, 3):
        return "traceback", f"exit {rc}: {stderr[-300:]}"
    return "result", out.getvalue()


class Hang(BaseException):
    """A case ran past its time limit. A BaseException, so code under test that catches Exception cannot
    swallow it."""


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    """Raise ``Hang`` in the block after ``seconds`` (SIGALRM; the previous handler is restored)."""

    def _alarm(signum, frame):
        raise Hang()

    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def fingerprint(root: Path) -> dict[str, str]:
    """Every path under ``root`` with its content hash (or "fifo"/"dir"), to check a run changed no input."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.is_fifo():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
        elif not p.is_file():
            out[str(p.relative_to(root))] = "fifo" if p.is_fifo() else "dir"
    return out


def run_case(
    case: Case, root: Path, timeout_s: int = 30, render_html: bool = False, via_cli: bool = False
) -> tuple[str, str]:
    """Write ``case`` under ``root``, analyse it (through the API, or ``tracedoc analyze --format json``
    in this process), and return (outcome, message)."""
    from tracedoc.api import analyze
    from tracedoc.checks import BUG_PREFIX, violations_in
    from tracedoc.errors import TracedocError

    path = case.write(root)
    before = fingerprint(root)
    try:
        with time_limit(timeout_s):
            if via_cli:
                outcome, text = _run_cli(path)
                if outcome != "result":
                    return outcome, text
            else:
                from tracedoc.render import render_html as html, render_md as md, render_text

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    result = analyze(path, jobs=2)
                    text = result.to_json()
                    render_text(result)
                    if render_html:
                        html(result)
                        md(result)
    except Hang:
        return "hang", f"no answer within {timeout_s} s"
    except TracedocError as exc:
        return "error", exc.message()
    except Exception as exc:  # noqa: BLE001 - what this harness is for
        return "traceback", f"{type(exc).__name__}: {str(exc)[:300]}"
    problems: list[str] = []
    try:
        doc = json.loads(text, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(f"JSON constant {c}")))
    except ValueError as exc:
        problems.append(f"invalid JSON output: {exc}")
    else:
        for rank in doc["ranks"]:
            problems += violations_in(rank)
            problems += [w for w in rank["warnings"] if w.startswith(BUG_PREFIX)]
    after = fingerprint(root)
    if after != before:
        problems.append(f"the input changed: {sorted(set(after.items()) ^ set(before.items()))[:4]}")
    if problems:
        return "violation", problems[0]
    return "result", ""
