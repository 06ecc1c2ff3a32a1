"""The report view model: ``AnalysisResult`` -> plain dicts and lists of already formatted strings.

The HTML and Markdown renderers both render this view model; their templates only format. Every
cap on table rows, name length, steps and timeline ops lives in ``Caps``, so a renderer can shrink
its output by building the view model again with smaller caps.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..analyses.idle import CAUSES as IDLE_CAUSES
from ..model import intervals as iv
from .format import fmt_bytes, fmt_ns, fmt_pct

if TYPE_CHECKING:  # pragma: no cover
    from ..api import AnalysisResult

_CAUSE_LABELS = {"dataloader": "idle: DataLoader", "host_launch": "idle: host launch", "sync": "idle: host sync",
                 "launch_latency": "idle: launch latency", "other": "idle: other"}
SEGMENTS = (("compute", "compute"), ("exposed_comm", "exposed communication"),
            ("memcpy", "memcpy/memset (not overlapped)"),
            *((f"idle_{c}", _CAUSE_LABELS[c]) for c in IDLE_CAUSES))

LABEL_MEANINGS = {
    "io_bound": "the GPU waits on the input pipeline",
    "comm_bound": "exposed communication takes a large share of the step",
    "small_batch_bound": "the GPU is starved by the host launching many short kernels",
    "sync_bound": "host synchronizations stall the pipeline",
    "h2d_copy_bound": "host-to-device copies dominate",
    "low_tensor_core_use": "compute runs mostly outside Tensor Cores",
    "memory_pressure": "peak memory is close to the device limit",
    "compute_bound": "the GPU is busy with compute (healthy)",
    "advice": "worth a look, not a bottleneck label",
}

# Main tables: evidence table -> (title, columns shown). Finding evidence shows every column.
MAIN_TABLES = {
    "top_gaps": ("Top gaps", ("gap_ns", "start_ns", "device", "stream", "cause", "before", "after", "launched_by",
                              "launch_call", "stack")),
    "stream_gaps": ("Gaps per stream", ("device", "stream", "comm_stream", "count", "total_ns", "p50_ns", "p95_ns",
                                        "max_ns", "causes_ns")),
    "top_kernels": ("Top kernels", ("name", "category", "tensor_core", "count", "total_ns", "mean_ns", "max_ns",
                                    "share")),
    "top_operators": ("Top operators", ("name", "calls", "cpu_ns", "gpu_ops", "gpu_ns", "share")),
    "collectives": ("Collectives", ("collective", "count", "total_ns", "mean_ns", "message_bytes_p50",
                                    "message_bytes_max", "algbw_gbps", "busbw_gbps")),
    "sync_calls": ("Synchronizing calls", ("op", "call", "count", "total_ns")),
    "memory_top_allocs": ("Largest allocations by operator", ("op", "count", "total_bytes", "max_bytes")),
    "memory_per_device": ("Memory per device", ("device", "peak_allocated_bytes", "peak_reserved_bytes",
                                                 "device_memory_bytes", "peak_fraction")),
}
_COLUMN_LABELS = {
    "gap_ns": "gap", "start_ns": "at", "end_ns": "until", "ts_ns": "at", "total_ns": "time", "mean_ns": "mean",
    "max_ns": "max", "p50_ns": "p50", "p95_ns": "p95", "cpu_ns": "CPU time", "gpu_ns": "GPU time",
    "gpu_ops": "GPU ops", "before": "previous op", "after": "next op", "launched_by": "launched by",
    "launch_call": "launch call", "comm_stream": "comm stream", "causes_ns": "by cause",
    "tensor_core": "Tensor Cores", "message_bytes_p50": "msg p50", "message_bytes_max": "msg max",
    "algbw_gbps": "algbw", "busbw_gbps": "busbw", "total_bytes": "total", "max_bytes": "largest",
    "peak_allocated_bytes": "peak allocated", "peak_reserved_bytes": "peak reserved",
    "device_memory_bytes": "device memory", "peak_fraction": "peak / device", "ns": "time",
}
_WIDE_COLUMNS = frozenset({"name", "before", "after", "launched_by", "stack", "op", "call", "step", "causes_ns"})
_TEXT_COLUMNS = frozenset({"name", "before", "after", "launched_by", "launch_call", "stack", "op", "call", "cause",
                           "category", "collective", "step", "tensor_core", "kind", "causes_ns"})


@dataclass(frozen=True)
class Caps:
    """How much of each table a report shows; smaller caps make smaller reports."""

    table_rows: int = 50
    evidence_rows: int = 10
    steps: int = 200
    ranks: int = 256
    name_chars: int = 300
    curve_points: int = 600
    timeline: bool = True
    slowest_excerpt: bool = True


# -- cells ------------------------------------------------------------------------------------------


def column_label(key: str) -> str:
    if key in _COLUMN_LABELS:
        return _COLUMN_LABELS[key]
    for suffix in ("_ns", "_bytes", "_fraction"):
        if key.endswith(suffix):
            key = key[: -len(suffix)]
    return key.replace("_", " ")


def shorten(text: Any, limit: int) -> str:
    s = str(text).replace("\r", " ").replace("\n", " ")
    return s if len(s) <= limit else s[: max(1, limit - 1)] + "…"


def fmt_cell(key: str, value: Any, origin_ns: int = 0, name_chars: int = 300) -> str:
    """One table cell as text: the unit comes from the column name (``*_ns``, ``*_bytes``, ``share``...)."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, dict):
        return ", ".join(f"{str(k).replace('_', ' ')} {fmt_cell(key, v, origin_ns, name_chars)}"
                         for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return shorten("; ".join(str(v) for v in value), name_chars)
    if isinstance(value, str):
        return shorten(value, name_chars)
    if hasattr(value, "item"):
        value = value.item()
    if key in ("start_ns", "end_ns", "ts_ns"):
        return "+" + fmt_ns(value - origin_ns)
    if key.endswith("_ns") or key == "ns":
        return fmt_ns(value)
    if "bytes" in key or key in ("allocated", "reserved"):
        return fmt_bytes(value)
    if key.endswith("fraction") or key == "share":
        return fmt_pct(value)
    if key.endswith("_gbps"):
        return f"{value:.1f} GB/s"
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 1e6 else f"{value:,.0f}"
    return f"{value:,}" if isinstance(value, int) and key not in ("device", "stream", "rank") else str(value)


def build_table(title: str, rows: list[dict], columns: tuple[str, ...] | None, cap: int, origin_ns: int = 0,
                name_chars: int = 300, key: str = "") -> dict:
    """A table view: formatted string cells, at most ``cap`` rows, and how many were left out."""
    rows = list(rows or [])
    if columns is None:
        seen: dict[str, None] = {}
        for r in rows[:cap]:
            seen.update(dict.fromkeys(r))
        columns = tuple(seen)
    else:
        columns = tuple(c for c in columns if any(r.get(c) is not None for r in rows[:cap])) or columns[:1]
    shown = rows[:cap]
    return {
        "key": key, "title": title,
        "columns": [{"key": c, "label": column_label(c), "wide": c in _WIDE_COLUMNS,
                     "num": c not in _TEXT_COLUMNS and all(isinstance(r.get(c), (int, float)) or r.get(c) is None
                                                           for r in shown)} for c in columns],
        "rows": [[fmt_cell(c, r.get(c), origin_ns, name_chars) for c in columns] for r in shown],
        "total": len(rows), "left_out": max(0, len(rows) - len(shown)),
    }


def version_text(v: Any) -> str | None:
    """CUDA versions as Kineto records them (12080) -> "12.8"; strings pass through."""
    if v is None or v == "":
        return None
    if isinstance(v, int) and v >= 1000:
        return f"{v // 1000}.{(v % 1000) // 10}"
    return str(v)


# -- view model --------------------------------------------------------------------------------------


def build_report(result: "AnalysisResult", caps: Caps = Caps()) -> dict:
    """The report view model: everything the HTML and Markdown templates show, already formatted."""
    from .. import __version__
    from ..api import _rules_version

    verdicts = list(result.verdicts or [None] * len(result.ranks))
    focus = _focus_rank(verdicts) if result.ranks else None
    inputs = [{"name": os.path.basename(p), "path": p, "sha256": result.hashes.get(p) or "not computed"}
              for p in result.inputs]
    command = result.command or ("tracedoc analyze " + _shell_quote(result.inputs[0]) if len(result.inputs) == 1
                                 else "tracedoc analyze <directory of the rank traces>")
    ranks = []
    if focus is not None:
        ranks.append(build_rank(result.ranks[focus], verdicts[focus], caps))
    name = (os.path.basename(os.path.dirname(result.inputs[0])) + "/" if len(result.inputs) > 1 and result.inputs
            else "") + (inputs[0]["name"] if len(inputs) == 1 else f"{len(inputs)} rank files")
    return {
        "title": f"tracedoc · {name}" if result.inputs else "tracedoc",
        "input_name": name,
        "tracedoc_version": __version__,
        "rules_version": _rules_version() or "unknown",
        "command": command,
        "inputs": inputs,
        "rank_count": len(result.ranks),
        "multi_rank": len(result.ranks) > 1,
        "rank_table": _rank_table(result, verdicts, caps) if len(result.ranks) > 1 else None,
        "focus_rank": None if focus is None else result.ranks[focus].rank,
        "ranks": ranks,
        "overlay_href": getattr(result, "overlay_href", None),
    }


def _shell_quote(path: str) -> str:
    import shlex

    return shlex.quote(path)


def _top_impact(v) -> float:
    if v is None or not getattr(v, "findings", None):
        return 0.0
    return max((f.impact_fraction or 0.0) for f in v.findings)


def _focus_rank(verdicts: list) -> int:
    """The rank shown in detail: the one whose top finding explains the most of its step."""
    return max(range(len(verdicts)), key=lambda i: (_top_impact(verdicts[i]), -i))


def _labels(v) -> list[str]:
    return list(v.labels) if v is not None and hasattr(v, "labels") else []


def build_rank(r, v, caps: Caps) -> dict:
    m = r.metrics
    origin = int(r.window.start_ns)
    per = "step" if m.get("steps") else "window"  # without steps, impact is a share of the window
    findings = [_finding(f, caps, origin, per) for f in (getattr(v, "findings", None) or [])]
    env = r.to_dict()["environment"]
    return {
        "rank": r.rank,
        "source_name": os.path.basename(r.source),
        "header": _header_bits(r, env),
        "verdict": _verdict(v, findings),
        "findings": findings,
        "health": [{"code": h.code, "level": h.level, "message": h.message, "confidence": h.confidence}
                   for h in (getattr(v, "health", None) or [])],
        "warnings": [shorten(w, 1000) for w in r.warnings[: caps.table_rows]],
        "warnings_left_out": max(0, len(r.warnings) - caps.table_rows),
        "window": {"length": fmt_ns(m.get("window_ns")), "description": r.window.describe(),
                   "kind": r.window.kind},
        "summary": _summary(m),
        "window_bar": _window_bar(m),
        "has_gpu_ops": bool(m.get("has_gpu_ops")),
        "idle_causes": [{"cause": c, "label": _CAUSE_LABELS[c], "pct": fmt_pct(m.get(f"idle_{c}_fraction") or 0.0)}
                        for c in IDLE_CAUSES if (m.get(f"idle_{c}_fraction") or 0) >= 0.0005],
        "steps": _steps(r.per_step, caps),
        "timeline": _timeline(r.timeline.get("excerpts") or [], caps) if caps.timeline else None,
        "tables": {key: build_table(title, r.evidence.get(key) or [], cols, caps.table_rows, origin, caps.name_chars,
                                    key=key)
                   for key, (title, cols) in MAIN_TABLES.items()},
        "tensor_cores": _tensor_cores(m),
        "memory": _memory(m, r.evidence.get("memory_curve") or [], origin, caps),
        "environment": _environment(r, env),
        "metrics": [{"key": k, "value": fmt_cell(k, val) if not isinstance(val, bool) else str(val).lower()}
                    for k, val in m.items()],
    }


def _header_bits(r, env: dict) -> list[str]:
    bits = [os.path.basename(r.source)]
    if r.rank is not None:
        bits.append(f"rank {r.rank}" + (f" of {env['world_size']}" if env.get("world_size") else ""))
    if env.get("gpu"):
        n = r.metrics.get("gpu_count") or 0
        bits.append(str(env["gpu"]) + (f" ×{n}" if n > 1 else ""))
    if env.get("backend"):
        bits.append(str(env["backend"]))
    return [shorten(b, 200) for b in bits]


def _finding(f, caps: Caps, origin: int, per: str = "step") -> dict:
    frac = f.impact_fraction
    ms = f.impact_ms_per_step
    if ms is None:
        impact_ms = None
    elif per == "step":
        impact_ms = f"{ms:.1f} ms/step"
    else:
        impact_ms = f"{fmt_ns(ms * 1e6)} of the window"
    return {
        "rule_id": f.rule_id, "name": f.name, "label": f.label, "severity": f.severity, "title": f.title,
        "message": f.message, "confidence": f.confidence, "is_verdict": f.is_verdict,
        "label_meaning": LABEL_MEANINGS.get(f.label, ""),
        "impact_ms": impact_ms, "impact_of": f"the {per}",
        "impact_pct": None if frac is None else fmt_pct(frac),
        "impact_width": 0.0 if frac is None else round(max(0.0, min(1.0, frac)) * 100, 2),
        "fixes": list(f.fixes), "expect": f.expect,
        "what_if": getattr(f, "what_if_text", None),
        "what_if_method": (f.what_if or {}).get("method") if getattr(f, "what_if", None) else None,
        "evidence": [build_table(table.replace("_", " "), rows, None, caps.evidence_rows, origin, caps.name_chars,
                                 key=table)
                     for table, rows in f.evidence.items() if rows],
    }


def _verdict(v, findings: list[dict]) -> dict:
    if v is None:
        return {"status": "none", "labels": [], "confidence": None, "headline": "The rules engine did not run.",
                "impact": None, "withheld": None}
    labels = _labels(v)
    top = next((f for f in findings if f["is_verdict"]), findings[0] if findings else None)
    if v.withheld:
        status, headline = "withheld", "Verdict withheld: " + v.withheld
    elif labels:
        status, headline = "findings", top["title"] if top else ""
    elif findings:
        status, headline = "advice", f"No bottleneck label. Top advice: {findings[0]['title']}" + (
            f" ({findings[0]['impact_pct']} of {findings[0]['impact_of']})" if findings[0]["impact_pct"] else "")
    else:
        status, headline = "clean", "No rule fired: nothing in this trace explains lost step time."
    impact = None
    if top and status == "findings":
        impact = " · ".join(x for x in (top["impact_ms"], top["impact_pct"] and f"{top['impact_pct']} of {top['impact_of']}")
                            if x)
    # The box headlines the top finding, so it shows that finding's confidence (the trace-wide one,
    # the lowest any health check allows, is in the trace health list).
    confidence = top["confidence"] if status == "findings" and top else v.confidence
    return {"status": status, "labels": labels, "confidence": confidence, "headline": headline,
            "impact": impact or None, "withheld": v.withheld,
            "label_meanings": [{"label": lb, "meaning": LABEL_MEANINGS.get(lb, "")} for lb in labels]}


def _summary(m: dict) -> list[dict]:
    items = [
        ("step time p50", fmt_ns(m.get("step_time_p50_ns")) if m.get("steps") else "no steps"),
        ("GPU busy", fmt_pct(m.get("gpu_busy_fraction"))),
        ("compute", fmt_pct(m.get("compute_fraction"))),
        ("communication", fmt_pct(m.get("comm_fraction"))),
        ("exposed comm", fmt_pct(m.get("exposed_comm_fraction"))),
        ("comm overlap", fmt_pct(m.get("comm_overlap_fraction"))),
        ("memcpy", fmt_pct(m.get("memcpy_fraction"))),
        ("idle", fmt_pct(m.get("idle_fraction"))),
        ("DataLoader stall", fmt_pct(m.get("dataloader_stall_fraction"))),
        ("Tensor Core share", fmt_pct(m.get("tensor_core_fraction"))),
    ]
    return [{"label": a, "value": b} for a, b in items]


def _window_bar(m: dict) -> list[dict]:
    """The whole window as one stacked bar: compute, exposed comm, copies, idle by cause (fractions)."""
    busy = m.get("gpu_busy_fraction") or 0.0
    values = {"compute": m.get("compute_fraction") or 0.0, "exposed_comm": m.get("exposed_comm_fraction") or 0.0}
    values["memcpy"] = max(0.0, busy - values["compute"] - values["exposed_comm"])
    for c in IDLE_CAUSES:
        values[f"idle_{c}"] = m.get(f"idle_{c}_fraction") or 0.0
    return [{"key": k, "label": label, "pct": fmt_pct(values[k], 0 if values[k] >= 0.1 else 1),
             "width": round(100 * min(1.0, values[k]), 3)}
            for k, label in SEGMENTS if values[k] >= 0.005]


def _steps(per_step: list[dict], caps: Caps) -> dict:
    rows = list(per_step or [])
    shown_idx = list(range(min(len(rows), caps.steps)))
    if len(rows) > caps.steps and caps.steps > 0:
        slow = max(range(len(rows)), key=lambda i: rows[i].get("window_ns") or 0)
        if slow not in shown_idx:
            shown_idx[-1] = slow
    longest = max((rows[i].get("window_ns") or 0 for i in shown_idx), default=0) or 1
    bars = []
    for i in shown_idx:
        row = rows[i]
        total = row.get("window_ns") or 0
        busy = row.get("busy_ns") or 0
        values = {"compute": row.get("compute_ns") or 0, "exposed_comm": row.get("exposed_comm_ns") or 0}
        values["memcpy"] = max(0, busy - values["compute"] - values["exposed_comm"])
        for c in IDLE_CAUSES:
            values[f"idle_{c}"] = row.get(f"idle_{c}_ns") or 0
        segments = [{"key": k, "label": label, "ns": values[k], "time": fmt_ns(values[k]),
                     "pct": fmt_pct(values[k] / total if total else 0.0),
                     "width": round(100 * values[k] / longest, 3)}
                    for k, label in SEGMENTS if values[k] > 0]
        bars.append({"step": shorten(row.get("step", f"step {i}"), 120), "time": fmt_ns(total),
                     "width": round(100 * total / longest, 3), "segments": segments,
                     "cells": [fmt_ns(total)] + [fmt_pct(values[k] / total if total else 0.0) for k, _ in SEGMENTS]})
    return {"bars": bars, "total": len(rows), "left_out": len(rows) - len(bars),
            "legend": [{"key": k, "label": label} for k, label in SEGMENTS
                       if any(seg["key"] == k for b in bars for seg in b["segments"])],
            "columns": ["step", "time"] + [label for _, label in SEGMENTS]}


def _tensor_cores(m: dict) -> dict:
    return {"share": fmt_pct(m.get("tensor_core_fraction")),
            "unknown": fmt_pct(m.get("tensor_core_unknown_fraction")),
            "eligible_off_tc": fmt_pct(m.get("tc_eligible_non_tc_fraction")),
            "capable": {True: "yes", False: "no", None: "unknown"}.get(m.get("tensor_core_capable"), "unknown"),
            "width": round(100 * max(0.0, min(1.0, m.get("tensor_core_fraction") or 0.0)), 2),
            "unknown_width": round(100 * max(0.0, min(1.0, m.get("tensor_core_unknown_fraction") or 0.0)), 2)}


def _memory(m: dict, curve: list[dict], origin: int, caps: Caps) -> dict:
    out = {"peak_allocated": fmt_bytes(m.get("memory_peak_allocated_bytes")),
           "peak_reserved": fmt_bytes(m.get("memory_peak_reserved_bytes")),
           "device_memory": fmt_bytes(m.get("device_memory_bytes")),
           "peak_fraction": fmt_pct(m.get("memory_peak_fraction")),
           "has_data": bool(m.get("memory_peak_allocated_bytes") or curve), "curve": None}
    if not curve:
        return out
    dev = curve[0].get("device")
    pts = [p for p in curve if p.get("device") == dev]
    if len(pts) > caps.curve_points:
        step = len(pts) / caps.curve_points
        pts = [pts[int(i * step)] for i in range(caps.curve_points)] + [pts[-1]]
    t0, t1 = pts[0]["ts_ns"], pts[-1]["ts_ns"]
    top = max(max(p.get("reserved") or 0, p.get("allocated") or 0) for p in pts) or 1
    w, h = 600.0, 120.0

    def line(key: str) -> str:
        xs = [(p["ts_ns"] - t0) / (t1 - t0) * w if t1 > t0 else w * i / max(1, len(pts) - 1)
              for i, p in enumerate(pts)]
        return " ".join(f"{x:.1f},{h - (p.get(key) or 0) / top * h:.1f}" for x, p in zip(xs, pts))

    out["curve"] = {"allocated": line("allocated"), "reserved": line("reserved"), "device": dev,
                    "top": fmt_bytes(top), "span": fmt_ns(t1 - t0), "start": "+" + fmt_ns(t0 - origin),
                    "points": len(pts)}
    return out


def _environment(r, env: dict) -> list[dict]:
    m = r.metrics
    extra = r.meta.get("extra") or {}
    torch = next((extra[k] for k in ("torch_version", "pytorch_version", "torchVersion") if extra.get(k)), None)
    devices = r.meta.get("devices") or []
    rows = [
        ("GPU", env.get("gpu") or "not recorded"),
        ("devices in the trace", f"{len(devices)} described, {m.get('gpu_count') or 0} with GPU ops"),
        ("compute capability", env.get("compute_capability") or "unknown"),
        ("world size", env.get("world_size") if env.get("world_size") is not None else "unknown"),
        ("rank", r.rank if r.rank is not None else "unknown"),
        ("backend", env.get("backend") or "none recorded"),
        ("torch", torch or "not recorded in the trace"),
        ("CUDA runtime", version_text(env.get("cuda_runtime_version")) or "not recorded"),
        ("CUDA driver", version_text(env.get("cuda_driver_version")) or "not recorded"),
        ("NCCL", version_text(env.get("nccl_version")) or "not recorded"),
        ("trace format", env.get("format") or "unknown"),
        ("events", f"{env.get('events'):,}" if isinstance(env.get("events"), int) else "unknown"),
        ("steps captured", str(m.get("steps") or 0)),
        ("analysis window", f"{fmt_ns(m.get('window_ns'))}: {r.window.describe()}"),
    ]
    return [{"label": a, "value": shorten(b, 300)} for a, b in rows]


def _rank_table(result, verdicts: list, caps: Caps) -> dict:
    cols = ("rank", "file", "window", "step p50", "GPU busy", "compute", "exposed comm", "overlap", "DL stall",
            "idle", "verdict", "top impact")
    rows = []
    for r, v in zip(result.ranks[: caps.ranks], verdicts[: caps.ranks]):
        m = r.metrics
        labels = "withheld" if v is not None and v.withheld else ", ".join(_labels(v)) or "—"
        rows.append([str(r.rank) if r.rank is not None else "?", shorten(os.path.basename(r.source), 60),
                     fmt_ns(m.get("window_ns")), fmt_ns(m.get("step_time_p50_ns")) if m.get("steps") else "—",
                     fmt_pct(m.get("gpu_busy_fraction")), fmt_pct(m.get("compute_fraction")),
                     fmt_pct(m.get("exposed_comm_fraction")), fmt_pct(m.get("comm_overlap_fraction")),
                     fmt_pct(m.get("dataloader_stall_fraction")), fmt_pct(m.get("idle_fraction")), labels,
                     fmt_pct(_top_impact(v)) if v is not None and v.findings else "—"])
    return {"columns": list(cols), "rows": rows, "total": len(result.ranks),
            "left_out": max(0, len(result.ranks) - len(rows))}


# -- timeline data ------------------------------------------------------------------------------------

_TIMELINE_LABELS = {"dataloader": "DataLoader wait (CPU)", "sync": "host sync (CPU)", "memset": "memset",
                    **{f"idle_{c}": label for c, label in _CAUSE_LABELS.items()},
                    "comm_overlapped": "comm overlapped by compute", "comm_exposed": "exposed comm",
                    "critical": "critical path"}
TIMELINE_CATS = ("compute", "communication", "memcpy", "memset", "dataloader", "sync",
                 *(f"idle_{c}" for c in IDLE_CAUSES), "comm_overlapped", "comm_exposed", "critical")


def _timeline(excerpts: list[dict], caps: Caps) -> dict:
    """Excerpts as compact lanes for the page's script: items are [start, end, name index, category index]."""
    strings: list[str] = []
    index: dict[str, int] = {}

    def sid(text: str) -> int:
        text = shorten(text, caps.name_chars)
        if text not in index:
            index[text] = len(strings)
            strings.append(text)
        return index[text]

    cat = {c: i for i, c in enumerate(TIMELINE_CATS)}
    out = []
    for ex in excerpts[: 2 if caps.slowest_excerpt else 1]:
        lanes = []
        if ex.get("critical"):
            lanes.append({"label": "critical path", "group": "critical",
                          "items": [[s, e, sid(f"critical path · {what.replace('_', ' ')}"), cat["critical"]]
                                    for s, e, what in ex["critical"]]})
        if ex.get("dataloader"):
            lanes.append({"label": "CPU · DataLoader", "group": "cpu",
                          "items": [[s, e, sid("DataLoader __next__"), cat["dataloader"]] for s, e in ex["dataloader"]]})
        if ex.get("sync"):
            lanes.append({"label": "CPU · host sync", "group": "cpu",
                          "items": [[s, e, sid("synchronizing call"), cat["sync"]] for s, e in ex["sync"]]})
        comm: list[tuple[int, int]] = []
        compute: list[tuple[int, int]] = []
        for lane in ex.get("lanes") or []:
            items = []
            for op in lane["ops"]:
                c = op.get("cat", "compute")
                items.append([op["start"], op["end"], sid(op.get("name", "")), cat.get(c, 0)])
                (comm if c == "communication" else compute if c == "compute" else []).append((op["start"], op["end"]))
            lanes.append({"label": f"GPU {lane['device']} · stream {lane['stream']}", "group": "gpu", "items": items})
        idle_items = []
        for cause in IDLE_CAUSES:
            for s, e in (ex.get("idle") or {}).get(cause, []):
                idle_items.append([s, e, sid(_CAUSE_LABELS[cause]), cat[f"idle_{cause}"]])
        if idle_items:
            idle_items.sort(key=lambda it: it[0])
            lanes.append({"label": "GPU idle · by cause", "group": "idle", "items": idle_items})
        if comm:
            lanes.append({"label": "comm · overlap", "group": "overlap", "items": _overlap_items(comm, compute, sid, cat)})
        out.append({"title": ex.get("title", ""), "step": ex.get("step"), "length_ns": ex.get("length_ns", 0),
                    "length": fmt_ns(ex.get("length_ns", 0)), "ops_left_out": ex.get("ops_left_out", 0),
                    "lanes": lanes})
    used = sorted({it[3] for ex in out for lane in ex["lanes"] for it in lane["items"]})
    return {"excerpts": out, "strings": strings, "cats": list(TIMELINE_CATS),
            "legend": [{"key": TIMELINE_CATS[i], "label": _TIMELINE_LABELS.get(TIMELINE_CATS[i], TIMELINE_CATS[i])}
                       for i in used],
            "excerpts_left_out": max(0, len(excerpts) - len(out))}


def _overlap_items(comm, compute, sid, cat) -> list[list[int]]:
    c = iv.union(np.array([a for a, _ in comm]), np.array([b for _, b in comm]))
    k = iv.union(np.array([a for a, _ in compute] or [0]), np.array([b for _, b in compute] or [0]))
    items = [[int(s), int(e), sid("communication overlapped by compute"), cat["comm_overlapped"]]
             for s, e in zip(*iv.intersect(c, k))]
    items += [[int(s), int(e), sid("exposed communication (no compute running)"), cat["comm_exposed"]]
              for s, e in zip(*iv.subtract(c, k))]
    return sorted(items, key=lambda it: it[0])
