"""Many ranks at a glance: from 64 ranks the text and Markdown reports show the straggler, the ranks
that wait most and a summary of the rest; the HTML report a sortable rank table and rank x step
heatmaps (inline SVG) where the straggler stands out; the merged timeline stays bounded and says
what it left out.

One 64-rank job of full traces (``job_builder``), rank 21 late by 20% of the step at the first
collective of every step.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import zlib

import pytest
from job_builder import write_job

from tracedoc.api import analyze
from tracedoc.render import render_html, render_md, render_text
from tracedoc.render.manyranks import TOP_WAITERS
from tracedoc.render.perfetto_job import MAX_FULL_RANKS

N_RANKS, SLOW = 64, 21


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    d = write_job(tmp_path_factory.mktemp("many") / "run", N_RANKS, 3, {SLOW: 0.2}, seed=5)
    result = analyze(d, jobs=1)
    assert result.job.straggler_ranks == [SLOW]
    return result


def _top_waiters(result) -> list[int]:
    rows = sorted((r for r in result.job.ranks), key=lambda r: (-(r.wait_ns_per_step or 0.0), r.rank))
    return [r.rank for r in rows[:TOP_WAITERS]]


def test_text_shows_the_straggler_the_top_waiters_and_a_summary_of_the_rest(job):
    text = render_text(job, width=160)
    table = text.split("Ranks that matter")[1].split("the other")[0]
    lines = [ln for ln in table.splitlines()[2:] if ln.strip()]
    shown = [int(ln.split()[0]) for ln in lines]
    assert shown[0] == SLOW and "straggler (high)" in lines[0]
    assert set(_top_waiters(job)) <= set(shown)
    assert job.job.median_rank in shown
    assert len(shown) <= 1 + TOP_WAITERS + 2  # not 64 rows
    rest = N_RANKS - len(shown)
    assert f"the other {rest} ranks:" in text
    for measure in ("step p50", "wait/step", "lateness/step", "arrived last", "verdicts:"):
        assert measure in text.split(f"the other {rest} ranks:")[1]
    # the per-rank verdict table holds the same ranks
    verdicts = text.split(f"\n{N_RANKS} ranks\n")[1]
    rows = [int(m) for m in re.findall(r"^\s*(\d+)\s+rank\d+\.pt", verdicts, flags=re.M)]
    assert rows == shown
    assert f"{rest} more ranks" in verdicts


def test_markdown_fits_a_comment_and_carries_the_digest(job):
    md = render_md(job)
    assert len(md) < 60_000
    assert "**Ranks that matter" in md and f"| {SLOW} | straggler (high) |" in md
    digest = md.split("**Ranks that matter")[1].split("\n\n")[1]
    assert 4 <= digest.count("\n") <= 1 + 2 + TOP_WAITERS + 2  # header, rule, rows: not 64


def _png_rows(svg: str) -> list[list[tuple[int, int, int]]]:
    """The cells of the heatmap's embedded PNG (RGB, 8 bits, no filter), row by row."""
    data = base64.b64decode(re.search(r'href="data:image/png;base64,([^"]+)"', svg).group(1))
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    idat = data.index(b"IDAT")
    raw = zlib.decompress(data[idat + 4 : idat + 4 + int.from_bytes(data[idat - 4 : idat], "big")])
    stride = 1 + 3 * width
    return [[tuple(raw[y * stride + 1 + 3 * x : y * stride + 4 + 3 * x]) for x in range(width)] for y in range(height)]


def test_html_heatmaps_make_the_straggler_stand_out(job):
    html = render_html(job)
    svgs = re.findall(r"<svg[^>]*class=\"heat-svg\".*?</svg>", html, flags=re.S)
    assert len(svgs) == 2  # lateness, wait
    assert "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")  # nothing fetched
    late, wait = (_png_rows(s) for s in svgs)
    ranks = job.job.heatmap["ranks"]
    assert len(late) == N_RANKS and len(late[0]) == len(job.job.heatmap["steps"])
    # lateness: the straggler's row is the darkest (lowest green) in every step it was measured in
    darkest = {
        min(range(N_RANKS), key=lambda i: late[i][s][1])
        for s in range(len(late[0]))
        if any(late[i][s][1] < 255 for i in range(N_RANKS))
    }
    assert darkest == {ranks.index(SLOW)}
    # wait: the straggler waits least
    mean_green = [sum(c[1] for c in row) / len(row) for row in wait]
    assert max(range(N_RANKS), key=lambda i: mean_green[i]) == ranks.index(SLOW)
    assert f"rank {SLOW} straggler" in svgs[0]


def test_html_rank_table_is_sortable_and_holds_every_rank(job):
    html = render_html(job)
    table = html.split('id="job-rank-table"')[1].split("</table>")[0]
    assert 'class="sortable"' in html.split('id="job-rank-table"')[0][-40:]
    assert table.count("<tr") == N_RANKS + 1
    assert table.count('data-col="') == 7 and "onclick" not in table
    # the wait column sorts by the value in ns, not by its text
    rows = {int(r.rank): r for r in job.job.ranks}
    body = table.split("<tbody>")[1]
    parsed = [
        re.findall(r'<td data-sort="([^"]*)">([^<]*)</td>', tr) for tr in re.findall(r"<tr[^>]*>(.*?)</tr>", body)
    ]
    assert len(parsed) == N_RANKS
    for cells in parsed:
        rank = int(cells[0][1])
        assert float(cells[0][0]) == rank
        assert float(cells[3][0]) == pytest.approx(rows[rank].wait_ns_per_step)  # "wait/step"
        assert cells[3][1].endswith("ms")
    assert sum(1 for tr in re.findall(r"<tr([^>]*)>", body) if "straggler-row" in tr) == 1


def test_merged_timeline_of_a_large_job_is_bounded_and_says_what_it_left_out(job, tmp_path):
    from tracedoc.render.perfetto import write_perfetto

    out = write_perfetto(job, str(tmp_path / "job.json.gz"))
    doc = json.loads(gzip.decompress(open(out, "rb").read()))
    head = doc["tracedoc"]
    full = set(head["ranks_in_full"])
    assert len(full) == MAX_FULL_RANKS and head["ranks_left_out"] == N_RANKS - MAX_FULL_RANKS
    assert {SLOW, job.job.median_rank} | set(_top_waiters(job)) <= full
    assert "not drawn in full" in head["left_out"]
    events = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert sorted(procs.values()) == sorted([f"rank {r}" for r in full] + ["all ranks · matched collectives"])
    summary = next(p for p, n in procs.items() if n.startswith("all ranks"))
    slices = [e for e in events if e.get("pid") == summary and e.get("ph") == "X"]
    assert len(slices) == job.job.collectives_matched  # every matched collective
    assert any(e.get("ph") == "i" and e["name"].startswith("left out:") for e in events)
    # every matched collective has its arrows to the ranks drawn in full
    flows = [e for e in events if e.get("ph") == "s" and e.get("cat") == "tracedoc.collective"]
    linked = {int(e["id"][3:].split(".")[0]) for e in flows}
    assert linked == set(range(job.job.collectives_matched))
    # the ranks left out contribute no events of their own
    drawn_pids = set(procs)
    assert {e.get("pid") for e in events} <= drawn_pids


def test_the_rank_table_sorts_in_a_browser(job, tmp_path):
    """A click on a heading sorts by the raw values (the page's own script, under its CSP)."""
    import shutil
    from pathlib import Path

    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    chromium = next(
        (
            p
            for p in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser"))
            if p and Path(p).exists()
        ),
        None,
    )
    if chromium is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    page_path = tmp_path / "job.html"
    page_path.write_text(render_html(job), encoding="utf-8")
    errors: list[str] = []
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--headless", "--disable-gpu"])
        try:
            page = b.new_page()
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_path.as_uri())

            def first_after_click(col: int) -> int:
                page.click(f"#job-rank-table th[data-col='{col}']")
                return int(page.eval_on_selector("#job-rank-table tbody tr", "r => r.cells[0].textContent"))

            assert first_after_click(5) == SLOW  # lateness/step, descending: the straggler first
            assert first_after_click(3) == _top_waiters(job)[0]  # wait/step, descending
            assert first_after_click(3) == SLOW  # again: ascending, the straggler waits least
        finally:
            b.close()
    assert errors == []
