"""View model of a diff: ``DiffResult`` -> typed rows that the text, Markdown and HTML renderers format.

Numbers are formatted here once, so the three outputs say the same thing; trace strings stay raw
and each renderer escapes them for its medium.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..labels import ADVICE_LABEL
from ..model.metrics import TRACE_METRICS as METRICS
from .format import fmt_unit, fmt_unit_delta, ms_figure

if TYPE_CHECKING:  # pragma: no cover
    from ..diff.model import DiffResult

VERDICT_WORDS = {
    "regression": "regression",
    "improvement": "improvement",
    "within_noise": "within noise",
    "no_change": "no change",
    "unknown": "step time unknown",
}


@dataclass
class CategoryRow:
    category: str
    before_ms: str
    after_ms: str
    delta_ms: str
    before_pct: float  # bar widths: share of the longer of the two steps, 0-100
    after_pct: float
    sign: int  # +1 slower, -1 faster, 0 unchanged


@dataclass
class KernelRow:
    name: str
    status: str
    count: str  # "20 → 320"
    ms: str  # "8.000 → 8.600"
    delta_ms: str
    mean_us: str


@dataclass
class OperatorRow:
    name: str
    status: str
    calls: str
    cpu_ms: str
    gpu_ms: str
    delta: str


@dataclass
class MetricRow:
    name: str
    before: str
    after: str
    delta: str
    change: str  # better / worse / changed
    meaning: str


@dataclass
class RankRow:
    rank: str
    before_ms: str
    after_ms: str
    delta: str
    top: str


@dataclass
class PredictionRow:
    """One of the base run's predictions beside the new run's measured step, formatted once for every renderer."""

    where: str  # "job" or "rank N" / "" for a single pair
    label: str
    rule_id: str
    status: str  # gone, reduced, grew, still_present
    status_words: str
    predicted: str  # "69.5 → 13.3"
    measured: str  # the new run's step, "13.1"
    off: str  # measured - predicted for an addressed finding ("-0.2 ms (-1.5%)"); "" otherwise
    upper_bound: bool  # the prediction is today's share (an upper bound), not a replay
    sentence: str  # the whole check in a line


@dataclass
class DiffView:
    before_path: str
    after_path: str
    before_kind: str
    after_kind: str
    verdict: str
    verdict_words: str
    headline: str
    step_before: str
    step_after: str
    step_delta: str
    step_pct: str
    basis: str
    categories: list[CategoryRow]
    kernels: list[KernelRow]
    new_kernels: list[KernelRow]
    vanished_kernels: list[KernelRow]
    operators: list[OperatorRow]
    labels_gone: list[str]
    labels_new: list[str]
    labels_kept: list[str]
    metrics: list[MetricRow]
    ranks: list[RankRow]
    focus: str
    warnings: list[str] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)
    predictions: list[PredictionRow] = field(default_factory=list)


def _us(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e3


def _ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6


def _count(v: float) -> str:
    return f"{v:.0f}" if abs(v - round(v)) < 0.05 or abs(v) >= 100 else f"{v:.1f}"


def build_diff_view(d: "DiffResult", rows: int = 15, name_chars: int = 160) -> DiffView:
    focus = d.focus_pair
    longest = max(d.before.step_ns, d.after.step_ns, 1)
    att = d.attribution_ns
    cats = []
    for c in att:
        cats.append(
            CategoryRow(
                category=c,
                before_ms=ms_figure(d.before.category_ns[c]),
                after_ms=ms_figure(d.after.category_ns[c]),
                delta_ms=ms_figure(att[c], signed=True),
                before_pct=100 * d.before.category_ns[c] / longest,
                after_pct=100 * d.after.category_ns[c] / longest,
                sign=(att[c] > 0) - (att[c] < 0),
            )
        )
        split = d.comm_split
        if c == "exposed_comm" and split:
            for i, part in enumerate(("  wait", "  transfer")):
                b, a = split["before"][i], split["after"][i]
                cats.append(
                    CategoryRow(
                        category=part,
                        before_ms=ms_figure(b),
                        after_ms=ms_figure(a),
                        delta_ms=ms_figure(a - b, signed=True),
                        before_pct=100 * b / longest,
                        after_pct=100 * a / longest,
                        sign=(a > b) - (a < b),
                    )
                )

    def cut(name: str) -> str:
        return name if len(name) <= name_chars else name[: name_chars - 1] + "…"

    def krow(k) -> KernelRow:
        mb, ma = _us(k.mean_before_ns), _us(k.mean_after_ns)
        mean = f"{mb:.1f} → {ma:.1f}" if mb and ma else f"{(ma or mb or 0):.1f}"
        return KernelRow(
            name=cut(k.name),
            status=k.status,
            count=f"{_count(k.count_before)} → {_count(k.count_after)}",
            ms=f"{k.time_before_ns / 1e6:.3f} → {k.time_after_ns / 1e6:.3f}",
            delta_ms=f"{k.delta_ns / 1e6:+.3f}",
            mean_us=mean,
        )

    sizes = focus.sizes  # the rows before the saved tables were cut to their largest
    moved = [k for k in focus.kernels if k.status == "changed"]
    ops = [o for o in focus.operators if o.status != "same"]
    notable = [m for m in focus.metrics if m.change in ("better", "worse", "changed")]
    notable.sort(key=lambda m: ({"worse": 0, "better": 1, "changed": 2}[m.change], m.name))
    ranks = []
    if len(d.pairs) > 1:
        for p in d.pairs:
            a = p.attribution_ns
            top = max(a, key=lambda c: abs(a[c]))
            ranks.append(
                RankRow(
                    rank=str(p.rank_before) if p.rank_before == p.rank_after else f"{p.rank_before} / {p.rank_after}",
                    before_ms=ms_figure(p.before.step_ns),
                    after_ms=ms_figure(p.after.step_ns),
                    delta=ms_figure(p.step_delta_ns, signed=True),
                    top=f"{top} {ms_figure(a[top], signed=True)} ms" if a[top] else "-",
                )
            )
    pct = d.step_pct
    return DiffView(
        before_path=d.before_path,
        after_path=d.after_path,
        before_kind=d.before_kind,
        after_kind=d.after_kind,
        verdict=d.verdict,
        verdict_words=VERDICT_WORDS[d.verdict],
        headline=headline(d),
        step_before=ms_figure(d.before.step_ns),
        step_after=ms_figure(d.after.step_ns),
        step_delta=ms_figure(d.step_delta_ns, signed=True),
        step_pct=f"{pct:+.1f}%" if pct is not None else "n/a",
        basis=_basis(d),
        categories=cats,
        kernels=[krow(k) for k in moved[:rows]],
        new_kernels=[krow(k) for k in focus.new_kernels[:rows]],
        vanished_kernels=[krow(k) for k in focus.vanished_kernels[:rows]],
        operators=[
            OperatorRow(
                name=cut(o.name),
                status=o.status,
                calls=f"{_count(o.calls_before)} → {_count(o.calls_after)}",
                cpu_ms=f"{o.cpu_before_ns / 1e6:.3f} → {o.cpu_after_ns / 1e6:.3f}",
                gpu_ms=f"{o.gpu_before_ns / 1e6:.3f} → {o.gpu_after_ns / 1e6:.3f}",
                delta=f"cpu {o.delta_cpu_ns / 1e6:+.3f}, gpu {o.delta_gpu_ns / 1e6:+.3f}",
            )
            for o in ops[:rows]
        ],
        labels_gone=focus.labels.gone,
        labels_new=focus.labels.new,
        labels_kept=focus.labels.kept,
        metrics=[
            MetricRow(
                name=m.name,
                before=fmt_unit(m.before, m.unit),
                after=fmt_unit(m.after, m.unit),
                delta=fmt_unit_delta(m.delta, m.unit),
                change=m.change,
                meaning=METRICS[m.name].meaning,
            )
            for m in notable[: rows * 2]
        ],
        ranks=ranks[: rows * 4],
        focus=(
            f"rank {focus.rank_before}"
            if focus.rank_before == focus.rank_after
            else f"rank {focus.rank_before} vs rank {focus.rank_after}"
        )
        if focus.rank_before is not None
        else "",
        warnings=list(d.warnings),
        predictions=prediction_rows(d),
        left_out={
            "kernels": max(0, sizes.changed_kernels - rows),
            "new_kernels": max(0, sizes.new_kernels - rows),
            "vanished_kernels": max(0, sizes.vanished_kernels - rows),
            "operators": max(0, sizes.changed_operators - rows),
            "metrics": max(0, len(notable) - rows * 2),
            "ranks": max(0, len(ranks) - rows * 4),
        },
    )


STATUS_WORDS = {"gone": "gone", "reduced": "reduced", "grew": "grew", "still_present": "still present"}


def step_figure(ms: float, scale: float | None = None) -> str:
    """A step time in ms as a bare figure: one decimal from 10 ms, two from 1 ms, three below (of ``scale``,
    the largest figure it is read beside, when given)."""
    a = abs(ms if scale is None else scale)
    return f"{ms:.1f}" if a >= 10 else f"{ms:.2f}" if a >= 1 else f"{ms:.3f}"


def prediction_row(p, where: str = "") -> PredictionRow:
    """One of the base's predictions beside the new run's step, as a row and a sentence."""
    predicted_before, predicted_after, measured_after = (
        _ms(x) for x in (p.predicted_before_ns, p.predicted_after_ns, p.measured_after_ns)
    )
    impact_before, impact_after, error = _ms(p.impact_before_ns), _ms(p.impact_after_ns), _ms(p.error_ns)
    scale = max(predicted_before, measured_after)
    pb, pa, ma = (step_figure(x, scale) for x in (predicted_before, predicted_after, measured_after))
    upper = p.method.startswith("upper bound")
    predicted = f"{pb} → {pa}"
    off = ""
    if error is not None:
        pct = f", {100 * error / predicted_after:+.1f}%" if predicted_after > 0 else ""
        off = f"{error:+.{2 if abs(error) < 10 else 1}f} ms{pct}"
    head = f"{where}: " if where else ""
    what = p.name if p.label == ADVICE_LABEL else p.label
    fix = f"{head}{what} fix predicted {'at best ' if upper else ''}{predicted} ms"
    impact = (
        f"{step_figure(impact_before, scale)} → {step_figure(impact_after, scale)} ms per step"
        if impact_before is not None and impact_after is not None
        else ""
    )
    if p.status == "gone":
        sentence = f"{fix}; measured {ma} ms (finding gone; prediction off by {off})"
    elif p.status == "reduced":
        sentence = f"{fix}; measured {ma} ms (finding reduced, {impact}; prediction off by {off})"
    elif p.status == "grew":
        sentence = f"{fix} if fixed; grew ({impact}), measured {ma} ms"
    else:
        sentence = f"{fix} if fixed; still present, measured {ma} ms"
    return PredictionRow(
        where=where,
        label=what,
        rule_id=p.rule_id,
        status=p.status,
        status_words=STATUS_WORDS.get(p.status, p.status),
        predicted=predicted,
        measured=ma,
        off=off,
        upper_bound=upper,
        sentence=sentence,
    )


def prediction_rows(d: "DiffResult") -> list[PredictionRow]:
    """The job verdict's predictions, then the focus pair's (named by rank in a job)."""
    focus = d.focus_pair
    where = (
        ""
        if len(d.pairs) == 1 and not d.job_predictions
        else (f"rank {focus.rank_before}" if focus.rank_before is not None else "focus rank")
    )
    return [prediction_row(p, "job") for p in d.job_predictions] + [prediction_row(p, where) for p in focus.predictions]


def _basis(d: "DiffResult") -> str:
    if d.before.basis == "steps" and d.after.basis == "steps":
        n = f" over {len(d.pairs)} ranks" if len(d.pairs) > 1 else ""
        iv = d.step_interval_ms
        ci = f"; 95% interval of the change {iv[0]:+.3f} to {iv[1]:+.3f} ms" if iv else ""
        return (
            f"median step time (interval between step completions) of {d.before.steps} and {d.after.steps} "
            f"steps{n}{ci}; per-step tables divide window totals by the step count"
        )
    return "no step spans on at least one side: a whole analysis window counts as one step there"


def headline(d: "DiffResult") -> str:
    """One sentence: the step change, its verdict, what led it and the kernels that came or went."""
    pct = d.step_pct
    change = f"{ms_figure(d.before.step_ns)} → {ms_figure(d.after.step_ns)} ms per step"
    if pct is not None:
        change += f" ({pct:+.1f}%)"
    text = f"Step time {change}: {VERDICT_WORDS[d.verdict]}"
    att = d.attribution_ns
    led = d.led_by
    if led and d.verdict in ("regression", "improvement"):
        text += ", led by " + ", ".join(f"{c} {ms_figure(att[c], signed=True)} ms" for c in led[:3])
    focus = d.focus_pair
    sizes = focus.sizes
    new = [k for k in focus.new_kernels if k.time_after_ns > 0 or k.count_after > 0]
    if new and d.verdict != "no_change":
        n = sizes.new_kernels_running
        text += (
            f"; {n} new kernel{'s' if n != 1 else ''} ({_count(sizes.new_launches)} "
            f"launches, {sizes.new_time_ns / 1e6:.3f} ms per step; largest {new[0].name})"
        )
    gone = sizes.vanished_kernels
    if gone and d.verdict != "no_change":
        text += f"; {gone} kernel{'s' if gone != 1 else ''} gone"
    if focus.labels.gone:
        text += "; label" + ("s " if len(focus.labels.gone) > 1 else " ") + ", ".join(focus.labels.gone) + " gone"
    if focus.labels.new:
        text += "; new label" + ("s " if len(focus.labels.new) > 1 else " ") + ", ".join(focus.labels.new)
    return text + "."
