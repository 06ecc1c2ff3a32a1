"""The job view's metrics: what matching collectives across the ranks of a directory yields.

None for a single trace; every rank of a job carries the communication ones (``comm_*``, ``link_*``)."""

from __future__ import annotations

from .metric import HIGHER, LOWER, Metric, topic

JOB_METRICS: tuple[Metric, ...] = (
    *topic(
        "job",
        "job",
        (
            Metric("job_ranks", "count", None, "ranks in the job view"),
            Metric(
                "collectives_matched", "count", None, "collective instances found on every member rank of their group"
            ),
            Metric(
                "job_step_time_p50_ns",
                "ns",
                LOWER,
                "the job's step: median over ranks of each rank's median step "
                "time over its matched steps (those holding a collective matched on every member rank)",
            ),
            Metric(
                "comm_wait_fraction",
                "fraction",
                LOWER,
                "share of the job's communication time spent waiting for the "
                "last rank to arrive (wait / (wait + transfer)), over matched collectives; per rank a union of "
                "intervals, so overlapping collectives count once",
            ),
            Metric(
                "comm_top_collective",
                "name",
                None,
                "collective type with the most transfer time in the job "
                "(all_reduce, all_gather, reduce_scatter, all_to_all, send_recv, ...)",
            ),
            Metric(
                "comm_busbw_gbps",
                "GB/s",
                HIGHER,
                "median bus bandwidth of the top collective's matched instances of "
                "1 MB or more, from their transfer time",
            ),
            Metric(
                "link_busbw_gbps",
                "GB/s",
                None,
                "typical bus bandwidth the job's links give (nccl-tests figures: "
                "NVLink by GPU inside one host, InfiniBand across hosts); None unknown",
            ),
            Metric(
                "straggler_count",
                "count",
                LOWER,
                "ranks whose lateness explains the others' wait (it stands far "
                "above the other ranks' lateness, or they arrive last more often than chance) and costs them a "
                "significant wait",
            ),
            Metric("straggler_rank", "rank", None, "the straggler that costs the others the most wait"),
            Metric(
                "straggler_confidence",
                "name",
                None,
                "how sure the job view is of the straggler: high (the chance "
                "test passes over steps), medium (a large lateness that stands far above the other ranks' over a "
                "few steps; or too few steps and it passes over collectives), low (one step, or the rank that "
                "arrives last most often with too few collectives for a test)",
            ),
            Metric(
                "straggler_cause",
                "name",
                None,
                "category in which the straggler's time before its collectives "
                "exceeds the median rank's: compute, copy, dataloader, sync, host, other, unknown; host_launch when "
                "it is host work that leaves its GPU idle in long host-late gaps",
            ),
            Metric(
                "straggler_cause_ms_per_step",
                "ms",
                LOWER,
                "how much longer per step the straggler spends in its cause category than the median rank",
            ),
            Metric(
                "straggler_wait_ms_per_step",
                "ms",
                LOWER,
                "wait per step each other rank spends for the straggler: straggler_wait_fraction x the job's step",
            ),
            Metric(
                "straggler_wait_fraction",
                "fraction",
                LOWER,
                "share of their step the other ranks spend waiting for "
                "the straggler: per rank the mean over its matched steps of that wait (a union of intervals) over "
                "its median step, then the mean over the ranks",
            ),
            Metric(
                "straggler_explained_fraction",
                "fraction",
                LOWER,
                "share of the other ranks' wait at the matched "
                "collectives spent at those the straggler arrived last at",
            ),
            Metric(
                "straggler_arrived_last_fraction",
                "fraction",
                LOWER,
                "share of matched collectives the straggler arrives last at",
            ),
        ),
    ),
    # what the job view gives each rank of the job besides the job's own metrics (None in the job's)
    *topic(
        "job",
        "job_rank",
        (
            Metric(
                "rank_comm_wait_fraction",
                "fraction",
                LOWER,
                "share of this rank's matched collective time (union of "
                "arrival-to-end intervals) spent waiting for the last rank to arrive; None for a single trace",
            ),
        ),
    ),
)
