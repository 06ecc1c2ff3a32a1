"""Distributed-training config checks: parallel sizes, batch arithmetic, divisibility by TP, precision.

Sources, merged in order (later ones fill what earlier ones left open): the log's own header
(Megatron ``arguments`` block), then each ``--config`` file: Megatron arguments (a log with the
``arguments`` block, or a command line with ``--tensor-model-parallel-size 2 ...``), DeepSpeed JSON,
Hugging Face TrainingArguments JSON, torchtitan/W&B/Lightning YAML, torchrun environment
(``WORLD_SIZE=8`` lines). Each check yields a row (check, ok, detail, fix) and the metrics the
``config_error`` rules read.

Semantics (Megatron-LM ``validate_args``, DeepSpeed config asserts):
world = TP x PP x CP x DP (DP derived as world / (TP PP CP) when not given, which must divide);
EP divides DP x CP; global batch = micro x DP x grad-accum (Megatron derives grad-accum, which must be
a whole number); heads and query groups % TP == 0; seq % TP == 0 with sequence parallelism; seq %
(2 CP) == 0 with context parallelism; layers % (PP x virtual stages) == 0; fp16 with a fixed loss scale of 1 is fp16
without loss scaling; bf16 needs compute capability >= 8.0.
"""

from __future__ import annotations

import os
from typing import Any

from .series import normalise_key

KEYS: dict[str, tuple[str, ...]] = {
    "tp": (
        "tensor_model_parallel_size",
        "tensor_parallel_size",
        "tp_size",
        "tp",
        "tensor_parallel_degree",
        "parallelism_tensor_parallel_degree",
        "tensor_parallel",
    ),
    "pp": (
        "pipeline_model_parallel_size",
        "pipeline_parallel_size",
        "pp_size",
        "pp",
        "pipeline_parallel_degree",
        "parallelism_pipeline_parallel_degree",
    ),
    "cp": ("context_parallel_size", "cp_size", "cp", "context_parallel_degree", "parallelism_context_parallel_degree"),
    "ep": (
        "expert_model_parallel_size",
        "expert_parallel_size",
        "ep_size",
        "ep",
        "expert_parallel_degree",
        "parallelism_expert_parallel_degree",
    ),
    "dp": ("data_parallel_size", "dp_size", "dp", "data_parallel_degree"),
    "world": ("world_size", "num_gpus", "n_gpus", "total_gpus"),
    "nnodes": ("nnodes", "num_nodes", "num_machines"),
    "nproc": ("nproc_per_node", "local_world_size", "gpus_per_node", "num_processes_per_node", "devices"),
    "micro": (
        "micro_batch_size",
        "train_micro_batch_size_per_gpu",
        "per_device_train_batch_size",
        "micro_batch_size_per_gpu",
        "local_batch_size",
        "training_local_batch_size",
        "per_gpu_train_batch_size",
    ),
    "global": ("global_batch_size", "training_global_batch_size"),
    "accum": (
        "gradient_accumulation_steps",
        "grad_accum",
        "gradient_accumulation",
        "accumulate_grad_batches",
        "grad_accum_steps",
    ),
    "seq": (
        "seq_length",
        "seq_len",
        "max_seq_length",
        "max_seq_len",
        "encoder_seq_length",
        "training_seq_len",
        "sequence_length",
    ),
    "heads": ("num_attention_heads", "n_heads", "num_heads", "n_head"),
    "groups": ("num_query_groups", "num_key_value_heads", "n_kv_heads"),
    "sp": ("sequence_parallel", "sequence_parallelism"),
    "layers": ("num_layers", "n_layers", "num_hidden_layers", "n_layer"),
    "vpp": ("num_layers_per_virtual_pipeline_stage", "virtual_pipeline_model_parallel_size"),
    "gpu": ("gpu", "gpu_name", "device_name", "gpu_type"),
    "clip": (
        "clip_grad",
        "max_grad_norm",
        "gradient_clipping",
        "grad_clip",
        "max_norm",
        "training_max_norm",
        "gradient_clip_val",
    ),
}
# GPUs without native bf16 (compute capability < 8.0), by name fragment
NO_BF16_GPUS = (
    "v100",
    "t4",
    "p100",
    "p40",
    "p4",
    "k80",
    "m60",
    "titan v",
    "titan rtx",
    "rtx 20",
    "quadro rtx",
    "gtx",
    "rtx 6000",
    "rtx 8000",
)
BF16_GPUS = (
    "a100",
    "a10",
    "a30",
    "a40",
    "a800",
    "l4",
    "l40",
    "h100",
    "h200",
    "h800",
    "h20",
    "gh200",
    "b100",
    "b200",
    "gb200",
    "rtx 30",
    "rtx 40",
    "rtx 50",
    "rtx a",
    "mi250",
    "mi300",
    "mi325",
    "mi355",
)


def read_config(path: str) -> tuple[dict[str, Any], str]:
    """Read one config file into a flat dict of settings and say what it was (see ``configfile``)."""
    from .configfile import read_config as read

    return read(path)


def _get(settings: dict[str, Any], name: str) -> Any:
    for key in KEYS[name]:
        v = settings.get(key)
        if v is not None and v != "":
            return v
    return None


def _int(v: Any) -> int | None:
    if isinstance(v, bool) or v is None:
        return None
    try:
        f = float(v)
    except (TypeError, ValueError, OverflowError):  # a 5,000-digit integer is past float's range
        return None
    return int(f) if f == f and f.is_integer() and 0 < f < 2**53 else None


def gather(header: dict[str, Any], config_paths: list[str] = ()) -> tuple[dict[str, Any], list[str]]:
    """Merge the log header and config files into one settings dict; return it and its sources."""
    settings: dict[str, Any] = {}
    sources: list[str] = []
    if any(k in header for k in ("tensor_model_parallel_size", "world_size", "micro_batch_size", "global_batch_size")):
        settings.update({normalise_key(k): v for k, v in header.items()})
        sources.append("log header")
    for path in config_paths or ():
        values, kind = read_config(path)
        for k, v in values.items():
            settings.setdefault(k, v)
        sources.append(f"{os.path.basename(path)} ({kind})")
    return settings, sources


def check_config(
    settings: dict[str, Any],
    sources: list[str],
    *,
    compute_capability: float | None = None,
    gpu_name: str | None = None,
    logged_loss_scales=None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run every check; return (metrics, rows of the config_checks evidence table)."""
    m: dict[str, Any] = dict.fromkeys(
        (
            "config_world_size",
            "parallel_mismatch",
            "parallel_text",
            "parallel_fix",
            "batch_mismatch",
            "batch_text",
            "batch_fix",
            "tp_divisibility_problem",
            "tp_divisibility_text",
            "tp_divisibility_fix",
            "fp16_without_loss_scaling",
            "fp16_text",
            "bf16_unsupported",
            "gpu_name",
        )
    )
    m["config_source"] = ", ".join(sources) or None
    rows: list[dict[str, Any]] = []
    s = settings
    tp, pp, cp, ep, dp = (_int(_get(s, k)) for k in ("tp", "pp", "cp", "ep", "dp"))
    world = _int(_get(s, "world"))
    if world is None and _int(_get(s, "nnodes")) and _int(_get(s, "nproc")):
        world = _int(_get(s, "nnodes")) * _int(_get(s, "nproc"))
    m["config_world_size"] = world
    model = (tp or 1) * (pp or 1) * (cp or 1)
    if world and (tp or pp or cp or dp):
        sizes = f"TP {tp or 1} x PP {pp or 1} x CP {cp or 1}"
        if dp:
            bad = model * dp != world
            text = f"{sizes} x DP {dp} = {model * dp} {'!=' if bad else '=='} world size {world}"
            fix = (
                f"set data_parallel_size to {world // model} (world {world} / {model})"
                if world % model == 0
                else f"choose TP x PP x CP dividing the world size {world} (now {model})"
            )
        else:
            bad = world % model != 0
            text = f"world size {world} {'is not' if bad else 'is'} divisible by {sizes} = {model}"
            fix = (
                f"choose TP x PP x CP (now {model}) dividing the world size {world}, "
                f"or run on a multiple of {model} GPUs"
            )
            dp = world // model if not bad else None
        if not bad and ep and ep > 1 and dp and (dp * (cp or 1)) % ep != 0:
            bad = True
            text = f"EP {ep} does not divide DP {dp} x CP {cp or 1} = {dp * (cp or 1)}"
            fix = f"set expert_model_parallel_size to a divisor of {dp * (cp or 1)}"
        m.update(parallel_mismatch=bad, parallel_text=text, parallel_fix=fix if bad else None)
        rows.append({"check": "parallel sizes", "ok": not bad, "detail": text, "fix": fix if bad else None})
    elif not dp and world and not (tp or pp or cp):
        dp = world  # pure data parallelism
    micro, glob, accum = _int(_get(s, "micro")), _int(_get(s, "global")), _int(_get(s, "accum"))
    if micro and glob and dp:
        if accum:
            want = micro * dp * accum
            bad = glob != want
            text = f"global batch {glob} {'!=' if bad else '=='} micro {micro} x DP {dp} x grad-accum {accum} = {want}"
            fix = f"set the global batch (global_batch_size / train_batch_size) to {want}" + (
                f", or gradient_accumulation_steps to {glob // (micro * dp)}" if glob % (micro * dp) == 0 else ""
            )
        else:
            bad = glob % (micro * dp) != 0
            text = (
                f"global batch {glob} {'is not' if bad else 'is'} a multiple of micro {micro} x DP {dp} = {micro * dp}"
            )
            lo = max(micro * dp, glob // (micro * dp) * micro * dp)
            fix = f"set global_batch_size to {lo} or {lo + micro * dp}"
        m.update(batch_mismatch=bad, batch_text=text, batch_fix=fix if bad else None)
        rows.append({"check": "batch arithmetic", "ok": not bad, "detail": text, "fix": fix if bad else None})
    _divisibility(s, tp, cp, pp, m, rows)
    _precision(s, m, rows, compute_capability, gpu_name, logged_loss_scales)
    return m, rows


def _divisibility(s, tp, cp, pp, m, rows) -> None:
    seq, heads, groups = _int(_get(s, "seq")), _int(_get(s, "heads")), _int(_get(s, "groups"))
    sp = _get(s, "sp")
    problems, fixes, checked = [], [], False
    if tp and tp > 1:
        for label, value, key in (
            ("attention heads", heads, "num_attention_heads"),
            ("query groups", groups, "num_query_groups"),
        ):
            if value:
                checked = True
                if value % tp:
                    problems.append(f"{label} {value} not divisible by TP {tp}")
                    fixes.append(
                        f"set tensor_model_parallel_size to a divisor of {value}, or {key} to a multiple of {tp}"
                    )
        if seq and sp is not False:
            checked = True
            if seq % tp:
                problems.append(
                    f"sequence length {seq} not divisible by TP {tp}"
                    + (" (sequence parallelism splits it)" if sp else "")
                )
                fixes.append(f"set seq_length to {(seq // tp + 1) * tp}, a multiple of TP {tp}")
    layers, vpp = _int(_get(s, "layers")), _int(s.get("virtual_pipeline_model_parallel_size"))
    if pp and pp > 1 and layers:
        checked = True
        stages = pp * (vpp or 1)
        if layers % stages:
            what = f"PP {pp} x virtual stages {vpp}" if vpp else f"PP {pp}"
            problems.append(f"{layers} layers not divisible by {what}")
            fixes.append(
                f"set num_layers to a multiple of {stages}, or pipeline_model_parallel_size to a divisor of {layers}"
            )
    if cp and cp > 1 and seq:
        checked = True
        if seq % (2 * cp):
            problems.append(f"sequence length {seq} not divisible by 2 x CP = {2 * cp} (load-balanced causal split)")
            fixes.append(f"set seq_length to a multiple of {2 * cp}")
    if checked:
        bad = bool(problems)
        m.update(
            tp_divisibility_problem=bad,
            tp_divisibility_text="; ".join(problems) if bad else "sizes divide",
            tp_divisibility_fix="; ".join(fixes) if bad else None,
        )
        rows.append(
            {
                "check": "divisible by TP / PP / CP",
                "ok": not bad,
                "detail": "; ".join(problems) or "sizes divide",
                "fix": "; ".join(fixes) or None,
            }
        )


def _precision(s, m, rows, compute_capability, gpu_name, logged_loss_scales) -> None:
    fp16, bf16 = s.get("fp16") is True, s.get("bf16") is True
    if fp16:
        scale = s.get("loss_scale")
        logged = [x for x in (logged_loss_scales if logged_loss_scales is not None else []) if x == x]
        static_one = (scale is not None and _num(scale) == 1.0) or (logged and all(x == 1.0 for x in logged))
        if scale is not None:
            where = f"loss_scale {scale}"
        elif logged and static_one:
            where = "the logged loss scale stays 1.0"
        elif logged:
            where = f"a dynamic loss scale, logged from {min(logged):g} to {max(logged):g} (last {logged[-1]:g})"
        else:
            where = "dynamic loss scaling"
        m["fp16_without_loss_scaling"] = bool(static_one)
        m["fp16_text"] = f"fp16 with {where}"
        rows.append(
            {
                "check": "fp16 loss scaling",
                "ok": not static_one,
                "detail": m["fp16_text"],
                "fix": "use dynamic loss scaling (Megatron: drop --loss-scale; DeepSpeed: fp16.loss_scale = 0; "
                "plain PyTorch: torch.amp.GradScaler)"
                if static_one
                else None,
            }
        )
    name = gpu_name or _get(s, "gpu")
    m["gpu_name"] = str(name) if name else None
    if bf16:
        cc = compute_capability
        if cc is None and name:
            low = str(name).lower()
            cc = (
                7.0
                if any(g in low for g in NO_BF16_GPUS) and not any(g in low for g in BF16_GPUS)
                else (8.0 if any(g in low for g in BF16_GPUS) else None)
            )
        if cc is not None:
            bad = cc < 8.0
            m["bf16_unsupported"] = bad
            detail = f"bf16 on {name or 'a GPU'} (compute capability {cc:.1f})"
            rows.append(
                {
                    "check": "bf16 support",
                    "ok": not bad,
                    "detail": detail,
                    "fix": "use fp16 with dynamic loss scaling on this GPU, or run on Ampere or newer" if bad else None,
                }
            )


def clip_value(settings: dict[str, Any]) -> float | None:
    """The gradient-clipping threshold the config sets; None when unset or off (0)."""
    v = _num(_get(settings, "clip"))
    return v if v is not None and v > 0 else None


def _num(v: Any) -> float | None:
    try:
        return float(v)
    except (TypeError, ValueError, OverflowError):
        return None
