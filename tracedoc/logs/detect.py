"""Vectorised detectors on one log series: moving averages, robust trailing references, spikes,
episodes, periodicity, trend and learning-rate schedule shape.

All functions take numpy arrays indexed by log point (one per logged step) and return index-based
results; the caller turns indices into step numbers with ``anomaly``, the one row every detection reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..model.groups import distinct
from ..model.plain import plain_finite

MAD_TO_SIGMA = 1.4826  # MAD of a normal distribution x 1.4826 = its standard deviation
_CHUNK_BLOCKS = 20_000  # bound the memory of the windowed medians


def moving_average(x: np.ndarray, window: int) -> np.ndarray:
    """Centred mean over ``window`` points (``window // 2`` on each side) of the finite points; near the
    ends the window shrinks symmetrically (the first point is itself, the second the mean of three...), so
    the curve neither lags the data nor bends where a trailing window would fill."""
    window = max(1, int(window))
    n = x.size
    if n == 0:
        return np.array([], dtype=np.float64)
    finite = np.isfinite(x)
    c = np.concatenate(([0.0], np.cumsum(np.where(finite, x, 0.0))))
    k = np.concatenate(([0], np.cumsum(finite)))
    i = np.arange(n)
    half = np.minimum(window // 2, np.minimum(i, n - 1 - i))
    lo, hi = i - half, i + half + 1
    counts = k[hi] - k[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, (c[hi] - c[lo]) / np.maximum(counts, 1), np.nan)


def trailing_mean(x: np.ndarray, window: int) -> float | None:
    """Mean of the last ``window`` finite points (None when there are none)."""
    tail = x[np.isfinite(x)][-max(1, int(window)) :]
    return float(np.mean(tail)) if tail.size else None


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
        w = windows[starts[i : i + _CHUNK_BLOCKS] - window]
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
    relative: np.ndarray  # the peak fired on its ratio to the median, not on its z-score


def find_spikes(
    x: np.ndarray,
    window: int,
    z_threshold: float,
    min_rise_fraction: float,
    max_gap: int = 2,
    ratio: float | None = None,
    ratio_z: float = 3.5,
    reference: tuple[np.ndarray, np.ndarray] | None = None,
) -> Spikes:
    """Robust spikes: modified z = 0.6745 (x - median) / MAD above ``z_threshold`` *and* a rise above
    ``min_rise_fraction`` of |median|, so that ordinary noise (small MAD) and flat plateaus (MAD 0)
    do not count; or, relative to the local level, at least ``ratio`` x a positive median with z above
    ``ratio_z`` (the outlier bar of Iglewicz and Hoaglin), so that a loss doubling from 0.01 counts even
    where the low loss is noisy in relative terms. Contiguous spike points (gaps <= ``max_gap``) are one
    episode. ``reference``: the (median, MAD) of :func:`trailing_reference`, when already computed."""
    med, mad = reference if reference is not None else trailing_reference(x, window)
    rise = x - med
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.where(mad > 0, 0.6745 * rise / mad, np.where(rise > 0, np.inf, 0.0))
        by_z = np.isfinite(x) & (z > z_threshold) & (rise > min_rise_fraction * np.abs(med))
        by_ratio = np.isfinite(x) & (med > 0) & (x >= (ratio or np.inf) * med) & (z > ratio_z)
    mask = by_z | by_ratio
    starts, ends = episodes(mask, max_gap)
    peaks = np.array(
        [s + int(np.nanargmax(np.where(mask[s : e + 1], x[s : e + 1], -np.inf))) for s, e in zip(starts, ends)],
        dtype=np.int64,
    )
    persistent = np.zeros(starts.size, dtype=bool)
    for i, (e, p) in enumerate(zip(ends, peaks)):
        after = x[e + 1 : e + 1 + window]
        after = after[np.isfinite(after)]
        if after.size >= 3:
            persistent[i] = np.median(after) - med[p] > min_rise_fraction * abs(med[p]) + 3 * MAD_TO_SIGMA * mad[p]
    none = np.array([])
    return Spikes(
        mask=mask,
        starts=starts,
        ends=ends,
        peaks=peaks,
        scores=z[peaks] if peaks.size else none,
        reference=med[peaks] if peaks.size else none,
        persistent=persistent,
        relative=(by_ratio & ~by_z)[peaks] if peaks.size else np.zeros(0, dtype=bool),
    )


@dataclass(frozen=True)
class Bump:
    start: int
    end: int  # last index above the band
    peak: int
    reference: float  # the level before the bump
    mean_ratio: float  # mean of the smoothed curve over the bump / reference
    max_ratio: float


def find_bumps(
    x: np.ndarray,
    window: int,
    rise_fraction: float = 0.1,
    z: float = 4.0,
    smooth: int = 5,
    min_points: int | None = None,
    reference: tuple[np.ndarray, np.ndarray] | None = None,
) -> list[Bump]:
    """Sustained bumps: the curve (a running median of ``smooth`` points, against single-point noise) rises
    more than ``rise_fraction`` and ``z`` robust sigmas above the level before it, stays up for at least
    ``min_points`` points (half the window: shorter ones are spike episodes), and comes back under half
    that rise before the end. The level is the trailing median where the bump starts, held for its length
    (a trailing median would follow the bump up and hide it).

    A running median of k points is above a level exactly when more than k // 2 of its points are, so the
    curve is never computed whole: counts of points above the level in each window decide."""
    n = x.size
    min_points = max(smooth, window // 2) if min_points is None else min_points
    if n < window + min_points + 2:
        return []
    filled = forward_fill(x)
    med, mad = reference if reference is not None else trailing_reference(filled, window)
    with np.errstate(invalid="ignore"):
        band = np.maximum(rise_fraction * np.abs(med), z * MAD_TO_SIGMA * mad)
        above = _majority(np.isfinite(med) & (filled - med > band) & (band > 0), smooth)
    out: list[Bump] = []
    candidates = np.flatnonzero(above)
    i = 0
    while True:
        at = int(np.searchsorted(candidates, i))
        if at >= candidates.size:
            break
        start = int(candidates[at])
        ref, need = float(med[start]), float(band[start])
        back = _first_below(filled, start, ref + need / 2, smooth)
        if back < 0:  # never comes back: a level shift or divergence, reported as such
            break
        end = back - 1
        if end - start + 1 >= min_points:
            half = smooth // 2
            seg = np.median(
                sliding_window_view(np.pad(filled, half, mode="edge")[start : end + 1 + 2 * half], smooth), axis=1
            )
            peak = start + int(np.argmax(np.where(np.isfinite(x[start : end + 1]), x[start : end + 1], -np.inf)))
            out.append(
                Bump(
                    start,
                    end,
                    peak,
                    ref,
                    float(np.mean(seg) / ref) if ref else float("inf"),
                    float(np.max(seg) / ref) if ref else float("inf"),
                )
            )
        i = end + 2
    return out


def _majority(mask: np.ndarray, k: int) -> np.ndarray:
    """For each point, whether more than k // 2 of the k points centred on it are True (edges padded with
    the end values, as a running median pads)."""
    half = k // 2
    padded = np.pad(mask.astype(np.int32), half, mode="edge")
    c = np.concatenate(([0], np.cumsum(padded)))
    return (c[k:] - c[:-k]) > half


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


def _first_below(x: np.ndarray, start: int, level: float, k: int) -> int:
    """The first index from ``start`` where the running median of ``k`` points of ``x`` is under ``level``
    (-1 if none), looked for in growing chunks so that a short bump costs a short search."""
    size = 256
    at = start
    while at < x.size:
        lo, hi = max(0, at - k), min(x.size, at + size + k)
        below = ~_majority(x[lo:hi] >= level, k)
        hit = np.flatnonzero(below[at - lo : at - lo + size])
        if hit.size:
            return at + int(hit[0])
        at += size
        size *= 2
    return -1


@dataclass(frozen=True)
class Period:
    period: int  # in steps
    phase: int
    hits: np.ndarray  # indices of the slow points on the period (where each stall starts)
    coverage: float  # share of the logged points with that phase that are slow


def find_period(
    slow_steps: np.ndarray,
    slow_idx: np.ndarray,
    all_steps: np.ndarray,
    min_hits: int = 3,
    min_coverage: float = 0.6,
    lengths: np.ndarray | None = None,
) -> Period | None:
    """Slow steps that recur every k steps. ``slow_steps``/``slow_idx`` are where slow episodes start and
    ``lengths`` their lengths in points: the spacing is measured between *short* episodes only (single
    slow steps; a long dip is not a stall and its start is not a beat), the candidates are the most common
    spacings and their multiples, and the one kept has at least ``min_hits`` slow starts on one phase,
    slow on at least ``min_coverage`` of the logged steps of that phase, and the most hits x coverage
    (stalls every 200 steps do not read as every 100: half the steps of phase 0 mod 100 are fast); on a
    tie the longer period, which explains the same slow steps with fewer assumptions."""
    if slow_steps.size < min_hits:
        return None
    log_stride = max(1, int(np.median(np.diff(all_steps)))) if all_steps.size > 1 else 1
    short = slow_steps if lengths is None else slow_steps[lengths <= max(2, np.median(lengths))]
    spacing = np.diff(short) if short.size >= 2 else np.diff(slow_steps)
    spacing = spacing[spacing >= 2 * log_stride]
    if spacing.size == 0:
        return None
    values, counts = np.unique(spacing, return_counts=True)
    top = [int(k) for k in values[np.argsort(-counts, kind="stable")][:3]]
    candidates = sorted({k * m for k in top for m in (1, 2)})
    best, best_score = None, -1.0
    for k in candidates:
        phases, pcounts = np.unique(slow_steps % k, return_counts=True)
        phase = int(phases[np.argmax(pcounts)])
        on = slow_steps % k == phase
        hits = int(on.sum())
        span = (all_steps >= slow_steps[on][0]) & (all_steps <= all_steps[-1])
        expected = int(np.sum(all_steps[span] % k == phase))
        if hits < min_hits or not expected:
            continue
        coverage = hits / expected
        score = hits * coverage
        if coverage >= min_coverage and score >= best_score - 1e-9:  # a tie: the longer period explains as much
            best, best_score = Period(k, phase, slow_idx[on], coverage), score
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
        errors = {
            "linear": float(np.mean(np.abs(y - (1 - t)))),
            "cosine": float(np.mean(np.abs(y - 0.5 * (1 + np.cos(np.pi * t))))),
            "inverse-sqrt": float(np.mean(np.abs(y - _inv_sqrt(t)))),
        }
        kind = min(errors, key=errors.get)
        levels = distinct(np.round(decay / peak, 6)).size
        if levels <= 6:
            kind = "step"
        elif errors[kind] > 0.1:
            kind = "other"
        parts.append(f"{kind} decay")
    elif decay.size >= 3:
        parts.append("constant after the peak")
    return {
        "shape": ", then ".join(parts) or "unknown",
        "warmup_steps": int(steps[peak_i] - steps[0]) if warm else 0,
        "peak_lr": peak,
        "final_lr": final,
        "jump_steps": [int(steps[j]) for j in jumps[:20]],
    }


def _inv_sqrt(t: np.ndarray) -> np.ndarray:
    s = 1.0 / np.sqrt(1.0 + 99.0 * t)  # a 1/sqrt(step) decay over two decades, normalised to 1..0
    return (s - s[-1]) / (s[0] - s[-1]) if s[0] != s[-1] else s


def anomaly(kind: str, steps: np.ndarray, start: int, end: int, **extra) -> dict[str, Any]:
    """One anomaly row: ``step`` or ``start_step``/``end_step``, then its values (NaN/inf as None)."""
    out: dict[str, Any] = {"kind": kind}
    if start == end:
        out["step"] = int(steps[start])
    else:
        out["start_step"], out["end_step"] = int(steps[start]), int(steps[end])
    out.update({k: plain_finite(v) for k, v in extra.items()})
    return out
