"""Text that fits its width on traces with pathological kernel names: 8 KB template names, and many
kernels sharing a 200-character prefix; short names are distinct within a table; JSON keeps them whole."""

import json
import re

import pytest

from test_text_output import assert_fits, run_cli, table_rows
from tracedoc.render.names import cut_middle, distinct_short_names, fit_names, short_forms
from trace_builder import TraceBuilder

HUGE_ARGS = ", ".join(f"cutlass::gemm::GemmShape<{i}, {i * 2}, 64>" for i in range(300))  # ~8 KB
PREFIX = "fused_" + "very_long_generated_kernel_name_part_" * 6  # ~230 characters


def names() -> list[str]:
    out = [
        f"void cutlass::device::gemm_kernel<{HUGE_ARGS}, cutlass::arch::Sm{80 + i}>(cutlass::Params<{i}>)"
        for i in range(4)
    ]
    out += [f"{PREFIX}{suffix}" for suffix in ("add", "mul", "sub", "div", "relu", "gelu")]
    out += [
        f"void at::native::vectorized_elementwise_kernel<4, at::native::{f}<float>, at::detail::Array<char*, 3> >"
        f"(int, at::native::{f}<float>, at::detail::Array<char*, 3>)"
        for f in ("AddFunctor", "MulFunctor")
    ]
    return out


@pytest.fixture
def pathological(tmp_path):
    b = TraceBuilder()
    t = 0.0
    for step in range(3):
        b.step(step, t, t + 2000)
        for i, name in enumerate(names()):
            b.kernel(name, t + 50 + 100 * i, 60 + 5 * i)
        t += 2000
    return str(b.write(tmp_path / "names.json"))


@pytest.mark.parametrize("width", [None, 80, 120])
def test_pathological_names_fit_and_stay_distinct(capsys, pathological, width):
    argv = ["--width", str(width)] if width else []
    code, out = run_cli(capsys, "analyze", pathological, "--top", "20", *argv)
    assert code == 0
    assert_fits(out, width or 100)
    rows = table_rows(out, "Top kernels")[1:]
    assert len(rows) == len(names())  # one line per kernel
    shown = [r.split("%", 1)[1].strip() for r in rows]
    assert len(set(shown)) == len(shown), shown
    assert max(map(len, out.splitlines())) <= (width or 100)


def test_full_names_keep_every_name_whole_and_json_always_does(capsys, pathological):
    code, out = run_cli(capsys, "analyze", pathological, "--top", "20", "--full-names")
    assert code == 0
    for name in names():
        assert " ".join(name.split()) in out
    code, out = run_cli(capsys, "analyze", pathological, "-f", "json")
    kernels = {r["name"] for r in json.loads(out)["ranks"][0]["evidence"]["top_kernels"]}
    assert set(names()) <= kernels


def test_short_forms_are_distinct_for_any_width():
    every = names()
    forms = distinct_short_names(every)
    assert len(set(forms)) == len(every)
    assert forms[-2:] == [
        "vectorized_elementwise_kernel<4, AddFunctor<…>, Array<…>>",
        "vectorized_elementwise_kernel<4, MulFunctor<…>, Array<…>>",
    ]
    for width in (12, 20, 40, 80):
        cut = fit_names(forms, width)
        assert all(len(c) <= width for c in cut)
        assert len(set(cut)) == len(every), (width, cut)
    assert short_forms(["a", "a", "b"]) == ["a", "a", "b"]  # the same name twice is one name
    assert cut_middle("abcdefghij", 5) == "a…hij"


def test_markdown_tables_show_short_names_and_full_names_on_request(pathological):
    from tracedoc import analyze
    from tracedoc.render.markdown import render_md
    from tracedoc.render.views import Caps

    result = analyze(pathological)
    md = render_md(result)
    assert HUGE_ARGS[:200] not in md.replace("\\", "")
    assert re.search(r"vectorized\\_elementwise\\_kernel&lt;4, MulFunctor", md)
    full = render_md(result, Caps(full_names=True)).replace("\\", "")
    assert "void cutlass::device::gemm_kernel&lt;cutlass::gemm::GemmShape&lt;0" in full  # as recorded (to name_chars)


def test_a_short_name_is_never_cut_while_a_longer_one_can_give_way():
    from tracedoc.render.fit import column_widths

    # 60 columns: a 7-wide number, then names wanting 40 and 18 characters, with 49 left for them
    assert column_widths([7, 40, 18], [False, True, True], 60) == [7, 31, 18]
    # too narrow for both at their floor: each keeps MIN_NAME_WIDTH
    assert column_widths([7, 40, 18], [False, True, True], 20) == [7, 12, 12]


def test_top_gaps_at_100_columns_keep_an_op_name_whole(capsys):
    from conftest import shared_traces

    path = shared_traces() / "kineto" / "a100_2rank_nccl_rank0.json.gz"
    code, out = run_cli(capsys, "analyze", str(path), "--width", "100")
    assert code == 0
    assert_fits(out, 100)
    rows = table_rows(out, "Top gaps")
    # the number columns' two-word headers fold so both names stay whole
    assert rows[0].strip() == "device" and rows[1].split()[:2] == ["gap", "idle"]
    assert len(rows) == 5
    assert all(r.endswith("ncclKernel_AllReduce_RING_LL_Sum_float  record_param_comms") for r in rows[2:])
