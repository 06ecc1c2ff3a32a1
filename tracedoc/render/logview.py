"""Reports for a training log: ``LogResult`` -> its view model (``logviews.LogView``) -> terminal text,
Markdown or one self-contained HTML page; JSON is the result itself.

The HTML page draws its charts as inline SVG computed here (loss with its moving average and markers
at NaN and spike steps; throughput with the P10 line, dips shaded and periodic stalls marked), so it
needs no script and no network. Every string from the log (paths, field names, messages that quote
them) reaches the page through Jinja autoescaping, and the Markdown through ``md_escape``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..neutral import clean_lines
from .format import fmt_log_value, readable
from .logviews import LogView

if TYPE_CHECKING:  # pragma: no cover
    from ..logs.report import LogResult

MAX_CHART_POINTS = 1200
MAX_ANOMALY_ROWS = 50
CHART_W, CHART_H, PAD_L, PAD_R, PAD_T, PAD_B = 900, 220, 64, 12, 10, 26


_where, _details, _fmt = LogView.where, LogView.details, fmt_log_value


def build_log_view(result: "LogResult", anomaly_rows: int = MAX_ANOMALY_ROWS, with_charts: bool = False) -> LogView:
    """The log report's view model: every renderer of a log formats this."""
    return LogView(
        source=result.source,
        format=result.input.format,
        labels=list(result.labels),
        summary=summary_lines(result),
        findings=list(result.findings),
        config_checks=list(result.config_checks),
        anomalies=result.anomalies[:anomaly_rows],
        anomaly_count=len(result.anomalies),
        notes=list(result.analysis.notes),
        warnings=list(result.warnings),
        points=result.metrics["log_points"],
        charts=charts(result) if with_charts else [],
        size={"w": CHART_W, "h": CHART_H, "l": PAD_L, "r": PAD_R, "t": PAD_T, "b": PAD_B},
    )


def summary_lines(result: "LogResult") -> list[str]:
    m = result.metrics
    lines = [f"{result.input.format}: {m['log_points']} logged steps, {m['log_first_step']}-{m['log_last_step']}"]
    lines.append("fields: " + ", ".join(f"{k} <- {v!r}" for k, v in result.fields.items()))
    lines += [f"run: {line}" for line in result.story]
    if m.get("log_series"):
        lines.append(f"series: {m['log_series']} (engines logged side by side, analysed apart)")
    if m["loss_logged"]:
        last_ma = result.analysis.charts.get("loss_ma_last")
        lines.append(
            f"loss: mean of the last {result.analysis.charts.get('window')} points {_fmt(last_ma)}; "
            f"NaN/inf {_fmt(m['loss_nonfinite_count'])}; spike episodes {_fmt(m['loss_spike_count'])}; "
            f"bumps {_fmt(m.get('loss_bump_count'))}; diverging {_fmt(m['divergence'])}"
        )
    if m.get("skip_pattern"):
        lines.append(
            f"skipped steps: {m['skipped_iterations']} ({_fmt(m['skipped_iteration_fraction'], '.1%')}), "
            f"pattern {m['skip_pattern']}; loss scale {_fmt(m.get('loss_scale_min'))} to "
            f"{_fmt(m.get('loss_scale_max'))}, last {_fmt(m.get('loss_scale_final'))}"
        )
    elif m.get("loss_scale_max") is not None:
        lines.append(
            f"loss scale: {_fmt(m['loss_scale_min'])} to {_fmt(m['loss_scale_max'])}, "
            f"last {_fmt(m.get('loss_scale_final'))}; no skipped steps"
        )
    if m["throughput_p50"] is not None:
        cause = f" after each {m['periodic_stall_cause']}" if m.get("periodic_stall_cause") else ""
        stall = (
            f"; slow step every {m.get('periodic_stall_period_text') or m['periodic_stall_period_steps']} "
            f"steps{cause} x{m['periodic_stall_count']}"
            + (
                f" ({_fmt(m.get('periodic_stall_slowdown'), '.1f')}x the median step, "
                f"{_fmt(m.get('periodic_stall_lost_fraction'), '.1%')} of the time)"
            )
            if m["periodic_stall_period_steps"]
            else "; no periodic stall"
        )
        if m.get("step_time_drift_fraction") is not None and m.get("throughput_drift_shape"):
            stall += (
                f"; time per unit of work {m['step_time_drift_fraction']:+.0%} first to last fifth "
                f"({m['throughput_drift_shape']})"
            )
        lines.append(
            f"throughput ({m['throughput_unit']}): P10 {_fmt(m['throughput_p10'])}, "
            f"P50 {_fmt(m['throughput_p50'])}, P90 {_fmt(m['throughput_p90'])}; "
            f"dip episodes {m['throughput_dip_count']} ({_fmt(m['throughput_dip_lost_fraction'], '.1%')} of the time)"
            + stall
        )
    if m.get("generation_time_fraction") is not None:
        lines.append(
            f"RLHF step: {m['generation_time_fraction']:.0%} of the end-to-end time generating, the rest "
            "training and other work"
        )
    if m["lr_schedule"]:
        lines.append(f"learning rate: {m['lr_schedule']}")
    if m["gpu_util_mean_percent"] is not None:
        lines.append(
            f"GPU utilisation: mean {m['gpu_util_mean_percent']:.0f}%, below 50% on "
            f"{m['low_gpu_util_fraction']:.0%} of the steps"
        )
    if m["config_source"]:
        lines.append(f"config: {m['config_source']}")
    if getattr(result, "config_files", None):  # whose thresholds the findings used
        lines.append(f"settings from: {', '.join(result.config_files)}")
    return lines


def render_log_text(result: "LogResult", width: int = 100) -> str:
    """The log's summary as text ``width`` columns wide: lines wrap at words (their indent kept), the
    anomaly table keeps its kinds and steps whole and wraps its details (``render.fittable``)."""
    from .fittable import fit_table, wrap_text

    v = build_log_view(result)

    def wrapped(line: str) -> list[str]:
        return wrap_text(line, width)

    out = [*wrapped(f"tracedoc logs: {v.source}"), ""]
    out += [x for line in v.summary for x in wrapped("  " + line)]
    if v.notes:
        out += [""] + [x for n in v.notes for x in wrapped("  " + n)]
    if v.config_checks:
        out += ["", "Config checks"]
        for row in v.config_checks:
            out += wrapped(f"  [{'ok' if row['ok'] else 'FAIL'}] {row['check']}: {row['detail']}")
    out += ["", f"Anomalies ({v.anomaly_count})"]
    if v.anomalies:
        out += fit_table(
            ("kind", "where", "details"),
            [(a["kind"], _where(a), _details(a)) for a in v.anomalies],
            ("id", "id", "text"),
            width,
            indent=2,
            min_text=24,
        )
    if v.anomaly_count > len(v.anomalies):
        out.append(f"  ... {v.anomaly_count - len(v.anomalies)} more (use --format json)")
    out += ["", *wrapped(f"Findings: {', '.join(v.labels) or 'none'}")]
    for f in v.findings:
        impact = f" [{f.impact_fraction:.1%} of the time]" if f.impact_fraction is not None else ""
        out += wrapped(f"  {f.rule_id} {f.name} ({f.label}, {f.severity}){impact}")
        out += wrapped(f"    {f.message}")
        for fix in f.fixes:
            out += wrapped(f"    fix: {fix}")
        out += wrapped(f"    expect: {f.expect}")
    if v.warnings:
        out += ["", "Warnings"] + [x for w in v.warnings for x in wrapped(f"  {w}")]
    return clean_lines(out) + "\n"  # strings from the log and its configs, cleaned (tracedoc.neutral)


def render_log_json(result: "LogResult") -> str:
    return result.to_json()


def render_log_md(result: "LogResult") -> str:
    from .markdown import md_escape
    from .templating import jinja_environment

    env = jinja_environment("md")
    env.filters["md"] = md_escape
    return env.get_template("log.md.j2").render(report=build_log_view(result))


# ---- charts ----------------------------------------------------------------------------------
def decimate(x: np.ndarray, y: np.ndarray, limit: int = MAX_CHART_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most ``limit`` points that keep each bucket's minimum and maximum (spikes stay visible)."""
    ok = np.isfinite(y) & np.isfinite(x)
    x, y = x[ok], y[ok]
    if y.size <= limit:
        return x, y
    edges = np.linspace(0, y.size, limit // 2 + 1).astype(np.int64)[:-1]
    lo = np.minimum.reduceat(y, edges)
    hi = np.maximum.reduceat(y, edges)
    xs = np.repeat(x[edges], 2)
    ys = np.empty(lo.size * 2)
    ys[0::2], ys[1::2] = lo, hi
    return xs, ys


LABEL_GAP_PX = 16  # a line of the 11 px chart font, with its outline, needs this much room


def spread_labels(ys: list[float], top: float, bottom: float, gap: float = LABEL_GAP_PX) -> list[float]:
    """Label positions near ``ys`` (sorted or not) at least ``gap`` apart and within [top, bottom]: each
    label moves as little as it must, so that P10, P50 and P90 a few pixels apart stay readable."""
    order = sorted(range(len(ys)), key=lambda i: ys[i])
    out = [0.0] * len(ys)
    prev = None
    for i in order:
        y = max(ys[i], top) if prev is None else max(ys[i], prev + gap)
        out[i] = prev = y
    over = (prev or 0.0) - bottom
    if over > 0:  # pushed past the bottom: shift the stack up, keeping the gaps
        for i in order:
            out[i] -= over
    return out


class _Frame:
    def __init__(self, x0: float, x1: float, lo: float, hi: float):
        self.x0, self.x1 = x0, (x1 if x1 > x0 else x0 + 1)
        self.lo, self.hi = lo, (hi if hi > lo else lo + (abs(lo) or 1.0))

    def px(self, x) -> np.ndarray:
        return PAD_L + (np.asarray(x, float) - self.x0) / (self.x1 - self.x0) * (CHART_W - PAD_L - PAD_R)

    def py(self, y) -> np.ndarray:
        y = np.clip(np.asarray(y, float), self.lo, self.hi)
        return CHART_H - PAD_B - (y - self.lo) / (self.hi - self.lo) * (CHART_H - PAD_B - PAD_T)

    def polyline(self, x, y) -> str:
        xs, ys = decimate(np.asarray(x, float), np.asarray(y, float))
        return " ".join(f"{a:.1f},{b:.1f}" for a, b in zip(self.px(xs), self.py(ys)))

    def ticks(self) -> list[dict[str, Any]]:
        vals = np.linspace(self.lo, self.hi, 5)
        return [{"y": float(self.py(v)), "label": readable(float(v)), "value": float(v)} for v in vals]

    def xticks(self) -> list[dict[str, Any]]:
        vals = np.linspace(self.x0, self.x1, 6)
        return [{"x": float(self.px(v)), "label": f"{v:,.0f}"} for v in vals]

    def band(self, s0, s1, kind: str, title: str) -> dict[str, Any]:
        xa, xb = float(self.px(s0)), float(self.px(s1))
        return {"x": xa - 1, "w": max(xb - xa, 0) + 2, "kind": kind, "title": title}


def _range(y: np.ndarray) -> tuple[float, float]:
    y = y[np.isfinite(y)]
    if y.size == 0:
        return 0.0, 1.0
    q01, q99 = np.percentile(y, [1, 99])
    spread = max(q99 - q01, 1e-12)
    return float(max(y.min(), q01 - 0.5 * spread)), float(min(y.max(), q99 + 2 * spread))


def _chart(title: str, f: _Frame, lines: list, bands=(), hlines=(), marks=(), note: str = "") -> dict[str, Any]:
    hl = list(hlines)
    label_y = spread_labels([h["y"] - 3 for h in hl], PAD_T + 9, CHART_H - PAD_B - 3)
    for h, y in zip(hl, label_y):
        h["label_y"] = y
    return {
        "title": title,
        "lines": lines,
        "bands": list(bands)[:500],
        "hlines": hl,
        "marks": list(marks)[:300],
        "ticks": f.ticks(),
        "xticks": f.xticks(),
        "x0": f.x0,
        "x1": f.x1,
        "note": note,
    }


def _loss_chart(title: str, steps: np.ndarray, c: dict[str, Any], anomalies: list[dict[str, Any]]) -> dict[str, Any]:
    lo, hi = _range(c["loss"])
    f = _Frame(float(steps[0]), float(steps[-1]), lo, hi)
    marks, bands = [], []
    for a in anomalies:
        if a["kind"] in ("nan", "loss_spike", "divergence") and a.get("field", "loss") == "loss":
            s = a.get("peak_step", a.get("step", a.get("start_step")))
            marks.append(
                {
                    "x": float(f.px(s)),
                    "kind": a["kind"],
                    "title": f"{a['kind']} at {_where(a)}: {_details(a)}",
                    "y": float(f.py(a["loss"])) if a.get("loss") is not None else PAD_T + 6,
                }
            )
        elif a["kind"] == "loss_bump":
            bands.append(
                f.band(a["start_step"], a["end_step"], "loss_bump", f"loss bump at {_where(a)}: {_details(a)}")
            )
    lines = [
        {"points": f.polyline(steps, c["loss"]), "cls": "raw", "label": "loss"},
        {
            "points": f.polyline(steps, c["loss_ma"]),
            "cls": "ma",
            "label": f"centred moving average ({c.get('window')} points)",
        },
    ]
    return _chart(title, f, lines, bands=bands, marks=marks)


def charts(result: "LogResult") -> list[dict[str, Any]]:
    """The report's charts: loss (with its moving average, NaN, spike, bump and divergence marks), the
    losses of series logged beside it, throughput (P10/P50/P90, dips and stalls shaded), gradient norm
    (spikes marked) and the fp16 loss scale (skip groups marked)."""
    c = result.analysis.charts
    steps = c["steps"].astype(float)
    if steps.size < 2:
        return []
    anomalies = result.anomalies
    name = result.series.name
    mine = [a for a in anomalies if a.get("series", name) == name]
    out = []
    if "loss" in c:
        out.append(_loss_chart(f"Loss ({name})" if name else "Loss", steps, c, mine))
    for other, oc in c.get("companions", {}).items():
        if "loss" in oc and oc["steps"].size >= 2:
            out.append(
                _loss_chart(
                    f"Loss ({other})", oc["steps"].astype(float), oc, [a for a in anomalies if a.get("series") == other]
                )
            )
    if "throughput" in c:
        tp = c["throughput"]
        lo, hi = _range(tp)
        f = _Frame(float(steps[0]), float(steps[-1]), min(lo, 0.0), hi)
        bands = [
            f.band(
                a.get("start_step", a.get("step")),
                a.get("end_step", a.get("step")),
                a["kind"],
                f"{a['kind']} at {_where(a)}: {_details(a)}",
            )
            for a in mine
            if a["kind"] in ("throughput_dip", "periodic_stall")
        ]
        hlines = [
            {"y": float(f.py(c[k])), "label": f"{k[-3:].upper()} {readable(c[k])}", "cls": k[-3:]}
            for k in ("throughput_p90", "throughput_p50", "throughput_p10")
            if c.get(k) is not None
        ]
        drift = [a for a in mine if a["kind"] == "throughput_drift"]
        note = (
            f"time per unit of work {drift[0]['drift_fraction']:+.0%} from the first to the last fifth "
            f"({drift[0]['shape']})"
            if drift and drift[0].get("drift_fraction") is not None
            else ""
        )
        out.append(
            _chart(
                f"Throughput ({c['throughput_unit']})",
                f,
                [{"points": f.polyline(steps, tp), "cls": "tp", "label": "throughput"}],
                bands=bands,
                hlines=hlines,
                note=note,
            )
        )
    if "grad_norm" in c:
        g = c["grad_norm"]
        lo, hi = _range(g)
        f = _Frame(float(steps[0]), float(steps[-1]), min(lo, 0.0), hi)
        marks = [
            {
                "x": float(f.px(a["peak_step"])),
                "kind": "loss_spike",
                "y": float(f.py(a["grad_norm"])),
                "title": f"gradient-norm spike at {_where(a)}: {_details(a)}",
            }
            for a in mine
            if a["kind"] == "grad_norm_spike" and a.get("grad_norm") is not None
        ]
        out.append(
            _chart(
                "Gradient norm",
                f,
                [{"points": f.polyline(steps, g), "cls": "gn", "label": "gradient norm"}],
                marks=marks,
            )
        )
    if "loss_scale" in c:
        sc = np.where(c["loss_scale"] > 0, np.log2(np.where(c["loss_scale"] > 0, c["loss_scale"], 1.0)), np.nan)
        lo, hi = _range(sc)
        f = _Frame(float(steps[0]), float(steps[-1]), lo - 0.5, hi + 0.5)
        bands = [
            f.band(
                a.get("start_step", a.get("step")),
                a.get("end_step", a.get("step")),
                "skips" if a.get("group") != "burst" else "throughput_dip",
                f"skipped steps at {_where(a)}: {_details(a)}",
            )
            for a in mine
            if a["kind"] == "skipped_iterations"
        ]
        chart = _chart(
            "fp16 loss scale (log2)",
            f,
            [{"points": f.polyline(steps, sc), "cls": "ls", "label": "log2 loss scale"}],
            bands=bands,
        )
        powers = np.arange(np.ceil(f.lo), np.floor(f.hi) + 1)
        if powers.size > 6:
            powers = powers[:: int(np.ceil(powers.size / 6))]
        chart["ticks"] = [{"y": float(f.py(p)), "label": readable(2.0**p), "value": float(p)} for p in powers]
        out.append(chart)
    return out


def render_log_html(result: "LogResult") -> str:
    import markupsafe

    from .templating import asset, jinja_environment

    env = jinja_environment("html")
    view = build_log_view(result, anomaly_rows=500, with_charts=True)
    return env.get_template("log.html.j2").render(report=view, css=markupsafe.Markup(asset("report.css")))
