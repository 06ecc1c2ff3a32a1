"""A trace with CPU activity only: every format says GPU-side metrics were not recorded, and shows its
GPU figures as n/a rather than measured-looking zeros."""

import json

from tracedoc import analyze
from tracedoc.render import render_html, render_json, render_md, render_text
from trace_builder import TraceBuilder

NOT_RECORDED = "GPU-side metrics were not recorded"


def cpu_only_trace(tmp_path):
    b = TraceBuilder(backend=None, world_size=None, rank=None)
    t = 0.0
    for step in range(5):
        b.step(step, t, t + 10_000)
        b.dataloader(t + 10, t + 9_000)  # the loop waits on its data for 90% of each step
        b.cpu_op("aten::mm", t + 9_100, t + 9_900)
        t += 10_000
    return analyze(str(b.write(tmp_path / "cpu.json")))


def test_every_format_says_gpu_metrics_were_not_recorded(tmp_path):
    result = cpu_only_trace(tmp_path)
    assert not result.focus.metrics.get("has_gpu_ops")
    text = " ".join(render_text(result).split())
    assert NOT_RECORDED in text
    assert NOT_RECORDED in " ".join(render_md(result).split())
    page = render_html(result)
    assert NOT_RECORDED in page
    health = json.loads(render_json(result))["ranks"][0]["verdict"]["health"]
    assert any(NOT_RECORDED in h["message"] for h in health)
    # GPU figures are n/a, not 0.0% busy / 100% idle
    tiles = page[page.index('class="tiles"') :]
    tiles = tiles[: tiles.index("</div>\n")]
    assert "GPU busy" in tiles and "no GPU ops recorded" in tiles
    assert "100.0%" not in tiles and "TFLOP/s" not in tiles
