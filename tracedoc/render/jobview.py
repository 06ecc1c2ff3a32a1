"""The job part of the report view model: the job verdict, stragglers, rank x step heatmaps.

Built from ``AnalysisResult.job`` (a ``tracedoc.job.JobView``) and the job verdict; shared by the
text, Markdown and HTML renderers. Values are formatted here; templates only lay them out.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from .format import fmt_pct

if TYPE_CHECKING:  # pragma: no cover
    from ..result import AnalysisResult

MAX_HEATMAP_RANKS = 256
MAX_HEATMAP_STEPS = 64
SEGMENTS = ("compute", "copy", "dataloader", "sync", "host", "other", "wait", "transfer")


def _ms(v: Any, digits: int = 1) -> str:
    return "—" if v is None else f"{v:,.{digits}f} ms"


def not_analysed(result: "AnalysisResult") -> list[str]:
    """One line per rank file that could not be read (``result.failed``): left out of the job."""
    return [f"not analysed: {os.path.basename(path)}: {why}" for path, why in (result.failed or {}).items()]


def build_job_view(result: "AnalysisResult", rank_cap: int = MAX_HEATMAP_RANKS) -> dict | None:
    holder = getattr(result, "job", None)
    job = getattr(holder, "view", None)
    if job is None or job.not_a_job:
        return None
    v = holder.verdict
    # ranks without steps: the findings speak of the iteration or the window (DESIGN.md), never of a "step"
    per = ("step" if any(r.metrics.get("steps") for r in result.ranks) else
           "iteration" if any(r.metrics.get("iterations") for r in result.ranks) else "window")
    findings = [{"rule_id": f.rule_id, "label": f.label, "title": f.title, "message": f.message,
                 "fixes": list(f.fixes), "expect": f.expect, "what_if": f.what_if_line(per),
                 "what_if_method": (f.what_if or {}).get("method"),
                 "impact": (f"{f.impact_ms_per_step:.1f} ms per {per} ({fmt_pct(f.impact_fraction)} of the {per})"
                            if per != "window" else f"{f.impact_ms_per_step:.1f} ms ({fmt_pct(f.impact_fraction)} "
                            "of the window)") if f.impact_ms_per_step is not None else None}
                for f in (v.findings if v is not None else []) if not f.minor]
    labels = list(v.labels) if v is not None else []
    m = job.metrics
    summary = [
        f"{len(job.ranks)} ranks; {job.collectives_matched:,} collectives matched on every member rank"
        + (f" (key: {job.match_key})" if job.match_key else ""),
        ("communication: " + fmt_pct(job.wait_fraction_of_comm) + " waiting for the last rank, "
         + fmt_pct(1 - job.wait_fraction_of_comm) + " transfer") if job.wait_fraction_of_comm is not None
        else "communication: no matched collective to split into wait and transfer",
    ]
    if m.get("comm_top_collective"):
        bw = m.get("comm_busbw_gbps")
        summary.append(f"most transfer time: {m['comm_top_collective']}"
                       + (f", bus bandwidth {bw:.1f} GB/s" if bw is not None else "")
                       + (f" (links typically give {m['link_busbw_gbps']:.0f} GB/s)" if m.get("link_busbw_gbps") else ""))
    if job.clock_note:
        summary.append("clocks: " + job.clock_note)
    aligned = _alignment_line(job.alignment)
    if aligned:
        summary.append(aligned)
    stragglers = []
    for s in job.stragglers:
        cost = s.get("wait_cost_ms_per_step")
        stragglers.append({
            "rank": s["rank"], "confidence": s.get("confidence"),
            "line": (f"rank {s['rank']} (confidence {s.get('confidence', 'high')}: {s.get('confidence_why', '')}) "
                     f"arrives last at {fmt_pct(s['arrived_last_fraction'])} of the matched collectives and costs "
                     "every other rank " + (f"{cost:.1f} ms" if cost is not None else "a share") +
                     f" of wait per step; cause: {s['cause_text']}"),
            "breakdown": [[row["category"], _ms(row["rank_ms_per_step"], 2), _ms(row["median_ms_per_step"], 2),
                           _ms(row["excess_ms_per_step"], 2)] for row in s["breakdown"]],
        })
    ranks_rows = [[str(r["rank"]), _ms(r["step_p50_ms"]), _ms(r["step_p95_ms"]), _ms(r["wait_ms_per_step"], 2),
                   fmt_pct(r["arrived_last_fraction"]), _ms(r["lateness_ms_per_step"], 2),
                   "straggler" if r["straggler"] else ""] for r in job.rank_rows[:rank_cap]]
    colls = [[c["collective"], "—" if c["bytes"] is None else f"{c['bytes']:,}", str(c["count"]),
              _ms(c["transfer_p50_ms"], 2), _ms(c["skew_p50_ms"], 2), _ms(c["wait_mean_ms"], 2),
              "—" if c["busbw_p50_gbps"] is None else f"{c['busbw_p50_gbps']:.1f}"] for c in job.collective_rows]
    return {
        "labels": labels,
        "confidence": (v.findings[0].confidence if v.findings else v.confidence) if v is not None else None,
        "findings": findings,
        "summary": summary,
        "stragglers": stragglers,
        "issues": not_analysed(result) + list(job.issues),
        "late_among_present": job.late_among_present,
        "rank_table": {"columns": ["rank", "step p50", "step p95", "wait/step", "arrived last", "lateness/step", ""],
                       "rows": ranks_rows, "left_out": max(0, len(job.rank_rows) - len(ranks_rows))},
        "collectives": {"columns": ["collective", "bytes", "count", "transfer p50", "skew p50", "mean wait",
                                    "busbw GB/s"], "rows": colls},
        "heatmaps": _heatmaps(job.heatmap),
        "compare": _compare(job),
        "median_rank": job.median_rank,
    }


def _alignment_line(alignment: dict) -> str | None:
    """Where each rank's window starts, when the ranks' windows differ (from ``job.alignment``)."""
    parts = []
    for g in (alignment or {}).get("groups", [])[:2]:
        late = [r for r in g["ranks"] if r["offset_calls"]]
        if not late:
            continue
        def when(r: dict) -> str:
            return f"{r['offset_steps']:g} step{'s' if r['offset_steps'] != 1 else ''}" if r["offset_steps"] is not None \
                else f"{r['offset_calls']} collectives"
        shown = ", ".join(f"rank {r['rank']} +{when(r)}" for r in late[:6]) + (" ..." if len(late) > 6 else "")
        parts.append(f"{shown} (group {g['group']})")
    if not parts:
        return None
    return ("the ranks' windows start at different steps (aligned by where their collectives end; after the "
            "earliest rank's): " + "; ".join(parts))


def _heatmaps(h: dict) -> list[dict]:
    """Rank x step grids of step time and of wait, each cell with a 0..1 shade (relative to the max)."""
    if not h:
        return []
    ranks, steps = h["ranks"][:MAX_HEATMAP_RANKS], h["steps"][:MAX_HEATMAP_STEPS]
    out = []
    for key, title in (("step_ms", "Step time (ms), rank x step"), ("wait_ms", "Wait in collectives (ms), rank x step")):
        grid = [row[: len(steps)] for row in h[key][: len(ranks)]]
        values = [x for row in grid for x in row if x is not None]
        lo, hi = (min(values), max(values)) if values else (0.0, 0.0)
        span = (hi - lo) or 1.0
        rows = [{"rank": r, "cells": [{"text": "—" if x is None else f"{x:.1f}",
                                       "shade": 0.0 if x is None else round((x - lo) / span, 3)} for x in row]}
                for r, row in zip(ranks, grid)]
        out.append({"title": title, "steps": steps, "rows": rows,
                    "left_out_ranks": max(0, len(h["ranks"]) - len(ranks)),
                    "left_out_steps": max(0, len(h["steps"]) - len(steps))})
    return out


def _compare(job) -> list[dict]:
    """The straggler's step beside the median rank's: lead-in by category, then wait and transfer (ms per step)."""
    if not job.stragglers or job.median_rank is None:
        return []
    s = job.stragglers[0]
    rows = {r["rank"]: r for r in job.rank_rows}
    out = []
    for rank, label in ((s["rank"], "straggler"), (job.median_rank, "median rank")):
        if rank == s["rank"] and label == "median rank":
            continue
        lead = {row["category"]: row["rank_ms_per_step" if rank == s["rank"] else "median_ms_per_step"]
                for row in s["breakdown"]}
        lead["wait"] = (rows.get(rank) or {}).get("wait_ms_per_step") or 0.0
        out.append({"rank": rank, "label": label, "values": lead})
    total = max(sum(max(x, 0.0) for x in o["values"].values()) for o in out) or 1.0
    for o in out:
        o["segments"] = [{"key": k, "ms": f"{o['values'].get(k, 0.0):.1f}",
                          "width": round(100.0 * max(o["values"].get(k, 0.0), 0.0) / total, 2)}
                         for k in SEGMENTS if o["values"].get(k, 0.0) > 0]
    return out


def focus_of(result: "AnalysisResult"):
    """The rank whose details a report shows, and why: ``--rank N``, else the straggler, else the
    job's median rank, else the rank whose top finding explains the most of its step."""
    holder = getattr(result, "job", None)
    job = getattr(holder, "view", None)
    if holder is None or job is None or not result.ranks or job.not_a_job:
        return result.focus, "whose top finding explains the most of its step"
    if holder.focus_asked:
        return result.ranks[holder.focus_index], "asked for with --rank"
    index = {r.rank: i for i, r in enumerate(result.ranks)}
    if job.straggler_ranks and job.straggler_ranks[0] in index:
        return result.ranks[index[job.straggler_ranks[0]]], "the straggler; --rank N shows another"
    if job.median_rank in index:
        return result.ranks[index[job.median_rank]], "the job's median rank; --rank N shows another"
    return result.focus, "whose top finding explains the most of its step"


def paired_excerpts(result: "AnalysisResult", focus) -> list[dict] | None:
    """The straggler's median-step timeline beside the median rank's, when the report shows the straggler."""
    job = getattr(getattr(result, "job", None), "view", None)
    if job is None or focus is None or not job.straggler_ranks or job.median_rank is None:
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
