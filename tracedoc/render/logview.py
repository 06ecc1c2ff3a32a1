"""Reports for a training log: ``LogResult`` -> its view model (``views.LogView``) -> terminal text,
Markdown or one self-contained HTML page; JSON is the result itself.

The HTML page draws its charts as inline SVG computed here (loss with its moving average and markers
at NaN and spike steps; throughput with the P10 line, dips shaded and periodic stalls marked), so it
needs no script and no network. Every string from the log (paths, field names, messages that quote
them) reaches the page through Jinja autoescaping, and the Markdown through ``md_escape``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .format import fmt_value
from .views import LogView

if TYPE_CHECKING:  # pragma: no cover
    from ..logs.report import LogResult

MAX_CHART_POINTS = 1200
MAX_ANOMALY_ROWS = 50
CHART_W, CHART_H, PAD_L, PAD_R, PAD_T, PAD_B = 900, 220, 64, 12, 10, 26


_where, _details = LogView.where, LogView.details


def build_log_view(result: "LogResult", anomaly_rows: int = MAX_ANOMALY_ROWS, with_charts: bool = False) -> LogView:
    """The log report's view model: every renderer of a log formats this."""
    return LogView(source=result.source, format=result.input.format, labels=list(result.labels),
                   summary=summary_lines(result), findings=list(result.findings),
                   config_checks=list(result.config_checks), anomalies=result.anomalies[:anomaly_rows],
                   anomaly_count=len(result.anomalies), notes=list(result.analysis.notes),
                   warnings=list(result.warnings), points=result.metrics["log_points"],
                   charts=charts(result) if with_charts else [],
                   size={"w": CHART_W, "h": CHART_H, "l": PAD_L, "r": PAD_R, "t": PAD_T, "b": PAD_B})


def summary_lines(result: "LogResult") -> list[str]:
    m = result.metrics
    lines = [f"{result.input.format}: {m['log_points']} logged steps, {m['log_first_step']}-{m['log_last_step']}"]
    lines.append("fields: " + ", ".join(f"{k} <- {v!r}" for k, v in result.fields.items()))
    if m["loss_logged"]:
        ma = result.analysis.charts.get("loss_ma")
        last_ma = float(ma[-1]) if ma is not None and ma.size and np.isfinite(ma[-1]) else None
        lines.append(f"loss: moving average over {result.analysis.charts.get('window')} points ends at {fmt_value(last_ma)}; "
                     f"NaN/inf {fmt_value(m['loss_nonfinite_count'])}; spike episodes {fmt_value(m['loss_spike_count'])}; "
                     f"diverging {fmt_value(m['divergence'])}")
    if m["throughput_p50"] is not None:
        stall = (f"; slow step every {m['periodic_stall_period_steps']} steps x{m['periodic_stall_count']}"
                 if m["periodic_stall_period_steps"] else "; no periodic stall")
        lines.append(f"throughput ({m['throughput_unit']}): P10 {fmt_value(m['throughput_p10'], ',.4g')}, "
                     f"P50 {fmt_value(m['throughput_p50'], ',.4g')}, P90 {fmt_value(m['throughput_p90'], ',.4g')}; "
                     f"dip episodes {m['throughput_dip_count']} ({fmt_value(m['throughput_dip_lost_fraction'], '.1%')} of the time)"
                     + stall)
    if m["lr_schedule"]:
        lines.append(f"learning rate: {m['lr_schedule']}")
    if m["gpu_util_mean_percent"] is not None:
        lines.append(f"GPU utilisation: mean {m['gpu_util_mean_percent']:.0f}%, below 50% on "
                     f"{m['low_gpu_util_fraction']:.0%} of the steps")
    if m["config_source"]:
        lines.append(f"config: {m['config_source']}")
    return lines


def render_log_text(result: "LogResult") -> str:
    v = build_log_view(result)
    out = [f"tracedoc logs: {v.source}", ""]
    out += ["  " + line for line in v.summary]
    if v.notes:
        out += [""] + ["  " + n for n in v.notes]
    if v.config_checks:
        out += ["", "Config checks"]
        for row in v.config_checks:
            out.append(f"  [{'ok' if row['ok'] else 'FAIL'}] {row['check']}: {row['detail']}")
    out += ["", f"Anomalies ({v.anomaly_count})"]
    for a in v.anomalies:
        out.append(f"  {a['kind']:<17} {_where(a):<20} {_details(a)}")
    if v.anomaly_count > len(v.anomalies):
        out.append(f"  ... {v.anomaly_count - len(v.anomalies)} more (use --format json)")
    out += ["", f"Findings: {', '.join(v.labels) or 'none'}"]
    for f in v.findings:
        impact = f" [{f.impact_fraction:.1%} of the time]" if f.impact_fraction is not None else ""
        out.append(f"  {f.rule_id} {f.name} ({f.label}, {f.severity}){impact}")
        out.append(f"    {f.message}")
        for fix in f.fixes:
            out.append(f"    fix: {fix}")
        out.append(f"    expect: {f.expect}")
    if v.warnings:
        out += ["", "Warnings"] + [f"  {w}" for w in v.warnings]
    return "\n".join(out) + "\n"


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
    ok = np.isfinite(y)
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
        return [{"y": float(self.py(v)), "label": format(float(v), ".4g")} for v in vals]


def _range(y: np.ndarray) -> tuple[float, float]:
    y = y[np.isfinite(y)]
    if y.size == 0:
        return 0.0, 1.0
    q01, q99 = np.percentile(y, [1, 99])
    spread = max(q99 - q01, 1e-12)
    return float(max(y.min(), q01 - 0.5 * spread)), float(min(y.max(), q99 + 2 * spread))


def charts(result: "LogResult") -> list[dict[str, Any]]:
    c = result.analysis.charts
    steps = c["steps"].astype(float)
    if steps.size < 2:
        return []
    out = []
    x0, x1 = float(steps[0]), float(steps[-1])
    if "loss" in c:
        lo, hi = _range(c["loss"])
        f = _Frame(x0, x1, lo, hi)
        marks = []
        for a in result.anomalies:
            if a["kind"] in ("nan", "loss_spike", "divergence"):
                s = a.get("peak_step", a.get("step", a.get("start_step")))
                marks.append({"x": float(f.px(s)), "kind": a["kind"], "title": f"{a['kind']} at {_where(a)}",
                              "y": float(f.py(a["loss"])) if "loss" in a and a["loss"] is not None else PAD_T + 6})
        out.append({"title": "Loss", "lines": [{"points": f.polyline(steps, c["loss"]), "cls": "raw", "label": "loss"},
                                                {"points": f.polyline(steps, c["loss_ma"]), "cls": "ma",
                                                 "label": f"moving average ({c.get('window')} points)"}],
                    "bands": [], "hlines": [], "marks": marks[:300], "ticks": f.ticks(), "x0": x0, "x1": x1})
    if "throughput" in c:
        tp = c["throughput"]
        lo, hi = _range(tp)
        f = _Frame(x0, x1, min(lo, 0.0), hi)
        bands, marks = [], []
        for a in result.anomalies:
            if a["kind"] in ("throughput_dip", "periodic_stall"):
                s0, s1 = a.get("start_step", a.get("step")), a.get("end_step", a.get("step"))
                xa, xb = float(f.px(s0)), float(f.px(s1))
                bands.append({"x": xa - 1, "w": max(xb - xa, 0) + 2, "kind": a["kind"], "title": f"{a['kind']} at {_where(a)}"})
        hlines = [{"y": float(f.py(c["throughput_p10"])), "label": f"P10 {c['throughput_p10']:,.4g}"},
                  {"y": float(f.py(c["throughput_p50"])), "label": f"P50 {c['throughput_p50']:,.4g}"}]
        out.append({"title": f"Throughput ({c['throughput_unit']})", "lines": [{"points": f.polyline(steps, tp),
                    "cls": "tp", "label": "throughput"}], "bands": bands[:500], "hlines": hlines, "marks": marks,
                    "ticks": f.ticks(), "x0": x0, "x1": x1})
    return out


def render_log_html(result: "LogResult") -> str:
    import markupsafe

    from .templating import asset, jinja_environment

    env = jinja_environment("html")
    view = build_log_view(result, anomaly_rows=500, with_charts=True)
    return env.get_template("log.html.j2").render(report=view, css=markupsafe.Markup(asset("report.css")))
