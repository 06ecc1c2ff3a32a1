"""Checks that a report does not contradict itself: every figure and table drawn from the report's window
and steps, and agreeing with the numbers beside it. Used on built traces and on every shared trace."""

from __future__ import annotations

from types import SimpleNamespace

from tracedoc.checks import BUG_PREFIX
from tracedoc.model.evidence import cell
from tracedoc.render.efficiency import efficiency_items
from tracedoc.render.format import fmt_pct
from tracedoc.render.format import fmt_ns
from tracedoc.render.stepview import NO_STEP_TIME, build_steps, steps_text
from tracedoc.render.viewmodel import rank_row


def disagreements(rank) -> list[str]:
    """What in one rank's result contradicts another number of the same result (empty: nothing)."""
    bad = [w for w in rank.warnings if BUG_PREFIX in w]
    m, ev = rank.metrics, rank.evidence
    # the window line counts the steps (or iterations) the step time comes from, and states it
    p50 = m.get("step_time_p50_ns")
    if p50 is not None and fmt_ns(p50) not in steps_text(m):
        bad.append(f"the window line says {steps_text(m)!r}; the step p50 is {fmt_ns(p50)}")
    # per-step rows: measured over the step time, so a timed step's quantities fit inside it
    for row in rank.per_step:
        t, span = row.get("step_time_ns"), row.get("window_ns")
        if t is not None and span != t:
            bad.append(f"{row['step']}: measured over {span} ns, its step time is {t} ns")
        if span is not None and (row.get("busy_ns") or 0) > span:
            bad.append(f"{row['step']}: busy {row['busy_ns']} ns in a {span} ns step")
    # the per-step bars: a bar's length follows the time written beside it
    view = build_steps(rank.per_step, SimpleNamespace(steps=len(rank.per_step)))
    timed = [(b.width, r["step_time_ns"]) for b, r in zip(view.bars, rank.per_step) if r.get("step_time_ns")]
    by_width = [t for _, t in sorted(timed)]  # the times, shortest bar first: they must not fall
    for t1, t2 in zip(by_width, by_width[1:]):
        if t2 < t1:
            bad.append(f"a bar for {t2} ns is drawn longer than one for {t1} ns")
    for b, r in zip(view.bars, rank.per_step):
        if r.get("step_time_ns") is None and "step_time_ns" in r and (b.time != NO_STEP_TIME or b.width):
            bad.append(f"{r['step']} has no step time but its bar says {b.time} and is {b.width}% long")
    # the timeline's representative step is one of the report's steps, as long as its step time
    times = [r["step_time_ns"] for r in rank.per_step if r.get("step_time_ns") is not None]
    for ex in (rank.timeline or {}).get("excerpts") or []:
        if ex["title"] in ("representative step", "slowest step") and ex["length_ns"] not in times:
            bad.append(f"timeline {ex['title']} {ex['step']} is {ex['length_ns']} ns; step times are {times}")
        if ex["title"] == "representative step" and times and not min(times) <= ex["length_ns"] <= max(times):
            bad.append(f"representative step {ex['length_ns']} ns outside the step times")
    # operator tables: the calls behind the GPU time are counted in the same window
    for table in ("top_operators", "operators_by_shape", "operators_by_module"):
        for row in ev.get(table) or []:
            if cell(row, "gpu_ops") and not cell(row, "calls"):
                bad.append(
                    f"{table}: {cell(row, 'name') or cell(row, 'module')} launched {cell(row, 'gpu_ops')} GPU "
                    f"ops in {cell(row, 'calls')} calls"
                )
    # FLOP rates: none above the peak of its dtype
    for table, key in (
        ("flops_by_kernel_class", "kernel_class"),
        ("flops_by_op_class", "op_class"),
        ("roofline", "op"),
    ):
        for row in ev.get(table) or []:
            tf, peak = cell(row, "tflops"), cell(row, "peak_tflops")
            if table == "roofline" and cell(row, "bound") != "compute":
                continue
            if tf is not None and peak and tf > peak * (1 + 1e-9):
                bad.append(f"{table}: {cell(row, key)} at {tf:.1f} TFLOP/s, above its {peak} TFLOP/s peak")
    # one MFU: the summary, the evidence and the verdict's low_mfu say the same number
    summary = (ev.get("flops_summary") or [None])[0]
    if summary is not None and summary.mfu is not None and summary.mfu != m.get("mfu"):
        bad.append(f"flops_summary MFU {summary.mfu} != metrics MFU {m.get('mfu')}")
    items = dict(efficiency_items(m, ev))
    if m.get("mfu") is not None and not items.get("MFU", "").startswith(fmt_pct(m["mfu"])):
        bad.append(f"summary says MFU {items.get('MFU')}, metrics.mfu is {m['mfu']}")
    for f in rank.verdict.findings if rank.verdict else []:
        if f.label == "low_mfu":
            if m.get("mfu") is not None and f"MFU {m['mfu']:.1%}" not in f.message:
                bad.append(f"low_mfu says {f.message[:120]!r}; metrics.mfu is {m['mfu']:.1%}")
            if (f.what_if or {}).get("step_ms_after") is not None:
                bad.append(f"low_mfu predicts a step of {f.what_if['step_ms_after']} ms it cannot model")
    return bad


def job_disagreements(result) -> list[str]:
    """The job's rank tables against each other: a rank's step p50 shown wherever it is known."""
    if result.job is None:
        return []
    bad = [i for i in result.job.issues if BUG_PREFIX in i]
    for row in result.job.ranks:
        shown = rank_row(row, False)[3]
        if row.step_time_p50_ns is not None and shown != fmt_ns(row.step_time_p50_ns):
            bad.append(
                f"rank {row.rank}: the rank table shows step p50 {shown}, the job table {fmt_ns(row.step_time_p50_ns)}"
            )
    return bad
