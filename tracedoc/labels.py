"""The verdict labels rules may give, each with what it means, and the severities: constants only, so the
CLI can read them without loading rules.

A label's meaning is the one line every report and ``tracedoc rules explain LABEL`` show beside it
(docs/guide.md, Labels, has the evidence each needs and its typical fixes). Adding a label is one
entry in ``MEANINGS``.
"""

from __future__ import annotations

ADVICE_LABEL = "advice"
MEANINGS: dict[str, str] = {
    "io_bound": "the GPU waits on the input pipeline",
    "comm_bound": "exposed communication takes a large share of the step",
    "small_batch_bound": "the kernels are too small for the GPU: many short kernels whose launch cost dominates, "
    "or too few blocks to fill its SMs",
    "sync_bound": "host synchronizations stall the pipeline",
    "h2d_copy_bound": "host-to-device copies dominate",
    "low_tensor_core_use": "compute runs mostly outside Tensor Cores",
    "memory_pressure": "peak memory is close to the device limit",
    "low_mfu": "the GPU is busy but the model's FLOP rate is low",
    "host_bound": "the GPU waits while the launching thread does other CPU work (Python, CPU ops, contention)",
    "compute_bound": "the GPU is busy with compute (healthy)",
    # from training logs and configs
    "unstable_training": "the loss goes NaN or inf, spikes or diverges",
    "throughput_regression": "throughput dips well below the run's usual rate",
    "periodic_stall": "slow steps recur every few steps (evaluation, checkpoints, logging)",
    "config_error": "parallel sizes, batch arithmetic or precision flags do not add up",
    # the job view
    "straggler_bound": "one rank arrives late at collectives and the others wait",
    ADVICE_LABEL: "worth a look, not a bottleneck label",
}
VERDICT_LABELS: tuple[str, ...] = tuple(label for label in MEANINGS if label != ADVICE_LABEL)
LABELS: tuple[str, ...] = VERDICT_LABELS + (ADVICE_LABEL,)
SEVERITIES: tuple[str, ...] = ("info", "warning", "error")


def label_meaning(label: str) -> str:
    """What a label means, in a line; a label no rule may give (a report of a newer tracedoc) says so."""
    return MEANINGS.get(label, "a label this version of tracedoc does not know")
