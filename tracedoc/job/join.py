"""The job stage: join the ranks' compact tables into the job view (``tracedoc.job.view``).

``join_job`` matches the ranks' collectives, times them, names stragglers and returns a ``JobJoin``:
the ``JobView``, the per-rank job columns of the rank table, and what the judge and the merged
timeline need besides.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ..analyses.comm.instances import RankTables
from ..model.groups import distinct, isin
from ..model.stats import median, percentile
from .view import JobJoin, JobView

if TYPE_CHECKING:
    from .straggler import Starvation

TOP_COLLECTIVE_ROWS = 20


def build_job(
    tables: list[RankTables], unreadable_ranks: set[int] | frozenset = frozenset(), starved: Starvation | None = None
) -> JobView:
    """The job view of the ranks' compact tables (``join_job`` without the rest)."""
    return join_job(tables, unreadable_ranks, starved).view


def join_job(
    tables: list[RankTables], unreadable_ranks: set[int] | frozenset = frozenset(), starved: Starvation | None = None
) -> JobJoin:
    """Join the ranks' compact tables: match, time, find stragglers. O(ranks x collectives).

    ``unreadable_ranks``: ranks whose file is in the directory but could not be read (the result's
    ``failed``); like absent ranks they are in no match and cannot be named stragglers. ``starved``:
    the bars of host launch starvation, a straggler's cause (from the run's rule parameters; without
    them no straggler is said to be starved)."""
    # imported here: analysing one file imports the job package (the job view's type), and with it this
    # module, but never joins ranks
    from .checks import admit
    from .match import group_members, match, stack
    from .straggler import cause_of, find_stragglers, lead_per_step, rank_stats
    from .timing import coarse_offsets, time_instances
    from .waits import caused_wait, rank_waits, step_windows
    from .whatif import straggler_removed

    ranks, issues, excluded = admit(tables)
    view = JobView(ranks_used=[rt.rank for rt in ranks], issues=issues, excluded=excluded)
    step_ms: dict[int, dict[str, float]] = {}  # rank -> p50, p95 (ms) and count of its step times
    for rt in ranks:
        st = _timed(rt)
        if st.size:
            step_ms[rt.rank] = {"p50": percentile(st, 50) / 1e6, "p95": percentile(st, 95) / 1e6, "steps": int(st.size)}
    stacked = stack(ranks)
    members, expected = group_members(ranks, stacked.groups)
    present = set(view.ranks_used)
    view.missing_ranks = sorted({r for exp in expected.values() for r in exp} - present)[:4096]
    if view.missing_ranks:
        n = len(view.missing_ranks)
        bad = sorted(set(view.missing_ranks) & set(unreadable_ranks))
        absent = [r for r in view.missing_ranks if r not in set(bad)]
        where = " or ".join(
            part
            for part in (
                f"not in the directory ({_ranges(absent)})" if absent else "",
                f"in an unreadable file ({_ranges(bad)})" if bad else "",
            )
            if part
        )
        view.issues.append(
            f"{n} member rank{'s' if n > 1 else ''} of the job's groups "
            f"{'are' if n > 1 else 'is'} {where}: collectives "
            "are matched and waits measured among the ranks present"
        )
    coarse = coarse_offsets(ranks)
    rough = _job_step_ns(step_ms)
    m = match(
        stacked,
        members,
        expected,
        half_step_ns=rough / 2 if rough else None,
        coarse=coarse,
        windows={rt.rank: tuple(rt.info["span_ns"]) for rt in ranks if rt.info.get("span_ns")},
    )
    view.collectives_matched, view.match_key, view.keys_by_group = m.count, m.key, m.keys_by_group
    view.disagreements, view.unmatched_calls, view.alignment = m.disagreements, m.unmatched_calls, m.alignment
    view.issues.extend(_unmatched_issues(m))
    common_steps = _step_tables(ranks, view, m.step_shift)
    t = time_instances(stacked, m, ranks, coarse)
    view.timing_mode, view.clock_note = t.mode if t.inst.size else None, t.clock_note
    view.alignment["clock_offsets_ns"] = {str(r): int(v) for r, v in sorted(t.offsets_ns.items()) if v}
    if t.untimed:
        view.issues.append(
            f"{t.untimed} matched collectives lack a GPU kernel or CPU call on some rank; their waits are not measured"
        )
    windows = step_windows(ranks, t, m.step_shift)
    waits = rank_waits(t, windows)
    view.comm_ns = int(sum(w.comm_ns for w in waits.values()))
    view.comm_wait_ns = int(sum(w.comm_wait_ns for w in waits.values()))
    view.wait_fraction_of_comm = view.comm_wait_ns / view.comm_ns if view.comm_ns else None
    matched_p50 = [w.step_p50_ns for w in waits.values() if w.step_p50_ns]
    step_ns = median(matched_p50) if matched_p50 else rough  # the job's step: over the matched steps
    stats = rank_stats(t, waits, m.step_shift)
    lead = lead_per_step(ranks, stacked, t)
    found = find_stragglers(stats, len(ranks), lambda r: caused_wait(t, windows, r, waits))
    view.median_rank = _median_rank(view, stats, step_ms)
    if found and view.missing_ranks:
        # with member ranks absent, the last arriver present may itself wait for an absent one
        late = ", ".join(f"rank {s.rank} ({s.stats.last_share:.0%} of collectives)" for s in found[:4])
        view.issues.append(
            f"among the ranks present, {late} arrived last; with {len(view.missing_ranks)} ranks absent "
            "the job's straggler cannot be named: analyse a directory holding every rank"
        )
        view.late_among_present = [s.rank for s in found]
        found = []
    info = {rt.rank: rt.info for rt in ranks}
    for f in found:
        s = f.stats
        late_ps = waits[s.rank].late_p50_ns or 0.0
        cause = cause_of(s.rank, lead, late_ps, info.get(s.rank), starved)
        view.stragglers.append(
            {
                "rank": s.rank,
                "confidence": f.confidence,
                "confidence_why": f.why,
                "named_by": "size" if f.by_size else "count",
                "explains_wait_fraction": s.explains,
                "lateness_score": s.score,
                "lateness_fraction": s.late_fraction,
                "arrived_last_fraction": s.last_share,
                "arrived_last": s.arrived_last,
                "instances": s.instances,
                "steps": s.steps,
                "late_steps": s.late_steps,
                "trials": s.trials,
                "wait_cost_fraction": f.caused_fraction,
                "wait_cost_ms_per_step": f.caused_fraction * step_ns / 1e6 if step_ns else None,
                "lateness_ms_per_step": late_ps / 1e6,
                "cause": cause["cause"],
                "cause_text": cause["text"],
                "cause_ms_per_step": cause["excess_ms_per_step"],
                "breakdown": cause["breakdown"],
                "kernels_per_step": cause["kernels_per_step"],
                "median_kernels_per_step": cause["median_kernels_per_step"],
            }
        )
    view.straggler_ranks = [s["rank"] for s in view.stragglers]
    unavailable = None
    if view.stragglers:
        view.straggler_what_if, unavailable = straggler_removed(t, ranks, view.straggler_ranks[0], step_ns, windows)
    columns = _rank_columns(view, stats, lead, waits)
    view.collective_rows = _collective_rows(stacked, t)
    view.heatmap = _heatmap(view, ranks, windows, common_steps, m.step_shift)
    view.metrics = _metrics(view, ranks, stacked, t, step_ns)
    view.not_a_job = _not_a_job(view, tables, stacked)
    return JobJoin(view, columns, unavailable, {r: v["p50"] * 1e6 for r, v in step_ms.items()}, _instances(t, stacked))


# -- pieces ---------------------------------------------------------------------------------------


def _instances(t, stacked) -> dict[str, Any]:
    """Per member of each matched, timed collective (aligned clock): what the merged timeline draws."""
    from .waits import median_arrival

    return {
        "rank": t.rank,
        "inst": t.inst,
        "arrival_ns": t.arrival_ns,
        "end_ns": t.end_ns,
        "last_ns": t.last_ns,
        "last_rank": t.last_rank,
        "median_ns": median_arrival(t) if t.inst.size else t.last_ns,
        "type": [stacked.types[int(x)] for x in t.type.tolist()],
    }


def _timed(rt: RankTables) -> np.ndarray:
    """The rank's step times, without the steps a pre-window backlog ran ahead of (they have none)."""
    st = rt.steps["step_time_ns"]
    timed = rt.steps.get("timed")
    return st[timed.astype(bool)] if timed is not None and timed.size == st.size else st


def _unmatched_issues(m) -> list[str]:
    """What the report says about the calls left unmatched, by reason."""
    if m.reason is None or not m.unmatched_calls:
        return []
    from .match import REASON_AFTER, REASON_BEFORE, REASON_MISSING, REASON_NOT_MEMBER, REASON_REFUSED, REASONS

    counts = np.bincount(m.reason.astype(np.int64), minlength=len(REASONS))
    out = []
    outside = int(counts[REASON_BEFORE] + counts[REASON_AFTER])
    if outside:
        by = [
            (
                f"rank {r['rank']}: {r['unmatched'].get('before_span', 0)} before, "
                f"{r['unmatched'].get('after_span', 0)} after"
            )
            for r in m.alignment.get("ranks", [])
            if r["unmatched"].get("before_span") or r["unmatched"].get("after_span")
        ]
        out.append(
            f"{outside} collective call{'s' if outside > 1 else ''} lie outside the time every rank's trace "
            f"covers (the ranks' profilers opened and closed at different times, and a kernel launched as a profiler "
            f"stopped runs after it; {'; '.join(by[:4])}"
            f"{' ...' if len(by) > 4 else ''}): left out of matching (job.alignment)"
        )
    if counts[REASON_REFUSED]:
        out.append(
            f"{int(counts[REASON_REFUSED])} call{'s' if counts[REASON_REFUSED] > 1 else ''} end too far from "
            "their partner's on the reference rank to be the same collective (beyond the end-skew tolerance): "
            "refused, and their collectives left unmatched"
        )
    if counts[REASON_MISSING]:
        out.append(
            f"{int(counts[REASON_MISSING])} collective call{'s' if counts[REASON_MISSING] > 1 else ''} in the time "
            "every rank's trace covers are missing on some member ranks (see the disagreements table)"
        )
    if counts[REASON_NOT_MEMBER]:
        out.append(
            f"{int(counts[REASON_NOT_MEMBER])} call{'s' if counts[REASON_NOT_MEMBER] > 1 else ''} of groups "
            "their rank is not listed in: left out"
        )
    return out


def _not_a_job(view: JobView, tables: list[RankTables], stacked) -> str | None:
    """Why the files are not one job (None when they are): two or more files, no collective shared by
    their ranks (none records any, or none matches), and the files do not say they are one job's
    ranks (each a distinct rank of the same world size)."""
    if len(tables) < 2 or view.collectives_matched:
        return None
    ranks = [rt.rank for rt in tables]
    sizes = {rt.info.get("world_size") for rt in tables}
    if None not in ranks and len(set(ranks)) == len(ranks) and len(sizes) == 1 and None not in sizes:
        return None  # one job's ranks by their own account, even with no collective recorded
    with_calls = sum(1 for rt in tables if len(rt))
    if not with_calls:
        return (
            f"none of the {len(tables)} files records a collective call, so no rank waits for another: "
            "they are not one job; each file is analysed on its own"
        )
    return (
        f"no collective call is shared by the ranks ({with_calls} of {len(tables)} files record collectives, "
        "none of them matched across files): the files are not one job (different runs or models); "
        "each file is analysed on its own"
    )


def _step_tables(ranks: list[RankTables], view: JobView, shift: dict[int, int]) -> list[int]:
    """The steps every rank has (in the job's step numbering: each rank's numbers plus its shift)."""
    sets = {rt.rank: set((rt.steps["number"] + shift.get(rt.rank, 0)).tolist()) for rt in ranks}
    with_steps = [s for s in sets.values() if s]
    if not with_steps:
        return []
    common = set.intersection(*with_steps)
    if any(s != with_steps[0] for s in with_steps) or len(with_steps) < len(sets):
        desc = "; ".join(f"rank {r}: {_ranges(sorted(s)) or 'none'}" for r, s in list(sets.items())[:6])
        renumbered = " after aligning the ranks' step numbers" if any(shift.values()) else ""
        view.issues.append(
            f"ranks recorded different steps{renumbered} ({desc}{' ...' if len(sets) > 6 else ''}); "
            f"the rank x step table uses the {len(common)} step{'s' if len(common) != 1 else ''} "
            "every rank has"
        )
    return sorted(common)


def _job_step_ns(step_ms: dict) -> float | None:
    p50 = [v["p50"] for v in step_ms.values()]
    return median(p50) * 1e6 if p50 else None


def _median_rank(view: JobView, stats, step_ms: dict) -> int | None:
    """The rank whose wait is the median (ties: lowest rank): the job's typical rank."""
    if stats:
        order = sorted(stats, key=lambda s: (s.wait_fraction, s.rank))
        return order[(len(order) - 1) // 2].rank
    if step_ms:
        order = sorted(step_ms, key=lambda r: (step_ms[r]["p50"], r))
        return order[(len(order) - 1) // 2]
    return view.ranks_used[0] if view.ranks_used else None


def _rank_columns(view: JobView, stats, lead, waits) -> dict[int, dict[str, Any]]:
    """Each rank's job columns of the rank table, per step in ns (medians over its matched steps): its
    matched steps and their median step, its wait for the last rank (and as a share of its step), how
    often it arrived last, its lateness against the median arrival (and as a share of its step), the
    share of its collective time spent waiting, its DataLoader time before collectives, and whether it
    is a straggler."""
    by = {s.rank: s for s in stats}
    out = {}
    for r in view.ranks_used:
        s, w = by.get(r), waits.get(r)
        out[r] = {
            "matched_steps": w.steps if w else 0,
            "matched_step_p50_ns": float(w.step_p50_ns) if w and w.step_p50_ns else None,
            "wait_fraction": w.wait_fraction if w else None,
            "wait_ns_per_step": float(w.wait_p50_ns) if w and w.wait_p50_ns is not None else None,
            "arrived_last_fraction": s.last_share if s else None,
            "lateness_fraction": w.late_fraction if w else None,
            "lateness_ns_per_step": float(w.late_p50_ns) if w and w.late_p50_ns is not None else None,
            "comm_wait_fraction": w.comm_wait_ns / w.comm_ns if w and w.comm_ns else None,
            "dataloader_ns_per_step": float(lead.get(r, {}).get("dataloader", 0.0)) if r in lead else None,
            "straggler": r in view.straggler_ranks,
        }
    return out


def _collective_rows(stacked, t) -> list[dict]:
    if not t.last_rank.size:
        return []
    out = []
    key = t.type * (1 << 40) + np.maximum(t.bytes, 0)
    for k in distinct(key).tolist():
        sel = key == k
        ctype = stacked.types[int(t.type[sel][0])]
        bw = t.busbw_gbps[sel]
        of_type = isin(t.inst, np.flatnonzero(sel))
        members = t.inst[of_type]
        waits = t.wait_ns[of_type]
        out.append(
            {
                "collective": ctype,
                "bytes": int(t.bytes[sel][0]) if t.bytes[sel][0] >= 0 else None,
                "count": int(sel.sum()),
                "group_size": int(t.group_size[sel].max()),
                "transfer_p50_ms": median(t.transfer_ns[sel]) / 1e6,
                "skew_p50_ms": median(t.skew_ns[sel]) / 1e6,
                "wait_mean_ms": float(waits.mean()) / 1e6 if members.size else None,
                "busbw_p50_gbps": median(bw[~np.isnan(bw)]) if np.isfinite(bw).any() else None,
            }
        )
    out.sort(key=lambda r: -(r["transfer_p50_ms"] * r["count"]))
    return out[:TOP_COLLECTIVE_ROWS]


def _heatmap(view: JobView, ranks, windows, steps: list[int], shift: dict[int, int]) -> dict:
    """Rank x step matrices of step time, of wait and of lateness (ms), for the common steps (job numbering)."""
    if not steps:
        return {}
    idx = {s: i for i, s in enumerate(steps)}
    step_ms = np.full((len(ranks), len(steps)), np.nan)
    wait_ms = np.zeros((len(ranks), len(steps)))
    row_of = {rt.rank: i for i, rt in enumerate(ranks)}
    for rt in ranks:
        numbers = (rt.steps["number"] + shift.get(rt.rank, 0)).tolist()
        timed = rt.steps.get("timed", np.ones(len(numbers), dtype=np.int64)).tolist()
        for num, st, has in zip(numbers, rt.steps["step_time_ns"].tolist(), timed):
            if num in idx and has:
                step_ms[row_of[rt.rank], idx[num]] = st / 1e6
    late_ms = np.zeros((len(ranks), len(steps)))
    if windows.wait_ns is not None:
        late = windows.late_ns if windows.late_ns is not None else np.zeros_like(windows.wait_ns)
        for r, num, w, lt in zip(windows.rank.tolist(), windows.step.tolist(), windows.wait_ns.tolist(), late.tolist()):
            if num in idx and r in row_of:
                wait_ms[row_of[r], idx[num]] = w / 1e6
                late_ms[row_of[r], idx[num]] = lt / 1e6
    return {
        "ranks": [rt.rank for rt in ranks],
        "steps": steps,
        "step_ms": [[None if np.isnan(v) else round(float(v), 4) for v in row] for row in step_ms],
        "wait_ms": [[round(float(v), 4) for v in row] for row in wait_ms],
        "late_ms": [[round(float(v), 4) for v in row] for row in late_ms],
    }


def _metrics(view: JobView, ranks, stacked, t, step_ns) -> dict[str, Any]:
    from .hardware import link_busbw_gbps

    top = view.stragglers[0] if view.stragglers else None
    m: dict[str, Any] = {
        "job_ranks": len(view.ranks_used),
        "collectives_matched": view.collectives_matched,
        "job_step_time_p50_ns": step_ns,
        "comm_wait_fraction": view.wait_fraction_of_comm,
        "straggler_count": len(view.stragglers),
        "straggler_rank": top["rank"] if top else None,
        "straggler_cause": top["cause"] if top else None,
        "straggler_confidence": top["confidence"] if top else None,
        "straggler_wait_ms_per_step": top["wait_cost_ms_per_step"] if top else None,
        "straggler_wait_fraction": top["wait_cost_fraction"] if top else None,
        "straggler_arrived_last_fraction": top["arrived_last_fraction"] if top else None,
        "straggler_explained_fraction": top["explains_wait_fraction"] if top else None,
        "straggler_cause_ms_per_step": top["cause_ms_per_step"] if top else None,
    }
    # the collective type with the most transfer time, and its bus bandwidth (messages >= 1 MB)
    m["comm_top_collective"] = None
    m["comm_busbw_gbps"] = None
    if t.last_rank.size:
        time_by_type = np.bincount(t.type, weights=t.transfer_ns.astype(np.float64), minlength=len(stacked.types))
        top_type = int(np.argmax(time_by_type))
        m["comm_top_collective"] = stacked.types[top_type]
        sel = (t.type == top_type) & (t.bytes >= 1 << 20) & np.isfinite(t.busbw_gbps)
        if sel.any():
            m["comm_busbw_gbps"] = median(t.busbw_gbps[sel])
    m["link_busbw_gbps"] = link_busbw_gbps(ranks)
    return m


def _ranges(nums: list[int]) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"``."""
    if not nums:
        return ""
    out, start, prev = [], nums[0], nums[0]
    for x in nums[1:] + [None]:
        if x is not None and x == prev + 1:
            prev = x
            continue
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
        if x is not None:
            start = prev = x
    return ", ".join(out[:12]) + (" ..." if len(out) > 12 else "")
