#!/usr/bin/env python3
"""Candidate Kineto JSON decoders on one trace, in this process, median and spread of --reps runs.

    python benchmarks/bench_decoders.py benchmarks/_data/shapes/cpu_ops_50MB.json [--reps 3]

Measured: ``orjson.loads``; a pysimdjson parse (no field access: the JSON-parse limit) and the same
with four fields read per event; msgspec's typed decode of the events into tracedoc's structs (the
decode half of tracedoc's pure-Python reader); the compiled scan of the same events into column buffers
(``_kscan``, where built: the decode half of the compiled reader); tracedoc's whole reader with each
decoder (``TRACEDOC_DECODER``), in this process and with two worker processes; a vectorised numpy splitter that
finds the event boundaries (top-level commas at array depth 1, outside strings); pyarrow's JSON reader on the events
turned into NDJSON by that splitter, with an explicit schema; a numba scanner finding the same boundaries (its
compile is timed apart). A library that is not installed is skipped (pip install pysimdjson pyarrow numba). Each row
gives the median wall time and its spread, and the median CPU time of this process (worker processes not counted),
which a loaded machine disturbs less.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import time
from typing import Callable

import numpy as np


def timed(name: str, fn: Callable, reps: int) -> None:
    ts, cpu = [], []
    note = ""
    for _ in range(reps):
        gc.collect()
        t, c = time.perf_counter(), time.process_time()
        try:
            r = fn()
        except Exception as exc:  # noqa: BLE001 - a decoder that cannot read the trace is a result
            note = f"fails: {str(exc)[:120]}"
            break
        ts.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
        del r
    if ts:
        print(
            f"{name:<60} {statistics.median(ts):7.3f} s  ({min(ts):.3f}-{max(ts):.3f})  "
            f"cpu {statistics.median(cpu):.3f} s {note}",
            flush=True,
        )
    else:
        print(f"{name:<60}       - {note}", flush=True)


def split_events(body: bytes) -> np.ndarray:
    """Offsets of the commas between events of a JSON array: outside strings, at depth 1."""
    a = np.frombuffer(body, dtype=np.uint8)
    q = np.flatnonzero(a == 34)
    bs = a == 92
    esc = np.zeros(len(q), bool)
    cand = q[(q > 0) & bs[np.maximum(q - 1, 0)]]
    if cand.size:  # a quote after an odd run of backslashes is escaped
        nonbs = np.flatnonzero(~bs)
        last = nonbs[np.searchsorted(nonbs, cand) - 1]
        esc[np.searchsorted(q, cand[((cand - last - 1) & 1).astype(bool)])] = True
    quotes = q[~esc]
    s = np.flatnonzero((a == 123) | (a == 125) | (a == 91) | (a == 93) | (a == 44))
    s = s[~(np.searchsorted(quotes, s) & 1).astype(bool)]
    c = a[s]
    depth = np.cumsum(np.where((c == 123) | (c == 91), 1, np.where((c == 125) | (c == 93), -1, 0)))
    return s[(c == 44) & (depth == 1)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("trace", help="a plain (not gzip) Kineto JSON file")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args(argv)
    with open(a.trace, "rb") as f:
        raw = f.read()
    start = raw.index(b"[", raw.index(b'"traceEvents"'))
    body = raw[start : raw.rindex(b"]") + 1]
    print(f"{a.trace}: {len(raw) / 2**20:.1f} MiB, {a.reps} runs each")
    import orjson

    timed("orjson.loads", lambda: orjson.loads(raw), a.reps)
    try:
        import simdjson
    except ImportError:
        print("pysimdjson: not installed")
    else:
        parser = simdjson.Parser()

        def parse_only():
            doc = parser.parse(raw)
            return sum(1 for _ in doc["traceEvents"])

        def four_fields():
            doc = parser.parse(raw)
            return [(e.get("ph"), e.get("name"), e.get("ts"), e.get("dur")) for e in doc["traceEvents"]]

        timed("pysimdjson parse + iterate events (no field access)", parse_only, a.reps)
        timed("pysimdjson parse + 4 fields per event", four_fields, a.reps)
    from tracedoc.ingest.kineto import read_kineto, rows
    from tracedoc.ingest.kineto.decode import _decode_events

    timed("msgspec typed decode into structs (1 process)", lambda: _decode_events(body), a.reps)
    os.environ["TRACEDOC_DECODER"] = "auto"
    scan = rows._load_scan()
    if scan is None:
        print("compiled decoder: not built")
    else:
        timed("compiled scan into column buffers (1 process)", lambda: scan(body), a.reps)
    for decoder in ("python", "compiled") if scan is not None else ("python",):
        os.environ["TRACEDOC_DECODER"] = decoder
        timed(f"tracedoc reader, 1 process, {decoder} decoder", lambda: read_kineto(a.trace, workers=1), a.reps)
        timed(
            f"tracedoc reader, 2 worker processes, {decoder} decoder", lambda: read_kineto(a.trace, workers=2), a.reps
        )
    del os.environ["TRACEDOC_DECODER"]
    timed("numpy vectorised splitter (boundaries only)", lambda: split_events(body), a.reps)
    try:
        import pyarrow as pa
        import pyarrow.json as pj
    except ImportError:
        print("pyarrow: not installed")
    else:

        def ndjson(b: bytes) -> bytes:
            arr = np.frombuffer(b, dtype=np.uint8).copy()
            commas = split_events(b)
            arr[(arr == 10) | (arr == 13)] = 32  # raw newlines lie outside strings in valid JSON
            arr[commas] = 10
            arr[0] = arr[-1] = 32
            return arr.tobytes()

        args_t = pa.struct(
            [("External id", pa.int64()), ("correlation", pa.int64()), ("device", pa.int64()), ("stream", pa.int64())]
        )
        schema = pa.schema(
            [
                ("ph", pa.string()),
                ("cat", pa.string()),
                ("name", pa.string()),
                ("pid", pa.int64()),
                ("tid", pa.int64()),
                ("ts", pa.float64()),
                ("dur", pa.float64()),
                ("id", pa.int64()),
                ("args", args_t),
            ]
        )
        opts = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore")
        lines = ndjson(body)
        timed(
            "pyarrow.json.read_json of the NDJSON (schema, threads)",
            lambda: pj.read_json(pa.BufferReader(lines), parse_options=opts),
            a.reps,
        )
        timed(
            "splitter + NDJSON + pyarrow.json.read_json",
            lambda: pj.read_json(pa.BufferReader(ndjson(body)), parse_options=opts),
            a.reps,
        )
    try:
        import numba
    except ImportError:
        print("numba: not installed")
    else:

        @numba.njit(cache=True)
        def scan(a):
            out = np.empty(len(a) // 32 + 16, np.int64)
            n = depth = 0
            inside = escaped = False
            for i in range(len(a)):
                c = a[i]
                if inside:
                    if escaped:
                        escaped = False
                    elif c == 92:
                        escaped = True
                    elif c == 34:
                        inside = False
                elif c == 34:
                    inside = True
                elif c == 123 or c == 91:
                    depth += 1
                elif c == 125 or c == 93:
                    depth -= 1
                elif c == 44 and depth == 1:
                    if n == len(out):
                        bigger = np.empty(2 * len(out), np.int64)
                        bigger[:n] = out
                        out = bigger
                    out[n] = i
                    n += 1
            return out[:n]

        arr = np.frombuffer(body, dtype=np.uint8)
        t = time.perf_counter()
        scan(arr[:100])
        print(f"{'numba scanner: compile (or load from cache)':<52} {time.perf_counter() - t:7.3f} s")
        timed("numba scanner (boundaries only)", lambda: scan(arr), a.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
