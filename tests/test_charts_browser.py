"""The reports' charts in a real browser at 1400 and 800 px: the roofline plot, the trend chart and the
job's cross-rank timeline are drawn (inline SVG, no request of any kind), no two of their labels overlap,
no label or mark is cut at the chart's edge, and nothing makes the page scroll sideways. The job report's
bar labels fit their segments and the log report's anomaly table fits the page.

Screenshots go to the test's tmp directory and tests/_output/ (git-ignored). Skips, with the reason,
when Playwright or Chromium is missing, as tests/test_report_browser.py does.
"""

from __future__ import annotations

import shutil


from browser_support import ARGS, CHROMIUM, OUTPUT, sync_api  # noqa: F401  (skips without a browser)

from tracedoc.api import analyze, analyze_log, trend
from tracedoc.render import render_html
from tracedoc.render.logview import render_log_html
from tracedoc.render.trend import render_trend_html

WIDTHS = (1400, 800)

# Every text box and mark of each chart: text boxes must not overlap one another; each must lie inside
# its svg; and the page must not be wider than the window.
GEOMETRY = """(selector) => {
  const svgs = [...document.querySelectorAll(selector)];
  const out = {charts: svgs.length, overlaps: [], outside: [], page: document.documentElement.scrollWidth,
               viewport: innerWidth, marks: 0};
  for (const svg of svgs) {
    const s = svg.getBoundingClientRect();
    const texts = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim())
      .map(t => ({t: t.textContent, r: t.getBoundingClientRect()}));
    for (let i = 0; i < texts.length; i++) {
      for (let j = i + 1; j < texts.length; j++) {
        const a = texts[i].r, b = texts[j].r;
        if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
          out.overlaps.push(texts[i].t + ' / ' + texts[j].t);
      }
    }
    for (const el of svg.querySelectorAll('text, rect, circle, line')) {
      const r = el.getBoundingClientRect();
      if (!r.width && !r.height) continue;
      if (el.tagName !== 'text') out.marks++;
      if (r.left < s.left - 1 || r.right > s.right + 1 || r.top < s.top - 1 || r.bottom > s.bottom + 1)
        out.outside.push(el.tagName + ':' + (el.textContent || '').slice(0, 40));
    }
  }
  return out;
}"""


def open_page(browser, html: str, tmp_path, name: str, width: int):
    path = tmp_path / f"{name}.html"
    path.write_text(html, encoding="utf-8")
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    url = path.resolve().as_uri()
    requests: list[str] = []
    context.route(
        "**/*",
        lambda route: (
            route.continue_() if route.request.url == url else (requests.append(route.request.url), route.abort())
        ),
    )
    page.goto(url)
    return context, page, requests


def check(browser, html: str, tmp_path, name: str, selector: str, min_marks: int) -> None:
    for width in WIDTHS:
        context, page, requests = open_page(browser, html, tmp_path, name, width)
        try:
            g = page.evaluate(GEOMETRY, selector)
            shot = tmp_path / f"{name}_{width}.png"
            page.screenshot(path=str(shot), full_page=True)
            OUTPUT.mkdir(exist_ok=True)
            shutil.copy(shot, OUTPUT / shot.name)
        finally:
            context.close()
        assert g["charts"] >= 1, f"{name}: no {selector} drawn"
        assert g["marks"] >= min_marks, f"{name} at {width}px: {g['marks']} marks"
        assert not g["overlaps"], f"{name} at {width}px: labels overlap: {g['overlaps'][:5]}"
        assert not g["outside"], f"{name} at {width}px: cut at the chart's edge: {g['outside'][:5]}"
        assert g["page"] <= g["viewport"], f"{name} at {width}px: the page scrolls sideways ({g['page']} px)"
        assert not requests, requests


def test_roofline_plot(browser, tmp_path):
    from test_roofline import two_ops_trace

    result = two_ops_trace(tmp_path)
    html = render_html(result)
    assert html.count('class="op-point"') == 2  # the two modelled rows; the unmodelled op has no place
    assert "<title>aten::mm · [4096, 4096] x [4096, 8192] · bf16" in html  # hover: op, shapes, dtype
    assert 'class="roof memory-roof"' in html and 'class="roof compute-roof"' in html
    check(browser, html, tmp_path, "roofline", "svg.roofline-plot", 4)


def test_trend_chart(browser, tmp_path):
    from test_notebook_diff_log import _trace

    runs = [
        _trace(tmp_path / f"run_with_a_long_name_{i}.pt.trace.json", dl) for i, dl in enumerate((8000.0, 0.0, 4000.0))
    ]
    t = trend(*runs)
    html = render_trend_html(t)
    assert html.count('class="bar"') == 3 and "+ host_bound" in html and "− io_bound" in html  # labels marked
    check(browser, html, tmp_path, "trend", "svg.trend-chart", 3)
    context, page, _ = open_page(browser, html, tmp_path, "trend", 800)
    try:  # the name column is wide enough for a file name (it once broke them letter by letter)
        width = page.evaluate("() => document.querySelector('table.trend td.name').getBoundingClientRect().width")
    finally:
        context.close()
    assert width >= 120


def test_job_timeline_and_bar_labels(browser, tmp_path):
    from test_job_align import _late_window_job

    result = analyze(_late_window_job(tmp_path / "job"), jobs=1)
    html = render_html(result)
    assert 'id="job-timeline"' in html and html.count('class="lane"') == 2
    assert 'class="seg-wait"' in html and 'class="late"' in html  # the straggler's lateness is marked
    check(browser, html, tmp_path, "job", "svg.job-timeline", 6)
    for width in WIDTHS:
        context, page, _ = open_page(browser, html, tmp_path, "job", width)
        try:  # each bar label inside its own segment: none runs into its neighbour
            spill = page.evaluate("""() => [...document.querySelectorAll('.job-seg')]
                .filter(s => s.textContent.trim() && s.scrollWidth > s.clientWidth + 1).map(s => s.textContent)""")
        finally:
            context.close()
        assert not spill, f"bar labels wider than their segment at {width}px: {spill}"


def test_no_job_timeline_from_a_saved_report(tmp_path):
    from test_job_align import _late_window_job

    from tracedoc import load_report

    result = analyze(_late_window_job(tmp_path / "job"), jobs=1)
    result.save(tmp_path / "job.json")
    assert 'id="job-timeline"' not in render_html(load_report(tmp_path / "job.json"))


def test_log_anomaly_table_fits(browser, tmp_path):
    from log_fixtures import llmc_main_log

    log = tmp_path / "main.log"
    log.write_text(llmc_main_log(n=2000, spike_at=900))
    html = render_log_html(analyze_log(log))
    for width in WIDTHS:
        context, page, _ = open_page(browser, html, tmp_path, "log", width)
        try:
            wide = page.evaluate("""() => [...document.querySelectorAll('.table-wrap')]
                .filter(t => t.scrollWidth > t.clientWidth + 1).length""")
        finally:
            context.close()
        assert not wide, f"{wide} tables scroll sideways at {width}px"
