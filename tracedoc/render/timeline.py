"""The timeline excerpts as the HTML page script's data: compact lanes of [start, end, name, category].

Plain JSON (it is embedded in the page as ``<script type="application/json">``), not view dataclasses.
"""

from __future__ import annotations

import numpy as np

from ..analyses.gputime.idle import CAUSES as IDLE_CAUSES
from ..model import intervals as iv
from .cells import shorten
from .format import fmt_ns
from .views import Caps

CAUSE_LABELS = {
    "dataloader": "idle: DataLoader",
    "host_launch": "idle: host launch",
    "sync": "idle: host sync",
    "launch_latency": "idle: launch latency",
    "other": "idle: other",
}
_TIMELINE_LABELS = {
    "dataloader": "DataLoader wait (CPU)",
    "sync": "host sync (CPU)",
    "memset": "memset",
    **{f"idle_{c}": label for c, label in CAUSE_LABELS.items()},
    "comm_overlapped": "comm overlapped by compute",
    "comm_exposed": "exposed comm",
    "critical": "critical path",
}
TIMELINE_CATS = (
    "compute",
    "communication",
    "memcpy",
    "memset",
    "dataloader",
    "sync",
    *(f"idle_{c}" for c in IDLE_CAUSES),
    "comm_overlapped",
    "comm_exposed",
    "critical",
)


def build_timeline(excerpts: list[dict], caps: Caps) -> dict:
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
            lanes.append(
                {
                    "label": "critical path",
                    "group": "critical",
                    "items": [
                        [s, e, sid(f"critical path · {what.replace('_', ' ')}"), cat["critical"]]
                        for s, e, what in ex["critical"]
                    ],
                }
            )
        if ex.get("dataloader"):
            lanes.append(
                {
                    "label": "CPU · DataLoader",
                    "group": "cpu",
                    "items": [[s, e, sid("DataLoader __next__"), cat["dataloader"]] for s, e in ex["dataloader"]],
                }
            )
        if ex.get("sync"):
            lanes.append(
                {
                    "label": "CPU · host sync",
                    "group": "cpu",
                    "items": [[s, e, sid("synchronizing call"), cat["sync"]] for s, e in ex["sync"]],
                }
            )
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
                idle_items.append([s, e, sid(CAUSE_LABELS[cause]), cat[f"idle_{cause}"]])
        if idle_items:
            idle_items.sort(key=lambda it: it[0])
            lanes.append({"label": "GPU idle · by cause", "group": "idle", "items": idle_items})
        if comm:
            lanes.append(
                {"label": "comm · overlap", "group": "overlap", "items": _overlap_items(comm, compute, sid, cat)}
            )
        out.append(
            {
                "title": ex.get("title", ""),
                "step": ex.get("step"),
                "length_ns": ex.get("length_ns", 0),
                "length": fmt_ns(ex.get("length_ns", 0)),
                "ops_left_out": ex.get("ops_left_out", 0),
                "lanes": lanes,
            }
        )
    used = sorted({it[3] for ex in out for lane in ex["lanes"] for it in lane["items"]})
    return {
        "excerpts": out,
        "strings": strings,
        "cats": list(TIMELINE_CATS),
        "legend": [
            {"key": TIMELINE_CATS[i], "label": _TIMELINE_LABELS.get(TIMELINE_CATS[i], TIMELINE_CATS[i])} for i in used
        ],
        "excerpts_left_out": max(0, len(excerpts) - len(out)),
    }


def _overlap_items(comm, compute, sid, cat) -> list[list[int]]:
    c = iv.union(np.array([a for a, _ in comm]), np.array([b for _, b in comm]))
    k = iv.union(np.array([a for a, _ in compute] or [0]), np.array([b for _, b in compute] or [0]))
    items = [
        [int(s), int(e), sid("communication overlapped by compute"), cat["comm_overlapped"]]
        for s, e in zip(*iv.intersect(c, k))
    ]
    items += [
        [int(s), int(e), sid("exposed communication (no compute running)"), cat["comm_exposed"]]
        for s, e in zip(*iv.subtract(c, k))
    ]
    return sorted(items, key=lambda it: it[0])
