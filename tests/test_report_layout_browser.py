"""The HTML report's layout in a real browser at a wide (1400 px) and a narrow (800 px) window: no
element sticks out of its section, and the summary tiles keep a sane height (a number and a caption,
not a paragraph), on a single-GPU report, a job report and a report of a trace with CPU activity only.

Screenshots go to the test's tmp directory and tests/_output/ (git-ignored). Skips, with the reason,
when Playwright or Chromium is missing, as tests/test_report_browser.py does.
"""

from __future__ import annotations

import pytest

from browser_support import ARGS, CHROMIUM, OUTPUT, sync_api  # noqa: F401  (skips without a browser)

from tracedoc.api import analyze
from tracedoc.cli import example_path
from tracedoc.render import render_html

TILE_MAX_PX = 140  # two lines of caption under the number fit well inside this; a paragraph does not
WIDTHS = (1400, 800)

LAYOUT = """() => {
  const clipped = (el, stop) => {  // inside a box that scrolls or clips what overflows it
    for (let a = el.parentElement; a && a !== stop; a = a.parentElement) {
      if (['auto', 'scroll', 'hidden', 'clip'].includes(getComputedStyle(a).overflowX)) return true;
    }
    return false;
  };
  const out = [];
  for (const sec of document.querySelectorAll('section')) {
    const r = sec.getBoundingClientRect();
    if (!r.width) continue;
    if (sec.scrollWidth > sec.clientWidth + 1) {  // text or boxes wider than the section, not in a scroller
      out.push(`${sec.id || 'section'}: content ${sec.scrollWidth} px wide in ${sec.clientWidth} px`);
    }
    for (const el of sec.querySelectorAll('*')) {
      const b = el.getBoundingClientRect();
      const pos = getComputedStyle(el).position;
      if (!b.width || !b.height || pos === 'absolute' || pos === 'fixed' || clipped(el, sec)) continue;
      if (b.right > r.right + 1 || b.left < r.left - 1) {
        out.push(`${sec.id || 'section'} > ${el.tagName.toLowerCase()}.${el.className}: ` +
                 `${Math.round(b.left)}-${Math.round(b.right)} outside ${Math.round(r.left)}-${Math.round(r.right)}`);
      }
    }
  }
  return {overflow: out.slice(0, 10),
          tiles: [...document.querySelectorAll('.tile')].map(t => Math.round(t.getBoundingClientRect().height)),
          cut: [...document.querySelectorAll('.tile-value')].filter(v => v.scrollWidth > v.clientWidth + 1)
                 .map(v => v.textContent),  // a number too long for its tile (a sentence in the big font)
          page: document.documentElement.scrollWidth, viewport: innerWidth};
}"""


def gpu_report():
    return analyze(example_path())


def h100_report():
    from conftest import shared_traces

    return analyze(shared_traces() / "h100" / "gpt_small_fp32.pt.trace.json.gz")  # MFU with its peak and device


def job_report(tmp_path):
    from test_job_align import _late_window_job

    return analyze(_late_window_job(tmp_path / "job"), jobs=1)


def cpu_report(tmp_path):
    from test_cpu_only_formats import cpu_only_trace

    return cpu_only_trace(tmp_path)


@pytest.mark.parametrize("kind", ["gpu", "h100", "job", "cpu"])
def test_nothing_overflows_its_section_and_tiles_stay_small(browser, tmp_path, kind):
    result = {
        "gpu": gpu_report,
        "h100": h100_report,
        "job": lambda: job_report(tmp_path),
        "cpu": lambda: cpu_report(tmp_path),
    }[kind]()
    path = tmp_path / f"{kind}.html"
    path.write_text(render_html(result), encoding="utf-8")
    for width in WIDTHS:
        context = browser.new_context(viewport={"width": width, "height": 1000})
        try:
            page = context.new_page()
            page.route(
                "**/*", lambda route: route.continue_() if route.request.url.startswith("file:") else route.abort()
            )
            page.goto(path.resolve().as_uri())
            page.wait_for_load_state("load")
            layout = page.evaluate(LAYOUT)
            OUTPUT.mkdir(exist_ok=True)
            shot = tmp_path / f"layout-{kind}-{width}.png"
            page.screenshot(path=str(shot), full_page=False)
            (OUTPUT / shot.name).write_bytes(shot.read_bytes())
        finally:
            context.close()
        assert layout["overflow"] == [], (width, layout["overflow"])
        assert layout["page"] <= layout["viewport"], (width, layout)  # no sideways scrolling of the page
        assert layout["tiles"] and max(layout["tiles"]) < TILE_MAX_PX, (width, layout["tiles"])
        assert layout["cut"] == [], (width, layout["cut"])
