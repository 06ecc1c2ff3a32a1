"""The HTML report's kernel, operator and memory views: kernel time by class, short kernel names with the
full name on hover, one top-kernels table, operators by input shape and by nn.Module, GPU figures and the
memory chart's axis."""

from __future__ import annotations

import re

import pytest
from trace_builder import TraceBuilder

from tracedoc import analyze
from tracedoc.cli import example_path
from tracedoc.render import render_html
from tracedoc.render.names import short_name
from tracedoc.render.charts import nice_ceiling

# (name, duration µs, class): one kernel of each class, names as real traces spell them
CLASSED = [
    ("sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32", 300.0, "GEMM"),
    (
        "void implicit_convolve_sgemm<float, float, 128, 5, 5, 3, 3, 3, 1, false, false, true>(int, int, int)",
        250.0,
        "convolution",
    ),
    (
        "void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
        "cutlass::half_t>>(Flash_fwd_params)",
        200.0,
        "attention",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::AddFunctor<float>, at::detail::Array<char*, 3> >"
        "(int, at::native::AddFunctor<float>, at::detail::Array<char*, 3>)",
        100.0,
        "elementwise",
    ),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float> > >"
        "(at::native::ReduceOp<float, at::native::MeanOps<float, float> >)",
        50.0,
        "reduction",
    ),
    (
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct, float const*)",
        40.0,
        "reduction",
    ),
    ("my_custom_kernel", 20.0, "other"),
]


def classed_trace(tmp_path):
    b = TraceBuilder(world_size=2)
    t = 1_000.0
    b.step(1, t, t + 5_000.0)
    for name, dur, _ in CLASSED:
        b.kernel(name, t + 100.0, dur, op="aten::op")
        t += dur + 20.0
    b.nccl(t + 100.0, 400.0)
    t += 420.0
    b.memcpy(t + 100.0, 80.0)
    b.gpu_op("memset", "Memset (Device)", t + 200.0, 10.0)
    return analyze(b.write(tmp_path / "classes.pt.trace.json.gz"))


def test_kernel_classes_sum_to_the_gpu_op_time_by_hand(tmp_path):
    result = classed_trace(tmp_path)
    rows = {r.kernel_class: r for r in result.focus.evidence["kernel_classes"]}
    want_us = {
        "GEMM": 300.0,
        "convolution": 250.0,
        "attention": 200.0,
        "elementwise": 100.0,
        "reduction": 90.0,
        "other": 20.0,
        "communication": 400.0,
        "memory": 90.0,
    }
    assert {k: r.total_ns / 1e3 for k, r in rows.items()} == pytest.approx(want_us)
    assert rows["reduction"].count == 2 and rows["memory"].count == 2
    total_us = sum(want_us.values())  # 1,450 µs of GPU ops, every one inside the step
    assert sum(r.total_ns for r in rows.values()) / 1e3 == pytest.approx(total_us)
    assert rows["GEMM"].share == pytest.approx(300.0 / total_us)
    page = render_html(result)
    assert 'class="class-bar"' in page
    assert "GEMM 20.7%" in page and "communication 27.6%" in page  # 300 / 1450, 400 / 1450


@pytest.mark.parametrize(
    "name, short",
    [
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
            "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)",
            "vectorized_elementwise_kernel",
        ),
        (
            "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl<at::native::BinaryFunctor<"
            "float, float, float, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, "
            "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > "
            "const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl<at::native::BinaryFunctor<float, float, "
            "float, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, "
            "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > "
            "const&)::{lambda(int)#1})",
            "elementwise_kernel",
        ),
        (
            "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float, float, float, "
            "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(float*, float const*, int)",
            "cunn_SoftMaxForward",
        ),
        (
            "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclDevComm*, unsigned long, ncclWork*)",
            "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t",
        ),
        (
            "void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>"
            "(cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4::Params)",
            "Kernel2<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align4>",
        ),
        (
            "std::enable_if<!(false), void>::type internal::gemvx::kernel<int, int, float, float, float, float, "
            "false, true, true, false, 7, false, cublasGemvParamsEx<int, float> >(cublasGemvParamsEx<int, float>)",
            "gemvx::kernel",
        ),
        ("Memcpy HtoD (Pageable -> Device)", "Memcpy HtoD (Pageable -> Device)"),
        ("triton_poi_fused_add_0", "triton_poi_fused_add_0"),
    ],
)
def test_short_kernel_names(name, short):
    assert short_name(name) == short


def test_long_names_show_short_with_the_full_name_on_hover(tmp_path):
    page = render_html(classed_trace(tmp_path))
    kernels = page[page.index('id="table-top_kernels"') :]
    kernels = kernels[: kernels.index("</table>")]
    full = (
        "void at::native::vectorized_elementwise_kernel&lt;4, at::native::AddFunctor&lt;float&gt;, "
        "at::detail::Array&lt;char*, 3&gt; &gt;(int, at::native::AddFunctor&lt;float&gt;, "
        "at::detail::Array&lt;char*, 3&gt;)"
    )
    assert f'title="{full}"><div class="clamp short-name">vectorized_elementwise_kernel</div>' in kernels


def test_top_kernels_table_appears_once(tmp_path):
    for result in (analyze(example_path()), classed_trace(tmp_path)):
        page = render_html(result)
        assert page.count('id="table-top_kernels"') == 1
        assert page.count("<h3>Top kernels</h3>") == 1
        assert "Evidence: top kernels (" not in page  # a finding citing it links to the table instead


def test_gpu_figures_are_labelled(tmp_path):
    page = render_html(analyze(example_path()))
    for label in ("GPU utilisation", "SM efficiency (est.)", "achieved occupancy (est.)"):
        assert f'<div class="tile-label">{label}</div>' in page
    m = analyze(example_path()).focus.metrics
    assert f'<div class="tile-value">{100 * m["gpu_busy_fraction"]:.1f}%</div>' in page


def test_memory_chart_has_a_y_axis_and_the_reserved_series():
    page = render_html(analyze(example_path()))
    start = page.index('<figure class="memcurve">')
    chart = page[start : page.index("</figure>", start)]
    ticks = re.findall(r'<text class="mem-tick"[^>]*>([^<]+)</text>', chart)
    assert ticks[0] == "0 B" and len(ticks) == 5
    assert 'class="mem-reserved"' in chart and 'class="mem-reserved-area"' in chart
    # the reserved line (12 GiB at its peak) stays inside the plot, below the axis top (a nice ceiling above it)
    ys = [float(p.split(",")[1]) for p in re.search(r'class="mem-reserved" points="([^"]+)"', chart).group(1).split()]
    assert min(ys) > 10.0
    assert nice_ceiling(12 * 1.05) == 20 and nice_ceiling(0.31) == 0.5 and nice_ceiling(1000) == 1000


def shaped_trace(tmp_path):
    """Two aten::mm shapes and an add inside nn.Module spans, as torch.profiler(record_shapes=True,
    with_modules=True) records them."""
    b = TraceBuilder()
    b.step(1, 0.0, 3_000.0)
    b.cpu_op("nn.Module: Model_0", 5.0, 2_900.0, cat="python_function")
    b.cpu_op("nn.Module: Linear_0", 10.0, 700.0, cat="python_function")
    b.cpu_op("nn.Module: Linear_1", 800.0, 1_500.0, cat="python_function")
    spans = [
        ("aten::mm", [[64, 128], [128, 256]], 100.0, 50.0),
        ("aten::mm", [[64, 128], [128, 256]], 400.0, 50.0),
        ("aten::mm", [[64, 256], [256, 10]], 900.0, 30.0),
        ("aten::add", [[64, 10], [64, 10]], 1_800.0, 5.0),
    ]
    for name, dims, at, dur in spans:
        b.kernel(
            "sm80_xmma_gemm_f16f16" if name == "aten::mm" else "vectorized_elementwise_kernel",
            at + 50.0,
            dur,
            op=name,
            launch_at=at,
        )
        op = next(e for e in reversed(b.events) if e["name"] == name)
        op["args"]["Input Dims"] = dims
        op["args"]["Input type"] = ["float", "float"]
    return analyze(b.write(tmp_path / "shapes.pt.trace.json.gz"))


def test_operators_grouped_by_name_and_input_shape(tmp_path):
    rows = shaped_trace(tmp_path).focus.evidence["operators_by_shape"]
    by = {(r.name, r.input_shapes): r for r in rows}
    big = by[("aten::mm", "[[64, 128], [128, 256]]")]
    small = by[("aten::mm", "[[64, 256], [256, 10]]")]
    assert (big.calls, big.gpu_ops, big.gpu_ns) == (2, 2, 100_000)
    assert (small.calls, small.gpu_ns) == (1, 30_000)
    assert rows[0] is big  # most GPU time first
    # the add's shapes are kept too (the roofline derives its bytes from them)
    assert by[("aten::add", "[[64, 10], [64, 10]]")].gpu_ns == 5_000


def test_operators_grouped_by_innermost_module(tmp_path):
    result = shaped_trace(tmp_path)
    rows = {r.module: r for r in result.focus.evidence["operators_by_module"]}
    assert rows["Linear_0"].gpu_ns == 100_000 and rows["Linear_0"].gpu_ops == 2
    assert rows["Linear_1"].gpu_ns == 30_000
    assert rows["Model_0"].gpu_ns == 5_000  # the add ran in the model, outside both linears
    assert rows["Model_0"].calls == 1 and rows["Model_0"].cpu_ns == 2_895_000
    page = render_html(result)
    assert 'id="table-operators_by_shape"' in page and 'id="table-operators_by_module"' in page
    assert "[[64, 256], [256, 10]]" in page and "Linear_1" in page


def test_no_module_spans_no_module_table():
    page = render_html(analyze(example_path()))
    assert 'id="table-operators_by_module"' not in page
