"""The training-log HTML report in a real browser (Debian's Chromium driven by Playwright): the charts
render from disk with no script, no console error and no network request; every label stays inside
its chart and the P10/P50/P90 labels do not cover each other even where the three values are close;
the moving average starts on the data. Screenshots go to the test's tmp directory and tests/_output/.

Skips, with the reason, only when Playwright or Chromium is missing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import log_fixtures as F  # noqa: E402
from browser_support import ARGS, CHROMIUM, OUTPUT, sync_api  # noqa: E402, F401  (skips when Chromium is missing)

from tracedoc.api import analyze_log  # noqa: E402
from tracedoc.render.logview import render_log_html  # noqa: E402


def open_log_report(browser, log: Path, tmp_path: Path, name: str):
    result = analyze_log(log)
    page_path = tmp_path / name
    page_path.write_text(render_log_html(result), encoding="utf-8")
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    blocked: list[str] = []
    url = page_path.resolve().as_uri()
    context.route(
        "**/*",
        lambda route: (
            route.continue_() if route.request.url == url else (blocked.append(route.request.url), route.abort())
        ),
    )
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    return result, context, page, errors, blocked


def boxes(page, selector: str) -> list[dict]:
    return page.evaluate(f"""() => Array.from(document.querySelectorAll({json.dumps(selector)})).map(e => {{
        const r = e.getBoundingClientRect(); const s = e.closest('svg').getBoundingClientRect();
        return {{text: e.textContent, l: r.left, r: r.right, t: r.top, b: r.bottom,
                 sl: s.left, sr: s.right, st: s.top, sb: s.bottom}}; }})""")


def overlap(a: dict, b: dict) -> bool:
    return a["l"] < b["r"] and b["l"] < a["r"] and a["t"] < b["b"] and b["t"] < a["b"]


def screenshot(page, tmp_path: Path, name: str) -> None:
    shot = tmp_path / name
    page.screenshot(path=str(shot), full_page=True)
    OUTPUT.mkdir(exist_ok=True)
    shutil.copy(shot, OUTPUT / name)


def test_throughput_labels_are_readable_when_p10_p50_p90_are_close(browser, tmp_path):
    """Throughput steady within 1%: P10, P50 and P90 lie within a pixel or two of each other, and their
    labels are spread so that each stays readable, inside the chart."""
    rng = np.random.default_rng(3)
    n = 2000
    tps = 10_000 * (1 + rng.normal(0, 0.004, n))
    tps[np.arange(1, n + 1) % 250 == 0] = 4000
    loss = 2 + 3 * np.exp(-np.arange(n) / 300) + rng.normal(0, 0.01, n)
    log = tmp_path / "close.jsonl"
    log.write_text(
        "".join(
            json.dumps({"step": i + 1, "loss": float(loss[i]), "tokens_per_sec": float(tps[i])}) + "\n"
            for i in range(n)
        )
    )
    result, context, page, errors, blocked = open_log_report(browser, log, tmp_path, "log_close_percentiles.html")
    try:
        assert errors == [] and blocked == []
        labels = boxes(page, "text.hlabel")
        assert [b["text"].split()[0] for b in labels] == ["P90", "P50", "P10"]
        for i, a in enumerate(labels):
            assert a["l"] >= a["sl"] and a["r"] <= a["sr"] and a["t"] >= a["st"] and a["b"] <= a["sb"], a
            for b in labels[i + 1 :]:
                assert not overlap(a, b), (a, b)
        for tick in boxes(page, "text.ytick") + boxes(page, "text.xtick"):
            assert tick["l"] >= tick["sl"] - 0.5 and tick["r"] <= tick["sr"] + 0.5, tick
        stalls = page.locator("rect.band-periodic_stall")
        assert stalls.count() == len([a for a in result.anomalies if a["kind"] == "periodic_stall"]) == 8
        screenshot(page, tmp_path, "log_close_percentiles.png")
    finally:
        context.close()


def test_charts_of_a_megatron_fp16_log_with_a_bump(browser, tmp_path):
    log = tmp_path / "megatron.log"
    log.write_text(F.megatron_deepspeed(n_iters=3000, bump=(2000, 300, 2.2)))
    result, context, page, errors, blocked = open_log_report(browser, log, tmp_path, "log_megatron.html")
    try:
        assert errors == [] and blocked == []
        assert page.evaluate("document.scripts.length") == 0
        titles = page.locator("section.log-chart h2").all_inner_texts()
        assert titles == ["Loss", "Throughput (samples/s)", "Gradient norm", "fp16 loss scale (log2)"]
        for svg in page.locator("svg.chart").all():
            box = svg.bounding_box()
            assert box["width"] > 600 and box["height"] > 100
        assert page.locator("rect.band-loss_bump").count() == 1
        assert page.locator("rect.band-periodic_stall").count() == 29
        # the moving average starts on the data: its first point is the first loss value's
        first = page.evaluate("""() => ['raw', 'ma'].map(c => document.querySelector('svg.chart polyline.' + c)
            .getAttribute('points').split(' ')[0].split(',').map(Number))""")
        assert first[0] == pytest.approx(first[1], abs=0.6)
        ticks = [t["text"] for t in boxes(page, "svg.chart:last-of-type text.ytick")]
        assert "32,768" in " ".join(t["text"] for t in boxes(page, "text.ytick")) or ticks
        screenshot(page, tmp_path, "log_megatron.png")
    finally:
        context.close()


def test_charts_of_a_ppo_log_show_actor_and_critic(browser, tmp_path):
    log = tmp_path / "ppo.log"
    log.write_text(F.ds_chat_ppo(n=200, critic_nan_at=120))
    result, context, page, errors, blocked = open_log_report(browser, log, tmp_path, "log_ppo.html")
    try:
        assert errors == [] and blocked == []
        titles = page.locator("section.log-chart h2").all_inner_texts()
        assert titles[:2] == ["Loss (actor)", "Loss (critic)"]
        critic = page.locator("section.log-chart").nth(1)
        assert critic.locator("line.mark-nan").count() == 1
        screenshot(page, tmp_path, "log_ppo.png")
    finally:
        context.close()
