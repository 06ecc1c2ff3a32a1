"""Model FLOPs, TFLOP/s and MFU on whole traces: real torch.profiler runs, shared traces, and traces
that cannot give MFU (no shapes, unknown GPU)."""

from __future__ import annotations

import argparse
import gzip
import json
import statistics
import subprocess
import sys
import textwrap

import pytest
from conftest import shared_traces

import tracedoc

# -- a real CPU profile of a tiny conv + MLP + attention model ----------------------------------

TINY = textwrap.dedent("""
    import sys, torch, torch.nn as nn, torch.nn.functional as F
    from torch.profiler import profile, ProfilerActivity, schedule
    from torch.utils.checkpoint import checkpoint
    torch.manual_seed(0)
    CKPT = sys.argv[2] == "ckpt"

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3, stride=1, padding=1)
            self.fc1 = nn.Linear(512, 64)
            self.fc2 = nn.Linear(64, 10)

        def forward(self, x):
            h = F.relu(self.conv(x)).flatten(1)
            h = (checkpoint(self.fc1, h, use_reentrant=False) if CKPT else self.fc1(h)).view(4, 2, 4, 8)
            h = F.scaled_dot_product_attention(h, h, h, is_causal=True).flatten(1)
            return self.fc2(h)

    m = Tiny()
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(4, 3, 8, 8)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=3, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as p:
        for _ in range(5):
            opt.zero_grad()
            m(x).sum().backward()
            opt.step()
            p.step()
""")

# FLOPs of one training step of Tiny, from its definition (x [4,3,8,8], batch 4):
CONV_FWD = 2 * (4 * 8 * 8 * 8) * (3 * 3 * 3) + 4 * 8 * 8 * 8  # out [4,8,8,8] x 27 MACs, + bias = 112640
FC1_FWD = 2 * 4 * 512 * 64 + 4 * 64  # 262400
ATTN_FWD = 2 * 4 * 2 * 4 * 4 * (8 + 8) // 2  # B=4, H=2, N=4, d=8, causal half = 2048
FC2_FWD = 2 * 4 * 64 * 10 + 4 * 10  # 5160
FORWARD = CONV_FWD + FC1_FWD + ATTN_FWD + FC2_FWD
# Backward: fc2 and fc1 input and weight gradients (2 matmuls each, the size of the forward without
# bias); attention twice its forward; conv only the weight gradient (the input x needs none) plus
# its bias gradient (one add per output element).
BACKWARD = 2 * (2 * 4 * 64 * 10) + 2 * (2 * 4 * 512 * 64) + 2 * ATTN_FWD + 2 * (4 * 8 * 8 * 8) * 27 + 4 * 8 * 8 * 8
ATTN_RECOMPUTE = 2 * 4 * 2 * 4 * 4 // 2 * 8  # the fused backward recomputes QK^T: scores x d_qk = 1024


def _profile_tiny(tmp_path, mode: str) -> str:
    pytest.importorskip("torch")
    out = tmp_path / f"tiny_{mode}.json"
    script = tmp_path / "tiny.py"
    script.write_text(TINY)
    subprocess.run([sys.executable, str(script), str(out), mode], check=True, capture_output=True, timeout=300)
    return str(out)


def test_real_cpu_profile_counts_forward_and_backward_from_the_model_definition(tmp_path):
    assert FORWARD + BACKWARD == 1_033_512  # the sum written out once by hand
    rank = tracedoc.analyze(_profile_tiny(tmp_path, "plain")).ranks[0]
    m = rank.metrics
    assert m["steps"] == 3
    assert m["model_flops_per_step"] == FORWARD + BACKWARD
    assert m["hardware_flops_per_step"] == FORWARD + BACKWARD + ATTN_RECOMPUTE
    assert m["achieved_tflops"] > 0
    assert m["mfu"] is None  # no GPU
    summary = rank.evidence["flops_summary"][0]
    assert summary.dtype == "fp32" and "no GPU kernels" in summary.note
    classes = {r.op_class: r for r in rank.evidence["flops_by_op_class"]}
    assert classes["conv forward"].model_flops == 3 * CONV_FWD
    assert classes["attention backward"].model_flops == 3 * 2 * ATTN_FWD
    for row in rank.evidence["flops_per_step"]:
        assert row.model_flops == FORWARD + BACKWARD


def test_activation_checkpointing_is_hardware_not_model_flops(tmp_path):
    rank = tracedoc.analyze(_profile_tiny(tmp_path, "ckpt")).ranks[0]
    m = rank.metrics
    # the checkpointed fc1 forward runs again during backward: model FLOPs unchanged, hardware + FC1_FWD
    assert m["model_flops_per_step"] == FORWARD + BACKWARD
    assert m["hardware_flops_per_step"] == FORWARD + BACKWARD + ATTN_RECOMPUTE + FC1_FWD
    assert rank.evidence["flops_summary"][0].recomputed_ops == 3  # one per profiled step


COMPILED = textwrap.dedent("""
    import sys, torch, torch.nn as nn
    from torch.profiler import profile, ProfilerActivity, schedule
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(64, 128), nn.GELU(), nn.Linear(128, 32))
    cm = torch.compile(m)
    opt = torch.optim.SGD(m.parameters(), lr=0.01)
    x = torch.randn(16, 64)
    for _ in range(2):
        cm(x).sum().backward()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True,
                 schedule=schedule(wait=0, warmup=1, active=3, repeat=1),
                 on_trace_ready=lambda p: p.export_chrome_trace(sys.argv[1])) as p:
        for _ in range(4):
            opt.zero_grad()
            cm(x).sum().backward()
            opt.step()
            p.step()
""")


def test_real_torch_compile_profile_counts_the_graphs_matrix_products(tmp_path):
    """torch.compile's graphs call mm/addmm with an out= tensor; the profiler records it as an extra input."""
    pytest.importorskip("torch")
    out, script = tmp_path / "compiled.json", tmp_path / "compiled.py"
    script.write_text(COMPILED)
    proc = subprocess.run([sys.executable, str(script), str(out)], capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and "compiler" in proc.stderr.lower():
        pytest.skip("torch.compile needs a C++ compiler here: " + proc.stderr.strip().splitlines()[-1][:200])
    assert proc.returncode == 0, proc.stderr[-2000:]
    # forward: 2*16*64*128 + 16*128 bias = 264,192 and 2*16*128*32 + 16*32 = 131,584; backward: the second
    # layer's input gradient 2*16*32*128 = 131,072 and both weight gradients 2*32*16*128 = 131,072 and
    # 2*128*16*64 = 262,144 (the input needs no gradient)
    assert tracedoc.analyze(str(out)).ranks[0].metrics["model_flops_per_step"] == (
        264_192 + 131_584 + 131_072 + 131_072 + 262_144
    )


# -- shared traces that record shapes ------------------------------------------------------------


def _leaf_blas_flops_per_step(path) -> float:
    """An independent count: every BLAS leaf op (mm, addmm, bmm) whose CPU start lies in a
    ProfilerStep span, from the raw JSON (not tracedoc's reader or its top-level-op rule)."""
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    steps = [
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("ph") == "X"
        and e.get("cat") in ("user_annotation", "cpu_op")
        and str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    total = 0
    for e in events:
        d = e.get("args", {}).get("Input Dims")
        if e.get("cat") != "cpu_op" or d is None or not any(s <= e["ts"] < t for s, t in steps):
            continue
        name = e["name"]
        if name == "aten::mm" and len(d) == 2 and len(d[0]) == 2 and len(d[1]) == 2 and d[0][1] == d[1][0]:
            total += 2 * d[0][0] * d[0][1] * d[1][1]
        elif name == "aten::addmm" and len(d) == 5 and len(d[1]) == 2 and len(d[2]) == 2 and d[1][1] == d[2][0]:
            total += 2 * d[1][0] * d[1][1] * d[2][1] + (d[1][0] * d[2][1] if d[0] else 0)
        elif name == "aten::bmm" and len(d) == 2 and len(d[0]) == 3 and len(d[1]) == 3 and d[0][2] == d[1][1]:
            total += 2 * d[0][0] * d[0][1] * d[0][2] * d[1][2]
    return total / len(steps)


@pytest.mark.parametrize(
    "name, rel",
    [
        ("v100_2rank_rank1.json.gz", 1e-12),
        ("mi250_rocm_minitoy.json.gz", 1e-12),
        # linear layers that run as matmul + add: counted at the leaf mm, as the independent count does
        ("dlrm_128rank_rank0.json.gz", 1e-12),
        ("dlrm_128rank_rank1.json.gz", 1e-12),
    ],
)
def test_shared_traces_flops_match_an_independent_leaf_count(name, rel):
    path = shared_traces() / "kineto" / name
    m = tracedoc.analyze(str(path)).ranks[0].metrics
    assert m["model_flops_per_step"] == pytest.approx(_leaf_blas_flops_per_step(path), rel=rel)


def test_v100_dlrm_mfu_against_the_tensor_core_peak_and_the_fp32_figure_apart():
    rank = tracedoc.analyze(str(shared_traces() / "kineto" / "v100_2rank_rank1.json.gz")).ranks[0]
    m, summary = rank.metrics, rank.evidence["flops_summary"][0]
    # fp32 GEMMs on CUDA cores: MFU against the V100 SXM2 fp16 Tensor Core peak (125), like every MFU;
    # the rate against the FP32 peak (15.7) is a figure of its own
    assert summary.dtype == "fp32" and summary.peak_device == "V100 SXM2"
    assert m["peak_tflops"] == 125 and summary.peak_basis == "dense 16-bit Tensor Core"
    assert m["mfu"] == pytest.approx(m["achieved_tflops"] / 125) == m["tensor_core_mfu"]
    assert m["dtype_peak_tflops"] == 15.7 and m["dtype_peak_fraction"] == pytest.approx(m["achieved_tflops"] / 15.7)
    assert m["fp32_flops_fraction"] == 1.0
    # achieved = FLOPs per step / the report's one step time: the median of the step times
    steps = rank.evidence["flops_per_step"]
    # the first step has no step time: a pre-window backlog ran ahead of it
    assert steps[0].step_time_ns is None and steps[0].achieved_tflops is None
    median_ns = statistics.median(r.step_time_ns for r in steps[1:])
    assert m["step_time_p50_ns"] == median_ns
    assert m["achieved_tflops"] == pytest.approx(m["model_flops_per_step"] / median_ns / 1e3)
    # the embedding-heavy model spends most GPU time outside the counted GEMMs, and says so
    assert 0 < m["flops_counted_fraction"] < 0.2
    assert any(r.gpu_ns for r in rank.evidence["flops_not_counted"])


def test_trace_without_shapes_states_it_instead_of_a_number():
    rank = tracedoc.analyze(str(shared_traces() / "kineto" / "v100_resnet_ns_rank0.pt.trace.json.gz")).ranks[0]
    for k in ("model_flops_per_step", "achieved_tflops", "mfu"):
        assert rank.metrics[k] is None
    assert "record_shapes=True" in rank.evidence["flops_summary"][0].note


def test_unknown_gpu_gives_tflops_without_mfu():
    rank = tracedoc.analyze(str(shared_traces() / "kineto" / "mi250_rocm_minitoy.json.gz")).ranks[0]
    assert rank.metrics["achieved_tflops"] > 0
    assert rank.metrics["mfu"] is None and rank.metrics["peak_tflops"] is None
    note = rank.evidence["flops_summary"][0].note
    assert "AMD Radeon Graphics" in note and "no MFU" in note


# -- capture records shapes by default ----------------------------------------------------------


def test_tracedoc_profile_records_shapes_so_reports_have_flops(tmp_path):
    torch = pytest.importorskip("torch")
    import tracedoc.capture as capture

    model = torch.nn.Linear(8, 2)
    with capture.profile(
        str(tmp_path), skip_first=1, warmup=1, active=2, report=False, signal=False, trigger_file="", monitor=False
    ) as prof:
        for _ in range(6):
            model(torch.randn(4, 8)).sum().backward()
            prof.step()
    m = tracedoc.analyze(prof.traces[0]).ranks[0].metrics
    # per step: linear forward 2*4*8*2 + bias 4*2 = 136; weight gradient mm 2*2*4*8 = 128 (the input
    # needs no gradient)
    assert m["model_flops_per_step"] == 136 + 128


def test_tracedoc_run_flag_turns_shapes_off():
    from tracedoc.cli.run import register

    sub = argparse.ArgumentParser().add_subparsers()
    register(sub)
    run = sub.choices["run"]
    assert run.parse_args(["--", "x"]).record_shapes is True
    assert run.parse_args(["--no-record-shapes", "--", "x"]).record_shapes is False
    assert run.parse_args(["--with-flops", "--", "x"]).with_flops is True


# -- GPU traces built by hand: dtype, TF32, peaks and the low_mfu verdict --------------------------


def _gemm_steps(kernel_name: str, in_type: str, kernels_per_step: int = 1):
    """Three 10 ms steps; in each, one aten::linear [4096,4096] x [4096,4096]^T + bias whose kernel runs
    9 ms, launched from inside the op (linked by the launch call's time, as a 2022 trace is)."""
    from trace_builder import TraceBuilder

    b = TraceBuilder(gpu="A100")
    for i in range(3):
        s = 1_000_000.0 + i * 10_000.0
        b.step(i + 1, s, s + 10_000.0)
        b.cpu_op(
            "aten::linear",
            s + 10.0,
            s + 60.0,
            args={
                "Input Dims": [[4096, 4096], [4096, 4096], [4096]],
                "Input type": [in_type] * 3,
                "Concrete Inputs": ["", "", ""],
            },
        )
        dur = 9_000.0 / kernels_per_step
        for k in range(kernels_per_step):
            b.kernel(kernel_name, s + 500.0 + k * dur, dur, launch_at=s + 20.0 + k, launch_dur=2.0)
    return b


LINEAR_FLOPS = 2 * 4096**3 + 4096 * 4096  # 137,455,730,688 per step
STEP_S = 0.010


def test_fp32_gemms_on_a100_fire_low_mfu_with_the_fp32_fix(tmp_path):
    # the 9 ms GEMM as 10 kernels per step: 30 GPU ops, enough for a verdict (tiny traces are withheld)
    b = _gemm_steps("ampere_sgemm_128x64_nn", "float", kernels_per_step=10)
    result = tracedoc.analyze(b.write(tmp_path / "fp32.pt.trace.json"))
    rank, verdict = result.ranks[0], result.verdicts[0]
    m = rank.metrics
    achieved = LINEAR_FLOPS / STEP_S / 1e12  # 13.75 TFLOP/s
    assert m["model_flops_per_step"] == LINEAR_FLOPS
    assert m["achieved_tflops"] == pytest.approx(achieved)
    assert m["dtype_peak_tflops"] == 19.5 and m["dtype_peak_fraction"] == pytest.approx(achieved / 19.5)  # 70%...
    assert m["peak_tflops"] == 312 and m["mfu"] == pytest.approx(achieved / 312)  # ...but MFU 4.4%
    assert m["tensor_core_mfu"] == m["mfu"]
    assert m["fp32_flops_fraction"] == 1.0 and m["flops_counted_fraction"] == 1.0
    # the kernel class: CUDA-core fp32 at 137.46 GFLOP / 9 ms = 15.27 TFLOP/s
    row = rank.evidence["flops_by_kernel_class"][0]
    assert row.kernel_class == "GEMM kernel on CUDA cores" and row.tflops == pytest.approx(LINEAR_FLOPS / 0.009 / 1e12)
    fired = {f.label: f for f in verdict.findings}
    assert "low_mfu" in fired and "compute_bound" not in fired
    assert any("autocast" in fix for fix in fired["low_mfu"].fixes)
    # a faster precision cannot be replayed: no predicted step, and what reaching the threshold would take
    w = fired["low_mfu"].what_if
    assert w["step_ms_after"] is None and w["gain_ms"] is None and w["method"].startswith("not modelled")
    # 20% of 312 TFLOP/s = 62.4 TFLOP/s: the 137.5 GFLOP of a step in 2.2 ms
    assert "at 62 TFLOP/s or faster, which is 2.2 ms of kernel time per step" in fired["low_mfu"].expect
    assert f"MFU {achieved / 312:.1%} of this GPU's dense peak of 312.0 TFLOP/s" in fired["low_mfu"].message
    assert f"{achieved / 19.5:.1%} of the 19.5 TFLOP/s peak of the dtype" in fired["low_mfu"].message


def test_tf32_kernels_make_fp32_ops_tf32(tmp_path):
    b = _gemm_steps("sm80_xmma_gemm_tf32f32_tf32f32_f32_tn_n_tilesize128x128x32", "float")
    m = tracedoc.analyze(b.write(tmp_path / "tf32.pt.trace.json")).ranks[0]
    assert m.evidence["flops_summary"][0].dtype == "tf32"
    assert m.metrics["dtype_peak_tflops"] == 156 and m.metrics["fp32_flops_fraction"] == 0.0
    assert m.metrics["peak_tflops"] == 312  # MFU: against the 16-bit peak, whatever the dtype


def test_bf16_at_a_healthy_rate_does_not_fire(tmp_path):
    # the same GEMM in bf16 in 0.9 ms kernels, ten per step (a bigger batch): 10 x 137 GFLOP per 10 ms step
    from trace_builder import TraceBuilder

    b = TraceBuilder(gpu="A100")
    for i in range(3):
        s = 1_000_000.0 + i * 10_000.0
        b.step(i + 1, s, s + 10_000.0)
        for k in range(10):
            b.cpu_op(
                "aten::linear",
                s + 10.0 + 30 * k,
                s + 35.0 + 30 * k,
                args={"Input Dims": [[4096, 4096], [4096, 4096], [4096]], "Input type": ["c10::BFloat16"] * 3},
            )
            b.kernel(
                "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x32",
                s + 300.0 + 950 * k,
                900.0,
                launch_at=s + 20.0 + 30 * k,
                launch_dur=2.0,
            )
    result = tracedoc.analyze(b.write(tmp_path / "bf16.pt.trace.json"))
    m = result.ranks[0].metrics
    assert m["mfu"] == pytest.approx(10 * LINEAR_FLOPS / STEP_S / 1e12 / 312)  # 44%
    assert "low_mfu" not in {f.label for f in result.verdicts[0].findings}


def test_small_gemms_and_explicit_softmax_are_named(tmp_path):
    from trace_builder import TraceBuilder

    b = TraceBuilder(gpu="A100")
    gemm = "sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x32"
    for i in range(2):
        s = 1_000_000.0 + i * 1_000.0
        b.step(i + 1, s, s + 1_000.0)
        # bf16 (64x64)(64x64): 2*64^3 FLOPs over 3*64*64*2 bytes = 21 FLOP/B, below the A100 ridge
        # 312 TFLOP/s / 2.0 TB/s = 156 FLOP/B: memory-bound by shape
        b.cpu_op(
            "aten::mm", s + 10, s + 20, args={"Input Dims": [[64, 64], [64, 64]], "Input type": ["c10::BFloat16"] * 2}
        )
        b.kernel(gemm, s + 100, 300.0, launch_at=s + 12, launch_dur=2.0)
        b.cpu_op("aten::_softmax", s + 30, s + 40)
        b.kernel("void softmax_warp_forward<c10::BFloat16>", s + 400, 100.0, launch_at=s + 32, launch_dur=2.0)
    m = tracedoc.analyze(b.write(tmp_path / "small.pt.trace.json")).ranks[0].metrics
    # compute time per step: 300 us GEMM + 100 us softmax
    assert m["small_gemm_fraction"] == pytest.approx(300 / 400)
    assert m["unfused_attention_fraction"] == pytest.approx(100 / 400)
    assert m["flops_counted_fraction"] == pytest.approx(300 / 400)


def test_reader_keeps_flops_args_and_shapes_only_of_ops_with_a_model(tmp_path):
    from trace_builder import TraceBuilder

    b = TraceBuilder(gpu="V100")
    b.step(1, 1000.0, 2000.0)
    # an older torch: conv2d with a "flops" arg and no Concrete Inputs (stride/padding unknown)
    b.cpu_op(
        "aten::conv2d",
        1010.0,
        1100.0,
        args={
            "Input Dims": [[8, 3, 32, 32], [16, 3, 3, 3], [16], [], [], [], []],
            "Input type": ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
            "flops": 12_345_678,
        },
    )
    b.cpu_op(
        "aten::view", 1200.0, 1210.0, args={"Input Dims": [[8, 16, 32, 32], []], "Input type": ["float", "ScalarList"]}
    )
    path = b.write(tmp_path / "old.pt.trace.json")
    t = tracedoc.load(path)
    assert len(t.op_shapes) == 1  # a view launches nothing: its shapes are not kept
    assert t.op_shapes["flops"][0] == 12_345_678
    assert json.loads(t.string(int(t.op_shapes["dims"][0])))[1] == [16, 3, 3, 3]
    assert tracedoc.analyze(path).ranks[0].metrics["model_flops_per_step"] == 12_345_678


def test_thread_clock_keeps_order_when_epoch_times_would_overflow():
    from types import SimpleNamespace

    import numpy as np

    from tracedoc.analyses.host.nesting import ThreadClock
    from tracedoc.model.trace import Table

    epoch = 1_700_000_000_000_000_000  # ns since 1970: times this large x 10 threads overflow int64
    starts = np.array([0, epoch, epoch + 10] + [epoch + 100 * i for i in range(10)], dtype=np.int64)
    ends = starts + 5
    tids = np.arange(starts.size, dtype=np.int64) % 10
    table = Table("cpu_ops", {"start_ns": starts, "end_ns": ends, "pid": np.zeros(starts.size), "tid": tids})
    clock = ThreadClock(SimpleNamespace(cpu_ops=table, runtime=Table("runtime")))
    rows = np.arange(starts.size)
    s, e = clock.cpu(rows, "start_ns"), clock.cpu(rows, "end_ns")
    assert (e > s).all()
    for t in range(10):  # order within a thread is kept, and threads do not interleave
        mine = tids == t
        assert (np.argsort(s[mine], kind="stable") == np.argsort(starts[mine], kind="stable")).all()
        assert s[mine].min() > (e[tids == t - 1].max() if t else -1)


def test_rank_compressed_clock_gives_the_same_numbers(monkeypatch):
    from tracedoc.analyses.host.nesting import ThreadClock

    path = str(shared_traces() / "kineto" / "v100_2rank_rank1.json.gz")
    plain = tracedoc.analyze(path).ranks[0]
    monkeypatch.setattr(ThreadClock, "LIMIT", 0)
    ranked = tracedoc.analyze(path).ranks[0]
    for k in ("model_flops_per_step", "achieved_tflops", "mfu", "flops_counted_fraction", "small_gemm_fraction"):
        assert ranked.metrics[k] == plain.metrics[k]
    assert ranked.evidence["flops_not_counted"] == plain.evidence["flops_not_counted"]


def test_unresolved_ops_counted_through_their_parent_or_children_are_not_listed(tmp_path):
    from trace_builder import TraceBuilder

    b = TraceBuilder(gpu="A100")
    b.step(1, 1000.0, 3000.0)
    conv_args = {
        "Input Dims": [[2, 3, 8, 8], [8, 3, 3, 3], [8], [], [], [], []],
        "Input type": ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar"],
        "Concrete Inputs": ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"],
    }
    b.cpu_op("aten::conv2d", 1010.0, 1100.0, args=conv_args)
    # inside it, a cuDNN call recorded without its arguments: counted through the conv2d
    b.cpu_op(
        "aten::cudnn_convolution",
        1020.0,
        1090.0,
        args={"Input Dims": [[2, 3, 8, 8], [8, 3, 3, 3]], "Input type": ["float", "float"]},
    )
    # an einsum without its equation around a bmm that resolves: counted through the bmm
    b.cpu_op(
        "aten::einsum",
        1200.0,
        1300.0,
        args={"Input Dims": [[], [[2, 4, 5], [2, 5, 3]], []], "Input type": ["", "TensorList", ""]},
    )
    b.cpu_op("aten::bmm", 1210.0, 1290.0, args={"Input Dims": [[2, 4, 5], [2, 5, 3]], "Input type": ["float"] * 2})
    # a lone matmul with mismatched shapes: not counted, and listed with why
    b.cpu_op("aten::mm", 1400.0, 1450.0, args={"Input Dims": [[2, 3], [4, 5]], "Input type": ["float"] * 2})
    rank = tracedoc.analyze(b.write(tmp_path / "nest.pt.trace.json")).ranks[0]
    # conv2d 14080 (out [2,8,4,4]: 2*256*27 + 256) + bmm 2*2*4*3*5 = 240
    assert rank.metrics["model_flops_per_step"] == 14_080 + 240
    listed = [r.op for r in rank.evidence["flops_not_counted"] if r.gpu_ns is None]
    assert listed == ["aten::mm"]


@pytest.mark.parametrize(
    "kernels, passes",
    [
        (["sm80_xmma_wgrad_implicit_gemm_indexed_f32f32_tf32f32"], 1),  # first layer: weight gradient only
        (["sm80_xmma_dgrad_implicit_gemm_f32f32_tf32f32", "sm80_xmma_wgrad_implicit_gemm_f32f32_tf32f32"], 2),
        (["some_conv_backward_kernel"], 2),  # names that do not say: both assumed
    ],
)
def test_conv_backward_without_output_mask_reads_the_kernels(tmp_path, kernels, passes):
    from trace_builder import TraceBuilder

    b = TraceBuilder(gpu="A100")
    b.step(1, 1000.0, 3000.0)
    # torch < 2.1: no Concrete Inputs, so no output mask
    b.cpu_op(
        "aten::convolution_backward",
        1010.0,
        1100.0,
        args={
            "Input Dims": [[2, 8, 4, 4], [2, 3, 8, 8], [8, 3, 3, 3]] + [[]] * 8,
            "Input type": ["float"] * 3 + [""] * 8,
        },
    )
    for k, name in enumerate(kernels):
        b.kernel(name, 1200.0 + 100 * k, 50.0, launch_at=1020.0 + 10 * k, launch_dur=2.0)
    m = tracedoc.analyze(b.write(tmp_path / "bwd.pt.trace.json")).ranks[0].metrics
    # one pass: 2 * 256 outputs * 27 = 13824
    assert m["model_flops_per_step"] == passes * 13_824


# -- the real H100 traces against the FLOPs counted by hand from their layer shapes (truth.json) ----

H100_TRUTH = ("mlp_eager_bf16", "mlp_compiled_bf16", "cnn_train_bf16", "gpt_small_fp32")


@pytest.mark.parametrize("name", H100_TRUTH)
def test_h100_flops_match_the_hand_count_and_no_check_fails(name):
    from tracedoc.checks import BUG_PREFIX

    h100 = shared_traces() / "h100"
    truth = json.loads((h100 / "truth.json").read_text())[name]
    rank = tracedoc.analyze(str(h100 / f"{name}.pt.trace.json.gz")).ranks[0]
    m = rank.metrics
    assert m["model_flops_per_step"] == pytest.approx(truth["model_flops_per_step"], rel=0.1)
    # one step time: the rate times the step p50 gives back the FLOPs per step
    assert m["achieved_tflops"] * 1e12 * m["step_time_p50_ns"] / 1e9 == pytest.approx(m["model_flops_per_step"])
    assert not [w for w in rank.warnings if BUG_PREFIX in w]
    # the dtype the products ran in: bf16 under autocast (compiled or not), fp32 with TF32 off
    assert rank.evidence["flops_summary"][0].dtype == ("fp32" if "fp32" in name else "bf16")
