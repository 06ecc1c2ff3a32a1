"""Vectorised detectors on one log series: moving averages, robust trailing references, spikes,
episodes, periodicity, trend and learning-rate schedule shape.

All functions take numpy arrays indexed by log point (one per logged step) and return index-based
results; the caller turns indices into step numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..model.groups import distinct

MAD_TO_SIGMA = 1.4826  # MAD of a normal distribution x 1.4826 = its standard deviation
_CHUNK_BLOCKS = 20_000  # bound the memory of the windowed medians


def moving_average(x: np.ndarray, window: int) -> np.ndarray:
    """Trailing mean over the last ``window`` finite points (NaN/inf are skipped; NaN before the first)."""
    window = max(1, int(window))
    finite = np.isfinite(x)
    c = np.concatenate(([0.0], np.cumsum(np.where(finite, x, 0.0))))
    k = np.concatenate(([0], np.cumsum(finite)))
    hi = np.arange(1, x.size + 1)
    lo = np.maximum(hi - window, 0)
    counts = k[hi] - k[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, (c[hi] - c[lo]) / np.maximum(counts, 1), np.nan)


def forward_fill(x: np.ndarray) -> np.ndarray:
    """Non-finite points take the last finite value before them (leading ones the first finite value)."""
    finite = np.isfinite(x)
    if finite.all() or not finite.any():
        return x.copy()
    idx = np.where(finite, np.arange(x.size), 0)
    np.maximum.accumulate(idx, out=idx)
    out = x[idx]
    first = int(np.argmax(finite))
    out[:first] = x[first]
    return out


def trailing_reference(x: np.ndarray, window: int, with_mad: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Median and MAD of the ``window`` points before each point (the point itself excluded).

    The reference is recomputed every ``window // 2`` points (a block), so a point is compared with
    a window that ends at most a block before it; points before the first full window get NaN.
    Non-finite points are forward-filled so that they do not poison the window.
    """
    n = x.size
    med = np.full(n, np.nan)
    mad = np.full(n, np.nan)
    if n <= window or window < 3:
        return med, mad
    filled = forward_fill(x)
    block = max(1, window // 2)
    starts = np.arange(window, n, block)
    windows = sliding_window_view(filled, window)
    meds, mads = [], []
    for i in range(0, starts.size, _CHUNK_BLOCKS):
        w = windows[starts[i:i + _CHUNK_BLOCKS] - window]
        m = np.median(w, axis=1)
        meds.append(m)
        if with_mad:
            mads.append(np.median(np.abs(w - m[:, None]), axis=1))
    med[window:] = np.repeat(np.concatenate(meds), block)[: n - window]
    if with_mad:
        mad[window:] = np.repeat(np.concatenate(mads), block)[: n - window]
    return med, mad


def episodes(mask: np.ndarray, max_gap: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Start and end indices (inclusive) of runs of True, joining runs separated by <= ``max_gap`` points."""
    idx = np.flatnonzero(mask)
    if idx.size == 0:
        return idx, idx
    breaks = np.flatnonzero(np.diff(idx) > max_gap + 1)
    return idx[np.r_[0, breaks + 1]], idx[np.r_[breaks, idx.size - 1]]


@dataclass(frozen=True)
class Spikes:
    """Points far above their trailing median, grouped into episodes."""

    mask: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    peaks: np.ndarray  # index of the highest point of each episode
    scores: np.ndarray  # modified z-score at the peak
    reference: np.ndarray  # trailing median at the peak
    persistent: np.ndarray  # the level after the episode stays above the reference


def find_spikes(x: np.ndarray, window: int, z_threshold: float, min_rise_fraction: float,
                max_gap: int = 2) -> Spikes:
    """Robust spikes: modified z = 0.6745 (x - median) / MAD above ``z_threshold`` *and* a rise above
    ``min_rise_fraction`` of |median|, so that ordinary noise (small MAD) and flat plateaus (MAD 0)
    do not count. Contiguous spike points (gaps <= ``max_gap``) are one episode."""
    med, mad = trailing_reference(x, window)
    rise = x - med
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(mad > 0, 0.6745 * rise / mad, np.where(rise > 0, np.inf, 0.0))
        mask = np.isfinite(x) & (z > z_threshold) & (rise > min_rise_fraction * np.abs(med))
    starts, ends = episodes(mask, max_gap)
    peaks = np.array([s + int(np.nanargmax(np.where(mask[s:e + 1], x[s:e + 1], -np.inf))) for s, e in zip(starts, ends)],
                     dtype=np.int64)
    persistent = np.zeros(starts.size, dtype=bool)
    for i, (e, p) in enumerate(zip(ends, peaks)):
        after = x[e + 1: e + 1 + window]
        after = after[np.isfinite(after)]
        if after.size >= 3:
            persistent[i] = np.median(after) - med[p] > min_rise_fraction * abs(med[p]) + 3 * MAD_TO_SIGMA * mad[p]
    return Spikes(mask=mask, starts=starts, ends=ends, peaks=peaks,
                  scores=z[peaks] if peaks.size else np.array([]), reference=med[peaks] if peaks.size else np.array([]),
                  persistent=persistent)


@dataclass(frozen=True)
class Trend:
    diverging: bool
    start: int  # index where the rise begins (the smoothed minimum)
    rise_fraction: float  # (final level - minimum) / |minimum|
    to_nan: bool  # the series ends in NaN/inf


def find_divergence(x: np.ndarray, rise_fraction: float, blocks: int = 50) -> Trend:
    """Loss trending up: the final level sits ``rise_fraction`` above the minimum of the smoothed curve,
    well above the noise, and the curve after the minimum rises in most blocks. A series that ends in
    a run of NaN/inf diverged to NaN."""
    n = x.size
    finite = np.isfinite(x)
    tail = max(3, n // 20)
    if n >= 2 * tail and not finite[-tail:].any() and finite.any():
        return Trend(True, int(np.flatnonzero(finite)[-1]) + 1, float("inf"), True)
    nb = min(blocks, n // 5)
    if nb < 5:
        return Trend(False, 0, 0.0, False)
    edges = np.linspace(0, n, nb + 1).astype(np.int64)
    filled = forward_fill(x)
    smooth = np.array([np.median(filled[a:b]) for a, b in zip(edges[:-1], edges[1:])])
    m = int(np.argmin(smooth))
    lowest, final = smooth[m], smooth[-1]
    noise = MAD_TO_SIGMA * np.median(np.abs(np.diff(filled))) / np.sqrt(2)
    rise = final - lowest
    rel = float(rise / abs(lowest)) if lowest != 0 else float("inf")
    after = np.diff(smooth[m:])
    rising = after.size >= 3 and float(np.mean(after > 0)) >= 0.6
    diverging = bool(m <= nb - 4 and rising and rel > rise_fraction and rise > 3 * noise)
    return Trend(diverging, int(edges[m]), rel, False)


@dataclass(frozen=True)
class Period:
    period: int  # in steps
    phase: int
    hits: np.ndarray  # indices of the slow points on the period


def find_period(slow_steps: np.ndarray, slow_idx: np.ndarray, all_steps: np.ndarray, min_hits: int = 3,
                min_coverage: float = 0.6) -> Period | None:
    """Slow steps that recur every k steps: the most common spacing k between slow steps, the most
    common phase modulo k, at least ``min_hits`` of them and on at least ``min_coverage`` of the
    logged steps with that phase (so that a few chance coincidences are not a period)."""
    if slow_steps.size < min_hits:
        return None
    spacing = np.diff(slow_steps)
    log_stride = max(1, int(np.median(np.diff(all_steps)))) if all_steps.size > 1 else 1
    spacing = spacing[spacing >= 2 * log_stride]
    if spacing.size == 0:
        return None
    values, counts = np.unique(spacing, return_counts=True)
    best = None
    for k in values[np.argsort(-counts, kind="stable")][:5]:
        k = int(k)
        phases, pcounts = np.unique(slow_steps % k, return_counts=True)
        phase = int(phases[np.argmax(pcounts)])
        on = slow_steps % k == phase
        hits = int(on.sum())
        span = (all_steps >= slow_steps[on][0]) & (all_steps <= all_steps[-1])
        expected = int(np.sum(all_steps[span] % k == phase))
        if hits >= min_hits and expected and hits / expected >= min_coverage:
            if best is None or hits > best.hits.size:
                best = Period(k, phase, slow_idx[on])
    return best


def lr_schedule(steps: np.ndarray, lr: np.ndarray) -> dict:
    """Shape of the learning-rate schedule: warm-up length, decay kind, and upward jumps after the peak
    (a resumed run whose scheduler state was not restored)."""
    ok = np.isfinite(lr)
    steps, lr = steps[ok], lr[ok]
    if lr.size < 3:
        return {"shape": "unknown", "warmup_steps": None, "peak_lr": None, "final_lr": None, "jump_steps": []}
    peak_i = int(np.argmax(lr))
    peak, final = float(lr[peak_i]), float(lr[-1])
    if np.max(lr) <= 1.01 * np.min(lr):
        return {"shape": "constant", "warmup_steps": 0, "peak_lr": peak, "final_lr": final, "jump_steps": []}
    warm = peak_i > 0 and lr[0] < 0.5 * peak and float(np.mean(np.diff(lr[: peak_i + 1]) >= 0)) >= 0.9
    parts = [f"warm-up to step {int(steps[peak_i])}"] if warm else []
    decay = lr[peak_i:]
    jumps = np.flatnonzero(np.diff(decay) > 0.1 * decay[:-1]) + peak_i + 1
    if decay.size >= 3 and final < 0.9 * peak:
        t = (steps[peak_i:] - steps[peak_i]) / max(1, steps[-1] - steps[peak_i])
        y = (decay - final) / (peak - final)
        errors = {"linear": float(np.mean(np.abs(y - (1 - t)))),
                  "cosine": float(np.mean(np.abs(y - 0.5 * (1 + np.cos(np.pi * t))))),
                  "inverse-sqrt": float(np.mean(np.abs(y - _inv_sqrt(t))))}
        kind = min(errors, key=errors.get)
        levels = distinct(np.round(decay / peak, 6)).size
        if levels <= 6:
            kind = "step"
        elif errors[kind] > 0.1:
            kind = "other"
        parts.append(f"{kind} decay")
    elif decay.size >= 3:
        parts.append("constant after the peak")
    return {"shape": ", then ".join(parts) or "unknown", "warmup_steps": int(steps[peak_i] - steps[0]) if warm else 0,
            "peak_lr": peak, "final_lr": final, "jump_steps": [int(steps[j]) for j in jumps[:20]]}


def _inv_sqrt(t: np.ndarray) -> np.ndarray:
    s = 1.0 / np.sqrt(1.0 + 99.0 * t)  # a 1/sqrt(step) decay over two decades, normalised to 1..0
    return (s - s[-1]) / (s[0] - s[-1]) if s[0] != s[-1] else s
