"""Model FLOPs, TFLOP/s and MFU on whole traces: real torch.profiler runs, shared traces, and traces
that cannot give MFU (no shapes, unknown GPU)."""

from __future__ import annotations

import argparse
import gzip
import json
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
BACKWARD = (2 * (2 * 4 * 64 * 10) + 2 * (2 * 4 * 512 * 64) + 2 * ATTN_FWD
            + 2 * (4 * 8 * 8 * 8) * 27 + 4 * 8 * 8 * 8)
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
    assert summary["dtype"] == "fp32" and "no GPU kernels" in summary["note"]
    classes = {r["op_class"]: r for r in rank.evidence["flops_by_op_class"]}
    assert classes["conv forward"]["model_flops"] == 3 * CONV_FWD
    assert classes["attention backward"]["model_flops"] == 3 * 2 * ATTN_FWD
    for row in rank.evidence["flops_per_step"]:
        assert row["model_flops"] == FORWARD + BACKWARD


def test_activation_checkpointing_is_hardware_not_model_flops(tmp_path):
    rank = tracedoc.analyze(_profile_tiny(tmp_path, "ckpt")).ranks[0]
    m = rank.metrics
    # the checkpointed fc1 forward runs again during backward: model FLOPs unchanged, hardware + FC1_FWD
    assert m["model_flops_per_step"] == FORWARD + BACKWARD
    assert m["hardware_flops_per_step"] == FORWARD + BACKWARD + ATTN_RECOMPUTE + FC1_FWD
    assert rank.evidence["flops_summary"][0]["recomputed_ops"] == 3  # one per profiled step


# -- shared traces that record shapes ------------------------------------------------------------

def _leaf_blas_flops_per_step(path) -> float:
    """An independent count: every BLAS leaf op (mm, addmm, bmm) whose CPU start lies in a
    ProfilerStep span, from the raw JSON (not tracedoc's reader or its top-level-op rule)."""
    with gzip.open(path) as f:
        events = json.load(f)["traceEvents"]
    steps = [(e["ts"], e["ts"] + e["dur"]) for e in events if e.get("ph") == "X"
             and e.get("cat") in ("user_annotation", "cpu_op") and str(e.get("name", "")).startswith("ProfilerStep#")]
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


@pytest.mark.parametrize("name, rel", [
    ("v100_2rank_rank1.json.gz", 1e-12),
    ("mi250_rocm_minitoy.json.gz", 1e-12),
    # linear layers that run as matmul + add: tracedoc counts their bias add (rows x N) at the
    # linear op; the BLAS leaves do not carry it (a 1e-5 share here)
    ("dlrm_128rank_rank0.json.gz", 1e-4),
    ("dlrm_128rank_rank1.json.gz", 1e-4),
])
def test_shared_traces_flops_match_an_independent_leaf_count(name, rel):
    path = shared_traces() / "kineto" / name
    m = tracedoc.analyze(str(path)).ranks[0].metrics
    assert m["model_flops_per_step"] == pytest.approx(_leaf_blas_flops_per_step(path), rel=rel)


def test_v100_dlrm_rates_and_mfu_against_the_fp32_peak():
    rank = tracedoc.analyze(str(shared_traces() / "kineto" / "v100_2rank_rank1.json.gz")).ranks[0]
    m, summary = rank.metrics, rank.evidence["flops_summary"][0]
    # fp32 GEMMs on CUDA cores: MFU against the V100 SXM2 FP32 peak (15.7), Tensor Core MFU against 125
    assert summary["dtype"] == "fp32" and summary["peak_device"] == "V100 SXM2"
    assert m["peak_tflops"] == 15.7
    assert m["mfu"] == pytest.approx(m["achieved_tflops"] / 15.7)
    assert m["tensor_core_mfu"] == pytest.approx(m["achieved_tflops"] / 125)
    assert m["fp32_flops_fraction"] == 1.0
    # achieved = FLOPs of all steps / (last completion - first step start)
    steps = rank.evidence["flops_per_step"]
    total_ns = sum(r["step_time_ns"] for r in steps)
    assert m["achieved_tflops"] == pytest.approx(m["model_flops_per_step"] * len(steps) / total_ns / 1e3)
    # the embedding-heavy model spends most GPU time outside the counted GEMMs, and says so
    assert 0 < m["flops_counted_fraction"] < 0.2
    assert any(r["gpu_ns"] for r in rank.evidence["flops_not_counted"])


def test_trace_without_shapes_states_it_instead_of_a_number():
    rank = tracedoc.analyze(str(shared_traces() / "kineto" / "v100_resnet_ns_rank0.pt.trace.json.gz")).ranks[0]
    for k in ("model_flops_per_step", "achieved_tflops", "mfu"):
        assert rank.metrics[k] is None
    assert "record_shapes=True" in rank.evidence["flops_summary"][0]["note"]


def test_unknown_gpu_gives_tflops_without_mfu():
    rank = tracedoc.analyze(str(shared_traces() / "kineto" / "mi250_rocm_minitoy.json.gz")).ranks[0]
    assert rank.metrics["achieved_tflops"] > 0
    assert rank.metrics["mfu"] is None and rank.metrics["peak_tflops"] is None
    note = rank.evidence["flops_summary"][0]["note"]
    assert "AMD Radeon Graphics" in note and "no MFU" in note


# -- capture records shapes by default ----------------------------------------------------------

def test_tracedoc_profile_records_shapes_so_reports_have_flops(tmp_path):
    torch = pytest.importorskip("torch")
    import tracedoc.capture as capture

    model = torch.nn.Linear(8, 2)
    with capture.profile(str(tmp_path), skip_first=1, warmup=1, active=2, report=False, signal=False,
                         trigger_file="", monitor=False) as prof:
        for _ in range(6):
            model(torch.randn(4, 8)).sum().backward()
            prof.step()
    m = tracedoc.analyze(prof.traces[0]).ranks[0].metrics
    # per step: linear forward 2*4*8*2 + bias 4*2 = 136; weight gradient mm 2*2*4*8 = 128 (the input
    # needs no gradient)
    assert m["model_flops_per_step"] == 136 + 128


def test_tracedoc_run_flag_turns_shapes_off():
    from tracedoc.capture.cli import register

    sub = argparse.ArgumentParser().add_subparsers()
    register(sub)
    run = sub.choices["run"]
    assert run.parse_args(["--", "x"]).record_shapes is True
    assert run.parse_args(["--no-record-shapes", "--", "x"]).record_shapes is False
    assert run.parse_args(["--with-flops", "--", "x"]).with_flops is True
