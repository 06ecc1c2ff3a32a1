#!/usr/bin/env python3
"""Scale a real Kineto trace up to a target size by repeating its events in time.

Copy k of the source's ``traceEvents`` is shifted by ``k * (span + gap)`` µs, so the copies follow one
another like consecutive profiling windows of the same job. Everything that links events is kept unique
and consistent per copy:

- flow event ``id`` and the ``args`` ids (``correlation``, ``External id``, ``Sequence number``, ...)
  are all shifted by the same ``k * id_offset``, so a launch still finds its kernel and its flow arrows;
- ``ProfilerStep#N`` is renumbered ``N + k * step_count``, so steps stay unique and consecutive.

Numbers are written the way the source wrote them: a ``ts``/``dur`` written as ``...522690.655`` stays a
3-decimal µs value (it is carried as an exact integer of 10⁻³ µs, never through a float, which could
not hold 16 significant digits), an integer stays an integer, and every other float keeps its source text.

The output is streamed: the source is parsed once, then each copy is serialized with orjson and written
before the next one is built, so memory stays at a few times the source size whatever the target size.

    python benchmarks/make_big_trace.py --size-mb 1024            # ~1 GiB under benchmarks/_data/
    python benchmarks/make_big_trace.py --source v100_resnet_ns_rank0.pt.trace.json.gz --size-mb 50 --gzip
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable

import orjson

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SHARED = REPO_ROOT.parent / "shared"
DEFAULT_OUT_DIR = REPO_ROOT / "benchmarks" / "_data"
DEFAULT_SOURCE = "v100_2rank_rank1.json.gz"
MIB = 1 << 20

# args fields that identify or link events; shifted per copy by one common offset so that links that
# compare ids across fields (flow id == correlation, fwdbwd flow id == Sequence number, ...) survive.
ID_ARG_FIELDS = (
    "correlation",
    "External id",
    "Sequence number",
    "Ev Idx",
    "Profiler Event Index",
    "Python id",
    "Python parent id",
)
STEP_RE = re.compile(r"ProfilerStep#(\d+)")
# What torch.profiler writes with activities=[ProfilerActivity.CUDA] alone: the device's activity (kernels,
# copies, sets, the GPU side of annotations), the CUDA runtime and driver calls that CUPTI records, their
# launch flows, and the process/thread metadata; no CPU operators.
CUDA_ACTIVITY = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_runtime", "cuda_driver"}


def _cuda_activity(ev: Any) -> bool:
    if not isinstance(ev, dict):
        return True
    ph = ev.get("ph")
    if ph == "X":
        return ev.get("cat") in CUDA_ACTIVITY
    if ph in ("s", "f", "t"):
        return ev.get("cat") == "ac2g"
    return ph == "M"


TIME_FIELDS = ("ts", "dur")


@dataclass
class GenResult:
    path: str
    gz_path: str | None
    source: str
    source_events: int
    copies: int
    events: int
    bytes: int
    shift_us: int
    id_offset: int
    step_offset: int
    seconds: float


class _Num:
    """A JSON float exactly as the source wrote it (``parse_float`` hook)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def shared_dir(override: str | os.PathLike | None = None) -> Path:
    return Path(override) if override else DEFAULT_SHARED


def resolve_source(source: str, shared: str | os.PathLike | None = None) -> Path:
    """``source`` as a path if it exists, else a file name under ``<shared>/traces/kineto/``."""
    p = Path(source)
    if p.exists():
        return p
    q = shared_dir(shared) / "traces" / "kineto" / source
    if q.exists():
        return q
    raise FileNotFoundError(
        f"source trace {source!r} not found (looked at {p} and {q}); pass --source PATH or --shared DIR"
    )


def source_stem(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".json", ".trace", ".pt"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def default_output(source: Path, size_mb: float, out_dir: Path) -> Path:
    size = f"{size_mb:g}".replace(".", "p")
    return out_dir / f"{source_stem(source)}_{size}MB.json"


# --- exact time values -----------------------------------------------------------------------------


def _time_value(v: Any) -> tuple[int, int] | None:
    """(integer in units of 10^-decimals µs, decimals) for a ts/dur value, or None if not a number."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v, 0
    if isinstance(v, _Num):
        text = v.text
        if "e" in text or "E" in text:  # not Kineto's style; keep 3 decimals
            from decimal import Decimal

            return int((Decimal(text) * 1000).to_integral_value()), 3
        whole, _, frac = text.partition(".")
        neg = whole.startswith("-")
        units = int(whole + frac) if not neg else -int(whole[1:] + frac)
        return units, len(frac)
    return None


def _format_time(units: int, decimals: int) -> Any:
    if decimals == 0:
        return units
    scale = 10**decimals
    sign = "-" if units < 0 else ""
    q, r = divmod(abs(units), scale)
    return orjson.Fragment(f"{sign}{q}.{r:0{decimals}d}".encode())


def _freeze_floats(obj: Any) -> Any:
    """Replace every _Num by an orjson Fragment of its source text (recursively)."""
    if isinstance(obj, _Num):
        return orjson.Fragment(obj.text.encode())
    if isinstance(obj, dict):
        return {k: _freeze_floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_freeze_floats(v) for v in obj]
    return obj


def _plain_floats(obj: Any) -> Any:
    """Replace every _Num by a float (for the small header, written with the stdlib json module)."""
    if isinstance(obj, _Num):
        return float(obj.text)
    if isinstance(obj, dict):
        return {k: _plain_floats(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain_floats(v) for v in obj]
    return obj


# --- the source, prepared once -----------------------------------------------------------------------


class _Template:
    """The source's events, prepared so that building copy k is a cheap loop."""

    def __init__(self, doc: dict, gap_us: int) -> None:
        events = doc.get("traceEvents")
        if not isinstance(events, list) or not events:
            raise ValueError("source has no traceEvents")
        keys = list(doc)
        at = keys.index("traceEvents")
        self.head = {k: _plain_floats(doc[k]) for k in keys[:at]}
        self.tail = {k: _plain_floats(doc[k]) for k in keys[at + 1 :]}

        # entries: (base event without ts, ts units, ts decimals or -1, flow id or None,
        #            args with id fields or None, id field names, step number or None)
        self.entries: list[tuple] = []
        self.starts_ns: list[int | None] = []  # each entry's ts in ns (None: no time, e.g. metadata)
        max_id = 0
        steps: list[int] = []
        lo_ns = hi_ns = None
        for ev in events:
            if not isinstance(ev, dict):
                raise ValueError(f"traceEvents holds a {type(ev).__name__}, expected objects")
            base = {}
            ts_units, ts_dec = 0, -1
            t0_ns = None
            for k, v in ev.items():
                if k == "ts":
                    tv = _time_value(v)
                    if tv is None:
                        base[k] = _freeze_floats(v)
                    else:
                        ts_units, ts_dec = tv
                        t0_ns = ts_units * 10 ** (3 - ts_dec) if ts_dec <= 3 else ts_units // 10 ** (ts_dec - 3)
                        base[k] = None  # placeholder keeps key order
                elif k == "dur":
                    tv = _time_value(v)
                    base[k] = _format_time(*tv) if tv is not None else _freeze_floats(v)
                else:
                    base[k] = _freeze_floats(v)
            if t0_ns is not None:
                end_ns = t0_ns
                dv = _time_value(ev.get("dur"))
                if dv is not None and dv[0] > 0:
                    end_ns += dv[0] * 10 ** (3 - dv[1]) if dv[1] <= 3 else dv[0] // 10 ** (dv[1] - 3)
                lo_ns = t0_ns if lo_ns is None else min(lo_ns, t0_ns)
                hi_ns = end_ns if hi_ns is None else max(hi_ns, end_ns)

            flow_id = base.get("id") if ev.get("ph") in ("s", "t", "f") else None
            if isinstance(flow_id, bool) or not isinstance(flow_id, int):
                flow_id = None
            else:
                max_id = max(max_id, flow_id)

            args = base.get("args")
            id_fields: tuple = ()
            if isinstance(args, dict):
                found = [f for f in ID_ARG_FIELDS if isinstance(args.get(f), int) and not isinstance(args.get(f), bool)]
                if found:
                    id_fields = tuple(found)
                    max_id = max(max_id, *(args[f] for f in found))
            step = None
            name = base.get("name")
            if isinstance(name, str):
                m = STEP_RE.fullmatch(name)
                if m:
                    step = int(m.group(1))
                    steps.append(step)
            self.entries.append((base, ts_units, ts_dec, flow_id, id_fields, step))
            self.starts_ns.append(t0_ns)

        if lo_ns is None:
            raise ValueError("source events carry no timestamps")
        self.n_events = len(events)
        self.lo_ns = lo_ns
        span_us = -(-(hi_ns - lo_ns) // 1000)  # ceil
        self.shift_us = int(span_us + gap_us)
        # a power of ten above every id: copy k's ids read as k followed by the source id
        self.id_offset = 10 ** len(str(max_id + 1)) if max_id > 0 else 0
        self.step_offset = (max(steps) - min(steps) + 1) if steps else 0

    def sizes(self) -> list[int]:
        """Each event's size once written (its text and the separator after it), from copy 0."""
        if not hasattr(self, "_sizes"):
            self._sizes = [len(orjson.dumps(e)) + 2 for e in self.copy(0)]
        return self._sizes

    def cut_ns(self, budget_bytes: int) -> int:
        """The time (ns from the source's first event) before which the source's events take about
        ``budget_bytes`` once written: a partial copy is the source's first stretch of time, so it keeps
        the source's mix of events (a prefix in file order would not: files group events by kind)."""
        sizes = self.sizes()
        timed = sorted((t - self.lo_ns, n) for t, n in zip(self.starts_ns, sizes) if t is not None)
        have = sum(n for t, n in zip(self.starts_ns, sizes) if t is None)
        for rel, size in timed:
            have += size
            if have > budget_bytes:
                return rel
        return timed[-1][0] + 1 if timed else 0

    def copy(self, k: int, cut_ns: int | None = None) -> list[dict]:
        """The events of copy k (k = 0 is the source itself); with ``cut_ns``, only those that start
        before that time from the source's first event (and the untimed ones)."""
        shift_us = k * self.shift_us
        id_shift = k * self.id_offset
        step_shift = k * self.step_offset
        shifts = [shift_us * 10**d for d in range(10)]
        fmt = _format_time
        out = []
        append = out.append
        for (base, ts_units, ts_dec, flow_id, id_fields, step), t0 in zip(self.entries, self.starts_ns):
            if cut_ns is not None and t0 is not None and t0 - self.lo_ns >= cut_ns:
                continue
            ev = base.copy()
            if ts_dec >= 0:
                ev["ts"] = fmt(ts_units + (shifts[ts_dec] if ts_dec < 10 else shift_us * 10**ts_dec), ts_dec)
            if flow_id is not None:
                ev["id"] = flow_id + id_shift
            if id_fields:
                args = ev["args"].copy()
                for f in id_fields:
                    args[f] += id_shift
                ev["args"] = args
            if step is not None:
                ev["name"] = f"ProfilerStep#{step + step_shift}"
            append(ev)
        return out


def read_source(path: Path) -> dict:
    raw = gzip.open(path, "rb").read() if path.name.endswith(".gz") else path.read_bytes()
    doc = json.loads(raw, parse_float=_Num)
    if isinstance(doc, list):  # a bare event array is valid Chrome trace JSON
        doc = {"traceEvents": doc}
    if not isinstance(doc, dict):
        raise ValueError(f"{path}: not a Chrome trace (top level is {type(doc).__name__})")
    return doc


# --- writing -----------------------------------------------------------------------------------------


class _Tee:
    def __init__(self, *files: BinaryIO) -> None:
        self.files = files
        self.n = 0

    def write(self, b: bytes) -> None:
        for f in self.files:
            f.write(b)
        self.n += len(b)


def _write_header_items(out: _Tee, items: dict, first: bool) -> bool:
    for k, v in items.items():
        # stdlib json keeps Kineto's "key": value spacing (HTA finds the rank with a "rank":\s+ regex)
        out.write(((b"" if first else b",\n") + f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}".encode()))
        first = False
    return first


def generate(
    source: str | os.PathLike = DEFAULT_SOURCE,
    out_path: str | os.PathLike | None = None,
    size_mb: float = 1024,
    *,
    copies: int | None = None,
    gap_us: int = 1000,
    write_gzip: bool = False,
    exact: bool = False,
    activities: str = "all",
    shared: str | os.PathLike | None = None,
    out_dir: str | os.PathLike | None = None,
    progress: Callable[[str], None] | None = None,
) -> GenResult:
    """Write a scaled trace of whole copies, as near ``size_mb`` MiB as copies allow (or exactly ``copies``).

    ``exact``: whole copies while they fit, then the first stretch of time of one more copy that brings the
    file to ``size_mb`` (so a target smaller than the source is a window of it). ``activities="cuda"``:
    only the events torch.profiler records for ``ProfilerActivity.CUDA`` (see ``CUDA_ACTIVITY``)."""
    t0 = time.perf_counter()
    src = resolve_source(os.fspath(source), shared)
    out_dir = Path(out_dir) if out_dir else DEFAULT_OUT_DIR
    out = Path(out_path) if out_path else default_output(src, size_mb, out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    target = int(size_mb * MIB)

    doc = read_source(src)
    if activities == "cuda":
        doc["traceEvents"] = [e for e in doc["traceEvents"] if _cuda_activity(e)]
    elif activities != "all":
        raise ValueError(f"activities must be 'all' or 'cuda', not {activities!r}")
    tpl = _Template(doc, gap_us)
    plan: list[int | None] | None = None  # exact: per copy, None (whole) or where it is cut
    if exact and copies is None:
        whole = tpl.cut_ns(1 << 62)
        full_bytes = sum(tpl.sizes())
        n_full = target // full_bytes
        plan = [None] * n_full
        if target - n_full * full_bytes > full_bytes // 100:
            plan.append(tpl.cut_ns(target - n_full * full_bytes))
        plan = plan or [whole]

    tmp = out.with_name(out.name + ".part")
    gz_path = out.with_name(out.name + ".gz") if write_gzip else None
    gz_tmp = gz_path.with_name(gz_path.name + ".part") if gz_path else None
    k = n_events = 0
    with open(tmp, "wb", buffering=8 * MIB) as fh:
        gz = gzip.open(gz_tmp, "wb", compresslevel=6) if gz_tmp else None
        try:
            w = _Tee(fh, gz) if gz else _Tee(fh)
            w.write(b"{\n")
            first = _write_header_items(w, tpl.head, True)
            w.write((b"" if first else b",\n") + b'  "traceEvents": [\n')
            dumps = orjson.dumps
            while True:
                events = tpl.copy(k, plan[k] if plan is not None else None)
                before = w.n
                w.write((b",\n" if k else b"") + b",\n".join([dumps(e) for e in events]))
                n_events += len(events)
                del events
                k += 1
                if progress:
                    progress(f"copy {k}: {w.n / MIB:,.0f} MiB")
                if plan is not None:
                    if k >= len(plan):
                        break
                elif copies is not None:
                    if k >= copies:
                        break
                elif w.n + (w.n - before) // 2 >= target:  # the copy count that lands nearest the target
                    break
            w.write(b"\n  ]")
            _write_header_items(w, tpl.tail, False)
            w.write(b"\n}\n")
            nbytes = w.n
        finally:
            if gz:
                gz.close()
    os.replace(tmp, out)
    if gz_tmp:
        os.replace(gz_tmp, gz_path)
    res = GenResult(
        path=str(out),
        gz_path=str(gz_path) if gz_path else None,
        source=str(src),
        source_events=tpl.n_events,
        copies=k,
        events=n_events,
        bytes=nbytes,
        shift_us=tpl.shift_us,
        id_offset=tpl.id_offset,
        step_offset=tpl.step_offset,
        seconds=time.perf_counter() - t0,
    )
    Path(str(out) + ".meta.json").write_text(json.dumps(asdict(res), indent=2) + "\n")
    return res


def read_meta(path: str | os.PathLike) -> dict | None:
    p = Path(os.fspath(path) + ".meta.json")
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--source",
        default=DEFAULT_SOURCE,
        help=f"a trace file, or a name under <shared>/traces/kineto/ (default {DEFAULT_SOURCE})",
    )
    ap.add_argument("--shared", default=None, help=f"the shared folder (default {DEFAULT_SHARED})")
    ap.add_argument("--size-mb", type=float, default=1024, help="target uncompressed size in MiB (default 1024)")
    ap.add_argument("--copies", type=int, default=None, help="write exactly this many copies instead of a size")
    ap.add_argument("--gap-us", type=int, default=1000, help="idle gap between copies in µs (default 1000)")
    ap.add_argument("--out-dir", default=None, help=f"output folder (default {DEFAULT_OUT_DIR})")
    ap.add_argument("-o", "--output", default=None, help="output file (default <out-dir>/<source>_<size>MB.json)")
    ap.add_argument("--gzip", action="store_true", help="also write <output>.gz")
    ap.add_argument(
        "--exact", action="store_true", help="end with part of a copy (its first stretch of time) to land on --size-mb"
    )
    ap.add_argument(
        "--activities",
        choices=("all", "cuda"),
        default="all",
        help="'cuda': keep only what torch.profiler records for ProfilerActivity.CUDA",
    )
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)
    if a.copies is not None and a.copies < 1:
        ap.error("--copies must be >= 1")
    try:
        res = generate(
            a.source,
            a.output,
            a.size_mb,
            copies=a.copies,
            gap_us=a.gap_us,
            write_gzip=a.gzip,
            exact=a.exact,
            activities=a.activities,
            shared=a.shared,
            out_dir=a.out_dir,
            progress=None if a.quiet else (lambda s: print(s, file=sys.stderr, flush=True)),
        )
    except (OSError, ValueError) as exc:
        print(f"make_big_trace: {exc}", file=sys.stderr)
        return 1
    print(
        f"wrote {res.path}: {res.bytes / MIB:,.1f} MiB, {res.events:,} events "
        f"({res.copies} copies of {res.source_events:,} from {Path(res.source).name}) in {res.seconds:.1f} s"
    )
    if res.gz_path:
        print(f"wrote {res.gz_path}: {os.path.getsize(res.gz_path) / MIB:,.1f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
