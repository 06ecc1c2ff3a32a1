"""The live watchdog's detectors: records of a growing log in, each anomaly out when it becomes certain.

What ``tracedoc logs --follow`` reports, one finding per line (``WATCH_KINDS`` in the registry):

- ``nan``: a loss or gradient norm that is not finite (at once).
- ``loss_spike``: a loss whose modified z-score against the trailing ``window`` losses is above
  ``spike_z`` and more than ``spike_min_rise_fraction`` above their median, or at least ``spike_ratio``
  x a positive median with z above ``spike_ratio_z`` (the batch analysis's definition, on the points seen
  so far); one finding per episode.
- ``divergence``: the block medians of the loss (blocks of half a window) reached their minimum and rose
  in at least 60% of the blocks since, at least 3 of them, to ``divergence_rise_fraction`` above it;
  once. A run of ``NAN_RUN`` non-finite losses is a divergence to NaN.
- ``stall``: a step (from the step-time field, or elapsed-time differences over the steps between two
  lines) more than ``stall_factor`` x the median step time of the trailing window.
- ``throughput_regression``: the median throughput (or 1 / step time) of the last window under
  ``1 - regression_fraction`` of the median of the first full window after warm-up; once until it is back.
- ``no_new_line``: no complete line for ``idle_s`` seconds (judged by the follower, :mod:`.follow`).

State is bounded: trailing windows of ``window`` values and at most ``MAX_BLOCKS`` block medians,
whatever the length of the log. Plain values in and out: :meth:`Watch.feed` takes one record (a dict of
canonical fields) and returns the findings it makes certain.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any


MAX_BLOCKS = 200
RESTART_SHARE = 0.25  # the clock restarted: elapsed time under this share of the last (a second writer lags less)
NAN_RUN = 3
SEVERITY = {
    "nan": "error",
    "divergence": "error",
    "no_new_line": "error",
    "loss_spike": "warning",
    "stall": "warning",
    "throughput_regression": "warning",
}
LABEL = {
    "nan": "unstable_training",
    "divergence": "unstable_training",
    "loss_spike": "unstable_training",
    "stall": "throughput_regression",
    "throughput_regression": "throughput_regression",
    "no_new_line": "throughput_regression",
}


@dataclass(frozen=True)
class WatchOptions:
    window: int = 50
    spike_z: float = 6.0
    spike_min_rise_fraction: float = 0.05
    spike_ratio: float = 2.0
    spike_ratio_z: float = 3.5
    divergence_rise_fraction: float = 0.1
    stall_factor: float = 3.0
    regression_fraction: float = 0.2
    warmup_points: int = 3


@dataclass
class Finding:
    kind: str
    step: int | None
    message: str
    criterion: str
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return LABEL[self.kind]

    @property
    def severity(self) -> str:
        return SEVERITY[self.kind]

    def as_dict(self) -> dict[str, Any]:
        out = {
            "kind": self.kind,
            "step": self.step,
            "label": self.label,
            "severity": self.severity,
            "message": self.message,
            "criterion": self.criterion,
        }
        out.update({k: (v if not isinstance(v, float) or math.isfinite(v) else str(v)) for k, v in self.values.items()})
        return out


def _median(values) -> float:
    """The median of a short window (sorting ~50 floats in Python beats numpy's call overhead)."""
    s = sorted(values)
    n = len(s)
    return float(s[n // 2]) if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])


def _robust(values) -> tuple[float, float]:
    med = _median(values)
    return med, _median([abs(x - med) for x in values])


class Watch:
    """Incremental detectors over the records of one run, in the order they are logged."""

    def __init__(self, options: WatchOptions = WatchOptions()):
        self.o = options
        w = max(5, options.window)
        self.losses: deque[float] = deque(maxlen=w)
        self.step_times: deque[float] = deque(maxlen=w)
        self.rates: deque[float] = deque(maxlen=w)
        self.block: list[float] = []
        self.blocks: deque[float] = deque(maxlen=MAX_BLOCKS)
        self.block_min = math.inf
        self.since_min: list[float] = []
        self.in_nan: dict[str, bool] = {}
        self.baseline: float | None = None
        self.baseline_values: list[float] = []
        self.in_spike = self.diverged = self.regressed = False
        self.nan_run = 0
        self.spike_points = 0
        self.points = 0
        self.last_step: int | None = None
        self.last_elapsed: tuple[int, float] | None = None
        self.repeats = 0
        self.resumes: list[tuple[int, int]] = []
        self.counts: dict[str, int] = {}
        self.first_step: int | None = None
        self.warm_until = options.warmup_points

    # -- records ------------------------------------------------------------------------------------
    def feed(self, rec: dict[str, Any]) -> list[Finding]:
        """One record (``step``, and any of ``loss``, ``grad_norm``, ``step_time_s``, ``elapsed_s``,
        ``throughput``) -> the findings it makes certain."""
        step = rec.get("step")
        step = int(step) if step is not None else (self.last_step + 1 if self.last_step is not None else 0)
        if self.last_step is not None and step <= self.last_step:
            elapsed = rec.get("elapsed_s")
            restarted = (
                self.last_elapsed is not None and elapsed is not None and elapsed < RESTART_SHARE * self.last_elapsed[1]
            )
            if step == self.last_step or not restarted:
                self.repeats += 1  # a second writer's line, or a step logged again: judged once
                return []
            self._resume(step)
        if self.first_step is None:
            self.first_step = step
        self.last_step = step
        self.points += 1
        out: list[Finding] = []
        self._loss(step, rec, out)
        self._timing(step, rec, out)
        for f in out:
            self.counts[f.kind] = self.counts.get(f.kind, 0) + 1
        return out

    def _loss(self, step: int, rec: dict[str, Any], out: list[Finding]) -> None:
        for name in ("loss", "grad_norm"):
            x = rec.get(name)
            if x is None:
                continue
            bad = not math.isfinite(x)
            if bad and not self.in_nan.get(name):  # one finding per run of NaN/inf lines
                out.append(
                    Finding(
                        "nan",
                        step,
                        f"{name} is {x} at step {step}",
                        "not a finite number",
                        {"field": name, "value": str(x)},
                    )
                )
            self.in_nan[name] = bad
        loss = rec.get("loss")
        if loss is None:
            return
        if not math.isfinite(loss):
            self.nan_run += 1
            if self.nan_run == NAN_RUN and not self.diverged:
                self.diverged = True
                out.append(
                    Finding(
                        "divergence",
                        step,
                        f"the loss has been NaN/inf for {NAN_RUN} lines in a row: the run diverged to NaN",
                        f"{NAN_RUN} non-finite losses in a row",
                        {"to_nan": True},
                    )
                )
            return
        self.nan_run = 0
        if len(self.losses) >= max(5, self.losses.maxlen // 2):
            med, mad = _robust(self.losses)
            rise = loss - med
            z = 0.6745 * rise / mad if mad > 0 else (math.inf if rise > 0 else 0.0)
            by_z = z > self.o.spike_z and rise > self.o.spike_min_rise_fraction * abs(med)
            by_ratio = med > 0 and loss >= self.o.spike_ratio * med and z > self.o.spike_ratio_z
            if (by_z or by_ratio) and not self.in_spike:
                crit = (
                    f"{loss / med:.2g}x the trailing median (>= {self.o.spike_ratio:g}x), z {min(z, 1e9):.1f}"
                    if by_ratio and not by_z
                    else f"z {min(z, 1e9):.1f} > {self.o.spike_z:g} scaled MADs and "
                    f"{rise / abs(med) if med else math.inf:+.0%} above the trailing median"
                )
                out.append(
                    Finding(
                        "loss_spike",
                        step,
                        f"loss {loss:.5g} at step {step}, trailing median {med:.5g}",
                        crit,
                        {"loss": loss, "reference": med, "z": min(z, 1e9)},
                    )
                )
            self.in_spike = bool(by_z or by_ratio)
            self.spike_points = self.spike_points + 1 if self.in_spike else 0
        self._blocks(step, loss, out)
        if self.in_spike and self.spike_points <= self.losses.maxlen // 2:
            return  # a spike does not enter the reference it is judged against; a new level does, after a while
        self.losses.append(loss)

    def _blocks(self, step: int, loss: float, out: list[Finding]) -> None:
        self.block.append(loss)
        if len(self.block) < max(3, self.o.window // 2):
            return
        level = _median(self.block)
        self.block = []
        self.blocks.append(level)
        if level < self.block_min:
            self.block_min = level
            self.since_min = [level]
            return
        self.since_min = (self.since_min + [level])[-MAX_BLOCKS:]
        ups = [b > a for a, b in zip(self.since_min, self.since_min[1:])]
        if self.diverged or len(ups) < 3 or self.block_min <= 0:
            return
        rel = level / self.block_min - 1.0
        if sum(ups) >= 0.6 * len(ups) and rel > self.o.divergence_rise_fraction:
            self.diverged = True
            out.append(
                Finding(
                    "divergence",
                    step,
                    f"the smoothed loss rose {rel:.0%} from its minimum {self.block_min:.5g} "
                    f"to {level:.5g} at step {step}",
                    f"block medians rose in >= 60% of the {len(ups)} blocks since the minimum, "
                    f"> {self.o.divergence_rise_fraction:.0%} above it",
                    {"rise_fraction": rel},
                )
            )

    def _timing(self, step: int, rec: dict[str, Any], out: list[Finding]) -> None:
        st = rec.get("step_time_s")
        elapsed = rec.get("elapsed_s")
        if st is None and elapsed is not None and math.isfinite(elapsed):
            if self.last_elapsed is not None:
                prev_step, prev_t = self.last_elapsed
                if step > prev_step and elapsed > prev_t:
                    st = (elapsed - prev_t) / (step - prev_step)
            self.last_elapsed = (step, elapsed)
        if st is not None and math.isfinite(st) and st > 0:
            if self.points > self.warm_until and len(self.step_times) >= max(5, self.step_times.maxlen // 2):
                med = _median(self.step_times)
                if st > self.o.stall_factor * med:
                    out.append(
                        Finding(
                            "stall",
                            step,
                            f"step {step} took {st:.3g} s, {st / med:.1f}x the median {med:.3g} s",
                            f"> {self.o.stall_factor:g}x the median step time of the last {len(self.step_times)} lines",
                            {"step_time_s": st, "median_s": med},
                        )
                    )
            self.step_times.append(st)
        rate = rec.get("throughput")
        if rate is None and st is not None and math.isfinite(st) and st > 0:
            rate = 1.0 / st
        if rate is None or not math.isfinite(rate) or rate <= 0 or self.points <= self.warm_until:
            return
        self.rates.append(rate)
        if self.baseline is None:
            self.baseline_values.append(rate)
            if len(self.baseline_values) >= self.rates.maxlen:
                self.baseline = _median(self.baseline_values)
                self.baseline_values = []
            return
        if len(self.rates) < self.rates.maxlen:
            return
        now = _median(self.rates)
        low = now < (1 - self.o.regression_fraction) * self.baseline
        if low and not self.regressed:
            out.append(
                Finding(
                    "throughput_regression",
                    step,
                    f"throughput over the last {len(self.rates)} lines is "
                    f"{now:.4g}, {now / self.baseline - 1:+.0%} against {self.baseline:.4g} at the start",
                    f"median of the last window < {1 - self.o.regression_fraction:g}x the first window's",
                    {"throughput": now, "baseline": self.baseline},
                )
            )
        self.regressed = low

    def _resume(self, step: int) -> None:
        """The step counter went back and the clock started again: a resumed (or restarted) run. The
        trailing windows start afresh (the join is not a spike or a stall), after a new warm-up."""
        self.resumes.append((int(self.last_step), step))
        self.last_elapsed = None
        for d in (self.losses, self.step_times, self.rates):
            d.clear()
        self.block, self.in_spike, self.nan_run = [], False, 0
        self.warm_until = self.points + self.o.warmup_points

    # -- the summary -------------------------------------------------------------------------------
    def summary(self) -> str:
        found = ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items())) or "no anomaly"
        span = f"steps {self.first_step}-{self.last_step}" if self.first_step is not None else "no step"
        extra = []
        if self.resumes:
            extra.append(
                f"{len(self.resumes)} resume(s), first from step {self.resumes[0][0]} back to {self.resumes[0][1]}"
            )
        if self.repeats:
            extra.append(f"{self.repeats} lines repeated a step already seen (a second writer?) and were skipped")
        return f"{self.points} records, {span}: {found}" + "".join(f"; {e}" for e in extra)
