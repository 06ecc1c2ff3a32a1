"""The job report's cross-rank timeline: one representative step, one lane per rank on one clock.

Each lane is the rank's step on the job's common clock (the job view's clock offsets applied): its
matched collectives split into waiting for the last rank and transfer, the rest of the step as compute;
the straggler's lateness at each collective (from the median rank's arrival to its own) is marked above
its lane. Where the rank's timeline excerpt covers that step, its compute is its kernels as they ran;
elsewhere it is the step's time outside the collectives, and the hover says so with the step's measured
compute and idle time.

Drawn for jobs of 2 to ``MAX_LANES`` ranks (a larger job is read from its rank x step heatmap), from a fresh
analysis (a saved report keeps no matched collectives). Inline SVG; hover text in ``<title>`` elements, no script.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from html import escape
from typing import TYPE_CHECKING

import numpy as np

from .format import fmt_ns
from .svg import label, nice_ticks, svg_open, text_width, tick_text, title

if TYPE_CHECKING:  # pragma: no cover
    from ..result import AnalysisResult

MAX_LANES = 16
W = 900.0
LEFT, RIGHT, TOP, LANE_H, LANE_GAP, MARK_H = 64.0, 12.0, 30.0, 18.0, 22.0, 10.0
FONT = 11.0
COLOURS = {"compute": "#4c78a8", "outside": "#9fb8d6", "wait": "#6a3d9a", "transfer": "#f58518", "late": "#c2352b"}


@dataclass
class Lane:
    rank: int
    start: int  # the step on the common clock (ns)
    end: int
    detail: bool  # compute drawn from the rank's kernels (else: the time outside the collectives)
    compute: list[tuple[int, int]] = field(default_factory=list)
    wait: list[tuple[int, int, str]] = field(default_factory=list)  # start, end, what
    transfer: list[tuple[int, int, str]] = field(default_factory=list)
    late: list[tuple[int, int]] = field(default_factory=list)  # median arrival -> own arrival
    note: str = ""  # the step's measured compute and idle (hover)


@dataclass
class JobTimeline:
    step: str
    lanes: list[Lane]
    stragglers: list[int]
    left_out: int  # ranks beyond MAX_LANES


def _union(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(a, b) for a, b in out]


def _minus(span: tuple[int, int], cuts: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out, at = [], span[0]
    for s, e in _union(cuts):
        if s > at:
            out.append((at, min(s, span[1])))
        at = max(at, e)
    if at < span[1]:
        out.append((at, span[1]))
    return [(a, b) for a, b in out if b > a]


def _excerpt_for(rank, step: str):
    for ex in (rank.timeline or {}).get("excerpts") or []:
        if ex.get("step") == step:
            return ex
    return None


def choose_step(ranks) -> str | None:
    """The step every drawn rank has: the one most ranks have a timeline excerpt of (kernel detail on the
    most lanes), the median-long among those."""
    shared = None
    for r in ranks:
        names = {row.get("step") for row in r.per_step if row.get("step")}
        shared = names if shared is None else shared & names
    if not shared:
        return None
    covered = {s: sum(_excerpt_for(r, s) is not None for r in ranks) for s in shared}
    best = max(covered.values())
    candidates = sorted(s for s in shared if covered[s] == best)

    def length(s: str) -> float:
        return float(
            np.median(
                [next(row["end_ns"] - row["start_ns"] for row in r.per_step if row.get("step") == s) for r in ranks]
            )
        )

    candidates.sort(key=length)
    return candidates[len(candidates) // 2]


def build_job_timeline(result: "AnalysisResult") -> JobTimeline | None:
    """The timeline's lanes, or None where it cannot be drawn (no job, a saved report, no shared step)."""
    job = result.job
    inst = getattr(result, "job_instances", None)
    if job is None or job.not_a_job or inst is None:
        return None
    used = set(job.ranks_used)
    ranks = sorted((r for r in result.ranks if r.rank is not None and r.rank in used), key=lambda r: r.rank)
    if not 2 <= len(ranks) <= MAX_LANES:  # a larger job is read from its rank x step heatmap instead
        return None
    drawn, left_out = ranks, 0
    step = choose_step(drawn)
    if step is None:
        return None
    offsets = {int(k): int(v) for k, v in ((job.alignment or {}).get("clock_offsets_ns") or {}).items()}
    stragglers = list(job.straggler_ranks or [])
    lanes = []
    for r in drawn:
        row = next(x for x in r.per_step if x.get("step") == step)
        off = offsets.get(r.rank, 0)
        s, e = int(row["start_ns"]) - off, int(row["end_ns"]) - off
        lane = Lane(
            rank=r.rank,
            start=s,
            end=e,
            detail=False,
            note=f"step {step}: compute {fmt_ns(row.get('compute_ns'))}, idle {fmt_ns(row.get('idle_ns'))}, "
            f"communication {fmt_ns(row.get('comm_ns'))} (measured on this rank)",
        )
        mine = np.flatnonzero((inst["rank"] == r.rank) & (inst["end_ns"] > s) & (inst["arrival_ns"] < e))
        for i in mine.tolist():
            k = int(inst["inst"][i])
            a, end = int(inst["arrival_ns"][i]), int(inst["end_ns"][i])
            if end <= s or a >= e:
                continue
            what = str(inst["type"][k])
            waited_to = min(int(inst["last_ns"][k]), end)
            if waited_to > a:
                lane.wait.append((a, waited_to, what))
            lane.transfer.append((max(a, waited_to), end, what))
            med = int(inst["median_ns"][k])
            if r.rank in stragglers and a > med:
                lane.late.append((med, a))
        ex = _excerpt_for(r, step)
        busy = [(x[0], x[1]) for x in lane.wait + lane.transfer]
        if ex is not None:
            base = int(ex["start_ns"]) - off
            ops = [
                (base + int(o["start"]), base + int(o["end"]))
                for ln in ex.get("lanes") or []
                for o in ln["ops"]
                if o.get("cat") in ("compute", "memcpy", "memset")
            ]
            lane.compute = [(max(a, s), min(b, e)) for a, b in _union(ops) if b > s and a < e]
            lane.detail = True
        else:
            lane.compute = _minus((s, e), busy)
        lanes.append(lane)
    return JobTimeline(step=step, lanes=lanes, stragglers=stragglers, left_out=left_out)


def job_timeline_svg(tl: JobTimeline) -> str:
    t0 = min(lane.start for lane in tl.lanes)
    t1 = max(max(lane.end for lane in tl.lanes), max((b for lane in tl.lanes for _, b in lane.late), default=t0))
    span = max(1, t1 - t0)
    ticks = nice_ticks(span / 1e6, 6)
    top_ms = ticks[-1]
    pl, pr = LEFT, W - RIGHT

    def x(ns: int) -> float:
        return pl + (ns - t0) / 1e6 / top_ms * (pr - pl)

    row_h = LANE_H + LANE_GAP
    h = TOP + row_h * len(tl.lanes) + 8
    out = [svg_open(W, h, f"one step on every rank: {len(tl.lanes)} lanes", "job-timeline")]
    for v in ticks:
        out.append(
            f'<line x1="{x(int(t0 + v * 1e6)):.1f}" x2="{x(int(t0 + v * 1e6)):.1f}" y1="{TOP - 6:.1f}" '
            f'y2="{h - 6:.1f}" stroke="#e6e9ef"/>'
        )
        out.append(
            label(
                x(int(t0 + v * 1e6)),
                TOP - 10,
                tick_text(v) + (" ms" if v == ticks[-1] else ""),
                size=FONT,
                anchor="end" if v == ticks[-1] else "middle",
                cls="tick",
                fill="#5b6577",
            )
        )
    for n, lane in enumerate(tl.lanes):
        y = TOP + n * row_h + MARK_H
        straggler = lane.rank in tl.stragglers
        out.append(f'<g class="lane" data-rank="{lane.rank}">')
        out.append(
            label(
                pl - 8,
                y + LANE_H - 5,
                f"rank {lane.rank}",
                size=FONT,
                anchor="end",
                cls="lane-name",
                fill="#c2352b" if straggler else "#1d2330",
                weight="600" if straggler else None,
            )
        )
        out.append(
            f'<rect x="{x(lane.start):.2f}" y="{y:.1f}" width="{max(0.5, x(lane.end) - x(lane.start)):.2f}" '
            f'height="{LANE_H:.1f}" fill="#f5f7fa" stroke="#dde2ea">'
            + title(f"rank {lane.rank}, {lane.note}")
            + "</rect>"
        )
        kind = "compute" if lane.detail else "outside"
        what = (
            "compute (its kernels and copies)"
            if lane.detail
            else "outside the collectives: compute, copies and idle (no kernel detail for this step on this rank)"
        )
        for a, b in lane.compute:
            out.append(
                f'<rect class="seg-{kind}" x="{x(a):.2f}" y="{y + 2:.1f}" width="{max(0.5, x(b) - x(a)):.2f}" '
                f'height="{LANE_H - 4:.1f}" fill="{COLOURS[kind]}">'
                + title(f"rank {lane.rank}: {what}, {fmt_ns(b - a)}")
                + "</rect>"
            )
        for key, rows in (("wait", lane.wait), ("transfer", lane.transfer)):
            for a, b, coll in rows:
                words = "waiting for the last rank" if key == "wait" else "transfer"
                out.append(
                    f'<rect class="seg-{key}" x="{x(a):.2f}" y="{y:.1f}" width="{max(0.8, x(b) - x(a)):.2f}" '
                    f'height="{LANE_H:.1f}" fill="{COLOURS[key]}">'
                    + title(f"rank {lane.rank}: {coll}, {words} {fmt_ns(b - a)}")
                    + "</rect>"
                )
        for a, b in lane.late:
            out.append(
                f'<line class="late" x1="{x(a):.2f}" x2="{x(b):.2f}" y1="{y - 4:.1f}" y2="{y - 4:.1f}" '
                f'stroke="{COLOURS["late"]}" stroke-width="3">'
                + title(f"rank {lane.rank} arrives {fmt_ns(b - a)} after the median rank")
                + "</line>"
            )
        if lane.late:
            worst = max(lane.late, key=lambda ab: ab[1] - ab[0])
            text = f"late {fmt_ns(worst[1] - worst[0])}"
            tx = x(worst[1]) + 4
            if tx + text_width(text, FONT - 1) > pr:
                tx = x(worst[0]) - 4 - text_width(text, FONT - 1)
            if tx >= pl:
                out.append(label(tx, y - 1, text, size=FONT - 1, cls="late-text", fill=COLOURS["late"], weight="600"))
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)


def job_timeline_html(result: "AnalysisResult") -> str:
    """The section's figure and key, or "" when there is nothing to draw."""
    tl = build_job_timeline(result)
    if tl is None:
        return ""
    detail = sum(lane.detail for lane in tl.lanes)
    keys = [
        ("compute", "compute (kernels and copies)"),
        ("wait", "waiting for the last rank"),
        ("transfer", "collective transfer"),
        ("late", "straggler's lateness"),
    ]
    if detail < len(tl.lanes):
        keys.insert(1, ("outside", "outside the collectives (no kernel detail on that rank)"))
    legend = "".join(
        f'<span class="key"><i class="swatch" style="background:{COLOURS[k]}"></i>{escape(words)}</span>'
        for k, words in keys
    )
    more = (
        f'<p class="more">{tl.left_out} more ranks are not drawn: the timeline shows the first {MAX_LANES}.</p>'
        if tl.left_out
        else ""
    )
    return (
        f'<p class="muted">Step <code>{escape(tl.step)}</code> on every rank, on one clock (the job view\'s clock '
        f"offsets applied); kernel detail on {detail} of {len(tl.lanes)} lanes. Hover any segment for its time.</p>"
        f'<figure class="chart-box">{job_timeline_svg(tl)}</figure><p class="chart-legend">{legend}</p>{more}'
    )
