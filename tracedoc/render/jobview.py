"""The job part of the report view model: the job verdict, stragglers, rank x step heatmaps.

``build_job_view`` turns ``AnalysisResult.job`` (a ``tracedoc.result.JobResult``: the job view, the
rank table and the job verdict) into a ``views.JobSectionView``, shared by the text, Markdown and
HTML renderers. Values are formatted here; templates only lay them out.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from .format import fmt_ms, fmt_pct, fmt_what_if
from .manyranks import MANY_RANKS, digest, heatmap_svgs, sort_keys
from .views import (
    BarPart,
    CompareView,
    GridView,
    HeatCell,
    HeatmapView,
    HeatRow,
    JobFindingView,
    JobSectionView,
    StragglerView,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..model.verdict import Finding
    from ..result import AnalysisResult, JobResult

MAX_HEATMAP_RANKS = 256
MAX_SORTABLE_RANKS = 4096  # the HTML's sortable rank table of a many-rank job
MAX_HEATMAP_STEPS = 64
SEGMENTS = ("compute", "copy", "dataloader", "sync", "host", "other", "wait", "transfer")
RANK_COLUMNS = ["rank", "step p50", "step p95", "wait/step", "arrived last", "lateness/step", ""]
COLLECTIVE_COLUMNS = ["collective", "bytes", "count", "transfer p50", "skew p50", "mean wait", "busbw GB/s"]


def not_analysed(result: "AnalysisResult") -> list[str]:
    """One line per rank file that could not be read (``result.failed``): left out of the job."""
    return [f"not analysed: {os.path.basename(path)}: {why}" for path, why in (result.failed or {}).items()]


def _ns_ms(v: float | None, digits: int = 1) -> str:
    return fmt_ms(None if v is None else v / 1e6, digits)


def _finding(f: "Finding", per: str) -> JobFindingView:
    """A job finding; ``per``: what its gain is per (a step, an iteration, or the window without either)."""
    if f.impact_ms_per_step is None:
        impact = None
    elif per != "window":
        impact = f"{f.impact_ms_per_step:.1f} ms per {per} ({fmt_pct(f.impact_fraction)} of the {per})"
    else:
        impact = f"{f.impact_ms_per_step:.1f} ms ({fmt_pct(f.impact_fraction)} of the window)"
    return JobFindingView(
        rule_id=f.rule_id,
        label=f.label,
        title=f.title,
        message=f.message,
        fixes=list(f.fixes),
        expect=f.expect,
        what_if=fmt_what_if(f.what_if, per),
        what_if_method=(f.what_if or {}).get("method"),
        impact=impact,
    )


def _summary(job: "JobResult") -> list[str]:
    m = job.metrics
    out = [
        f"{len(job.ranks_used)} ranks; {job.collectives_matched:,} collectives matched on every member rank"
        + (f" (key: {job.match_key})" if job.match_key else ""),
        (
            "communication: "
            + fmt_pct(job.wait_fraction_of_comm)
            + " waiting for the last rank, "
            + fmt_pct(1 - job.wait_fraction_of_comm)
            + " transfer"
        )
        if job.wait_fraction_of_comm is not None
        else "communication: no matched collective to split into wait and transfer",
    ]
    if m.get("comm_top_collective"):
        bw = m.get("comm_busbw_gbps")
        out.append(
            f"most transfer time: {m['comm_top_collective']}"
            + (f", bus bandwidth {bw:.1f} GB/s" if bw is not None else "")
            + (f" (links typically give {m['link_busbw_gbps']:.0f} GB/s)" if m.get("link_busbw_gbps") else "")
        )
    if job.clock_note:
        out.append("clocks: " + job.clock_note)
    aligned = _alignment_line(job.alignment)
    if aligned:
        out.append(aligned)
    return out


def _alignment_line(alignment: dict) -> str | None:
    """Where each rank's window starts, when the ranks' windows differ (from ``job.alignment``)."""
    parts = []
    for g in (alignment or {}).get("groups", [])[:2]:
        late = [r for r in g["ranks"] if r["offset_calls"]]
        if not late:
            continue

        def when(r: dict) -> str:
            return (
                f"{r['offset_steps']:g} step{'s' if r['offset_steps'] != 1 else ''}"
                if r["offset_steps"] is not None
                else f"{r['offset_calls']} collectives"
            )

        shown = ", ".join(f"rank {r['rank']} +{when(r)}" for r in late[:6]) + (" ..." if len(late) > 6 else "")
        parts.append(f"{shown} (group {g['group']})")
    if not parts:
        return None
    return (
        "the ranks' windows start at different steps (aligned by where their collectives end; after the "
        "earliest rank's): " + "; ".join(parts)
    )


def _straggler(s: dict) -> StragglerView:
    cost = s.get("wait_cost_ms_per_step")
    return StragglerView(
        rank=s["rank"],
        line=(
            f"rank {s['rank']} (confidence {s.get('confidence', 'high')}: {s.get('confidence_why', '')}) "
            f"arrives last at {fmt_pct(s['arrived_last_fraction'])} of the matched collectives and costs "
            "every other rank "
            + (f"{cost:.1f} ms" if cost is not None else "a share")
            + f" of wait per step; cause: {s['cause_text']}"
        ),
        breakdown=[
            [
                row["category"],
                fmt_ms(row["rank_ms_per_step"], 2),
                fmt_ms(row["median_ms_per_step"], 2),
                fmt_ms(row["excess_ms_per_step"], 2),
            ]
            for row in s["breakdown"]
        ],
    )


def build_job_view(result: "AnalysisResult", rank_cap: int = MAX_HEATMAP_RANKS) -> JobSectionView | None:
    job = result.job
    if job is None or job.not_a_job:
        return None
    v = job.verdict
    # ranks without steps: the findings speak of the iteration or the window (docs/definitions.md), never of a "step"
    per = (
        "step"
        if any(r.metrics.get("steps") for r in result.ranks)
        else "iteration"
        if any(r.metrics.get("iterations") for r in result.ranks)
        else "window"
    )
    in_view = [r for r in job.ranks if r.rank in set(job.ranks_used)]
    many = len(in_view) >= MANY_RANKS
    if many:  # every rank, for the HTML's sortable table; text and Markdown show the digest
        rank_cap = max(rank_cap, MAX_SORTABLE_RANKS)
    ranks_rows = [
        [
            str(r.rank),
            _ns_ms(r.step_time_p50_ns),
            _ns_ms(r.step_time_p95_ns),
            _ns_ms(r.wait_ns_per_step, 2),
            fmt_pct(r.arrived_last_fraction),
            _ns_ms(r.lateness_ns_per_step, 2),
            "straggler" if r.straggler else "",
        ]
        for r in in_view[:rank_cap]
    ]
    colls = [
        [
            c["collective"],
            "—" if c["bytes"] is None else f"{c['bytes']:,}",
            str(c["count"]),
            fmt_ms(c["transfer_p50_ms"], 2),
            fmt_ms(c["skew_p50_ms"], 2),
            fmt_ms(c["wait_mean_ms"], 2),
            "—" if c["busbw_p50_gbps"] is None else f"{c['busbw_p50_gbps']:.1f}",
        ]
        for c in job.collective_rows
    ]
    return JobSectionView(
        labels=list(v.labels) if v is not None else [],
        confidence=(v.findings[0].confidence if v.findings else v.confidence) if v is not None else None,
        findings=[_finding(f, per) for f in (v.findings if v is not None else []) if not f.minor],
        summary=_summary(job),
        stragglers=[_straggler(s) for s in job.stragglers],
        issues=not_analysed(result) + list(job.issues),
        late_among_present=list(job.late_among_present),
        rank_table=GridView(RANK_COLUMNS, ranks_rows, max(0, len(in_view) - len(ranks_rows))),
        collectives=GridView(COLLECTIVE_COLUMNS, colls),
        heatmaps=[] if many else _heatmaps(job.heatmap),
        compare=_compare(job),
        median_rank=job.median_rank,
        digest=digest(job) if many else None,
        heat_svgs=heatmap_svgs(job) if many else [],
        rank_sort=sort_keys(in_view[:rank_cap], RANK_COLUMNS),
    )


def _heatmaps(h: dict) -> list[HeatmapView]:
    """Rank x step grids of step time and of wait, each cell with a 0..1 shade (relative to the max)."""
    if not h:
        return []
    ranks, steps = h["ranks"][:MAX_HEATMAP_RANKS], h["steps"][:MAX_HEATMAP_STEPS]
    out = []
    for key, title in (
        ("step_ms", "Step time (ms), rank x step"),
        ("wait_ms", "Wait in collectives (ms), rank x step"),
    ):
        grid = [row[: len(steps)] for row in h[key][: len(ranks)]]
        values = [x for row in grid for x in row if x is not None]
        lo, hi = (min(values), max(values)) if values else (0.0, 0.0)
        span = (hi - lo) or 1.0
        rows = [
            HeatRow(
                r,
                [
                    HeatCell("—" if x is None else f"{x:.1f}", 0.0 if x is None else round((x - lo) / span, 3))
                    for x in row
                ],
            )
            for r, row in zip(ranks, grid)
        ]
        out.append(
            HeatmapView(title, steps, rows, max(0, len(h["ranks"]) - len(ranks)), max(0, len(h["steps"]) - len(steps)))
        )
    return out


def _compare(job: "JobResult") -> list[CompareView]:
    """The straggler's step beside the median rank's: lead-in by category, then wait and transfer (ms per step)."""
    if not job.stragglers or job.median_rank is None:
        return []
    s = job.stragglers[0]
    waits = {r.rank: r.wait_ns_per_step for r in job.ranks}
    out = []
    for rank, label in ((s["rank"], "straggler"), (job.median_rank, "median rank")):
        if rank == s["rank"] and label == "median rank":
            continue
        lead = {
            row["category"]: row["rank_ms_per_step" if rank == s["rank"] else "median_ms_per_step"]
            for row in s["breakdown"]
        }
        lead["wait"] = (waits.get(rank) or 0.0) / 1e6
        out.append(CompareView(rank, label, lead))
    total = max(sum(max(x, 0.0) for x in o.values.values()) for o in out) or 1.0
    for o in out:
        o.segments = [
            BarPart(k, f"{o.values.get(k, 0.0):.1f}", round(100.0 * max(o.values.get(k, 0.0), 0.0) / total, 2))
            for k in SEGMENTS
            if o.values.get(k, 0.0) > 0
        ]
    return out


def paired_excerpts(result: "AnalysisResult", focus) -> list[dict] | None:
    """The straggler's median-step timeline beside the median rank's, when the report shows the straggler."""
    job = result.job
    if job is None or job.not_a_job or focus is None or not job.straggler_ranks or job.median_rank is None:
        return None
    by_rank = {r.rank: r for r in result.ranks}
    s, m = by_rank.get(job.straggler_ranks[0]), by_rank.get(job.median_rank)
    if s is None or m is None or s is not focus or s is m:
        return None
    out = []
    for r, label in ((s, "straggler"), (m, "median rank")):
        excerpts = (r.timeline or {}).get("excerpts") or []
        if not excerpts:
            return None
        out.append({**excerpts[0], "title": f"rank {r.rank} ({label}) · {excerpts[0].get('title', '')}"})
    return out
