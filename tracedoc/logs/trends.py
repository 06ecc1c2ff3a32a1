"""Slow trends of the loss over epochs or windows: a regression (the loss rising window after window,
often after a resume) and overfitting (validation loss rising while the training loss falls).

Definitions:

- **windows**: the epochs, where the log has an epoch field and at least ``MIN_WINDOWS`` of them;
  otherwise blocks of ``window`` logged points (after warm-up). A window's level is the median of the
  loss in it (the validation loss: of its evaluations).
- **rising run**: the level rose from each window to the next over the last ``MIN_RISES`` or more
  windows, by at least ``MIN_RISE_FRACTION`` of the level in all, starting from the lowest level so far
  (before it the loss had been falling or flat).
- **loss regression** (an anomaly, rule TD608): the training loss is on a rising run (or, without one,
  the validation loss is); reported once, with the validation loss beside it and the resume it follows
  when there was one. A divergence already reported covers it.
- **overfitting** (a note): the validation loss is on a rising run while the training loss fell over
  the same windows.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .registry import ANOMALY_RULES

MIN_WINDOWS = 4
MIN_RISES = 3
MIN_RISE_FRACTION = 0.005
MAX_EPOCHS = 100_000  # more distinct epochs than this is not an epoch field: windows of points instead


def _windows(series, name: str, window: int) -> tuple[np.ndarray, np.ndarray, str] | None:
    """(levels, the first step of each window, what a window is) for a loss column."""
    col = series.col(name)
    if col is None:
        return None
    ok = series.present[name] & np.isfinite(col)
    epoch = series.col("epoch")
    if epoch is not None:
        e = np.floor(np.where(series.present["epoch"], epoch, np.nan))
        e = _fill(e)
        use = np.flatnonzero(ok & np.isfinite(e))
        keys, inverse, counts = np.unique(e[use], return_inverse=True, return_counts=True)
        if MIN_WINDOWS <= keys.size <= MAX_EPOCHS:
            return (
                _group_medians(col[use], inverse, counts),
                _group_first(series.step[use], inverse, keys.size),
                "epochs",
            )
    idx = np.flatnonzero(ok)
    if name == "eval_loss" and idx.size >= MIN_WINDOWS:
        return col[idx], series.step[idx], "evaluations"
    n = idx.size // max(1, window)
    if n < MIN_WINDOWS:
        return None
    blocks = np.array_split(idx[idx.size - n * window :], n)
    return (
        np.array([np.median(col[b]) for b in blocks]),
        np.array([int(series.step[b[0]]) for b in blocks]),
        f"windows of {window} points",
    )


def _group_medians(x: np.ndarray, group: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The median of ``x`` in each group (groups numbered 0..k-1), in one sort."""
    order = np.lexsort((x, group))
    xs = x[order]
    start = np.r_[0, np.cumsum(counts)[:-1]]
    return 0.5 * (xs[start + (counts - 1) // 2] + xs[start + counts // 2])


def _group_first(steps: np.ndarray, group: np.ndarray, k: int) -> np.ndarray:
    first = np.full(k, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, group, steps.astype(np.int64))
    return first


def _fill(e: np.ndarray) -> np.ndarray:
    """Epochs carried forward over rows that did not log one (a sparse Lightning row)."""
    finite = np.isfinite(e)
    if finite.all() or not finite.any():
        return e
    idx = np.where(finite, np.arange(e.size), 0)
    np.maximum.accumulate(idx, out=idx)
    out = e[idx]
    out[: int(np.argmax(finite))] = np.nan
    return out


def rising_run(levels: np.ndarray) -> int | None:
    """The index of the window a rising run at the end starts from, or None."""
    if levels.size < MIN_RISES + 1:
        return None
    up = np.diff(levels) > 0
    k = 0
    while k < up.size and up[-1 - k]:
        k += 1
    if k < MIN_RISES:
        return None
    start = levels.size - 1 - k
    base = levels[start]
    if base <= 0 or (levels[-1] - base) < MIN_RISE_FRACTION * abs(base):
        return None
    if start > 0 and np.min(levels[:start]) < base:
        return None  # not from the lowest level so far: a wobble on the way, not a turn
    return start


def find_trends(
    series, window: int, diverging: bool, anomalies: list[dict[str, Any]], notes: list[str], m: dict[str, Any]
) -> None:
    m.update(
        loss_regression=None,
        loss_regression_start_step=None,
        loss_regression_rise_fraction=None,
        loss_regression_after_resume_step=None,
    )
    train = _windows(series, "loss", window)
    val = _windows(series, "eval_loss", window)
    if train is None and val is None:
        return
    m["loss_regression"] = False
    t_start = rising_run(train[0]) if train is not None else None
    v_start = rising_run(val[0]) if val is not None else None
    crit = (
        f"the level (median per window) rose from each window to the next over the last {MIN_RISES} or more "
        f"windows, by at least {MIN_RISE_FRACTION:.1%} in all, from the lowest level so far"
    )
    if t_start is not None and not diverging or (train is None and v_start is not None):
        levels, firsts, unit = train if t_start is not None else val
        start = t_start if t_start is not None else v_start
        what = "training loss" if t_start is not None else "validation loss"
        rise = float(levels[-1] / levels[start] - 1.0)
        step = int(firsts[start])
        after = [r for r in series.resume_steps if r <= int(firsts[start + 1])]
        row: dict[str, Any] = {
            "kind": "loss_regression",
            "start_step": step,
            "end_step": int(series.step[-1]),
            "loss_from": float(levels[start]),
            "loss_to": float(levels[-1]),
            "rise_fraction": rise,
            "windows": int(levels.size - 1 - start),
            "window_kind": unit,
            "field": what,
            "rule": ANOMALY_RULES["loss_regression"],
            "criterion": crit,
        }
        if after:
            row["after_resume_step"] = m["loss_regression_after_resume_step"] = after[-1]
        if what == "training loss" and v_start is not None:
            vl = val[0]
            row.update(eval_loss_from=float(vl[v_start]), eval_loss_to=float(vl[-1]))
        anomalies.append(row)
        m.update(loss_regression=True, loss_regression_start_step=step, loss_regression_rise_fraction=rise)
        return
    if v_start is not None and train is not None:
        t_levels, t_firsts, _ = train
        from_step = int(val[1][v_start])
        i = int(np.searchsorted(t_firsts, from_step))
        part = t_levels[max(0, i - 1) :]
        if part.size >= 2 and part[-1] < part[0]:
            vl = val[0]
            notes.append(
                f"validation loss rose over the last {vl.size - 1 - v_start} {val[2]} ({vl[v_start]:.4g} -> "
                f"{vl[-1]:.4g}) while the training loss fell ({part[0]:.4g} -> {part[-1]:.4g}): the model "
                f"may be overfitting (criterion: {crit.replace('windows', val[2])})"
            )
