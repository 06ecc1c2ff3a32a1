"""``tracedoc analyze`` options for the model-formula estimate (``--model CONFIG --tokens-per-step N``): not a
command of its own, so not in ``COMMANDS``."""

from __future__ import annotations

import argparse

from ..errors import UsageError
from ..estimate.memory import OPTIMIZERS, PRECISIONS


def add_estimate_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("model estimate", "set the model's own FLOPs, tokens/s and memory beside the trace")
    g.add_argument(
        "--model",
        metavar="CONFIG",
        help="Hugging Face config.json, or params such as "
        "hidden=4096,layers=32,heads=32,kv_heads=8,ffn=14336,vocab=128256,swiglu=true",
    )
    g.add_argument(
        "--tokens-per-step",
        type=int,
        metavar="N",
        help="tokens this rank processes per step (micro-batch x sequence x accumulation steps)",
    )
    g.add_argument("--seq-len", type=int, metavar="N", help="sequence length (default: the config's maximum context)")
    g.add_argument(
        "--micro-batch",
        type=int,
        metavar="N",
        help="sequences per micro-batch, for the memory estimate (default: tokens per step / sequence length)",
    )
    g.add_argument(
        "--precision",
        choices=list(PRECISIONS),
        default="bf16-master",
        help="training precision for the memory estimate (default: bf16-master)",
    )
    g.add_argument("--optimizer", choices=list(OPTIMIZERS), default="adamw", help="default: adamw")
    g.add_argument(
        "--zero-stage",
        type=int,
        choices=(0, 1, 2, 3),
        default=0,
        help="ZeRO / FSDP sharding stage (3 = FSDP full shard; default 0)",
    )
    g.add_argument(
        "--dp-size",
        type=int,
        default=None,
        metavar="N",
        help="data-parallel ranks that shard the states (default: the trace's world size)",
    )
    g.add_argument("--activation-checkpointing", action="store_true", help="full activation checkpointing")


def estimate_request(args):
    """The estimate the options ask for, or None without ``--model``."""
    model = getattr(args, "model", None)
    if model is None:
        if getattr(args, "tokens_per_step", None) is not None:
            raise UsageError("--tokens-per-step", "needs --model", None, "pass the model's config.json with --model")
        return None
    from ..estimate import EstimateRequest, TrainSetup, load_model_spec

    spec = load_model_spec(model)
    if args.tokens_per_step is None or args.tokens_per_step < 1:
        raise UsageError(
            "--model",
            "needs --tokens-per-step N (a positive count)",
            None if args.tokens_per_step is None else str(args.tokens_per_step),
            "give the tokens this rank processes per step",
        )
    seq = args.seq_len or spec.max_seq_len
    if not seq or seq < 1:
        raise UsageError(
            "--model",
            "needs a sequence length",
            "no --seq-len and no maximum context in the config",
            "pass --seq-len N",
        )
    micro = args.micro_batch or max(1, args.tokens_per_step // seq)
    setup = TrainSetup(
        micro_batch=micro,
        seq_len=int(seq),
        precision=args.precision,
        optimizer=args.optimizer,
        zero_stage=args.zero_stage,
        dp_size=args.dp_size,
        checkpointing=args.activation_checkpointing,
    ).validated()
    return EstimateRequest(spec=spec, tokens_per_step=args.tokens_per_step, setup=setup)
