"""Perfetto / chrome://tracing overlay: the original trace plus tracedoc's tracks.

Input: an ``AnalysisResult`` of one torch.profiler trace file. Output: a Chrome trace JSON holding the
original file's events unchanged, plus one ``tracedoc`` process with three kinds of track:

- ``GPU idle · by cause``: each idle interval of the window, named and coloured by its cause;
- ``critical path``: each step's critical path as slices (named by what the path was doing), and
  flow arrows on the original tracks where the path crosses from one thread or stream to another
  (a launch, a sync, an event wait);
- ``finding · <label>``: one slice per step for each finding, carrying its message and what-if.

The file opens in ui.perfetto.dev and chrome://tracing (JSON object format, ``ph`` X/M/s/f events,
microsecond timestamps on the trace's own clock).

The trace is read once, through the analysis's bounded reader (``tracedoc/infile.py``: regular files only,
bounded gzip inflation, a damaged file refused with one line). Its events are copied to the output as the
bytes they were, never parsed into Python objects: only the few fields the overlay reads of each event
(``_Event``) are decoded, and the output is written as it is made.
"""

from __future__ import annotations

import gzip
import os
from typing import TYPE_CHECKING, Any

import msgspec

from ..errors import TracedocError, UsageError
from ..outfiles import replace_atomically
from .format import fmt_what_if
from .names import short_name

if TYPE_CHECKING:  # pragma: no cover
    from ..result import AnalysisResult

# chrome://tracing reserved colour names (Perfetto colours slices by name)
IDLE_COLOURS = {
    "dataloader": "thread_state_iowait",
    "host_launch": "yellow",
    "sync": "terrible",
    "launch_latency": "olive",
    "other": "grey",
}
PATH_COLOURS = {
    "compute": "good",
    "comm": "rail_response",
    "comm_wait": "bad",
    "comm_transfer": "rail_response",
    "memcpy": "rail_load",
    "cpu": "thread_state_running",
    "launch_overhead": "yellow",
    "dataloader": "thread_state_iowait",
    "sync": "terrible",
    "idle": "grey",
}
MAX_FLOWS = 20_000
MAX_FINDING_STEPS = 200
TRACK_IDLE, TRACK_PATH, TRACK_FINDINGS = 1, 2, 10


def write_perfetto(result: "AnalysisResult", out_path: str) -> str:
    """Write the overlay of ``result``'s one trace file to ``out_path`` (``.gz`` compresses); for a
    job (a directory of ranks), the merged timeline of all its ranks (``perfetto_job.py``)."""

    if result.job is not None and not result.job.not_a_job and len(result.ranks) > 1:
        from .perfetto_job import write_job_perfetto

        return write_job_perfetto(result, out_path)
    if len(result.inputs) != 1 or len(result.ranks) != 1:
        raise UsageError(
            "--perfetto",
            "overlays one trace file",
            f"{len(result.inputs)} inputs, {len(result.ranks)} ranks",
            "run tracedoc analyze on one rank's file with --perfetto",
        )
    rank = result.ranks[0]
    fmt = rank.environment.format
    if fmt != "kineto":
        raise UsageError(
            "--perfetto",
            "needs a torch.profiler Chrome trace to overlay",
            f"a {fmt} file",
            "export the run with torch.profiler, or open the nsys report in Nsight Systems",
        )
    top, raw_events, events = _read_trace(result.paths[0])
    verdict = result.verdicts[0] if result.verdicts else None
    added = overlay_events(rank, verdict, events, (getattr(result, "overlays", None) or {}).get(0))
    had_events = bool(events)
    del events
    _write_overlay(out_path, top, raw_events, added, had_events)
    return out_path


class _Args(msgspec.Struct, gc=False):
    """What the overlay reads of an event's ``args`` (the rest is skipped, not decoded)."""

    stream: Any = None
    device: Any = None


class _Event(msgspec.Struct, gc=False):
    """What the overlay reads of an original event; the event itself is copied through as its bytes."""

    ph: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    cat: Any = None
    args: _Args | None = None


def _read_trace(path: str) -> tuple[dict[str, msgspec.Raw], msgspec.Raw, list]:
    """The trace's top-level values (as their bytes), its ``traceEvents`` array (as its bytes) and the
    ``_Event`` of each event (None for an entry that is not an object), read through the bounded reader."""
    from ..infile import read_input

    raw = read_input(path, TracedocError, "trace file")  # a damaged or cut-off file is refused, one line
    try:
        top = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
        events_raw = top.pop("traceEvents", None)
        if events_raw is None or not bytes(memoryview(events_raw)[:1]) == b"[":
            raise TracedocError(
                path, "has no traceEvents array to overlay", None, "pass the torch.profiler trace file itself"
            )
        try:
            events = msgspec.json.decode(events_raw, type=list[_Event])
        except msgspec.ValidationError:  # entries that are not objects (or oddly typed): kept, not read
            events = [_lenient_event(e) for e in msgspec.json.decode(events_raw)]
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError) as exc:
        raise TracedocError(
            path,
            "is not complete JSON, so it cannot be overlaid",
            str(exc)[:120],
            "overlay an intact copy of the trace",
        ) from None
    return top, events_raw, events


def _lenient_event(e: Any) -> "_Event | None":
    """An entry of an odd file as an ``_Event`` (its ``args`` dropped when they are not an object), or None."""
    if not isinstance(e, dict):
        return None
    args = e.get("args")
    try:
        return msgspec.convert({**e, "args": args if isinstance(args, dict) else None}, _Event)
    except msgspec.ValidationError:
        return None


def _write_overlay(
    out_path: str, top: dict[str, msgspec.Raw], events_raw: msgspec.Raw, added: list[dict], had_events: bool
) -> None:
    """Stream the overlay: the original events' bytes, tracedoc's events, then the other top-level values."""
    import orjson

    body = memoryview(events_raw)[:-1]  # the array without its closing bracket

    def write(raw) -> None:
        f = gzip.GzipFile(os.path.basename(out_path)[:-3], "wb", 6, raw) if out_path.lower().endswith(".gz") else raw
        with f:
            f.write(b'{"traceEvents":')
            f.write(body)
            first = not had_events
            for k in range(0, len(added), 10_000):
                chunk = orjson.dumps(added[k : k + 10_000])[1:-1]
                f.write(chunk if first else b"," + chunk)
                first = False
            f.write(b"]")
            for key, value in top.items():
                f.write(b"," + orjson.dumps(key) + b":")
                f.write(memoryview(value))
            f.write(b"}")

    try:
        replace_atomically(out_path, write)
    except OSError as exc:
        raise TracedocError(
            out_path, "cannot be written", exc.strerror or str(exc), "choose another --perfetto path"
        ) from None


def overlay_events(rank, verdict, original: list, overlay=None) -> list[dict]:
    """tracedoc's events for one rank: metadata, idle causes, critical path and findings. ``overlay``: the
    idle intervals and critical paths of a fresh analysis (``analyses.RankOverlay``); a loaded report has none."""
    pid = _free_pid(original)
    out: list[dict] = [_meta(pid, None, "process_name", "tracedoc"), _meta(pid, None, "process_sort_index", -1)]
    out += [
        _meta(pid, TRACK_IDLE, "thread_name", "GPU idle · by cause"),
        _meta(pid, TRACK_PATH, "thread_name", "critical path"),
    ]
    for cause, (s, e) in sorted((overlay.idle_intervals if overlay is not None else {}).items()):
        for a, b in zip(s.tolist(), e.tolist()):
            out.append(_slice(pid, TRACK_IDLE, f"idle: {cause}", a, b, "tracedoc.idle", IDLE_COLOURS.get(cause)))
    cp = rank.critical_path
    if cp is not None and cp.available and overlay is not None and overlay.critical_path.segments:
        out += _path_events(pid, cp, overlay.critical_path, _track_lookup(original), original)
    out += _finding_events(pid, rank, verdict)
    return out


def _path_events(pid: int, cp, paths, tracks: dict, original: list) -> list[dict]:
    from ..analyses.critical_path.solve import HOP_CATEGORIES

    seg = paths.segments
    out = []
    flows = 0
    names = paths.chain_names
    covering = _CoveringOps(original)
    for i, (step, s, e, cat, chain, src) in enumerate(
        zip(
            seg["step"].tolist(),
            seg["start_ns"].tolist(),
            seg["end_ns"].tolist(),
            seg["category"].tolist(),
            seg["chain"].tolist(),
            seg["from_chain"].tolist(),
        )
    ):
        what = HOP_CATEGORIES[cat]
        op = covering.at(tracks.get(paths.chain_keys[chain]), (s + e) / 2000)
        args = {"step": cp.steps[step]["step"], "on": names[chain], "from": names[src]}
        if op:
            args["op"] = op
        out.append(
            _slice(
                pid,
                TRACK_PATH,
                f"{what}: {short_name(op)}" if op else what,
                s,
                e,
                "tracedoc.critical_path",
                PATH_COLOURS.get(what),
                args,
            )
        )
        if chain != src and flows < MAX_FLOWS:
            a, b = tracks.get(paths.chain_keys[src]), tracks.get(paths.chain_keys[chain])
            if a is not None and b is not None:
                flows += 1
                common = {"cat": "tracedoc.critical_path", "name": "critical path", "id": f"tdcp{i}"}
                out.append({**common, "ph": "s", "pid": a[0], "tid": a[1], "ts": s / 1000})
                out.append({**common, "ph": "f", "bp": "e", "pid": b[0], "tid": b[1], "ts": e / 1000})
    return out


class _CoveringOps:
    """The innermost op, kernel or copy of a track of the original trace at a time: what a critical-path
    slice on that track covers, to name it by."""

    def __init__(self, events: list) -> None:
        self._events = events
        self._tracks: dict | None = None

    def _index(self) -> dict:
        import numpy as np

        spans: dict = {}
        for e in self._events:
            if e is None or e.ph != "X" or not isinstance(e.name, str):
                continue
            try:
                ts, dur = float(e.ts), float(e.dur or 0)
            except (TypeError, ValueError):
                continue
            spans.setdefault((_key(e.pid), _key(e.tid)), []).append((ts, ts + dur, e.name))
        out = {}
        for key, rows in spans.items():
            rows.sort()
            out[key] = (np.array([r[0] for r in rows]), np.array([r[1] for r in rows]), [r[2] for r in rows])
        return out

    def at(self, track: tuple | None, t_us: float) -> str | None:
        import numpy as np

        if track is None:
            return None
        if self._tracks is None:
            self._tracks = self._index()
        found = self._tracks.get(track)
        if found is None:
            return None
        starts, ends, names = found
        hi = int(np.searchsorted(starts, t_us, side="right"))
        lo = max(0, hi - 512)  # nested ops start shortly before; a bounded look back keeps this linear
        best, best_len = None, float("inf")
        for k in range(lo, hi):
            if ends[k] >= t_us and ends[k] - starts[k] < best_len:
                best, best_len = names[k], ends[k] - starts[k]
        return best


def _finding_events(pid: int, rank, verdict) -> list[dict]:
    if verdict is None or not verdict.findings:
        return []
    cp = rank.critical_path
    steps = cp.steps if cp is not None and cp.available else []
    spans = [(row["start_ns"], row["completion_ns"], row["step"]) for row in steps[:MAX_FINDING_STEPS]] or [
        (rank.window.start_ns, rank.window.end_ns, "window")
    ]
    out = []
    for k, f in enumerate(verdict.findings):
        tid = TRACK_FINDINGS + k
        out.append(_meta(pid, tid, "thread_name", f"finding · {f.label} · {f.rule_id}"))
        args = {
            "message": f.message,
            "what_if": fmt_what_if(f.what_if),
            "impact_ms_per_step": f.impact_ms_per_step,
            "fixes": list(f.fixes)[:3],
        }
        for s, e, name in spans:
            out.append(
                _slice(
                    pid,
                    tid,
                    f"[{f.label}] {f.title}",
                    s,
                    e,
                    "tracedoc.finding",
                    "bad" if f.is_verdict else "generic_work",
                    {**args, "step": name},
                )
            )
    return out


def _slice(
    pid: int, tid: int, name: str, s_ns: int, e_ns: int, cat: str, colour: str | None, args: dict | None = None
) -> dict:
    ev = {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": s_ns / 1000,
        "dur": max(e_ns - s_ns, 0) / 1000,
    }
    if colour:
        ev["cname"] = colour
    if args:
        ev["args"] = args
    return ev


def _meta(pid: int, tid: int | None, name: str, value) -> dict:
    ev = {"ph": "M", "pid": pid, "name": name, "args": {"sort_index" if name.endswith("sort_index") else "name": value}}
    if tid is not None:
        ev["tid"] = tid
    return ev


def _key(value: Any) -> Any:
    """A pid or tid as a dictionary key (a hostile file may give a list or an object)."""
    return value if isinstance(value, (int, float, str)) or value is None else repr(value)[:100]


def _free_pid(events: list) -> int:
    used = {_key(e.pid) for e in events if e is not None}
    pid = 0x7D0C
    while pid in used or str(pid) in used:
        pid += 1
    return pid


def _track_lookup(events: list) -> dict:
    """(kind, a, b) chain key -> the (pid, tid) the original file uses for that thread or stream."""
    out: dict = {}
    for e in events:
        if e is None or e.ph != "X":
            continue
        args = e.args if isinstance(e.args, _Args) else _Args()
        cat = (e.cat if isinstance(e.cat, str) else "").lower()
        try:
            if args.stream is not None and ("kernel" in cat or "memcpy" in cat or "memset" in cat):
                key = ("gpu", int(e.pid if args.device is None else args.device), int(args.stream))
            elif cat in ("cuda_runtime", "runtime", "cuda_driver", "cpu_op", "operator", "user_annotation"):
                key = ("cpu", int(e.pid), int(e.tid))
            else:
                continue
        except (TypeError, ValueError, OverflowError):
            continue
        out.setdefault(key, (_key(e.pid), _key(e.tid)))
    return out
