"""The columnar model of a training log: one row per logged step, one float64 array per field.

Readers map each format's own names onto the canonical fields below through :data:`ALIASES`
(compared after :func:`normalise_key`: lower case, runs of other characters as ``_``). A value
that was logged as NaN or Infinity stays NaN or inf; a value that was not logged at a step is
NaN in ``columns`` and False in ``present``.
"""

from __future__ import annotations

import re
import warnings
from contextvars import ContextVar
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
    "elapsed_s": ("s", "training time since the start, as logged (step times are its differences)"),
    "generation_time_s": ("s", "RLHF: time the step spent generating experience"),
    "training_time_s": ("s", "RLHF: time the step spent training actor and critic"),
    "epoch": ("epoch", "the epoch (fractional where the log says how far into it)"),
    "total_tokens": ("tokens", "tokens trained on so far, as logged"),
}

# canonical field -> normalised aliases, most specific first; the first alias a log holds wins
ALIASES: dict[str, tuple[str, ...]] = {
    "step": (
        "step",
        "global_step",
        "iteration",
        "iter",
        "trainer_global_step",
        "train_global_step",
        "it",
        "optimizer_step",
        "current_steps",
        "steps",
    ),
    "loss": (
        "loss",
        "train_loss_step",
        "train_loss",
        "lm_loss",
        "training_loss",
        "loss_step",
        "train_lm_loss",
        "loss_metrics_global_avg_loss",
        "total_loss",
        "train_total_loss",
        "trainer_loss",
    ),
    "eval_loss": ("eval_loss", "val_loss", "validation_loss", "val_loss_epoch", "valid_loss", "eval_lm_loss"),
    "lr": (
        "lr",
        "learning_rate",
        "train_learning_rate",
        "learning_rate_0",
        "lr_0",
        "lr_adamw",
        "lr_adam",
        "lr_sgd",
        "optim_lr",
    ),
    "grad_norm": (
        "grad_norm",
        "gradient_norm",
        "train_grad_norm",
        "total_grad_norm",
        "global_grad_norm",
        "grad_norm_total",
        "gradnorm",
        "grad_norm_step",
    ),
    "tokens_per_s": (
        "tokens_per_sec",
        "tokens_per_s",
        "tokens_per_second",
        "tps",
        "throughput_tps",
        "tok_per_s",
        "tok_s",
        "train_tokens_per_second",
        "tokens_s",
        "tokens_per_sec_per_gpu",
        "wps",
    ),
    "samples_per_s": (
        "samples_per_sec",
        "samples_per_s",
        "samples_sec",
        "samples_per_second",
        "train_samples_per_second",
        "currsamplespersec",
        "sps",
        "images_per_sec",
        "img_per_sec",
        "examples_per_sec",
    ),
    "steps_per_s": ("steps_per_sec", "steps_per_s", "steps_per_second", "it_per_s", "it_s", "iters_per_sec"),
    "throughput": ("throughput",),
    "step_time_s": (
        "step_time_s",
        "step_time",
        "time_per_step",
        "iter_time",
        "iteration_time",
        "time_per_iteration",
        "batch_time",
        "step_duration_s",
        "time_metrics_end_to_end_s",
        "elapsed_time_per_iteration_s",
        "iteration_time_s",
        "time_s",
        "step_time_mean_s",
    ),
    "step_time_ms": (
        "step_time_ms",
        "iteration_time_ms",
        "elapsed_time_per_iteration_ms",
        "time_ms",
        "iter_time_ms",
        "time_per_step_ms",
        "batch_time_ms",
    ),
    "gpu_util_percent": (
        "gpu_util",
        "gpu_util_percent",
        "gpu_utilization",
        "utilization_gpu",
        "gpu_utilization_percent",
        "gpu_usage",
        "util",
    ),
    "memory_bytes": (
        "peak_mem_bytes",
        "memory_bytes",
        "max_memory_allocated_bytes",
        "mem_bytes",
        "max_memory_allocated",
    ),
    "memory_gib": (
        "memory",
        "memory_gib",
        "memory_gb",
        "mem_gb",
        "max_memory_allocated_gb",
        "memory_max_active_gib",
        "memory_max_reserved_gib",
        "gpu_mem_gb",
        "max_mem_gb",
        "mem",
    ),
    "skipped_iterations": (
        "skipped_iterations",
        "number_of_skipped_iterations",
        "skipped",
        "skipped_iters",
        "skipped_steps",
    ),
    "nan_iterations": ("nan_iterations", "number_of_nan_iterations", "nan_iters"),
    "loss_scale": ("loss_scale", "scaler_scale", "grad_scale"),
    "tflops": ("tflops", "throughput_per_gpu_tflop_s_gpu", "tflops_per_gpu", "model_tflops"),
    "mfu_percent": ("mfu", "mfu_percent", "mfu_pct"),
    # cumulative training time: nanoGPT's train_time, W&B's _runtime
    # (LLaMA-Factory's elapsed_time is a "H:MM:SS" / "N days, H:MM:SS" string: :func:`parse_duration`)
    "elapsed_s": (
        "elapsed_s",
        "elapsed_time_s",
        "train_time_s",
        "training_time_elapsed_s",
        "runtime",
        "wall_time_s",
        "time_elapsed_s",
        "elapsed_time",
    ),
    "elapsed_ms": ("train_time_ms", "elapsed_ms", "elapsed_time_ms", "time_elapsed_ms"),
    "generation_time_s": ("generation_time_s", "generate_time_s", "gen_time_s"),
    "training_time_s": ("training_time_s", "train_phase_time_s"),
    "epoch": ("epoch", "train_epoch"),
    "total_tokens": ("total_tokens", "num_input_tokens_seen", "tokens_seen", "consumed_tokens"),
}
# fields that say where or when a record is, not what training did: a log of only these has nothing to analyse
POSITION_FIELDS = ("step", "epoch", "total_tokens")

THROUGHPUT_UNITS = {
    "tokens_per_s": "tokens/s",
    "samples_per_s": "samples/s",
    "steps_per_s": "steps/s",
    "throughput": "as logged",
}

_NORMALISE_RE = re.compile(r"[^a-z0-9]+")
_EVAL_PREFIX_RE = re.compile(r"(?:^|[^a-z])(?:eval|val|valid|validation|test|dev)(?:$|[^a-z])", re.IGNORECASE)


def normalise_key(key: str) -> str:
    """``"Train/Loss"`` -> ``"train_loss"``; ``"elapsed time per iteration (ms)"`` ->
    ``"elapsed_time_per_iteration_ms"``."""
    return _NORMALISE_RE.sub("_", key.lower()).strip("_")


# canonical field -> the log's own key, set by the user (``tracedoc logs --field loss=train/lm_loss``) for
# the duration of one read (see :func:`tracedoc.logs.reader.read_log`)
FIELD_OVERRIDES: ContextVar[dict[str, str] | None] = ContextVar("FIELD_OVERRIDES", default=None)


def field_overrides() -> dict[str, str]:
    """The user's field map in effect for the current read ({} when none)."""
    return FIELD_OVERRIDES.get() or {}


MAPPABLE = tuple(ALIASES)  # the names --field accepts


def match_keys(keys) -> dict[str, str]:
    """Map alias groups to the log's own keys: ``{"loss": "train/loss", "step": "_step", ...}``.
    A key the user mapped (``FIELD_OVERRIDES``) wins over the aliases, and is used for nothing else."""
    keys = list(keys)
    by_norm: dict[str, str] = {}
    for key in keys:
        by_norm.setdefault(normalise_key(str(key)), key)
    for key in keys:  # W&B / TensorBoard names: "perf/tokens_per_second" also answers to its last part
        head, sep, last = str(key).rpartition("/")
        if sep and not _EVAL_PREFIX_RE.search(head):
            by_norm.setdefault(normalise_key(last), key)
    out: dict[str, str] = {}
    taken: set[str] = set()
    for group, wanted in field_overrides().items():
        key = wanted if wanted in keys else by_norm.get(normalise_key(wanted))
        if key is not None:
            out[group] = key
            taken.add(key)
    for group, aliases in ALIASES.items():
        if group in out:
            continue
        for alias in aliases:
            key = by_norm.get(alias)
            if key is not None and key not in taken:
                out[group] = key
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
    # what the log says happened at a step: fp16 overflows ("overflow", with the loss scale), evaluations
    # ("eval"), checkpoint saves ("save"), garbage collections ("gc"); each {"kind", "step", ...}
    events: list[dict[str, Any]] = field(default_factory=list)
    # engines logged side by side in the same file (RLHF: the critic beside the actor), by name
    companions: dict[str, "LogSeries"] = field(default_factory=dict)
    name: str | None = None  # this series' name among its companions ("actor")
    # how the log's pieces make one run, a line each: resumes, second writers, joined files (:mod:`.runs`)
    story: list[str] = field(default_factory=list)
    resume_steps: list[int] = field(default_factory=list)  # the first step logged after each resume
    # the resolution of the elapsed-time field step times were derived from (1.0 for "H:MM:SS"), if any
    clock_tick_s: float | None = None

    def __len__(self) -> int:
        return int(self.step.size)

    def has(self, name: str) -> bool:
        p = self.present.get(name)
        return p is not None and bool(p.any())

    def col(self, name: str) -> np.ndarray | None:
        return self.columns[name] if self.has(name) else None

    def derive_step_time(self) -> None:
        """Step times from a cumulative training-time field (nanoGPT ``train_time``, W&B ``_runtime``) where
        the log has no step time: the time between two logged points over the steps between them. A clock
        that goes back (a restart) gives no step time there."""
        if self.has("step_time_s") or not self.has("elapsed_s"):
            return
        at = np.flatnonzero(self.present["elapsed_s"])
        if at.size < 2:
            return
        t, s = self.columns["elapsed_s"][at], self.step[at].astype(np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            per = np.diff(t) / np.diff(s)
        ok = np.isfinite(per) & (per > 0)
        out = np.full(self.step.size, np.nan)
        out[at[1:][ok]] = per[ok]
        self.columns["step_time_s"] = out
        self.present["step_time_s"] = np.isfinite(out)
        self.fields_seen["step_time_s"] = f"differences of {self.fields_seen.get('elapsed_s', 'elapsed time')!r}"
        self.clock_tick_s = clock_tick(t)

    def finish(self) -> "LogSeries":
        """Sort by step, merge rows that share a step (a later value wins, per field) and drop rows
        that hold no field at all. Resumed runs that log a step twice keep the later values."""
        if self.step.size == 0:
            return self
        steps = self.step
        if steps.size > 1 and not np.all(np.diff(steps) > 0):
            back = np.flatnonzero(np.diff(steps) <= 0)
            if back.size and np.any(np.diff(steps)[back] < 0) and not self.story:
                i = int(back[0])
                self.warnings.append(
                    f"the step counter goes back from {int(steps[i])} to {int(steps[i + 1])} "
                    "(a resumed run?); for steps logged twice the later values are used"
                )
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


def clock_tick(t: np.ndarray) -> float | None:
    """The resolution of a clock's readings: the coarsest of 1 s, 0.1 s, ... 1 us that every finite reading
    is a whole multiple of; None when finer."""
    t = t[np.isfinite(t)]
    if t.size == 0:
        return None
    for tick in (1.0, 0.1, 0.01, 1e-3, 1e-4, 1e-5, 1e-6):
        q = t / tick
        if np.all(np.abs(q - np.round(q)) <= 1e-6 * np.maximum(1.0, np.abs(q))):
            return tick
    return None


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


# no two quantifiers that can match the same characters next to each other: linear in the text's length
_NUMBER_RE = re.compile(r"^[-+]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")


_DURATION_RE = re.compile(r"^(?:(\d{1,9}) days?, )?(\d{1,9}):(\d{2}):(\d{2}(?:\.\d{1,9})?)$")


def parse_duration(value: Any) -> float | None:
    """Seconds from a number or a ``timedelta`` string (``"1:02:03"``, ``"2 days, 1:02:03"``,
    ``"0:00:01.5"``); None for anything else."""
    if isinstance(value, str):
        m = _DURATION_RE.match(value.strip())
        if m:
            days, h, mi, sec = m.groups()
            return int(days or 0) * 86400.0 + int(h) * 3600.0 + int(mi) * 60.0 + float(sec)
    return scalar(value)


def duration_column(values: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Values of an elapsed-time field -> (seconds, present): numbers or ``timedelta`` strings."""
    if not any(isinstance(v, str) and ":" in v for v in values):
        return to_float_column(values)
    out = np.full(len(values), np.nan)
    present = np.zeros(len(values), dtype=bool)
    for i, v in enumerate(values):
        x = parse_duration(v)
        if x is not None:
            out[i], present[i] = x, True
    return out, present


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
    if _NUMBER_RE.match(t):  # float() reads any number of digits in linear time; past 1.8e308 it is inf
        return float(t.replace(",", ""))
    return None
