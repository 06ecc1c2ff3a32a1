"""Transformer model specs from a Hugging Face ``config.json`` or explicit ``key=value`` params.

Families: GPT (GPT-2, GPT-NeoX, GPT-J, OPT style: one up and one down MLP matrix), LLaMA (GQA,
SwiGLU), Qwen (v1 and Qwen2/2.5/3, SwiGLU) and Mixtral-style mixture of experts (Mixtral,
Qwen-MoE, DeepSeek-style shared experts).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any

from ..errors import UsageError


@dataclass(frozen=True)
class ModelSpec:
    """A transformer's shape, as the model-formula estimate reads it from a config."""

    family: str  # "gpt", "llama", "qwen", "moe"
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    ffn_size: int  # per MLP matrix (dense layers; per expert for MoE when moe_ffn_size is 0)
    vocab_size: int
    gated_mlp: bool  # SwiGLU/GeGLU: three MLP matrices instead of two
    tie_embeddings: bool
    max_seq_len: int | None = None
    num_experts: int = 0  # routed experts (0: dense)
    experts_per_token: int = 0
    moe_ffn_size: int = 0  # per routed expert
    shared_ffn_size: int = 0  # total size of always-active shared experts per layer
    learned_positions: bool = False  # GPT-2 style position embedding table
    source: str = ""

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0


_EXPLICIT_KEYS = {
    "family": "family",
    "hidden": "hidden_size",
    "hidden_size": "hidden_size",
    "layers": "num_layers",
    "num_layers": "num_layers",
    "heads": "num_heads",
    "num_heads": "num_heads",
    "kv_heads": "num_kv_heads",
    "num_kv_heads": "num_kv_heads",
    "head_dim": "head_dim",
    "ffn": "ffn_size",
    "ffn_size": "ffn_size",
    "vocab": "vocab_size",
    "vocab_size": "vocab_size",
    "swiglu": "gated_mlp",
    "gated_mlp": "gated_mlp",
    "tie_embeddings": "tie_embeddings",
    "seq_len": "max_seq_len",
    "experts": "num_experts",
    "num_experts": "num_experts",
    "top_k": "experts_per_token",
    "experts_per_token": "experts_per_token",
    "moe_ffn": "moe_ffn_size",
    "moe_ffn_size": "moe_ffn_size",
    "shared_ffn": "shared_ffn_size",
    "shared_ffn_size": "shared_ffn_size",
}


MAX_CONFIG_BYTES = 16 << 20  # a Hugging Face config.json is a few KB; a tokenizer's vocabulary a few MB


def load_model_spec(text: str) -> ModelSpec:
    """A spec from a config.json path or explicit params (``hidden=4096,layers=32,heads=32,...``)."""
    if os.path.exists(text) or os.path.islink(text):
        from ..infile import excerpt, read_input

        # Read through infile: a pipe or a device is refused before a byte is read, and a config is small.
        raw = read_input(text, UsageError, "model config", max_bytes=MAX_CONFIG_BYTES)
        try:
            cfg = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise UsageError(
                text,
                "is not a readable JSON model config",
                excerpt(str(exc), chars=80),
                "pass a Hugging Face config.json or key=value params",
            ) from None
        if not isinstance(cfg, dict):
            raise UsageError(text, "is not a JSON object", type(cfg).__name__, "pass a Hugging Face config.json")
        return from_hf_config(cfg, source=text)
    if "=" in text:
        return from_params(text)
    raise UsageError(
        f"--model {text}",
        "is neither a file nor key=value params",
        None,
        "pass a Hugging Face config.json path or e.g. hidden=4096,layers=32,heads=32,ffn=11008,vocab=32000,swiglu=true",
    )


FAMILIES = ("gpt", "llama", "qwen", "moe")
# Every size and count of a model lies below this: the largest vocabularies are ~2^18, hidden sizes ~2^15,
# layer and expert counts ~2^8. Bounding them keeps every product of the FLOPs and memory formulas exact
# in int64 and float64, so a typo such as 40960000 is refused instead of giving absurd numbers.
MAX_MODEL_DIM = 1 << 24


def _seen(value: Any) -> str:
    text = repr(value)
    kind = {str: "a string", bool: "a boolean", list: "a list", dict: "an object", float: "a number"}.get(
        type(value), ""
    )
    text = text if len(text) <= 40 else f"{text[:37]}..."
    return f"{text} ({kind})" if kind else text


def whole_number(where: str, key: str, value: Any, minimum: int = 1) -> int:
    """A config's size or count: a JSON integer (or an integral number) from ``minimum`` to ``MAX_MODEL_DIM``;
    anything else (a string such as "4096", a boolean, NaN, a fraction, zero heads) is a usage error that
    names the field."""
    ok = (
        isinstance(value, int)
        and not isinstance(value, bool)
        or isinstance(value, float)
        and math.isfinite(value)
        and value.is_integer()
    )
    if not ok:
        raise UsageError(where, f"{key} must be a whole number", _seen(value), "fix the model config")
    number = int(value)
    if not minimum <= number <= MAX_MODEL_DIM:
        need = "positive" if minimum == 1 else f"at least {minimum}"
        raise UsageError(
            where, f"{key} must be {need} and at most {MAX_MODEL_DIM:,}", str(number)[:40], "fix the model config"
        )
    return number


def flag(where: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise UsageError(where, f"{key} must be true or false", _seen(value), "fix the model config")
    return value


_FLAGS = ("gated_mlp", "tie_embeddings")
_MAY_BE_ZERO = ("num_experts", "experts_per_token", "moe_ffn_size", "shared_ffn_size")


def _value(key: str, raw: str, given_as: str | None = None):
    low = raw.strip().lower()
    where = f"--model {(given_as or key)[:40]}={raw.strip()[:40]}"
    if key in ("family",):
        if low not in FAMILIES:
            raise UsageError(where, "is not a model family", low[:40], f"use one of {', '.join(FAMILIES)}")
        return low
    if key in _FLAGS:
        if low in ("true", "yes", "1"):
            return True
        if low in ("false", "no", "0"):
            return False
        raise UsageError(where, f"{key} must be true or false", raw.strip()[:40], f"e.g. {key}=true")
    try:
        number: Any = int(low)
    except ValueError:
        try:
            number = float(low)
        except ValueError:
            raise UsageError(where, "needs a number", raw.strip()[:40], "e.g. layers=32") from None
    return whole_number(where, key, number, minimum=0 if key in _MAY_BE_ZERO else 1)


def from_params(text: str) -> ModelSpec:
    given: dict = {}
    for part in text.split(","):
        if not part.strip():
            continue
        k, _, v = part.partition("=")
        key = _EXPLICIT_KEYS.get(k.strip().lower())
        if key is None:
            raise UsageError(
                f"--model {part.strip()[:80]}",
                "is not a known model param",
                k.strip()[:40],
                f"use one of {', '.join(sorted(set(_EXPLICIT_KEYS)))}",
            )
        given[key] = _value(key, v, k.strip())
    for need in ("hidden_size", "num_layers", "num_heads", "vocab_size"):
        if need not in given:
            raise UsageError("--model", f"params lack {need}", text, "give hidden, layers, heads, ffn and vocab")
    h, heads = given["hidden_size"], given["num_heads"]
    gated = bool(given.get("gated_mlp", False))
    experts = given.get("num_experts", 0)
    family = given.get("family") or ("moe" if experts else "llama" if gated else "gpt")
    return _checked(
        ModelSpec(
            family=family,
            hidden_size=h,
            num_layers=given["num_layers"],
            num_heads=heads,
            num_kv_heads=given.get("num_kv_heads", heads),
            head_dim=given.get("head_dim", h // heads),
            ffn_size=given.get("ffn_size", 4 * h),
            vocab_size=given["vocab_size"],
            gated_mlp=gated,
            tie_embeddings=bool(given.get("tie_embeddings", False)),
            max_seq_len=given.get("max_seq_len"),
            num_experts=experts,
            experts_per_token=given.get("experts_per_token", 0),
            moe_ffn_size=given.get("moe_ffn_size", 0),
            shared_ffn_size=given.get("shared_ffn_size", 0),
            source="explicit params",
        ),
        "--model",
    )


def from_hf_config(cfg: dict, source: str = "config.json") -> ModelSpec:
    """Read the fields each family names differently; unknown model types fall back on common keys."""
    mt = str(cfg.get("model_type", "")).lower()

    def get(*keys, default=None):
        for k in keys:
            if cfg.get(k) is not None:
                return cfg[k]
        return default

    def key_of(*keys) -> str:
        return next((k for k in keys if cfg.get(k) is not None), keys[0])

    def number(*keys, default=None, minimum: int = 1):
        value = get(*keys)
        return default if value is None else whole_number(source, key_of(*keys), value, minimum)

    if not isinstance(cfg.get("model_type", ""), str):
        raise UsageError(source, "model_type must be a string", _seen(cfg["model_type"]), "fix the model config")
    h = number("hidden_size", "n_embd", "d_model", "hidden_dim")
    layers = number("num_hidden_layers", "n_layer", "num_layers", "n_layers")
    heads = number("num_attention_heads", "n_head", "num_heads", "n_heads")
    vocab = number("vocab_size", "padded_vocab_size")
    if None in (h, layers, heads, vocab):
        missing = [
            n
            for n, v in (
                ("hidden_size", h),
                ("num_hidden_layers", layers),
                ("num_attention_heads", heads),
                ("vocab_size", vocab),
            )
            if v is None
        ]
        raise UsageError(
            source,
            f"lacks {', '.join(missing)}",
            f"model_type {mt[:40] or 'unset'}",
            "pass the model's Hugging Face config.json, or explicit params",
        )
    if get("kv_lora_rank", "q_lora_rank") is not None:
        raise UsageError(
            source,
            "uses multi-head latent attention (kv_lora_rank), which the formulas do not model",
            f"model_type {mt[:40] or 'unset'}",
            "pass explicit params of an equivalent model, or leave out --model",
        )
    kv = number("num_key_value_heads", "num_kv_heads", "multi_query_group_num", "n_head_kv", default=heads)
    if cfg.get("multi_query") is not None and flag(source, "multi_query", cfg["multi_query"]):
        kv = 1
    head_dim = number("head_dim", "kv_channels", default=h // heads)
    act = get("hidden_act", "activation_function", default="")
    gated = mt in (
        "llama",
        "mistral",
        "mixtral",
        "qwen",
        "qwen2",
        "qwen2_moe",
        "qwen3",
        "qwen3_moe",
        "gemma",
        "gemma2",
        "deepseek_v2",
        "deepseek_v3",
        "phi3",
        "olmo",
        "olmo2",
        "internlm2",
        "yi",
    ) or (isinstance(act, str) and act.lower() in ("silu", "swiglu"))
    ffn = number("intermediate_size", "n_inner", "ffn_hidden_size", "ffn_dim")
    if mt == "qwen" and ffn is not None:
        ffn = max(ffn // 2, 1)  # Qwen v1 configs give the size of the two gate/up halves together
    if ffn is None:
        ffn = 4 * h
    experts = number("num_local_experts", "num_experts", "n_routed_experts", default=0, minimum=0)
    top_k = number("num_experts_per_tok", "moe_top_k", "num_experts_per_token", default=0, minimum=0)
    moe_ffn = number("moe_intermediate_size", default=0, minimum=0)
    shared = number("shared_expert_intermediate_size", default=0, minimum=0)
    n_shared = number("n_shared_experts", default=0, minimum=0)
    if not shared and n_shared:
        shared = whole_number(source, "n_shared_experts", n_shared * (moe_ffn or ffn))
    tie = get("tie_word_embeddings")
    max_seq = number("max_position_embeddings", "n_positions", "seq_length", "max_sequence_length")
    family = "moe" if experts else ("qwen" if mt.startswith("qwen") else "llama" if gated else "gpt")
    spec = ModelSpec(
        family=family,
        hidden_size=h,
        num_layers=layers,
        num_heads=heads,
        num_kv_heads=kv,
        head_dim=head_dim,
        ffn_size=ffn,
        vocab_size=vocab,
        gated_mlp=bool(gated),
        tie_embeddings=mt in ("gpt2",) if tie is None else flag(source, "tie_word_embeddings", tie),
        max_seq_len=max_seq,
        num_experts=experts,
        experts_per_token=top_k,
        moe_ffn_size=moe_ffn,
        shared_ffn_size=shared,
        learned_positions=mt in ("gpt2", "opt", "gpt_bigcode"),
        source=source,
    )
    return _checked(spec, source)


def _checked(spec: ModelSpec, where: str) -> ModelSpec:
    for name in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "head_dim", "ffn_size", "vocab_size"):
        if getattr(spec, name) <= 0:
            raise UsageError(where, f"{name} must be positive", str(getattr(spec, name)), "fix the model config")
    if spec.num_heads % spec.num_kv_heads:
        raise UsageError(
            where,
            "attention heads are not a multiple of key/value heads",
            f"{spec.num_heads} heads, {spec.num_kv_heads} kv heads",
            "fix the model config",
        )
    if spec.num_experts and not 0 < spec.experts_per_token <= spec.num_experts:
        raise UsageError(
            where,
            "a mixture of experts needs experts per token between 1 and the expert count",
            f"{spec.experts_per_token} of {spec.num_experts}",
            "set num_experts_per_tok",
        )
    return spec
