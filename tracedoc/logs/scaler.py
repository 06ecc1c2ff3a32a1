"""fp16 dynamic loss scaling: the normal rhythm of skipped steps, and the patterns that are not.

A dynamic loss scaler (DeepSpeed, Megatron, ``torch.amp.GradScaler``) doubles the scale after every
``window`` steps without overflow and, on an overflow, skips the step and halves it (DeepSpeed's
``hysteresis`` first absorbs one overflow without halving). Once calibrated, it therefore skips a
small group of steps (one, or ``hysteresis`` of them) about once per window, forever: a steady trickle
that costs a step or two per window and is the scaler working. What is not normal:

- **calibration** (normal): the burst at the start, while the scale falls from its initial 2^16..2^32 to
  the level the gradients allow;
- **steady** (normal): after calibration, groups of at most a few skips, none much larger than the
  typical group, at a rate that does not grow;
- **burst**: a group of at least 4 skips and 3x the typical group (or a scale falling 8x within one
  group): the gradients overflowed again and again;
- **rising**: the last third of the run skips at least twice as often as the first (and 4 or more);
- **frequent**: more than 5% of the steps after calibration skipped, however regular (one step in 20);
- **collapsing**: the scale ends 32x or more under its usual level, or at 1 or below, or the scaler
  says it is at its minimum.

Inputs are the log's per-interval skip counts (``skipped_iterations``), its logged loss scale, and the
overflow events of the console (each a skipped step, with the attempted and the new scale).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

BURST_MIN_SKIPS = 4
BURST_FACTOR = 3.0
RISING_FACTOR = 2.0
FREQUENT_FRACTION = 0.05
COLLAPSE_FACTOR = 32.0
PRIORITY = ("collapsing", "burst", "rising", "frequent", "steady", "calibration")


@dataclass
class SkipRhythm:
    pattern: str | None  # PRIORITY names; None without skips
    skips: int
    calibration_skips: int
    groups: list[dict[str, Any]] = field(default_factory=list)  # the evidence: one row per group of skips
    bursts: int = 0
    scale_min: float | None = None
    scale_max: float | None = None
    scale_final: float | None = None
    typical_spacing: int | None = None  # steps between groups after calibration (about the scaler's window)
    reason: str = ""


def scale_values(steps: np.ndarray, logged: np.ndarray | None, events: list[dict[str, Any]]) -> np.ndarray:
    """The loss scale as the log shows it: the logged column, or the scales the overflow messages name."""
    if logged is not None:
        vals = logged[np.isfinite(logged) & (logged > 0)]  # a scale is a positive number
        if vals.size:
            return vals
    vals = []
    for e in events:
        if e.get("kind") == "overflow":
            vals += [v for v in (e.get("loss_scale"), e.get("new_scale")) if v is not None and 0 < v < float("inf")]
    return np.array(vals, dtype=np.float64)


def skip_rhythm(
    steps: np.ndarray,
    skipped: np.ndarray | None,
    scale: np.ndarray | None,
    events: list[dict[str, Any]],
    counted: np.ndarray | None = None,
) -> SkipRhythm:
    """Classify the skipped steps of one series (see the module docstring). ``counted``: the points where
    the skip counter was logged (the first of them holds the calibration however late it is printed)."""
    overflow = [e for e in events if e.get("kind") == "overflow"]
    if skipped is not None and np.nansum(skipped) > 0:
        at = np.flatnonzero(np.nan_to_num(skipped) > 0)
        points = [(int(steps[i]), int(skipped[i])) for i in at]
    elif overflow:
        per: dict[int, int] = {}
        for e in overflow:
            s = int(e.get("step") or 0)
            per[s] = per.get(s, 0) + 1
        points = sorted(per.items())
    else:
        points = []
    values = scale_values(steps, scale, events)
    out = SkipRhythm(pattern=None, skips=sum(c for _, c in points), calibration_skips=0)
    if values.size:
        out.scale_min, out.scale_max, out.scale_final = float(values.min()), float(values.max()), float(values[-1])
    if not points:
        return out
    stride = int(np.median(np.diff(steps))) if steps.size > 1 else 1
    gap = max(2 * max(stride, 1), 20)
    groups: list[list[int]] = []  # [first step, last step, skips]
    for s, c in points:
        if groups and s - groups[-1][1] <= gap:
            groups[-1][1], groups[-1][2] = s, groups[-1][2] + c
        else:
            groups.append([s, s, c])
    span = max(1, int(steps[-1] - steps[0]) + 1) if steps.size else 1
    first_count = int(steps[counted][0]) if counted is not None and counted.any() else int(steps[0])
    calibrating = groups[0][0] <= max(first_count, int(steps[0]) + max(2 * stride, span // 50))
    rest = groups[1:] if calibrating else groups
    out.calibration_skips = groups[0][2] if calibrating else 0
    sizes = np.array([g[2] for g in rest]) if rest else np.array([], dtype=np.int64)
    typical = float(np.median(sizes)) if sizes.size else 0.0
    if len(rest) >= 2:
        out.typical_spacing = int(np.median(np.diff([g[0] for g in rest])))
    burst_at = [i for i, g in enumerate(rest) if g[2] >= BURST_MIN_SKIPS and g[2] >= BURST_FACTOR * max(typical, 1)]
    burst_at += [i for i, g in enumerate(rest) if i not in burst_at and _scale_fell(g, overflow, stride) >= 8]
    out.bursts = len(burst_at)
    for i, g in enumerate(groups):
        kind = "calibration" if calibrating and i == 0 else ("burst" if (i - calibrating) in burst_at else "steady")
        out.groups.append(
            {"start_step": g[0], "end_step": g[1], "skips": g[2], "kind": kind, **_scales_in(g, overflow, stride)}
        )
    # after calibration the scale climbs back to where the gradients overflow before the trickle starts:
    # rates are measured from the first group after calibration on
    after = steps[steps >= rest[0][0]] if rest else steps[:0]
    post_span = max(1, int(after[-1] - after[0]) + 1) if after.size else 0
    post_skips = int(sizes.sum()) if sizes.size else 0
    pattern, reason = (
        ("calibration", f"{out.calibration_skips} skips while the scale calibrated, none after")
        if not rest
        else (
            "steady",
            f"{len(rest)} groups of about {typical:g} skips"
            + (f", one every ~{out.typical_spacing} steps" if out.typical_spacing else ""),
        )
    )
    if len(rest) >= 3 and post_skips / post_span > FREQUENT_FRACTION:
        pattern, reason = "frequent", f"{post_skips} of {post_span} steps skipped after calibration"
    if len(rest) >= 4:
        third = post_span / 3
        t0 = int(after[0]) if after.size else 0
        first = sum(g[2] for g in rest if g[0] < t0 + third)
        last = sum(g[2] for g in rest if g[0] >= t0 + 2 * third)
        if last >= 4 and last >= RISING_FACTOR * first + 2:
            pattern, reason = "rising", f"{first} skips in the first third after calibration, {last} in the last"
    if burst_at:
        g = rest[burst_at[0]]
        pattern, reason = "burst", f"{g[2]} skips in steps {g[0]}-{g[1]} (typical group {typical:g})"
    collapse = _collapse(values, scale, out, events)
    if collapse:
        pattern, reason = "collapsing", collapse
    out.pattern, out.reason = pattern, reason
    return out


def _scales_in(g: list[int], overflow: list[dict[str, Any]], stride: int = 1) -> dict[str, Any]:
    """The scales the overflow messages of a group name: messages placed after the last logged step
    before the group's first count, up to its last (a counter counts the steps before it)."""
    inside = [e for e in overflow if g[0] - max(stride, 1) <= int(e.get("step") or 0) <= g[1]]
    tried = [e["loss_scale"] for e in inside if e.get("loss_scale") is not None]
    new = [e["new_scale"] for e in inside if e.get("new_scale") is not None]
    out: dict[str, Any] = {}
    if tried:
        out["loss_scale_before"] = max(tried)
    if new:
        out["loss_scale_after"] = min(new)
    return out


def _scale_fell(g: list[int], overflow: list[dict[str, Any]], stride: int = 1) -> float:
    s = _scales_in(g, overflow, stride)
    before, after = s.get("loss_scale_before"), s.get("loss_scale_after")
    return before / after if before and after and after > 0 else 1.0


def _collapse(values: np.ndarray, logged: np.ndarray | None, out: SkipRhythm, events: list[dict[str, Any]]) -> str:
    if any(e.get("kind") == "min_scale" for e in events):
        return "the scaler reports the loss scale at its minimum"
    if values.size < 4:
        return ""
    usual = float(np.median(values))
    tail = values[-max(2, values.size // 5) :]
    low = float(np.min(tail))
    if low <= 1.0 < usual:
        return f"the loss scale fell to {low:g} (usually {usual:g})"
    if usual > 0 and low * COLLAPSE_FACTOR <= usual:
        return f"the loss scale fell to {low:g}, {usual / low:.0f}x under its usual {usual:g}"
    return ""
