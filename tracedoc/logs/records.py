"""Build a :class:`LogSeries` from records (JSON objects, CSV rows, parsed text lines).

Readers hand over a getter ``values(key) -> list`` (one value or None per record) and the keys the
log holds; this module maps the keys onto the canonical fields, converts units (ms -> s, GiB ->
bytes) and merges rows that share a step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from .errors import LogError
from .runs import recognise, segment_step_times
from .series import (
    POSITION_FIELDS,
    THROUGHPUT_UNITS,
    LogSeries,
    clock_tick,
    duration_column,
    field_overrides,
    list_columns,
    list_minimum,
    match_keys,
    to_float_column,
)

GIB = 2**30


class Converted:
    """A column a reader already converted to float64, with its present mask."""

    __slots__ = ("values", "present")

    def __init__(self, values: np.ndarray, present: np.ndarray):
        self.values, self.present = values, present

    def __len__(self) -> int:
        return int(self.values.size)


class PerGpu:
    """Per-GPU values already reduced to the mean and the least busy GPU per record."""

    __slots__ = ("mean", "minimum", "present")

    def __init__(self, mean: np.ndarray, minimum: np.ndarray, present: np.ndarray):
        self.mean, self.minimum, self.present = mean, minimum, present

    def __len__(self) -> int:
        return int(self.mean.size)


def _convert(raw: Any) -> tuple[np.ndarray, np.ndarray]:
    if isinstance(raw, Converted):
        return raw.values, raw.present
    return to_float_column(raw)


_THROUGHPUT_ORDER = ("tokens_per_s", "samples_per_s", "steps_per_s", "throughput")


def usable_groups(keys: Iterable[str]) -> dict[str, str]:
    """The alias groups found among ``keys``, without ``step`` (which alone says nothing)."""
    found = match_keys(keys)
    return {g: k for g, k in found.items() if g not in POSITION_FIELDS}


def build_series(
    source: str,
    fmt: str,
    keys: Iterable[str],
    values: Callable[[str], list[Any]],
    count: int,
    *,
    warnings: list[str] | None = None,
    header: dict | None = None,
) -> LogSeries:
    """Map ``keys`` to canonical fields and convert each column; raise :class:`LogError` when none match."""
    keys = list(keys)
    found = match_keys(keys)
    missing = [f"{g}={k}" for g, k in field_overrides().items() if g not in found]
    if missing and not any(g not in POSITION_FIELDS for g in found):
        shown = ", ".join(repr(k) for k in keys[:12]) + (" ..." if len(keys) > 12 else "")
        raise LogError(
            source,
            f"--field {', '.join(missing)}: no such field in this {fmt} log",
            f"fields {shown}" if keys else "no fields at all",
            "map a field the log has",
        )
    if not any(g not in POSITION_FIELDS for g in found):
        shown = ", ".join(repr(k) for k in keys[:12]) + (" ..." if len(keys) > 12 else "")
        raise LogError(
            source,
            f"no training-log field recognised in this {fmt} log",
            f"fields {shown}" if keys else "no fields at all",
            "log at least one of loss, lr, grad_norm, tokens_per_sec, samples_per_sec, step_time_s "
            "(aliases are listed in tracedoc/logs/series.py)",
        )
    warnings = list(warnings or [])
    columns: dict[str, np.ndarray] = {}
    present: dict[str, np.ndarray] = {}
    units: dict[str, str] = {}
    seen: dict[str, str] = {}

    def put(name: str, group: str, scale: float = 1.0) -> None:
        key = found[group]
        raw = values(key)
        if isinstance(raw, PerGpu):
            lists = (raw.mean, raw.minimum, raw.present) if name == "gpu_util_percent" else None
            raw = Converted(raw.mean, raw.present)
        else:
            lists = list_columns(raw) if name == "gpu_util_percent" and not isinstance(raw, Converted) else None
        if lists is not None:  # the common per-GPU case: every row a list of the same length
            columns[name], columns["gpu_util_min_percent"], pres = lists
            present[name] = present["gpu_util_min_percent"] = pres
            seen[name] = seen["gpu_util_min_percent"] = key
            return
        col, pres = duration_column(raw) if name == "elapsed_s" and isinstance(raw, list) else _convert(raw)
        if scale != 1.0:
            col = col * scale
        columns[name], present[name], seen[name] = col, pres, key
        if name == "gpu_util_percent" and not isinstance(raw, Converted):
            low = list_minimum(raw)
            if low is not None:
                columns["gpu_util_min_percent"], present["gpu_util_min_percent"] = low
                seen["gpu_util_min_percent"] = key

    for name in (
        "loss",
        "eval_loss",
        "lr",
        "grad_norm",
        "gpu_util_percent",
        "skipped_iterations",
        "nan_iterations",
        "loss_scale",
        "tflops",
        "mfu_percent",
        "generation_time_s",
        "training_time_s",
        "epoch",
        "total_tokens",
    ):
        if name in found:
            put(name, name)
    for group in _THROUGHPUT_ORDER:  # the first throughput field that holds a value
        if group in found:
            put("throughput", group)
            if present["throughput"].any():
                units["throughput"] = THROUGHPUT_UNITS[group]
                break
            del columns["throughput"], present["throughput"], seen["throughput"]
    if "step_time_s" in found:
        put("step_time_s", "step_time_s")
    elif "step_time_ms" in found:
        put("step_time_s", "step_time_ms", 1e-3)
    if "elapsed_s" in found:
        put("elapsed_s", "elapsed_s")
    elif "elapsed_ms" in found:
        put("elapsed_s", "elapsed_ms", 1e-3)
    if "memory_bytes" in found:
        put("memory_bytes", "memory_bytes")
    elif "memory_gib" in found:
        put("memory_bytes", "memory_gib", GIB)

    if "step" in found:
        step_f, step_ok = _convert(values(found["step"]))
        seen["step"] = found["step"]
        if not step_ok.all():
            missing = int((~step_ok).sum())
            warnings.append(f"{missing} of {count} records have no {found['step']!r}; they are left out")
            for name in columns:
                columns[name], present[name] = columns[name][step_ok], present[name][step_ok]
            step_f = step_f[step_ok]
        step_f = _usable_steps(step_f, found["step"], columns, present, warnings)
        if step_f.size and not np.array_equal(step_f, np.floor(step_f)):
            warnings.append(f"{found['step']!r} holds fractional values (an epoch?); record numbers are used as steps")
            step = np.arange(step_f.size, dtype=np.int64)
        else:
            step = step_f.astype(np.int64)
    else:
        warnings.append("no step field (step, iteration, global_step, ...); record numbers are used as steps")
        step = np.arange(count, dtype=np.int64)
    if fmt.startswith("LLaMA-Factory"):
        _llamafactory_throughput(columns, present, units, seen)
    _positive_times(columns, present, seen, warnings)
    story = recognise(step, present, columns.get("elapsed_s"))
    if not story.keep.all():
        step = step[story.keep]
        for name in columns:
            columns[name], present[name] = columns[name][story.keep], present[name][story.keep]
        story.segment = story.segment[story.keep]
    if "step_time_s" not in columns and "elapsed_s" in columns and story.lines:
        times = segment_step_times(step, columns["elapsed_s"], present["elapsed_s"], story.segment)
        columns["step_time_s"], present["step_time_s"] = times, np.isfinite(times)
        seen["step_time_s"] = f"differences of {seen['elapsed_s']!r} within each run segment"
    series = LogSeries(
        source=source,
        format=fmt,
        step=step,
        columns=columns,
        present=present,
        units=units,
        fields_seen=seen,
        header=dict(header or {}),
        warnings=warnings,
        story=story.lines,
        resume_steps=story.resumes,
    )
    if "step_time_s" in columns and seen["step_time_s"].startswith("differences"):
        series.clock_tick_s = clock_tick(columns["elapsed_s"])
    series.finish()
    series.derive_step_time()
    return series


MAX_STEP = 2.0**53  # beyond this a float64 step is no longer an exact integer


def _usable_steps(step_f: np.ndarray, key: str, columns: dict, present: dict, warnings: list[str]) -> np.ndarray:
    """Leave out records whose step cannot be a step number: inf/NaN (1e400 in a log), negative, or past 2^53."""
    with np.errstate(invalid="ignore"):
        ok = np.isfinite(step_f) & (step_f >= 0) & (step_f <= MAX_STEP)
    if ok.all():
        return step_f
    bad = np.flatnonzero(~ok)
    warnings.append(
        f"{bad.size} records have a {key!r} that is not a step number (first: {float(step_f[bad[0]])!r}; "
        f"steps are whole numbers from 0 to 2^53); they are left out"
    )
    for name in columns:
        columns[name], present[name] = columns[name][ok], present[name][ok]
    return step_f[ok]


def _llamafactory_throughput(columns: dict, present: dict, units: dict, seen: dict) -> None:
    """LLaMA-Factory's ``throughput`` is tokens/s, and "0.00" where it was not measured: not a value."""
    if "throughput" not in columns or seen.get("throughput") != "throughput":
        return
    with np.errstate(invalid="ignore"):
        present["throughput"] &= columns["throughput"] > 0
    if present["throughput"].any():
        units["throughput"] = "tokens/s"
    else:
        del columns["throughput"], present["throughput"], seen["throughput"]
        units.pop("throughput", None)


def _positive_times(columns: dict, present: dict, seen: dict, warnings: list[str]) -> None:
    """A step time or throughput of zero or less is not a measurement: it is left out, with a warning."""
    for name in ("step_time_s", "throughput"):
        if name not in columns:
            continue
        with np.errstate(invalid="ignore"):
            bad = present[name] & ~(columns[name] > 0) & ~np.isnan(columns[name])
        if bad.any():
            first = float(columns[name][np.flatnonzero(bad)[0]])
            warnings.append(
                f"{int(bad.sum())} values of {seen.get(name, name)!r} are zero or negative (first: "
                f"{first:g}), which no {name.replace('_s', '').replace('_', ' ')} can be; they are left out"
            )
            present[name] = present[name] & ~bad
            columns[name] = np.where(bad, np.nan, columns[name])
