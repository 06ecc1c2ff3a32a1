"""Model-formula estimates: parameter counts against published model sizes, FLOPs per token and
memory worked out by hand, and the estimate set beside a real trace."""

from __future__ import annotations

import json

import pytest
from conftest import shared_traces

import tracedoc
from tracedoc.errors import UsageError
from tracedoc.estimate import EstimateRequest, TrainSetup, load_model_spec
from tracedoc.estimate.config import from_hf_config
from tracedoc.estimate.formulas import flops_per_token, param_count
from tracedoc.estimate.memory import activation_bytes_per_sample, estimate_memory, largest_micro_batch
from tracedoc.model.evidence import MemoryEstimatePart, ModelEstimate
from tracedoc.result import load as load_report

LLAMA2_7B = {
    "model_type": "llama",
    "hidden_size": 4096,
    "intermediate_size": 11008,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 32,
    "vocab_size": 32000,
    "max_position_embeddings": 4096,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
}
LLAMA2_70B = dict(
    LLAMA2_7B,
    hidden_size=8192,
    intermediate_size=28672,
    num_hidden_layers=80,
    num_attention_heads=64,
    num_key_value_heads=8,
)
MIXTRAL_8X7B = {
    "model_type": "mixtral",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "num_experts_per_tok": 2,
    "vocab_size": 32000,
    "tie_word_embeddings": False,
}
GPT2 = {
    "model_type": "gpt2",
    "n_embd": 768,
    "n_layer": 12,
    "n_head": 12,
    "vocab_size": 50257,
    "n_positions": 1024,
    "n_inner": None,
    "activation_function": "gelu_new",
}


def test_llama_7b_and_70b_parameter_counts_match_the_published_sizes():
    # 7B: embeddings 2*32000*4096 + 32 layers * (4*4096^2 + 3*4096*11008 + 2*4096) + 4096 = 6,738,415,616
    assert param_count(from_hf_config(LLAMA2_7B)).total == 6_738_415_616
    # 70B with GQA (8 kv heads of 128): per layer 8192*(8192+2*1024) + 8192^2 + 3*8192*28672 + 2*8192
    # = 855,654,400; x80 + 2*32000*8192 + 8192 = 68,976,648,192
    spec = from_hf_config(LLAMA2_70B)
    assert spec.num_kv_heads == 8 and spec.head_dim == 128
    assert param_count(spec).total == 68_976_648_192


def test_mixtral_total_and_active_parameters():
    spec = from_hf_config(MIXTRAL_8X7B)
    assert spec.is_moe and spec.experts_per_token == 2
    p = param_count(spec)
    # per layer: attention 41,943,040 + 8 experts * 3*4096*14336 + router 4096*8 + norms 8192 = 1,451,270,144
    assert p.total == 32 * 1_451_270_144 + 2 * 32000 * 4096 + 4096 == 46_702_792_704
    # active: 2 of 8 experts: 41,943,040 + 2*176,160,768 + 32,768 + 8192 = 394,305,536 per layer
    assert p.active == 32 * 394_305_536 + 2 * 32000 * 4096 + 4096 == 12_879_925_248


def test_gpt2_small_within_its_biases():
    spec = from_hf_config(GPT2)
    assert spec.ffn_size == 4 * 768 and not spec.gated_mlp and spec.tie_embeddings and spec.learned_positions
    # published 124,439,808 includes ~100k bias parameters this count leaves out
    assert param_count(spec).total == pytest.approx(124_439_808, rel=1e-3)


def test_qwen_configs():
    # Qwen v1 gives the gate+up width together: 22016 -> 11008 per matrix
    v1 = from_hf_config(
        {
            "model_type": "qwen",
            "hidden_size": 4096,
            "intermediate_size": 22016,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "vocab_size": 151936,
            "seq_length": 8192,
        }
    )
    assert v1.ffn_size == 11008 and v1.gated_mlp and v1.max_seq_len == 8192 and v1.family == "qwen"
    moe = from_hf_config(
        {
            "model_type": "qwen2_moe",
            "hidden_size": 2048,
            "intermediate_size": 5632,
            "num_hidden_layers": 24,
            "num_attention_heads": 16,
            "num_key_value_heads": 16,
            "vocab_size": 151936,
            "num_experts": 60,
            "num_experts_per_tok": 4,
            "moe_intermediate_size": 1408,
            "shared_expert_intermediate_size": 5632,
        }
    )
    assert moe.family == "moe" and moe.moe_ffn_size == 1408 and moe.shared_ffn_size == 5632
    # per token MLP forward: 2*2048*3*(4*1408 + 5632) = 138,412,032 per layer; router 2*2048*60
    f = flops_per_token(moe, seq_len=1024)
    assert f.mlp == 24 * 138_412_032 and f.router == 24 * 2 * 2048 * 60


def test_training_flops_per_token_llama_7b():
    spec = from_hf_config(LLAMA2_7B)
    f = flops_per_token(spec, seq_len=2048)
    # per layer: projections 2*(4*4096^2) = 134,217,728; MLP 2*3*4096*11008 = 270,532,608;
    # causal attention 4*2048*4096/2 = 16,777,216; logits 2*4096*32000 = 262,144,000
    forward = 32 * (134_217_728 + 270_532_608 + 16_777_216) + 262_144_000
    assert f.forward == forward == 13_751_025_664
    assert f.training == 3 * forward


def test_explicit_params_and_bad_input():
    spec = load_model_spec("hidden=4096,layers=32,heads=32,kv_heads=8,ffn=14336,vocab=128256,swiglu=true")
    assert spec.family == "llama" and spec.num_kv_heads == 8 and spec.head_dim == 128
    with pytest.raises(UsageError, match="not a known model param"):
        load_model_spec("hidden=4096,layerz=32")
    with pytest.raises(UsageError, match="params lack num_heads"):
        load_model_spec("hidden=4096,layers=2")
    with pytest.raises(UsageError, match="neither a file nor"):
        load_model_spec("no-such-config.json")
    with pytest.raises(UsageError, match="multiple of key/value heads"):
        load_model_spec("hidden=4096,layers=32,heads=32,kv_heads=5,vocab=100")


def test_memory_states_by_precision_and_zero_stage():
    spec = from_hf_config(LLAMA2_7B)
    n = 6_738_415_616
    # bf16 weights 2 + bf16 grads 2 + fp32 master 4 + Adam moments 8 = 16 bytes per parameter
    assert estimate_memory(spec, TrainSetup()).states_bytes == 16 * n
    # ZeRO-1 over 8: optimizer and master sharded: 2 + 2 + 12/8
    assert estimate_memory(spec, TrainSetup(zero_stage=1, dp_size=8)).states_bytes == pytest.approx(5.5 * n)
    # ZeRO-3 / FSDP full shard over 8: everything / 8
    assert estimate_memory(spec, TrainSetup(zero_stage=3, dp_size=8)).states_bytes == pytest.approx(2 * n)
    # plain SGD in fp32: 4 + 4
    assert estimate_memory(spec, TrainSetup(precision="fp32", optimizer="sgd")).states_bytes == 8 * n
    with pytest.raises(UsageError):
        estimate_memory(spec, TrainSetup(optimizer="lion"))


def test_activations_reproduce_the_published_gpt_formula():
    # GPT-style layer without a fused attention kernel: s*b*h*(34 + 5*a*s/h) bytes (Korthikanti et al.)
    spec = load_model_spec("hidden=1024,layers=1,heads=16,vocab=1,ffn=4096")
    s, h, a = 512, 1024, 16
    per_sample = activation_bytes_per_sample(spec, TrainSetup(seq_len=s, fused_attention=False))
    layer = s * h * (34 + 5 * a * s / h)
    assert per_sample == layer + 2 * s * h + 4 * s * 1  # plus the embedding output and the logits (V=1)
    # full checkpointing keeps each layer's input (2*s*h) and one layer during its recomputation
    ckpt = activation_bytes_per_sample(spec, TrainSetup(seq_len=s, fused_attention=False, checkpointing=True))
    assert ckpt == 2 * s * h + layer + 4 * s


def test_largest_micro_batch_by_hand():
    spec = load_model_spec("hidden=1024,layers=2,heads=16,vocab=1000,ffn=4096")
    est = estimate_memory(spec, TrainSetup(seq_len=512))
    device = 2 * 2**30
    expected = int((0.9 * device - est.states_bytes) // est.activations_per_sample_bytes)
    assert largest_micro_batch(est, device) == expected > 0
    assert largest_micro_batch(est, est.states_bytes) == 0


def test_estimate_beside_a_real_trace(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {"model_type": "gpt2", "n_embd": 512, "n_layer": 4, "n_head": 8, "vocab_size": 1000, "n_positions": 256}
        )
    )
    req = EstimateRequest(spec=load_model_spec(str(cfg)), tokens_per_step=4096, setup=TrainSetup(seq_len=256))
    rank = tracedoc.analyze(str(shared_traces() / "kineto" / "v100_2rank_rank1.json.gz"), estimate=req).ranks[0]
    m = rank.metrics
    step_s = m["step_time_p50_ns"] / 1e9  # the report's one step time (the median)
    assert step_s == pytest.approx(0.1167, rel=0.01)
    assert m["tokens_per_s"] == pytest.approx(4096 / step_s)
    assert m["samples_per_s"] == pytest.approx(4096 / 256 / step_s)
    formula = flops_per_token(req.spec, 256).training * 4096
    assert m["formula_flops_per_step"] == formula
    # against the same peak as the MFU: the V100 SXM2 16-bit Tensor Core peak, 125 TFLOP/s
    assert m["formula_mfu"] == pytest.approx(formula / step_s / 1e12 / 125)
    assert m["trace_to_formula_flops_ratio"] == pytest.approx(m["model_flops_per_step"] / formula)
    row = rank.evidence["model_estimate"][0]
    assert "formula" in row.comparison
    parts = {r.part: r for r in rank.evidence["memory_estimate"]}
    assert parts["total (estimate)"].bytes == m["memory_estimate_bytes"]
    # a saved report reads the two tables back as their rows and writes the same JSON (the median step
    # time here is a float, the parameter count an int)
    result = tracedoc.analyze(str(shared_traces() / "kineto" / "v100_2rank_rank1.json.gz"), estimate=req)
    result.save(tmp_path / "saved.json")
    back = load_report(tmp_path / "saved.json")
    for name, row_type in (("model_estimate", ModelEstimate), ("memory_estimate", MemoryEstimatePart)):
        assert [type(r) for r in back.ranks[0].evidence[name]] == [row_type] * len(result.ranks[0].evidence[name])
        assert back.ranks[0].evidence[name] == result.ranks[0].evidence[name]
    saved = json.loads((tmp_path / "saved.json").read_text())
    assert json.dumps(json.loads(back.to_json())) == json.dumps(saved)


def _cli(*args):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root))
    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *args], capture_output=True, text=True, env=env, cwd=root, timeout=300
    )


def test_cli_model_estimate_in_the_report(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(LLAMA2_7B))
    trace = str(shared_traces() / "kineto" / "v100_2rank_rank1.json.gz")
    out = _cli(
        "analyze",
        trace,
        "--model",
        str(cfg),
        "--tokens-per-step",
        "4096",
        "--seq-len",
        "2048",
        "--zero-stage",
        "3",
        "-f",
        "md",
    )
    assert out.returncode == 0, out.stderr
    assert "tokens/s" in out.stdout and "model MFU (formula)" in out.stdout and "MFU" in out.stdout
    doc = json.loads(_cli("analyze", trace, "--model", str(cfg), "--tokens-per-step", "4096", "-f", "json").stdout)
    m = doc["ranks"][0]["metrics"]
    # 7B at 4096 context (the config's maximum) by hand: 3 * (32*(134,217,728 + 270,532,608 + 4*4096*4096/2)
    # + 262,144,000) per token
    per_token = 3 * (32 * (134_217_728 + 270_532_608 + 4 * 4096 * 4096 // 2) + 262_144_000)
    assert m["formula_flops_per_step"] == per_token * 4096
    assert m["model_flops_per_step"] is not None and m["mfu"] is not None


def test_cli_estimate_usage_errors(tmp_path):
    trace = str(shared_traces() / "kineto" / "mi250_rocm_minitoy.json.gz")
    out = _cli("analyze", trace, "--model", "hidden=64,layers=2", "--tokens-per-step", "8")
    assert out.returncode == 2 and "params lack num_heads" in out.stderr and "Traceback" not in out.stderr
    out = _cli("analyze", trace, "--model", "hidden=64,layers=2,heads=2,vocab=10")
    assert out.returncode == 2 and "--tokens-per-step" in out.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2")
    out = _cli("analyze", trace, "--model", str(bad), "--tokens-per-step", "8")
    assert out.returncode == 2 and "not a readable JSON model config" in out.stderr


def test_a_formula_faster_than_the_gpu_is_called_out(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(LLAMA2_7B))
    req = EstimateRequest(spec=load_model_spec(str(cfg)), tokens_per_step=4096, setup=TrainSetup(seq_len=2048))
    rank = tracedoc.analyze(str(shared_traces() / "kineto" / "v100_2rank_rank1.json.gz"), estimate=req).ranks[0]
    # 4096 tokens of a 7B model in a ~0.12 s step on one V100 would take ~90x its peak
    assert rank.metrics["formula_mfu"] > 1
    assert any("does not describe this trace" in w for w in rank.warnings)


def test_latent_attention_configs_are_refused_not_miscounted():
    with pytest.raises(UsageError, match="multi-head latent attention"):
        from_hf_config(dict(LLAMA2_7B, model_type="deepseek_v3", kv_lora_rank=512))


def test_the_formula_uses_the_reports_one_step_when_no_step_has_a_step_time(tmp_path):
    """One step after a pre-window backlog has no step time (docs/definitions.md): the report's step is the
    window, from the backlog's end (4 ms) to the step's end (9 ms). tokens/s divides by that same 5 ms, never
    by the step's own 7.5 ms span: a report shows one step time."""
    from trace_builder import TraceBuilder

    cfg = tmp_path / "config.json"
    cfg.write_text(
        json.dumps(
            {"model_type": "gpt2", "n_embd": 512, "n_layer": 4, "n_head": 8, "vocab_size": 1000, "n_positions": 256}
        )
    )
    req = EstimateRequest(spec=load_model_spec(str(cfg)), tokens_per_step=4096, setup=TrainSetup(seq_len=256))
    b = TraceBuilder()
    b.unlaunched("ampere_sgemm_128x64_tn", 1_000.0, 3_000.0)  # launched before the capture: runs until 4 ms
    b.step(1, 1_500.0, 9_000.0)
    b.kernel("ampere_sgemm_128x64_tn", 4_100.0, 2_000.0, op="aten::mm", launch_at=2_000.0)
    b.kernel("vectorized_elementwise_kernel", 6_200.0, 500.0, op="aten::add", launch_at=2_100.0)
    rank = tracedoc.analyze(str(b.write(tmp_path / "t.json")), estimate=req).ranks[0]
    assert rank.metrics["steps"] == 1 and rank.metrics["step_time_p50_ns"] is None
    assert rank.verdict.step_time_ns == 5_000_000
    assert rank.evidence["model_estimate"][0].step_time_ns == 5_000_000
    assert rank.metrics["tokens_per_s"] == pytest.approx(4096 / 5e-3)
