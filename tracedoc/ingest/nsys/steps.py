"""Steps of an nsys export: which NVTX ranges mark a step, and input-pipeline ranges."""

from __future__ import annotations

import re

import numpy as np

from ...model import trace as M
from ...model.trace import Trace

# Step ranges found by name: ProfilerStep#3, step 12, train_step, iteration_7, "iter 2", ...
# An emit_nvtx suffix (", op_id = 17", ", seq = 3", ", sizes = [...]") is allowed after the name.
_STEP_FAMILY_RE = re.compile(
    r"^\s*(?P<fam>profiler[ _]?step|train(?:ing)?[ _\-]?step|step|train[ _\-]?iter(?:ation)?|iteration|iter)"
    r"(?:[\s_#:=\-]*\d+)?\s*(?:,\s*(?:seq|op_id|sizes|stream)\b.*)?$",
    re.I,
)
_DATALOADER_RE = re.compile(r"DataLoader|DataPipe", re.I)


def _mark_steps(trace: Trace, step_range: str | None) -> None:
    """Record which NVTX range names are steps in ``meta["step_names"]``; strings are not renamed."""
    c = trace.cpu_ops
    ann = c["name"][c["kind"] == M.USER_ANNOTATION]
    if not ann.size:
        trace.meta["step_range"] = step_range
        if step_range:
            trace.warnings.append(f"{trace.source}: step_range={step_range!r} given, but the export has no NVTX ranges")
        return
    ids, counts = np.unique(ann[ann >= 0], return_counts=True)
    if step_range:
        pat = re.compile(r"^\s*" + re.escape(step_range.strip()) + r"(?:[\s_#:=\-]*\d+)?\s*(?:,.*)?$", re.I)
        chosen = [int(i) for i in ids.tolist() if pat.match(trace.strings[i])]
        trace.meta["step_range"] = step_range
        if not chosen:
            common = ", ".join(repr(trace.strings[int(i)]) for i in ids[np.argsort(-counts)][:5])
            trace.warnings.append(f"{trace.source}: no NVTX range matches step_range={step_range!r}; "
                                  f"the most frequent ranges are {common}")
    else:
        families: dict[str, list[int]] = {}
        label: dict[str, str] = {}
        count: dict[str, int] = {}
        for sid, k in zip(ids.tolist(), counts.tolist()):
            m = _STEP_FAMILY_RE.match(trace.strings[sid])
            if m:
                key = re.sub(r"[ _\-]", "", m.group("fam").lower())
                families.setdefault(key, []).append(sid)
                label.setdefault(key, m.group("fam"))
                count[key] = count.get(key, 0) + k
        if not families:
            trace.meta["step_range"] = None
            trace.meta["step_names"] = []
            return
        if "profilerstep" in families:
            best = "profilerstep"
        else:
            best = max(families, key=lambda f: (count[f], -min(families[f])))
        chosen = families[best]
        trace.meta["step_range"] = label[best]
    trace.meta["step_names"] = sorted(trace.strings[i] for i in chosen)


def _count_dataloader(trace: Trace) -> int:
    """NVTX ranges of the input pipeline (``enumerate(DataLoader)#...``, DataPipe): kept as
    USER_ANNOTATION cpu_ops under their own text; counted so reports can say they were seen."""
    c = trace.cpu_ops
    if not len(c):
        return 0
    mask = trace.string_ids(lambda s: _DATALOADER_RE.search(s) is not None)
    names = c["name"]
    ok = (names >= 0) & (c["kind"] == M.USER_ANNOTATION)
    return int(mask[names[ok]].sum()) if mask.size else 0
