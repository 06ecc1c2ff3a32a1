"""The job view: what matching the ranks' collectives shows, and what rules and reports read from it.

``JobView`` is a saved value, the ``job`` object of a report without the rank table and verdict the
judge stage adds; ``JobJoin`` is what the job stage (``tracedoc.job.join.join_job``) hands the judge:
the view, the per-rank job columns of the rank table, and what the judge and the merged timeline need
besides.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import msgspec

from ..model.metrics import metric_names
from ..model.record import Record

# The metrics the job view produces, for the job verdict and every rank of a job (the metric table's job scope)
JOB_METRICS: tuple[str, ...] = metric_names(scope="job")
# The job metrics every rank's rules see too (communication split, top collective, bandwidth, the straggler)
RANK_CONTEXT: tuple[str, ...] = (
    "comm_wait_fraction",
    "comm_top_collective",
    "comm_busbw_gbps",
    "link_busbw_gbps",
    "straggler_rank",
)
# Evidence tables of the job view that job rules may cite
JOB_EVIDENCE: tuple[str, ...] = ("job_ranks", "job_collectives", "straggler_cause", "job_disagreements")


class JobView(Record, kw_only=True):
    """What matching the collectives of a directory's ranks shows: who waits for whom, the stragglers
    and their cause, the collectives by type, and what limits the view."""

    # ranks the view uses (after leaving out unreadable, duplicate and other-job files), sorted
    ranks_used: list[int]
    straggler_ranks: list[int] = []  # ranks that hold the job back, most costly first
    # each straggler: how sure the view is of it, the share of collectives it arrived last at, the wait
    # it costs each other rank per step, its cause and its lead-in against the median rank's
    stragglers: list[dict[str, Any]] = []
    # the job's step time with the top straggler on time: the matched collectives replayed in
    # lockstep, each starting at the latest arrival of the other ranks; null without a straggler
    straggler_what_if: dict[str, Any] | None = None
    collectives_matched: int = 0  # collective instances found on every member rank of their group
    # key used for most matched instances: group+seq, or group[+step]+type+size+order
    match_key: str | None = None
    # key used per process group ('' = calls without a group name)
    keys_by_group: dict[str, str] = msgspec.field(default_factory=dict, name="match_keys_by_group")
    unmatched_calls: int = 0  # calls not found on every member rank
    # collectives missing on some member ranks: group, step, type, size, calls per rank, ranks without
    disagreements: list[dict[str, Any]] = []
    missing_ranks: list[int] = []  # member ranks of the groups that are not in the directory (or unreadable)
    late_among_present: list[int] = []  # last arrivers among the ranks present, when ranks are missing
    # wait / (wait + transfer) over the matched collectives and ranks; null without matched collectives
    wait_fraction_of_comm: float | None = None
    comm_wait_ns: int = 0  # total wait over the matched collectives and ranks
    comm_ns: int = 0  # total arrival-to-end time over the matched collectives and ranks
    # gpu (kernel start), cpu (call start, CPU backends), mixed; null without timed collectives
    timing_mode: str | None = msgspec.field(default=None, name="timing")
    # how clocks across hosts were treated (offsets estimated from collective ends)
    clock_note: str = msgspec.field(default="", name="clock")
    median_rank: int | None = None  # the rank whose wait is the median: the job's typical rank
    # per collective type and size: count, transfer p50, skew p50, mean wait, busbw p50
    collective_rows: list[dict[str, Any]] = msgspec.field(default_factory=list, name="collectives")
    heatmap: dict[str, Any] = {}  # rank x step grids of step time, wait and lateness (ms), over the common steps
    # what was wrong with the input or what limits the view (missing ranks, mixed jobs, different steps)
    issues: list[str] = []
    excluded: list[dict[str, Any]] = []  # ranks left out of the view, and why
    metrics: dict[str, Any] = {}  # the job scope of the metric table
    alignment: dict[str, Any] = {}  # offsets found per rank, unmatched calls by reason
    not_a_job: str | None = None  # why the files are not one job (no shared collective), null for a job

    def what_ifs(self) -> dict[str, dict]:
        """Predicted job step time per verdict label the job view replays (``straggler_bound``)."""
        return {"straggler_bound": self.straggler_what_if} if self.straggler_what_if else {}


class JobJoin(NamedTuple):
    """What the job stage hands the judge: the view, each rank's job columns of the rank table (ns per
    step, by rank), why there is no straggler replay when there is none, each rank's own median step
    (ns, what its per-step columns are checked against) and the matched collectives per member on the
    aligned clock (what the merged timeline draws; not saved)."""

    view: JobView
    rank_columns: dict[int, dict[str, Any]]
    what_if_unavailable: str | None = None
    step_ns_by_rank: dict[int, float] = {}
    instances: dict[str, Any] | None = None

    def rank_context(self, rank: int | None) -> dict[str, Any]:
        """Job metrics a rank's rules see (communication split, top collective, bandwidth, the
        straggler), and the share of the rank's own collective time spent waiting."""
        out = {k: self.view.metrics.get(k) for k in RANK_CONTEXT}
        out["rank_comm_wait_fraction"] = self.rank_columns.get(rank, {}).get("comm_wait_fraction")
        return out


def job_evidence(view: JobView, rank_rows: list[dict]) -> dict[str, list[dict]]:
    """The evidence tables job rules may cite (``JOB_EVIDENCE``): the rank table's rows, the collectives,
    the top straggler's lead-in against the median rank's, and the calls ranks disagree on."""
    return {
        "job_ranks": rank_rows,
        "job_collectives": view.collective_rows,
        "straggler_cause": view.stragglers[0]["breakdown"] if view.stragglers else [],
        "job_disagreements": view.disagreements,
    }
