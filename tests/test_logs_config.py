"""Config checks with known errors, from each config source: Megatron command line, DeepSpeed JSON,
Hugging Face TrainingArguments JSON, torchrun environment, YAML; the arithmetic in each expected
value is worked out in the test."""

from __future__ import annotations

import json

import pytest

from tracedoc.api import analyze_log
from tracedoc.logs.config import check_config, gather, read_config
from tracedoc.logs.errors import LogError


@pytest.fixture
def log(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("".join(json.dumps({"step": i, "loss": 2.0 - i * 0.001}) + "\n" for i in range(1, 101)))
    return path


def rule_ids(result):
    return {f.rule_id for f in result.findings}


def test_megatron_command_line_parallel_mismatch(tmp_path, log):
    cfg = tmp_path / "launch.sh"
    cfg.write_text(
        "torchrun --nnodes 2 --nproc-per-node 8 pretrain_gpt.py \\\n  --tensor-model-parallel-size 4 "
        "--pipeline-model-parallel-size 2 --data-parallel-size 4 --micro-batch-size 2 "
        "--global-batch-size 64 --seq-length 4096 --num-attention-heads 32 --bf16\n"
    )
    result = analyze_log(log, config=[str(cfg)])
    m = result.metrics
    # 4 x 2 x 1 x 4 = 32 ranks asked for, 2 nodes x 8 = 16 launched
    assert m["config_world_size"] == 16
    assert m["parallel_mismatch"] is True
    assert m["parallel_text"] == "TP 4 x PP 2 x CP 1 x DP 4 = 32 != world size 16"
    assert m["parallel_fix"] == "set data_parallel_size to 2 (world 16 / 8)"
    assert "TD701" in rule_ids(result)
    finding = next(f for f in result.findings if f.rule_id == "TD701")
    assert finding.fixes == ["set data_parallel_size to 2 (world 16 / 8)."]
    assert finding.label == "config_error"


def test_deepspeed_batch_mismatch_with_torchrun_env(tmp_path, log):
    ds = tmp_path / "ds_config.json"
    ds.write_text(
        json.dumps(
            {
                "train_batch_size": 512,
                "train_micro_batch_size_per_gpu": 4,
                "gradient_accumulation_steps": 8,
                "fp16": {"enabled": True, "loss_scale": 0},
            }
        )
    )
    env = tmp_path / "env.txt"
    env.write_text("export WORLD_SIZE=8\nMASTER_ADDR=node0\n")
    result = analyze_log(log, config=[str(ds), str(env)])
    m = result.metrics
    # 4 x 8 ranks x 8 accumulation = 256, not 512; 512 / (4 x 8) = 16 accumulation steps would match
    assert m["batch_mismatch"] is True
    assert m["batch_text"] == "global batch 512 != micro 4 x DP 8 x grad-accum 8 = 256"
    assert (
        m["batch_fix"]
        == "set the global batch (global_batch_size / train_batch_size) to 256, or gradient_accumulation_steps to 16"
    )
    assert m["fp16_without_loss_scaling"] is False  # loss_scale 0 = dynamic
    assert m["precision"] == "fp16"
    assert "TD702" in rule_ids(result) and "TD704" not in rule_ids(result)


def test_deepspeed_fp16_static_loss_scale_of_one(tmp_path, log):
    ds = tmp_path / "ds_config.json"
    ds.write_text(json.dumps({"train_micro_batch_size_per_gpu": 4, "fp16": {"enabled": True, "loss_scale": 1.0}}))
    result = analyze_log(log, config=[str(ds)])
    assert result.metrics["fp16_without_loss_scaling"] is True
    assert "TD704" in rule_ids(result)


def test_fp16_log_whose_loss_scale_stays_one(tmp_path):
    path = tmp_path / "l.jsonl"
    path.write_text("".join(json.dumps({"step": i, "loss": 2.0, "loss_scale": 1.0}) + "\n" for i in range(1, 50)))
    cfg = tmp_path / "args.json"
    cfg.write_text(json.dumps({"fp16": True}))
    result = analyze_log(path, config=[str(cfg)])
    assert result.metrics["fp16_without_loss_scaling"] is True
    assert result.metrics["fp16_text"] == "fp16 with the logged loss scale stays 1.0"


def test_hf_training_args_bf16_on_v100(tmp_path, log):
    args = tmp_path / "training_args.json"
    args.write_text(
        json.dumps({"per_device_train_batch_size": 8, "gradient_accumulation_steps": 4, "bf16": True, "fp16": False})
    )
    result = analyze_log(log, config=[str(args)], gpu_name="Tesla V100-SXM2-32GB")
    assert result.metrics["bf16_unsupported"] is True
    assert "TD705" in rule_ids(result)
    ok = analyze_log(log, config=[str(args)], gpu_name="NVIDIA A100-SXM4-80GB")
    assert ok.metrics["bf16_unsupported"] is False and "TD705" not in rule_ids(ok)
    by_cc = analyze_log(log, config=[str(args)], compute_capability=7.5)  # a T4 from a trace
    assert by_cc.metrics["bf16_unsupported"] is True


def test_heads_groups_and_sequence_divisibility(tmp_path, log):
    cfg = tmp_path / "args.json"
    cfg.write_text(
        json.dumps(
            {
                "tensor_model_parallel_size": 8,
                "num_attention_heads": 32,
                "num_query_groups": 4,
                "seq_length": 4100,
                "sequence_parallel": True,
                "context_parallel_size": 1,
                "world_size": 8,
            }
        )
    )
    result = analyze_log(log, config=[str(cfg)])
    text = result.metrics["tp_divisibility_text"]
    assert "query groups 4 not divisible by TP 8" in text
    assert "sequence length 4100 not divisible by TP 8" in text
    assert "attention heads" not in text  # 32 % 8 == 0
    assert "set seq_length to 4104" in result.metrics["tp_divisibility_fix"]  # next multiple of 8
    assert "TD703" in rule_ids(result)


def test_context_parallel_needs_seq_divisible_by_twice_cp():
    settings = {"context_parallel_size": 4, "seq_length": 4100, "world_size": 4}
    m, rows = check_config(settings, ["x"])
    assert m["tp_divisibility_problem"] is True
    assert "not divisible by 2 x CP = 8" in m["tp_divisibility_text"]


def test_expert_parallel_must_divide_dp_times_cp():
    # 16 ranks / (TP 2 x PP 1) = DP 8; EP 3 does not divide 8
    m, _ = check_config({"tensor_model_parallel_size": 2, "expert_model_parallel_size": 3, "world_size": 16}, ["x"])
    assert m["parallel_mismatch"] is True and m["parallel_text"] == "EP 3 does not divide DP 8 x CP 1 = 8"


def test_megatron_derived_accumulation_must_be_whole():
    # DP = 16 / (2 x 2) = 4; micro 2 x DP 4 = 8 does not divide 100
    m, _ = check_config(
        {
            "tensor_model_parallel_size": 2,
            "pipeline_model_parallel_size": 2,
            "world_size": 16,
            "micro_batch_size": 2,
            "global_batch_size": 100,
        },
        ["x"],
    )
    assert m["batch_mismatch"] is True
    assert m["batch_text"] == "global batch 100 is not a multiple of micro 2 x DP 4 = 8"
    assert m["batch_fix"] == "set global_batch_size to 96 or 104"


def test_consistent_config_gives_no_config_finding(tmp_path, log):
    cfg = tmp_path / "args.json"
    cfg.write_text(
        json.dumps(
            {
                "tensor_model_parallel_size": 2,
                "pipeline_model_parallel_size": 2,
                "world_size": 16,
                "micro_batch_size": 2,
                "global_batch_size": 64,
                "num_attention_heads": 32,
                "seq_length": 4096,
                "bf16": True,
                "gpu": "NVIDIA H100 80GB HBM3",
            }
        )
    )
    result = analyze_log(log, config=[str(cfg)])
    assert all(row["ok"] for row in result.config_checks) and len(result.config_checks) == 4
    assert "config_error" not in result.labels


def test_yaml_config(tmp_path, log):
    cfg = tmp_path / "config.yaml"
    cfg.write_text("parallelism:\n  tensor_parallel_degree: 3\ntraining:\n  global_batch_size: 8\nworld_size: 8\n")
    result = analyze_log(log, config=[str(cfg)])
    assert result.metrics["parallel_mismatch"] is True  # 8 ranks are not divisible by TP 3


def test_unknown_config_is_a_clear_error(tmp_path):
    cfg = tmp_path / "notes.txt"
    cfg.write_text("just some words\n")
    with pytest.raises(LogError) as exc:
        read_config(str(cfg))
    assert "not a config tracedoc knows" in str(exc.value) and "just some words" in str(exc.value)


def test_log_header_is_a_config_source():
    settings, sources = gather({"tensor_model_parallel_size": 2, "world_size": 4}, [])
    assert sources == ["log header"] and settings["world_size"] == 4


def test_layers_must_divide_over_pipeline_stages():
    # 30 layers over PP 4: 7.5 layers a stage; with 2 virtual stages, 8 chunks
    m, rows = check_config({"pipeline_model_parallel_size": 4, "num_layers": 30, "world_size": 8}, ["x"])
    assert m["tp_divisibility_problem"] is True and "30 layers not divisible by PP 4" in m["tp_divisibility_text"]
    m, _ = check_config(
        {
            "pipeline_model_parallel_size": 4,
            "num_layers": 32,
            "world_size": 8,
            "virtual_pipeline_model_parallel_size": 3,
        },
        ["x"],
    )
    assert "32 layers not divisible by PP 4 x virtual stages 3" in m["tp_divisibility_text"]
    m, _ = check_config({"pipeline_model_parallel_size": 4, "num_layers": 32, "world_size": 8}, ["x"])
    assert m["tp_divisibility_problem"] is False


def test_clipping_fraction_from_the_config_threshold(tmp_path):
    grads = [0.5, 1.5, 2.0, 0.8, 3.0, 1.2, 1.1, 0.9, 1.3, 1.4] * 5  # 35 of 50 above 1.0
    path = tmp_path / "g.jsonl"
    path.write_text(
        "".join(json.dumps({"step": i + 1, "loss": 2.0, "grad_norm": g}) + "\n" for i, g in enumerate(grads))
    )
    cfg = tmp_path / "training_args.json"
    cfg.write_text(json.dumps({"per_device_train_batch_size": 8, "max_grad_norm": 1.0}))
    result = analyze_log(path, config=[str(cfg)])
    assert result.metrics["grad_clip_value"] == 1.0
    assert result.metrics["grad_clip_fraction"] == pytest.approx(35 / 50)
    assert "TD606" in rule_ids(result)
    assert analyze_log(path).metrics["grad_clip_fraction"] is None  # no threshold, no fraction
