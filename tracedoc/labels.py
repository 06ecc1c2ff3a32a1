"""The verdict labels and severities rules may use: constants only, so the CLI can read them without loading rules."""

from __future__ import annotations

VERDICT_LABELS: tuple[str, ...] = (
    "io_bound",
    "comm_bound",
    "small_batch_bound",
    "sync_bound",
    "h2d_copy_bound",
    "low_tensor_core_use",
    "memory_pressure",
    "low_mfu",
    "host_bound",
    "compute_bound",
    # from training logs and configs
    "unstable_training",
    "throughput_regression",
    "periodic_stall",
    "config_error",
    "straggler_bound",
)
ADVICE_LABEL = "advice"
LABELS: tuple[str, ...] = VERDICT_LABELS + (ADVICE_LABEL,)
SEVERITIES: tuple[str, ...] = ("info", "warning", "error")
