"""Training memory per GPU from a model spec: weights, gradients, optimizer states, activations.

States per parameter (bytes), before sharding:

| precision | weights | gradients | optimizer extra | meaning |
|---|---|---|---|---|
| ``fp32`` | 4 | 4 | 0 | everything in fp32 |
| ``amp`` | 4 | 4 | 0 | torch.autocast: fp32 parameters, 16-bit math |
| ``bf16-master`` | 2 | 2 | 4 (fp32 master copy) | Megatron/DeepSpeed mixed precision |
| ``bf16`` | 2 | 2 | 0 | pure bf16 training |

Optimizer states are fp32: Adam/AdamW 8 bytes (two moments), SGD with momentum 4, plain SGD 0.
ZeRO stage 1 shards optimizer states (and master weights) over the data-parallel group, stage 2
also gradients, stage 3 (FSDP full sharding) also weights.

Activations per micro-batch of b sequences of s tokens follow Korthikanti et al. 2022 ("Reducing
Activation Recomputation in Large Transformer Models", 16-bit activations, no tensor parallelism):
per layer 11·s·b·h for attention (+ 5·a·s²·b for the softmax and its dropout mask unless a fused
kernel keeps scores on chip), 4·s·b·h for the two norms, and for the MLP its saved inputs: 2·s·b·h
plus 2·s·b·f per saved intermediate (2 for GeLU MLPs, 3 for gated ones) and a dropout mask of s·b·h
for GPT-style models. Logits add 4·s·b·V (fp32 for the loss). Full activation checkpointing keeps
only each layer's input (2·s·b·h) plus one layer's activations while it is recomputed.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError
from .config import ModelSpec
from .formulas import param_count

PRECISIONS = {"fp32": (4, 4, 0), "amp": (4, 4, 0), "bf16-master": (2, 2, 4), "bf16": (2, 2, 0)}
OPTIMIZERS = {"adam": 8, "adamw": 8, "sgd-momentum": 4, "sgd": 0}
# Share of device memory a run can fill: the CUDA context and caching-allocator fragmentation take
# the rest (a few hundred MB of context plus typically 5-10% fragmented blocks).
USABLE_FRACTION = 0.9


@dataclass(frozen=True)
class TrainSetup:
    """How the model is trained, as far as its memory estimate depends on it."""

    micro_batch: int = 1
    seq_len: int = 2048
    precision: str = "bf16-master"
    optimizer: str = "adamw"
    zero_stage: int = 0
    dp_size: int | None = None  # None: the trace's world size (1 when unknown)
    checkpointing: bool = False
    fused_attention: bool = True

    def validated(self) -> "TrainSetup":
        if self.precision not in PRECISIONS:
            raise UsageError(
                "--precision", "is not a known precision", self.precision, f"use one of {', '.join(PRECISIONS)}"
            )
        if self.optimizer not in OPTIMIZERS:
            raise UsageError(
                "--optimizer", "is not a known optimizer", self.optimizer, f"use one of {', '.join(OPTIMIZERS)}"
            )
        if self.zero_stage not in (0, 1, 2, 3):
            raise UsageError("--zero-stage", "must be 0, 1, 2 or 3", str(self.zero_stage), None)
        for name in ("micro_batch", "seq_len", "dp_size"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise UsageError(f"--{name.replace('_', '-')}", "must be at least 1", str(getattr(self, name)), None)
        return self


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per device of weights, gradients, optimizer states and activations."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float  # optimizer states plus any fp32 master copy
    activations_per_sample_bytes: float  # one sequence of the micro-batch
    activations_bytes: float  # the whole micro-batch

    @property
    def states_bytes(self) -> float:
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes

    @property
    def total_bytes(self) -> float:
        return self.states_bytes + self.activations_bytes


def activation_bytes_per_sample(spec: ModelSpec, setup: TrainSetup) -> float:
    s, h, a, L = setup.seq_len, spec.hidden_size, spec.num_heads, spec.num_layers
    f = (
        (spec.moe_ffn_size or spec.ffn_size) * spec.experts_per_token + spec.shared_ffn_size
        if spec.is_moe
        else spec.ffn_size
    )
    attention = 11 * s * h + (0 if setup.fused_attention else 5 * a * s * s)
    saved = 3 if spec.gated_mlp else 2
    mlp = 2 * s * h + 2 * s * f * saved + (0 if spec.gated_mlp else s * h)
    norms = 4 * s * h
    layer = attention + mlp + norms
    logits = 4 * s * spec.vocab_size
    if setup.checkpointing:
        return L * 2 * s * h + layer + logits
    return L * layer + 2 * s * h + logits


def estimate_memory(spec: ModelSpec, setup: TrainSetup) -> MemoryEstimate:
    setup = setup.validated()
    n = param_count(spec, setup.seq_len).total
    w_b, g_b, master_b = PRECISIONS[setup.precision]
    dp = setup.dp_size or 1
    opt = n * (OPTIMIZERS[setup.optimizer] + master_b)
    grads = n * g_b
    weights = n * w_b
    if setup.zero_stage >= 1:
        opt /= dp
    if setup.zero_stage >= 2:
        grads /= dp
    if setup.zero_stage >= 3:
        weights /= dp
    per_sample = activation_bytes_per_sample(spec, setup)
    return MemoryEstimate(
        weights_bytes=weights,
        gradients_bytes=grads,
        optimizer_bytes=opt,
        activations_per_sample_bytes=per_sample,
        activations_bytes=per_sample * setup.micro_batch,
    )


def largest_micro_batch(est: MemoryEstimate, device_bytes: float) -> int:
    """The most sequences per micro-batch whose estimate fits in the usable share of the device."""
    free = device_bytes * USABLE_FRACTION - est.states_bytes
    if free <= 0 or est.activations_per_sample_bytes <= 0:
        return 0
    return int(free // est.activations_per_sample_bytes)
