"""Steps chosen by range name (nsys NVTX ranges), and input-pipeline ranges, for every reader.

Torch.profiler traces name their steps ``ProfilerStep#N`` and need no choice; other sources name
them freely, and ``mark_steps`` records which names are steps so that the analyses find them.
"""

from __future__ import annotations

import numpy as np

from ..model import trace as M
from ..model import vocab as V
from ..model.trace import MATCH_CHARS, Trace


def mark_steps(trace: Trace, step_range: str | None) -> None:
    """Record which range names are steps in ``meta.step_names``; strings are not renamed.

    ``step_range`` names the range (with an optional number and suffix); without it the ranges are
    grouped into step families by name (``vocab.STEP_FAMILY_RE``) and ``ProfilerStep`` wins, else the
    most frequent family.
    """
    c = trace.cpu_ops
    ann = c["name"][c["kind"] == M.USER_ANNOTATION]
    if not ann.size:
        trace.meta.step_range = step_range
        if step_range:
            trace.warnings.append(f"{trace.source}: step_range={step_range!r} given, but the export has no NVTX ranges")
        return
    ids, counts = np.unique(ann[ann >= 0], return_counts=True)
    if step_range:
        pat = V.user_step_range_re(step_range)
        chosen = ids[trace.string_ids(pat.match, ids)[ids]].tolist()
        trace.meta.step_range = step_range
        if not chosen:
            common = ", ".join(repr(trace.strings[int(i)]) for i in ids[np.argsort(-counts)][:5])
            trace.warnings.append(
                f"{trace.source}: no NVTX range matches step_range={step_range!r}; "
                f"the most frequent ranges are {common}"
            )
    else:
        families: dict[str, list[int]] = {}
        label: dict[str, str] = {}
        count: dict[str, int] = {}
        named = trace.string_ids(V.STEP_FAMILY_RE.match, ids)[ids]  # the few names of a step family
        for sid, k in zip(ids[named].tolist(), counts[named].tolist()):
            m = V.STEP_FAMILY_RE.match(trace.strings[sid][:MATCH_CHARS])
            if m:
                key = V.STEP_FAMILY_SEPARATORS_RE.sub("", m.group("fam").lower())
                families.setdefault(key, []).append(sid)
                label.setdefault(key, m.group("fam"))
                count[key] = count.get(key, 0) + k
        if not families:
            trace.meta.step_range = None
            trace.meta.step_names = []
            return
        if "profilerstep" in families:
            best = "profilerstep"
        else:
            best = max(families, key=lambda f: (count[f], -min(families[f])))
        chosen = families[best]
        trace.meta.step_range = label[best]
    trace.meta.step_names = sorted(trace.strings[i] for i in chosen)


def count_dataloader_ranges(trace: Trace) -> int:
    """NVTX ranges of the input pipeline (``enumerate(DataLoader)#...``, DataPipe): kept as
    USER_ANNOTATION cpu_ops under their own text; counted so reports can say they were seen."""
    c = trace.cpu_ops
    if not len(c):
        return 0
    mask = trace.string_ids(V.DATALOADER_RE.search, c["name"])
    names = c["name"]
    ok = (names >= 0) & (c["kind"] == M.USER_ANNOTATION)
    return int(mask[names[ok]].sum()) if mask.size else 0
