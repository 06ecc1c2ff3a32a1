"""Step monitor: step time, throughput, peak memory and GPU utilization while a job is wrapped.

The monitor is fed one call per detected step boundary (``on_step``) and appends to ``steps.jsonl``
one JSON line per step, one per interval, and at exit a ``summary`` record; it returns a one-line
summary for stderr. Lines are written in batches, each batch one ``os.write`` on an ``O_APPEND``
descriptor, so ranks can share the file: step lines at least every ``STEP_FLUSH_S`` (or every
``STEP_FLUSH_ROWS`` steps), an interval line every ``interval_s``. The hot path only appends a tuple;
formatting happens at the flush, which keeps the cost of a step to about a microsecond.

Record schema (``schema`` = 2; 1 had no step records)::

    {"type": "step", "schema": 2, "rank": 0, "step": n, "time": <unix s at its end>, "step_time_s": float,
     "samples_per_s": float (when known), "tokens_per_s": float (when known),
     "gpu_util_percent": float (on the steps where it was sampled, about once a second),
     "profiled": true (only on steps the profiler recorded: slower by its overhead)}
    {"type": "interval", "schema": 2, "rank": 0, "pid": 123, "time": <unix s>, "step": <last step>,
     "steps": n, "profiled_steps": k, "step_time_s": {"mean", "p50", "p90", "max"},
     "samples_per_s": float|null, "tokens_per_s": float|null,
     "peak_mem_bytes": int|null, "mem_source": "cuda"|"rss", "gpu_util_percent": float|null}
    {"type": "summary", ... same keys over the whole run, "wall_s": float}

Nothing here imports torch at module import time.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from array import array
from dataclasses import dataclass, field
from typing import Any

import msgspec

SCHEMA = 2
STEP_FLUSH_S = 1.0  # step records reach the file at least this often ...
STEP_FLUSH_ROWS = 4096  # ... or once this many wait


class StepRecord(msgspec.Struct, tag_field="type", tag="step", omit_defaults=True):
    """One step's line; unknown throughputs, an unsampled GPU and ``profiled=False`` are left out."""

    schema: int
    rank: int
    step: int
    time: float
    step_time_s: float
    samples_per_s: float | None = None
    tokens_per_s: float | None = None
    gpu_util_percent: float | None = None
    profiled: bool = False


_STEP_LINES = msgspec.json.Encoder()


def _quantiles(values) -> dict[str, float] | None:
    n = len(values)
    if n == 0:
        return None
    s = sorted(values)

    def q(p: float) -> float:
        return s[min(n - 1, int(p * (n - 1) + 0.5))]

    return {"mean": sum(s) / n, "p50": q(0.5), "p90": q(0.9), "max": s[-1]}


def _rss_peak_bytes() -> int | None:
    try:
        kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (OSError, ValueError):
        return None
    return int(kb) * (1 if sys.platform == "darwin" else 1024)


class _Nvml:
    """GPU utilization through pynvml, for the device this process uses; silently absent otherwise."""

    def __init__(self) -> None:
        self.handle = None
        self.tried = False

    def sample(self) -> float | None:
        if not self.tried:
            self.tried = True
            self.handle = self._open()
        if self.handle is None:
            return None
        try:
            import pynvml

            return float(pynvml.nvmlDeviceGetUtilizationRates(self.handle).gpu)
        except Exception:
            self.handle = None
            return None

    @staticmethod
    def _open():
        torch = sys.modules.get("torch")
        if torch is None or not torch.cuda.is_initialized():
            return None
        try:
            import pynvml

            pynvml.nvmlInit()
            dev = torch.cuda.current_device()
            try:
                uuid = str(torch.cuda.get_device_properties(dev).uuid)
                if not uuid.startswith("GPU-"):
                    uuid = "GPU-" + uuid
                return pynvml.nvmlDeviceGetHandleByUUID(uuid)
            except Exception:
                return pynvml.nvmlDeviceGetHandleByIndex(dev)
        except Exception:
            return None


class StepMonitor:
    """Aggregates step boundaries into interval records. Hot path: ``on_step`` (a few attribute ops)."""

    def __init__(
        self, path: str | None, interval_s: float = 10.0, rank: int = 0, warn=None, batch_size: int | None = None
    ):
        self.path = path
        self.interval_s = interval_s
        self.rank = rank
        self._warn = warn or (lambda key, msg: None)
        self.batch_size = batch_size
        self._fd: int | None = None
        self._t_prev: float | None = None
        self._t_start = time.perf_counter()
        self._next_flush = self._t_start + interval_s
        self._next_gpu = self._t_start
        self._nvml = _Nvml()
        self._wall_offset = time.time() - self._t_start  # perf_counter -> unix time
        self._rows: list[tuple] = []  # per step: (step, end, duration, samples, tokens, profiled, gpu util)
        self._next_rows = self._t_start + STEP_FLUSH_S
        self._gpu_samples: list[float] = []
        self._all_gpu: list[float] = []
        # interval accumulators
        self._durs: list[float] = []
        self._samples = 0
        self._tokens = 0
        self._samples_known = True
        self._tokens_known = True
        self._profiled = 0
        # run accumulators (clean steps only: not profiled)
        self.all_durs = array("d")
        self.total_steps = 0
        self.total_samples = 0
        self.total_tokens = 0
        self.total_time_s = 0.0
        self.run_samples_known = True
        self.run_tokens_known = True
        self.last_step = 0

    # ----- hot path -----
    def on_step(self, now: float, step: int, samples: int | None, tokens: int | None, profiled: bool) -> None:
        prev = self._t_prev
        self._t_prev = now
        self.last_step = step
        if prev is None:  # the first boundary only opens the first measured step
            return
        dur = now - prev
        self._durs.append(dur)
        self.total_steps += 1
        self.total_time_s += dur
        if samples is None:
            samples = self.batch_size
        if samples is None:
            self._samples_known = self.run_samples_known = False
        else:
            self._samples += samples
            self.total_samples += samples
        if tokens is None:
            self._tokens_known = self.run_tokens_known = False
        else:
            self._tokens += tokens
            self.total_tokens += tokens
        if profiled:
            self._profiled += 1
        else:
            self.all_durs.append(dur)
        util = None
        if now >= self._next_gpu:
            self._next_gpu = now + 1.0
            util = self._nvml.sample()
            if util is not None:
                self._gpu_samples.append(util)
        rows = self._rows
        rows.append((step, now, dur, samples, tokens, profiled, util))
        if now >= self._next_flush:
            self.flush()
        elif now >= self._next_rows or len(rows) >= STEP_FLUSH_ROWS:
            self._flush_rows(now)

    # ----- records -----
    def _peak_mem(self) -> tuple[int | None, str]:
        torch = sys.modules.get("torch")
        try:
            if torch is not None and torch.cuda.is_initialized():
                return int(torch.cuda.max_memory_allocated()), "cuda"
        except Exception:
            pass
        return _rss_peak_bytes(), "rss"

    def _write(self, record: dict[str, Any]) -> None:
        self._write_text((json.dumps(record, separators=(",", ":")) + "\n").encode())

    def _write_text(self, data: bytes) -> None:
        if self.path is None:
            return
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            while data:  # a regular file takes it whole; a short write would leave the rest
                data = data[os.write(self._fd, data) :]
        except OSError as exc:
            self._warn(
                "monitor",
                f"cannot write the step monitor to {self.path} ({exc.strerror}); training continues without it",
            )
            self.path = None

    def _step_lines(self) -> bytes:
        """The buffered steps as JSON lines (encoded here, not in the hot path)."""
        rank, offset = int(self.rank), self._wall_offset
        return _STEP_LINES.encode_lines(
            [
                StepRecord(
                    SCHEMA,
                    rank,
                    int(step),
                    round(end + offset, 3),
                    dur,
                    samples / dur if samples is not None and dur > 0 else None,
                    tokens / dur if tokens is not None and dur > 0 else None,
                    None if util is None else float(util),
                    bool(profiled),
                )
                for step, end, dur, samples, tokens, profiled, util in self._rows
            ]
        )

    def _flush_rows(self, now: float) -> None:
        self._next_rows = now + STEP_FLUSH_S
        if self._rows:
            text = self._step_lines()
            self._rows = []
            self._write_text(text)

    def flush(self) -> None:
        now = time.perf_counter()
        self._next_flush = now + self.interval_s
        self._flush_rows(now)
        if not self._durs:
            return
        span = sum(self._durs)
        mem, mem_source = self._peak_mem()
        gpu = sum(self._gpu_samples) / len(self._gpu_samples) if self._gpu_samples else None
        self._all_gpu.extend(self._gpu_samples)
        rec = {
            "type": "interval",
            "schema": SCHEMA,
            "rank": self.rank,
            "pid": os.getpid(),
            "time": time.time(),
            "step": self.last_step,
            "steps": len(self._durs),
            "profiled_steps": self._profiled,
            "step_time_s": _quantiles(self._durs),
            "samples_per_s": self._samples / span if self._samples_known and span > 0 else None,
            "tokens_per_s": self._tokens / span if self._tokens_known and span > 0 and self._tokens else None,
            "peak_mem_bytes": mem,
            "mem_source": mem_source,
            "gpu_util_percent": gpu,
        }
        self._durs = []
        self._samples = self._tokens = self._profiled = 0
        self._samples_known = self._tokens_known = True
        self._gpu_samples = []
        self._write(rec)

    def summary(self) -> dict[str, Any]:
        mem, mem_source = self._peak_mem()
        t = self.total_time_s
        gpu = self._all_gpu
        return {
            "type": "summary",
            "schema": SCHEMA,
            "rank": self.rank,
            "pid": os.getpid(),
            "time": time.time(),
            "step": self.last_step,
            "steps": self.total_steps,
            "profiled_steps": self.total_steps - len(self.all_durs),
            "step_time_s": _quantiles(self.all_durs),
            "samples_per_s": self.total_samples / t if self.run_samples_known and t > 0 and self.total_steps else None,
            "tokens_per_s": self.total_tokens / t if self.run_tokens_known and t > 0 and self.total_tokens else None,
            "peak_mem_bytes": mem,
            "mem_source": mem_source,
            "gpu_util_percent": sum(gpu) / len(gpu) if gpu else None,
            "wall_s": time.perf_counter() - self._t_start,
        }

    def close(self) -> str:
        """Flush, append the summary record and return the one-line human summary."""
        self.flush()
        summ = self.summary()
        self._write(summ)
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None
        return format_summary(summ)


def _fmt_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return "?"  # pragma: no cover


def format_summary(s: dict[str, Any]) -> str:
    if not s.get("steps"):
        return "no training steps detected (no optimizer step, DataLoader batch or profile.step() call)"
    parts = [f"{s['steps']} step{'' if s['steps'] == 1 else 's'}"]
    st = s.get("step_time_s")
    if st:
        parts.append(f"{st['mean'] * 1e3:.1f} ms/step (p50 {st['p50'] * 1e3:.1f}, max {st['max'] * 1e3:.1f})")
    if s.get("samples_per_s") is not None:
        parts.append(f"{s['samples_per_s']:.1f} samples/s")
    if s.get("tokens_per_s") is not None:
        parts.append(f"{s['tokens_per_s']:.0f} tokens/s")
    parts.append(
        f"peak {'CUDA allocated' if s.get('mem_source') == 'cuda' else 'RSS'} {_fmt_bytes(s.get('peak_mem_bytes'))}"
    )
    if s.get("gpu_util_percent") is not None:
        parts.append(f"GPU util {s['gpu_util_percent']:.0f}%")
    if s.get("profiled_steps"):
        parts.append(f"{s['profiled_steps']} profiled steps excluded from step time")
    return ", ".join(parts)


@dataclass
class MonitorLog:
    """What ``load_monitor`` returns.

    ``intervals``: a pandas DataFrame, one row per interval record, with ``step_time_s`` flattened to
    ``step_time_mean_s``, ``step_time_p50_s``, ``step_time_p90_s``, ``step_time_max_s``.
    ``summaries``: the per-rank summary records (rank -> dict) of runs that ended cleanly.
    ``bad_lines``: line numbers that could not be parsed (e.g. a job killed mid-write).
    ``steps``: a pandas DataFrame, one row per step record (rank, step, time, step_time_s,
    samples_per_s, tokens_per_s, gpu_util_percent, profiled); empty for a file written before them.
    """

    path: str
    intervals: Any
    summaries: dict[int, dict[str, Any]] = field(default_factory=dict)
    bad_lines: list[int] = field(default_factory=list)
    steps: Any = None


def load_monitor(path: str | os.PathLike) -> MonitorLog:
    """Read a ``steps.jsonl`` written by the step monitor (or the directory holding it)."""
    import pandas as pd

    from ..errors import TraceError

    path = os.fspath(path)
    if os.path.isdir(path):
        path = os.path.join(path, "steps.jsonl")
    try:
        with open(path, "rb") as f:
            lines = f.read().splitlines()
    except OSError as exc:
        raise TraceError(
            path,
            "cannot be read",
            exc.strerror,
            "pass the steps.jsonl that `tracedoc run` wrote in its output directory",
        ) from None
    rows: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = []
    summaries: dict[int, dict[str, Any]] = {}
    bad: list[int] = []
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            bad.append(i)
            continue
        if not isinstance(rec, dict):
            bad.append(i)
            continue
        if rec.get("type") == "summary":
            summaries[int(rec.get("rank") or 0)] = rec
            continue
        if rec.get("type") == "step":
            steps.append(rec)
            continue
        if rec.get("type") != "interval":
            continue
        st = rec.pop("step_time_s", None) or {}
        for k in ("mean", "p50", "p90", "max"):
            rec[f"step_time_{k}_s"] = st.get(k)
        rows.append(rec)
    columns = [
        "rank",
        "pid",
        "time",
        "step",
        "steps",
        "profiled_steps",
        "step_time_mean_s",
        "step_time_p50_s",
        "step_time_p90_s",
        "step_time_max_s",
        "samples_per_s",
        "tokens_per_s",
        "peak_mem_bytes",
        "mem_source",
        "gpu_util_percent",
    ]
    df = pd.DataFrame(rows, columns=columns) if rows else pd.DataFrame(columns=columns)
    step_columns = [
        "rank",
        "step",
        "time",
        "step_time_s",
        "samples_per_s",
        "tokens_per_s",
        "gpu_util_percent",
        "profiled",
    ]
    step_df = pd.DataFrame(steps, columns=step_columns)
    step_df["profiled"] = step_df["profiled"].eq(True)
    return MonitorLog(path=path, intervals=df, summaries=summaries, bad_lines=bad, steps=step_df)
