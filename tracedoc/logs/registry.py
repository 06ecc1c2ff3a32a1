"""What a training log (and its config) yields: its metrics and evidence tables.

Rules with ``scope = "log"`` may reference exactly these names, as trace rules reference
``tracedoc.analyses.core.registry``; the engine validates each rule file against its scope's tables. The
metrics are the log scope of the metric table (``tracedoc.model.metrics``); ``None`` means not
measurable on this log (e.g. no throughput field), never zero. Steps are the log's own step numbers.
"""

from __future__ import annotations

from ..model.metrics import LOG_METRIC_TABLE, Metric

LOG_METRICS: dict[str, Metric] = LOG_METRIC_TABLE
# the formats ``tracedoc logs --format-hint`` names (``reader.FORMATS``, kept here so that the CLI can list
# them without importing the readers)
LOG_FORMATS = ("jsonl", "json", "megatron", "deepspeed", "torchtitan", "nanogpt", "llmc", "hf-console", "csv", "text")

# what ``tracedoc logs --follow`` reports (``tracedoc.logs.watch``); ``--fail-on`` takes these too
WATCH_KINDS = ("nan", "loss_spike", "divergence", "stall", "throughput_regression", "no_new_line")

# The log rule that reports each kind of anomaly (an anomaly row's ``rule``): the one place the log
# analyses name rule ids (tests/test_log_rules.py checks each against the rule files).
ANOMALY_RULES: dict[str, str] = {
    "nan": "TD601",
    "loss_spike": "TD602",
    "divergence": "TD603",
    "grad_norm_spike": "TD604",
    "skipped_iterations": "TD605",
    "loss_bump": "TD607",
    "loss_regression": "TD608",
    "throughput_dip": "TD611",
    "periodic_stall": "TD612",
    "low_gpu_util": "TD613",
    "throughput_drift": "TD614",
}

# Evidence tables a log rule may cite (``[[evidence]] table = ...``): what the log analyses produce.
LOG_EVIDENCE: dict[str, str] = {
    "anomalies": "Every anomaly found, with its kind and steps.",
    "nan_steps": "Logged steps whose loss is NaN or inf (the first 100): step, field and value.",
    "loss_spikes": "Loss-spike episodes: steps, peak step and loss, the trailing median it rose from, the modified "
    "z-score, and whether the loss stayed up.",
    "throughput_dips": "Throughput-dip episodes (the first 100): steps and how far throughput fell.",
    "periodic_stalls": "Periodic patterns of slow steps, costliest first: the period (and its range), phase, how many, "
    "the slowdown, the share of the run time lost, the cause, whether it is reported, the first steps.",
    "loss_bumps": "Sustained loss bumps: steps, peak step and loss, the level before the bump it rose from, and the "
    "mean and highest ratio to that level.",
    "skip_groups": "Groups of skipped steps (the first 100): first and last step, skips, and their kind in the loss "
    "scaler's rhythm (calibration, steady, burst, ...).",
    "lr_schedule": "The learning-rate schedule: its shape, as the lr_schedule metric names it.",
    "config_checks": "Each configuration check: what was compared, the arithmetic, whether it holds and the fix.",
}
LOG_EVIDENCE_TABLES: tuple[str, ...] = tuple(LOG_EVIDENCE)


def describe(name: str) -> str:
    return LOG_METRICS[name].describe()
