"""The columnar model of a training log: one row per logged step, one float64 array per field.

Readers map each format's own names onto the canonical fields below through :data:`ALIASES`
(compared after :func:`normalise_key`: lower case, runs of other characters as ``_``). A value
that was logged as NaN or Infinity stays NaN or inf; a value that was not logged at a step is
NaN in ``columns`` and False in ``present``.
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np

# canonical field -> (unit, meaning)
FIELDS: dict[str, tuple[str, str]] = {
    "loss": ("loss", "training loss"),
    "eval_loss": ("loss", "validation loss"),
    "lr": ("1", "learning rate"),
    "grad_norm": ("1", "gradient norm (before clipping)"),
    "throughput": ("per s", "tokens/s, samples/s or steps/s; the unit is in LogSeries.units"),
    "step_time_s": ("s", "time per step (Megatron: average over the logging interval)"),
    "gpu_util_percent": ("percent", "GPU utilisation, mean over the GPUs logged"),
    "gpu_util_min_percent": ("percent", "GPU utilisation of the least busy GPU logged"),
    "memory_bytes": ("bytes", "device memory (peak or reserved, as logged)"),
    "skipped_iterations": ("count", "iterations skipped in the interval (loss-scale overflow, NaN)"),
    "nan_iterations": ("count", "iterations with a NaN/inf in the interval (Megatron)"),
    "loss_scale": ("1", "fp16 loss scale"),
    "tflops": ("TFLOP/s", "achieved TFLOP/s per GPU, as logged"),
    "mfu_percent": ("percent", "model FLOPs utilisation, as logged"),
}

# canonical field -> normalised aliases, most specific first; the first alias a log holds wins
ALIASES: dict[str, tuple[str, ...]] = {
    "step": ("step", "global_step", "iteration", "iter", "trainer_global_step", "train_global_step", "it",
             "optimizer_step", "steps"),
    "loss": ("loss", "train_loss_step", "train_loss", "lm_loss", "training_loss", "loss_step", "train_lm_loss",
             "loss_metrics_global_avg_loss", "total_loss", "train_total_loss", "trainer_loss"),
    "eval_loss": ("eval_loss", "val_loss", "validation_loss", "val_loss_epoch", "valid_loss", "eval_lm_loss"),
    "lr": ("lr", "learning_rate", "train_learning_rate", "learning_rate_0", "lr_0", "lr_adamw", "lr_adam", "lr_sgd",
           "optim_lr"),
    "grad_norm": ("grad_norm", "gradient_norm", "train_grad_norm", "total_grad_norm", "global_grad_norm",
                  "grad_norm_total", "gradnorm", "grad_norm_step"),
    "tokens_per_s": ("tokens_per_sec", "tokens_per_s", "tokens_per_second", "tps", "throughput_tps", "tok_per_s",
                     "train_tokens_per_second", "tokens_s", "tokens_per_sec_per_gpu", "wps"),
    "samples_per_s": ("samples_per_sec", "samples_per_s", "samples_sec", "samples_per_second", "train_samples_per_second",
                      "currsamplespersec", "sps", "images_per_sec", "img_per_sec", "examples_per_sec"),
    "steps_per_s": ("steps_per_sec", "steps_per_s", "steps_per_second", "it_per_s", "it_s", "iters_per_sec"),
    "throughput": ("throughput",),
    "step_time_s": ("step_time_s", "step_time", "time_per_step", "iter_time", "iteration_time", "time_per_iteration",
                    "batch_time", "step_duration_s", "time_metrics_end_to_end_s", "elapsed_time_per_iteration_s",
                    "iteration_time_s", "time_s", "step_time_mean_s"),
    "step_time_ms": ("step_time_ms", "iteration_time_ms", "elapsed_time_per_iteration_ms", "time_ms", "iter_time_ms",
                     "time_per_step_ms", "batch_time_ms"),
    "gpu_util_percent": ("gpu_util", "gpu_util_percent", "gpu_utilization", "utilization_gpu", "gpu_utilization_percent",
                         "gpu_usage", "util"),
    "memory_bytes": ("peak_mem_bytes", "memory_bytes", "max_memory_allocated_bytes", "mem_bytes", "max_memory_allocated"),
    "memory_gib": ("memory", "memory_gib", "memory_gb", "mem_gb", "max_memory_allocated_gb", "memory_max_active_gib",
                   "memory_max_reserved_gib", "gpu_mem_gb", "max_mem_gb", "mem"),
    "skipped_iterations": ("skipped_iterations", "number_of_skipped_iterations", "skipped", "skipped_iters", "skipped_steps"),
    "nan_iterations": ("nan_iterations", "number_of_nan_iterations", "nan_iters"),
    "loss_scale": ("loss_scale", "scaler_scale", "grad_scale"),
    "tflops": ("tflops", "throughput_per_gpu_tflop_s_gpu", "tflops_per_gpu", "model_tflops"),
    "mfu_percent": ("mfu", "mfu_percent", "mfu_pct"),
}

THROUGHPUT_UNITS = {"tokens_per_s": "tokens/s", "samples_per_s": "samples/s", "steps_per_s": "steps/s",
                    "throughput": "as logged"}

_NORMALISE_RE = re.compile(r"[^a-z0-9]+")


def normalise_key(key: str) -> str:
    """``"Train/Loss"`` -> ``"train_loss"``; ``"elapsed time per iteration (ms)"`` -> ``"elapsed_time_per_iteration_ms"``."""
    return _NORMALISE_RE.sub("_", key.lower()).strip("_")


def match_keys(keys) -> dict[str, str]:
    """Map alias groups to the log's own keys: ``{"loss": "train/loss", "step": "_step", ...}``."""
    by_norm: dict[str, str] = {}
    for key in keys:
        by_norm.setdefault(normalise_key(str(key)), key)
    out: dict[str, str] = {}
    for group, aliases in ALIASES.items():
        for alias in aliases:
            if alias in by_norm:
                out[group] = by_norm[alias]
                break
    return out


@dataclass
class LogSeries:
    """A training log as columns. ``step`` is int64 and strictly increasing after :meth:`finish`."""

    source: str
    format: str
    step: np.ndarray
    columns: dict[str, np.ndarray]
    present: dict[str, np.ndarray]
    units: dict[str, str] = field(default_factory=dict)
    fields_seen: dict[str, str] = field(default_factory=dict)  # canonical -> the log's own name
    header: dict[str, Any] = field(default_factory=dict)  # configuration the log itself states
    warnings: list[str] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)  # e.g. fp16 overflow messages

    def __len__(self) -> int:
        return int(self.step.size)

    def has(self, name: str) -> bool:
        p = self.present.get(name)
        return p is not None and bool(p.any())

    def col(self, name: str) -> np.ndarray | None:
        return self.columns[name] if self.has(name) else None

    def finish(self) -> "LogSeries":
        """Sort by step, merge rows that share a step (a later value wins, per field) and drop rows
        that hold no field at all. Resumed runs that log a step twice keep the later values."""
        if self.step.size == 0:
            return self
        steps = self.step
        if steps.size > 1 and not np.all(np.diff(steps) > 0):
            back = np.flatnonzero(np.diff(steps) <= 0)
            if back.size and np.any(np.diff(steps)[back] < 0):
                i = int(back[0])
                self.warnings.append(f"the step counter goes back from {int(steps[i])} to {int(steps[i + 1])} "
                                     "(a resumed run?); for steps logged twice the later values are used")
            uniq, inverse = np.unique(steps, return_inverse=True)
            order = np.arange(steps.size)
            for name, values in list(self.columns.items()):
                pres = self.present[name]
                last = np.full(uniq.size, -1, dtype=np.int64)
                np.maximum.at(last, inverse[pres], order[pres])
                got = last >= 0
                out = np.full(uniq.size, np.nan)
                out[got] = values[last[got]]
                self.columns[name] = out
                self.present[name] = got
            self.step = uniq.astype(np.int64)
        any_present = np.zeros(self.step.size, dtype=bool)
        for pres in self.present.values():
            any_present |= pres
        if not any_present.all():
            keep = any_present
            self.step = self.step[keep]
            for name in list(self.columns):
                self.columns[name] = self.columns[name][keep]
                self.present[name] = self.present[name][keep]
        return self


def to_float_column(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Values as logged -> (float64 array, present mask). None is absent; "NaN"/"Infinity" strings,
    numbers and numeric strings are values; lists (per-GPU values) become their mean; dicts with a
    ``mean`` (the step monitor's summaries) become that mean."""
    try:
        col = np.array(values, dtype=np.float64)  # None -> NaN; "NaN"/"Infinity" strings -> NaN/inf
    except (TypeError, ValueError):
        col = None
    if col is not None and col.ndim == 1:
        present = np.ones(col.size, dtype=bool)
        nan_at = np.flatnonzero(np.isnan(col))
        if nan_at.size:  # a NaN is a logged NaN, or a value that was not logged (None)
            present[nan_at] = [values[i] is not None for i in nan_at.tolist()]
        return col, present
    present = np.fromiter((v is not None for v in values), dtype=bool, count=len(values))
    out = np.full(len(values), np.nan)
    for i, v in enumerate(values):
        x = scalar(v)
        if x is None:
            present[i] = False
        else:
            out[i] = x
    return out, present


def scalar(v: Any) -> float | None:
    """One logged value as a float (lists: mean; dicts: their ``mean``/``p50``/``value``); None if not numeric."""
    if v is None or isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        return parse_number(v)
    if isinstance(v, (list, tuple)):
        xs = [scalar(x) for x in v]
        xs = [x for x in xs if x is not None]
        return float(np.mean(xs)) if xs else None
    if isinstance(v, dict):
        for key in ("mean", "p50", "value", "avg"):
            if key in v:
                return scalar(v[key])
    return None


def list_columns(values: list[Any]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """Per-GPU lists of the same length in every row: (mean, min, present) per row, vectorised;
    None when the values are not all such lists."""
    if not values or not isinstance(values[0], list) or not values[0]:
        return None
    width = len(values[0])
    try:  # len() of a None, a number or a dict row fails or differs: not the per-GPU-list case
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    except TypeError:
        return None
    if np.any(lengths != width):
        return None
    try:
        table = np.fromiter(chain.from_iterable(values), dtype=np.float64, count=width * len(values))
    except (TypeError, ValueError):
        return None
    table = table.reshape(len(values), width)
    with np.errstate(invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows are marked absent below
        return np.nanmean(table, axis=1), np.nanmin(table, axis=1), ~np.all(np.isnan(table), axis=1)


def list_minimum(values: list[Any]) -> tuple[np.ndarray, np.ndarray] | None:
    """For per-GPU lists: the least busy GPU per row; None when no value is a list."""
    if not any(isinstance(v, (list, tuple)) for v in values):
        return None
    out = np.full(len(values), np.nan)
    present = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):
        xs = [scalar(x) for x in v] if isinstance(v, (list, tuple)) else [scalar(v)]
        xs = [x for x in xs if x is not None]
        if xs:
            out[i] = min(xs)
            present[i] = True
    return out, present


_NUMBER_RE = re.compile(r"^[-+]?(\d[\d,]*\.?\d*|\.\d+)([eE][-+]?\d+)?$")


def parse_number(text: str) -> float | None:
    """``"1,234.5"`` -> 1234.5, ``"25.3%"`` -> 25.3, ``"NaN"``/``"inf"`` -> nan/inf; None if not a number."""
    t = text.strip().rstrip("%").strip()
    low = t.lower()
    if low in ("nan", "-nan", "+nan"):
        return float("nan")
    if low in ("inf", "+inf", "infinity", "+infinity"):
        return float("inf")
    if low in ("-inf", "-infinity"):
        return float("-inf")
    if _NUMBER_RE.match(t):
        return float(t.replace(",", ""))
    return None
