"""The input pipeline: the main thread's DataLoader ``__next__`` spans and whether the iterator is multi-process."""

from __future__ import annotations

import numpy as np

from ...model import intervals as iv
from ...model import trace as M
from ...model import vocab as V
from ...model.evidence import DataLoaderSpan
from ...model.groups import distinct, isin
from ...model.trace import MATCH_CHARS, Trace
from ..kernels import classify as C
from ..core.registry import Produced, analysis


def dataloader_spans(trace: Trace) -> tuple[iv.IntervalSet, bool | None, list[str]]:
    """Union of DataLoader ``__next__`` spans, whether the iterator is multi-process, and the names seen."""
    c = trace.cpu_ops
    if not len(c):
        return iv.empty(), None, []
    names = C.name_mask(trace, V.DATALOADER_RE, ids=c["name"])
    rows = np.flatnonzero(names[c["name"]] & isin(c["kind"], (M.CPU_OP, M.USER_ANNOTATION, M.PYTHON_FUNCTION)))
    if not rows.size:
        return iv.empty(), None, []
    seen = [trace.string(int(i)) for i in distinct(c["name"][rows])]
    multi = any(V.MULTIPROC_DATALOADER_RE.search(s[:MATCH_CHARS]) for s in seen)
    single = any(V.SINGLEPROC_DATALOADER_RE.search(s[:MATCH_CHARS]) for s in seen)
    kind = True if multi else (False if single else None)
    return iv.union(c["start_ns"][rows], c["end_ns"][rows]), kind, seen


@analysis(provides=("dataloader_spans",), produces=("dataloader_multiprocess",), evidence=("dataloader",))
def input_pipeline(trace: Trace, inputs) -> Produced:
    spans, multi, names = dataloader_spans(trace)
    return Produced(
        metrics={"dataloader_multiprocess": multi},
        evidence={"dataloader": [DataLoaderSpan(name=n) for n in names]},
        values={"dataloader_spans": spans},
    )
