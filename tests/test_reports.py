"""HTML and Markdown reports: gold files on fixed inputs, key fragments, escaping, offline-ness and size.

Gold files live in tests/gold/. Volatile text (tracedoc and rules versions, SHA-256 digests, absolute
paths) is scrubbed before comparing. On a mismatch the actual output is written to
tests/_output/actual/ (git-ignored); ``pytest --update-gold`` rewrites the gold files.
"""

from __future__ import annotations

import copy
import html.parser
import json
import base64
import hashlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
from trace_builder import TraceBuilder

from tracedoc import __version__
from tracedoc.api import analyze
from tracedoc.cli import example_path
from tracedoc.model.evidence import MemoryPoint, plain_rows
from tracedoc.model.record import replace
from tracedoc.render import render_html, render_md
from tracedoc.render.html import MAX_HTML_BYTES
from tracedoc.render.templating import jinja_environment, script_json
from tracedoc.render.markdown import MAX_MD_CHARS, md_escape

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
GOLD = TESTS / "gold"
ACTUAL = TESTS / "_output" / "actual"

XSS = "<script>alert(1)</script>"
XSS_NAMES = [
    f"void evil_kernel{XSS}()",
    "quoted \"double\" and 'single' </script><script>window.__pwned=1</script>",
    '<img src=x onerror="window.__pwned=2"> | pipe `tick` **bold** [link](http://example.com)',
    "line\u2028separator\u2029paragraph & ampersand </style><!-- comment",
]


# -- fixed inputs ----------------------------------------------------------------------------------


def build_comm_trace() -> TraceBuilder:
    """Four steps of a 2-rank DDP-like job: a short DataLoader wait, compute, an all-reduce that only
    partly overlaps, a .item() sync, and memory events."""
    b = TraceBuilder(rank=0, world_size=2, gpu="A100")
    b.extra_meta.update({"cuda_runtime_version": 12040, "cuda_driver_version": 12040, "nccl_version": "2.21.5"})
    start, step_us = 1_000_000.0, 20_000.0
    for i in range(4):
        s = start + i * step_us
        b.step(10 + i, s, s + step_us + (3_000.0 if i == 2 else 0.0))
        b.dataloader(s + 1.0, s + 801.0)
        t = s + 900.0
        gpu_t = t + 30.0
        for k in range(24):
            name = (
                "sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32"
                if k % 2
                else "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>>()"
            )
            b.kernel(
                name, gpu_t, 300.0 if k % 2 else 120.0, launch_at=t + k * 8.0, op="aten::mm" if k % 2 else "aten::add"
            )
            gpu_t += 310.0 if k % 2 else 130.0
        b.nccl(gpu_t - 2_000.0, 6_000.0 + (3_000.0 if i == 2 else 0.0), launch_at=gpu_t - 2_100.0)
        b.sync(gpu_t + 6_500.0, gpu_t + 7_000.0)
        b.memory(s + 900.0, 64 << 20, (20 << 30) + i * (256 << 20), 30 << 30)
    return b


def build_hostile_trace() -> TraceBuilder:
    """A trace whose kernel and operator names try to inject HTML, script, Markdown and JSON breakers."""
    b = TraceBuilder(rank=0, world_size=1, gpu="A100")
    start, step_us = 1_000_000.0, 5_000.0
    for i in range(3):
        s = start + i * step_us
        b.step(i + 1, s, s + step_us)
        b.dataloader(s + 1.0, s + 2_001.0)
        t = s + 2_100.0
        for k, name in enumerate(XSS_NAMES):
            b.kernel(name, t + 50.0 + k * 400.0, 300.0, launch_at=t + k * 10.0, op=f"aten::{XSS_NAMES[(k + 1) % 4]}")
    return b


@pytest.fixture(scope="module")
def example_result():
    return analyze(example_path())


@pytest.fixture(scope="module")
def comm_trace(tmp_path_factory) -> Path:
    return build_comm_trace().write(tmp_path_factory.mktemp("comm") / "builder_comm.pt.trace.json.gz")


@pytest.fixture(scope="module")
def comm_result(comm_trace):
    return analyze(comm_trace)


@pytest.fixture(scope="module")
def hostile_result(tmp_path_factory):
    return analyze(build_hostile_trace().write(tmp_path_factory.mktemp("hostile") / "hostile.pt.trace.json.gz"))


# -- gold files --------------------------------------------------------------------------------------


_INLINED_ASSET = re.compile(r"(<style>|<script>)(.*?)(</style>|</script>)", re.S)


def scrub(text: str, *paths: Path) -> str:
    """Replace what changes between machines and releases: versions, digests, absolute paths; and
    the inlined CSS and JS, which are the template assets verbatim (checked separately)."""
    text = _INLINED_ASSET.sub(lambda m: f"{m.group(1)}[inlined asset]{m.group(3)}", text)
    for p in sorted({str(p) for p in paths} | {str(ROOT)}, key=len, reverse=True):
        text = text.replace(p, "PATH")
    text = re.sub(r"sha256:[0-9a-f]{12}", "sha256:RULES", text)
    text = re.sub(r"\b[0-9a-f]{64}\b", "SHA256", text)
    text = re.sub(r"(tracedoc |tracedoc_version\W+|\| tracedoc \| )" + re.escape(__version__), r"\g<1>VERSION", text)
    text = re.sub(r"(<th>tracedoc</th><td>)" + re.escape(__version__), r"\g<1>VERSION", text)
    return text


def compare_gold(request, name: str, actual: str) -> None:
    gold = GOLD / name
    if request.config.getoption("--update-gold"):
        gold.parent.mkdir(parents=True, exist_ok=True)
        gold.write_text(actual, encoding="utf-8")
        return
    if not gold.exists():
        pytest.fail(f"{gold} is missing; run pytest --update-gold to create it")
    expected = gold.read_text(encoding="utf-8")
    if actual != expected:
        (ACTUAL / name).parent.mkdir(parents=True, exist_ok=True)
        (ACTUAL / name).write_text(actual, encoding="utf-8")
        exp, act = expected.splitlines(), actual.splitlines()
        line = next((i for i, (a, b) in enumerate(zip(exp, act)) if a != b), min(len(exp), len(act)))
        pytest.fail(
            f"{name} differs from the gold file at line {line + 1}; actual output in {ACTUAL / name}; "
            f"if the change is intended run pytest --update-gold\n"
            f"gold:   {exp[line][:200] if line < len(exp) else '<end>'}\n"
            f"actual: {act[line][:200] if line < len(act) else '<end>'}"
        )


def test_gold_example_html(request, example_result):
    compare_gold(request, "example/report.html", scrub(render_html(example_result)))


def test_gold_example_md(request, example_result):
    compare_gold(request, "example/report.md", scrub(render_md(example_result)))


def test_gold_builder_comm_html(request, comm_result, comm_trace):
    compare_gold(request, "builder_comm/report.html", scrub(render_html(comm_result), comm_trace.parent))


def test_gold_builder_comm_md(request, comm_result, comm_trace):
    compare_gold(request, "builder_comm/report.md", scrub(render_md(comm_result), comm_trace.parent))


def test_html_inlines_the_template_assets_verbatim(comm_result):
    from tracedoc.resources import data_dir

    page = render_html(comm_result)
    blocks = [m.group(2) for m in _INLINED_ASSET.finditer(page)]
    for asset in ("report.css", "report.js"):
        text = (data_dir("templates") / asset).read_text(encoding="utf-8")
        assert any(block.strip() == text.strip() for block in blocks), asset


def test_scrub_removes_what_varies(comm_result, comm_trace):
    text = scrub(render_html(comm_result), comm_trace.parent)
    assert str(comm_trace.parent) not in text
    assert comm_result.hashes[str(comm_trace)] not in text
    assert "PATH/builder_comm.pt.trace.json.gz" in text  # the reproduce command, path scrubbed


# -- key fragments -----------------------------------------------------------------------------------


class _Links(html.parser.HTMLParser):
    """Collects every URL-bearing attribute and every tag, to prove the page loads nothing."""

    def __init__(self):
        super().__init__()
        self.urls: list[tuple[str, str, str]] = []
        self.tags: list[str] = []
        self.handlers: list[tuple[str, str]] = []
        self.scripts: list[dict] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        for k, v in attrs:
            if k in ("src", "href", "action", "srcset", "poster", "data", "xlink:href") and v is not None:
                self.urls.append((tag, k, v))
            if k.startswith("on"):
                self.handlers.append((tag, k))
        if tag == "script":
            self.scripts.append(dict(attrs))


def parse(page: str) -> _Links:
    p = _Links()
    p.feed(page)
    return p


def test_html_is_self_contained(example_result):
    page = render_html(example_result)
    links = parse(page)
    assert all(v.startswith("#") for _, _, v in links.urls), links.urls
    assert not links.handlers, "no inline event handlers"
    assert "link" not in links.tags and "iframe" not in links.tags and "img" not in links.tags
    assert [s.get("type") for s in links.scripts] == ["application/json", None]
    assert not re.search(r"https?://(?!json-schema)", page.split("<script>")[0].split("</style>")[1])
    assert "@import" not in page and "url(" not in page
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert csp and "default-src 'none'" in csp.group(1) and "img-src data:" in csp.group(1)
    # The page's one script is allowed by its own SHA-256, nothing else: no 'unsafe-inline' for scripts.
    script = re.search(r"script-src ([^;]+)", csp.group(1)).group(1).strip()
    body = re.findall(r"<script>(.*?)</script>", page, flags=re.S)
    digest = base64.b64encode(hashlib.sha256(body[0].encode()).digest()).decode()
    assert len(body) == 1 and script == f"'sha256-{digest}'", script
    assert "style-src 'unsafe-inline'" in csp.group(1)


def test_html_shows_verdict_first_and_every_section(example_result):
    page = render_html(example_result)
    body = page.split("<main>", 1)[1]
    assert body.index('id="verdict"') < body.index('id="findings"') < body.index('id="breakdown"')
    assert '<span class="label label-io_bound"' in body
    assert "5.2 ms/step · 43.3% of the step" in body
    for fid in ("TD301", "TD101"):
        assert f'id="finding-{fid}"' in body
    # TD303 explains 1.5% of the step (under 2%): it is in the minor list, not a finding card
    assert 'id="finding-TD303"' not in body and "Minor findings (1, each under 2% of the step)" in body
    for section in ("health", "breakdown", "timeline", "gaps", "kernels", "memory", "environment", "reproduce"):
        assert f'<section id="{section}"' in body
    assert "The next profile should show:" in body
    assert "Tensor Core kernels" in body and "57.5%" in body
    assert "Peak allocated <b>9.0 GiB</b>" in body
    assert '<polyline class="mem-allocated"' in body
    assert "SHA-256 " + example_result.inputs[0].sha256 in body
    assert "tracedoc analyze " in body and "dataloader_starved.pt.trace.json.gz" in body
    assert "CUDA runtime</th><td>12.8" in body


def test_html_data_block_is_json_and_escaped(hostile_result):
    page = render_html(hostile_result)
    block = re.search(r'<script type="application/json" id="tracedoc-data">(.*?)</script>', page, re.S).group(1)
    for ch in ("<", ">", "&", "\u2028", "\u2029"):
        assert ch not in block
    data = json.loads(block)
    names = data["timeline"]["strings"]
    for name in XSS_NAMES:
        assert name.replace("\n", " ") in names
    assert page.count("</script>") == 2  # the data block and the script, nothing from the trace


def test_html_escapes_trace_strings(hostile_result):
    page = render_html(hostile_result)
    assert XSS not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=" in page
    links = parse(page)
    assert not links.handlers and "img" not in links.tags
    assert [s.get("type") for s in links.scripts] == ["application/json", None]


def test_script_json_escapes_breakers():
    out = script_json({"a": "</script><!--\u2028\u2029&"})
    assert out == '{"a":"\\u003c/script\\u003e\\u003c!--\\u2028\\u2029\\u0026"}'
    assert json.loads(out) == {"a": "</script><!--\u2028\u2029&"}


def test_jinja_environment_is_strict_and_escaping():
    import jinja2

    env = jinja_environment("html")
    assert env.autoescape is True
    assert env.undefined is jinja2.StrictUndefined
    with pytest.raises(jinja2.UndefinedError):
        env.from_string("{{ missing }}").render()


def test_md_has_verdict_evidence_fixes(example_result):
    md = render_md(example_result)
    assert md.startswith("## tracedoc verdict: `io_bound`")
    assert "**5.2 ms/step** (43.3% of the step) · confidence high" in md
    assert "**Fixes**" in md and "num\\_workers" in md
    assert "**The next profile should show:**" in md
    assert "<details><summary>Evidence: dataloader (1 row)</summary>" in md
    assert "```\ntracedoc analyze " in md
    assert len(md) < MAX_MD_CHARS


def test_md_escapes_trace_strings(hostile_result):
    md = render_md(hostile_result)
    assert "<script>" not in md and "<img" not in md and "<!--" not in md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md
    assert "\\| pipe \\`tick\\` \\*\\*bold\\*\\* \\[link\\](http:&#8203;//example.com)" in md  # no autolink either
    # every table row keeps its column count: no unescaped pipe from a trace string splits a cell
    for block in re.findall(r"((?:^\|.*\|$\n?)+)", md, re.M):
        rows = [re.split(r"(?<!\\)\|", line)[1:-1] for line in block.strip().splitlines()]
        assert len({len(r) for r in rows}) == 1, block[:300]


def test_md_escape():
    assert md_escape("a|b`c<d>e&f_g*h[i]\\j\nk") == "a\\|b\\`c&lt;d&gt;e&amp;f\\_g\\*h\\[i\\]\\\\j k"


def test_cli_writes_html_and_md(tmp_path):
    for fmt, name in (("html", "r.html"), ("md", "r.md")):
        out = tmp_path / name
        proc = subprocess.run(
            [sys.executable, "-m", "tracedoc", "analyze", "--example", "--format", fmt, "-o", str(out)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr
        text = out.read_text(encoding="utf-8")
        assert "io_bound" in text
        assert "tracedoc analyze --example --format " + fmt in text  # how to reproduce: the exact command


def test_directory_input_gets_a_rank_table(tmp_path):
    for rank in (0, 1):
        b = build_comm_trace()
        b.rank = rank
        b.write(tmp_path / f"rank{rank}.pt.trace.json.gz")
    result = analyze(tmp_path, jobs=1)
    page = render_html(result)
    assert '<section id="ranks">' in page and "2 ranks, details for rank" in page
    assert page.count("rank0.pt.trace.json.gz") >= 2 and "rank1.pt.trace.json.gz" in page
    md = render_md(result)
    assert "### Ranks" in md and "rank1.pt.trace.json.gz" in md


@pytest.mark.parametrize(
    "name",
    [
        "cpu_only_gloo_rank34.pt.trace.json.gz",
        "a100_alexnet.json.gz",
        "mi250_rocm_minitoy.json.gz",
        "h100_2026_format.json",
    ],
)
def test_unusual_traces_render(name):
    from conftest import shared_traces

    result = analyze(shared_traces() / "kineto" / name)
    page = render_html(result)
    assert 'id="verdict"' in page and "</html>" in page
    assert len(render_md(result)) < MAX_MD_CHARS


# -- size ----------------------------------------------------------------------------------------------


def inflate(result, factor: int = 1):
    """A result as big as a 1 GB trace's could be: huge evidence tables, long unique names, full excerpts."""
    big = copy.deepcopy(result)
    r = big.ranks[0]
    long = "void very::long::templated<kernel, " + "T" * 900 + ">"
    r.evidence["top_gaps"] = [
        replace(
            r.evidence["top_gaps"][0],
            before=f"{long}{i}",
            after=f"{long}|{i}",
            stack="\n".join(f"frame {j} " + "x" * 80 for j in range(40)),
        )
        for i in range(100_000 * factor)
    ]
    r.evidence["top_kernels"] = [
        replace(r.evidence["top_kernels"][0], name=f"{long}{i}") for i in range(100_000 * factor)
    ]
    r.evidence["top_operators"] = [replace(r.evidence["top_operators"][0], name=f"aten::op{i}") for i in range(50_000)]
    r.evidence["memory_curve"] = [
        MemoryPoint(ts_ns=i * 1000, allocated=i * 7 % 1000003, reserved=2 << 30, device=0) for i in range(500_000)
    ]
    r.per_step = [dict(r.per_step[0], step=f"ProfilerStep#{i}") for i in range(50_000)]
    r.warnings = [f"warning {i}: " + "w" * 200 for i in range(20_000)]
    for ex in r.timeline["excerpts"]:
        ops = [{"start": i * 100, "end": i * 100 + 90, "name": f"{long}{i}", "cat": "compute"} for i in range(4000)]
        ex["lanes"] = [{"device": 0, "stream": 7, "ops": ops}]
        ex["idle"] = {c: [[i * 100 + 90, i * 100 + 100] for i in range(2000)] for c in ex["idle"]}
        ex["dataloader"] = [[i * 10, i * 10 + 5] for i in range(2000)]
    v = big.verdicts[0]
    for f in v.findings:
        for k in list(f.evidence):
            f.evidence[k] = [{**plain_rows([row])[0], "note": long} for row in (f.evidence[k] * 100)[:100]]
    return big


def test_html_of_a_huge_result_stays_under_5_mb(example_result):
    page = render_html(inflate(example_result))
    size = len(page.encode("utf-8"))
    print(f"\nHTML of the inflated result: {size / 1e6:.2f} MB")
    assert size < MAX_HTML_BYTES
    assert "more not shown" in page and 'id="verdict"' in page and "</html>" in page
    assert re.search(r"\d[\d,]* more not shown \(100000 rows in all", page)


def test_md_of_a_huge_result_stays_under_65000_chars(example_result):
    md = render_md(inflate(example_result))
    print(f"\nMarkdown of the inflated result: {len(md):,} characters")
    assert len(md) < MAX_MD_CHARS
    assert "more rows not shown" in md and "## tracedoc verdict" in md


def test_markdown_does_not_mention_people_from_trace_strings():
    from tracedoc.render.markdown import md_escape

    out = md_escape("kernel_@maintainer #12 <b>")
    assert "@" not in out and "&#64;&#8203;maintainer" in out and "\\#12" in out and "<b>" not in out
