"""Parameter counts and training FLOPs per token of a transformer from its spec.

Every matrix product costs 2 FLOPs per multiply-add. Per layer and token, forward:

- attention projections: 2·h·(a·d + 2·g·d) for Q, K, V (a query heads, g key/value heads of size d)
  and 2·a·d·h for the output;
- attention scores and values: 2·s·a·d (QK^T) + 2·s·a·d (PV) over a context of s tokens, halved
  for a causal mask (the unmasked triangle, as the trace count does);
- MLP: 2·h·f per matrix, 3 matrices when gated (SwiGLU), 2 otherwise; a mixture of experts runs
  ``experts_per_token`` routed experts plus any shared ones, and a router of 2·h·E;
- logits: 2·h·V once per token.

Training is forward + backward, the backward of a matrix product costing twice its forward (input
and weight gradients): 3x forward. Recomputation (activation checkpointing) is not model work.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelSpec


@dataclass(frozen=True)
class FlopsPerToken:
    """Forward FLOPs per token, by part of the model."""

    attention_proj: float
    attention_scores: float
    mlp: float
    router: float
    logits: float

    @property
    def forward(self) -> float:
        return self.attention_proj + self.attention_scores + self.mlp + self.router + self.logits

    @property
    def training(self) -> float:
        return 3.0 * self.forward


def _mlp_matrices(spec: ModelSpec) -> int:
    return 3 if spec.gated_mlp else 2


def flops_per_token(spec: ModelSpec, seq_len: int, causal: bool = True) -> FlopsPerToken:
    h, a, g, d, L = spec.hidden_size, spec.num_heads, spec.num_kv_heads, spec.head_dim, spec.num_layers
    proj = 2.0 * h * (a * d + 2 * g * d) + 2.0 * a * d * h
    scores = 4.0 * seq_len * a * d * (0.5 if causal else 1.0)
    if spec.is_moe:
        expert = spec.moe_ffn_size or spec.ffn_size
        mlp = 2.0 * h * _mlp_matrices(spec) * (expert * spec.experts_per_token + spec.shared_ffn_size)
        router = 2.0 * h * spec.num_experts
    else:
        mlp = 2.0 * h * _mlp_matrices(spec) * spec.ffn_size
        router = 0.0
    return FlopsPerToken(
        attention_proj=L * proj,
        attention_scores=L * scores,
        mlp=L * mlp,
        router=L * router,
        logits=2.0 * h * spec.vocab_size,
    )


@dataclass(frozen=True)
class ParamCount:
    """Parameter counts, by part of the model (all experts, and those active per token)."""

    embedding: int  # token (and learned position) embeddings
    lm_head: int  # 0 when tied to the embedding
    layers: int  # all transformer layers, all experts
    active_layers: int  # per token: routed experts counted top-k of E

    @property
    def total(self) -> int:
        return self.embedding + self.lm_head + self.layers

    @property
    def active(self) -> int:
        return self.embedding + self.lm_head + self.active_layers


def param_count(spec: ModelSpec, seq_len: int | None = None) -> ParamCount:
    """Weights (biases and norm scales included as 2·h per layer; they are < 0.1% of a layer)."""
    h, a, g, d, L = spec.hidden_size, spec.num_heads, spec.num_kv_heads, spec.head_dim, spec.num_layers
    attn = h * (a * d + 2 * g * d) + a * d * h
    norms = 2 * h
    m = _mlp_matrices(spec)
    if spec.is_moe:
        expert = h * m * (spec.moe_ffn_size or spec.ffn_size)
        shared = h * m * spec.shared_ffn_size
        router = h * spec.num_experts
        layer = attn + norms + spec.num_experts * expert + shared + router
        active = attn + norms + spec.experts_per_token * expert + shared + router
    else:
        layer = active = attn + norms + h * m * spec.ffn_size
    positions = (spec.max_seq_len or seq_len or 0) * h if spec.learned_positions else 0
    return ParamCount(
        embedding=spec.vocab_size * h + positions,
        lm_head=0 if spec.tie_embeddings else spec.vocab_size * h,
        layers=L * layer + h,
        active_layers=L * active + h,
    )
