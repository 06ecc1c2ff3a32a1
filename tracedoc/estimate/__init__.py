"""Model formulas: FLOPs per token, parameter counts and the memory of training, from a model config.

``EstimateRequest`` (``--model CONFIG --tokens-per-step N``) is a stage input of the rank analyses:
``tracedoc.analyses.flops.estimate`` sets the formula's FLOPs per step and MFU beside the FLOPs counted
from the trace, tokens and samples per second, and the memory estimate beside the measured peak.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .config import ModelSpec, load_model_spec
from .memory import TrainSetup

__all__ = ["AGREEMENT", "EstimateRequest", "ModelSpec", "TrainSetup", "load_model_spec"]

# Trace and formula counts within this of each other agree: the formula leaves out norms, softmax and
# element-wise work, and the trace may miss ops whose shapes were not recorded.
AGREEMENT = 0.10


@dataclass(frozen=True)
class EstimateRequest:
    """The model and training setup to estimate beside a rank's measurements."""

    spec: ModelSpec
    tokens_per_step: int  # tokens this rank processes per step (micro-batch x sequence x accumulation)
    setup: TrainSetup = field(default_factory=TrainSetup)
