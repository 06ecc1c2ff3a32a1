"""The saved records of a diff's steps: a run's (or a rank's) typical step split by category, and a
category's part of the change. Integer nanoseconds, as every time of a saved tracedoc document.

``StepProfile`` (``steps.py``) is the working state they are read from: it also holds the completion
intervals the bootstrap interval of the change is drawn from, which the saved diff keeps only as that
interval.
"""

from __future__ import annotations

from ..analyses.core.rank import Environment
from ..model.record import Record
from .steps import CATEGORIES, StepProfile


class StepSplit(Record, kw_only=True):
    """A typical step: its time and its split by category (integer ns summing to ``step_ns``)."""

    step_ns: int  # median step time (interval between step completions), or the whole window without steps
    steps: int  # steps summarised (0: the whole window stood for one step)
    basis: str  # "steps" (completion intervals) or "window" (no steps: the whole window as one step)
    # the step by category (compute, exposed_comm, memcpy, then the idle causes), summing to step_ns
    category_ns: dict[str, int]
    # the exposed communication spent waiting for the last rank; null unless both runs have a job view
    # that measured waits
    exposed_wait_ns: int | None = None
    exposed_transfer_ns: int | None = None  # the rest of the exposed communication (transfer); null as the wait

    @property
    def comm_split(self) -> tuple[int, int] | None:
        """(wait, transfer) ns of the exposed communication; None where not measured."""
        if self.exposed_wait_ns is None or self.exposed_transfer_ns is None:
            return None
        return self.exposed_wait_ns, self.exposed_transfer_ns


class RunSide(StepSplit, kw_only=True):
    """One of the runs compared: where it came from, and its typical step (averaged over the aligned
    rank pairs)."""

    path: str  # as given
    kind: str  # "trace" (analysed for the diff) or "report" (a saved report)
    environment: Environment | None  # its focus rank's


class CategoryDelta(Record, kw_only=True):
    """A category's part of the step-time change."""

    category: str  # compute, exposed_comm, memcpy, or an idle cause
    delta_ns: int  # its part of the step-time change; the parts sum to the change


def step_split(p: StepProfile, split: tuple[int, int] | None = None) -> dict:
    """The fields of a ``StepSplit`` from a working profile (and the exposed comm's wait/transfer split)."""
    return {
        "step_ns": int(p.step_ns),
        "steps": int(p.steps),
        "basis": p.basis,
        "category_ns": {c: int(p.category_ns[c]) for c in CATEGORIES},
        "exposed_wait_ns": split[0] if split else None,
        "exposed_transfer_ns": split[1] if split else None,
    }


def attribution(before: StepSplit, after: StepSplit) -> list[CategoryDelta]:
    """Each category's part of the change, in category order; the parts sum to the change exactly."""
    return [CategoryDelta(category=c, delta_ns=after.category_ns[c] - before.category_ns[c]) for c in CATEGORIES]


def led_by(parts: dict[str, int], delta_ns: int, share: float = 0.1) -> list[str]:
    """Categories moving the same way as the step, each at least ``share`` of the change, largest first."""
    if delta_ns == 0:
        return []
    moved = [(c, v) for c, v in parts.items() if v * delta_ns > 0 and abs(v) >= share * abs(delta_ns)]
    return [c for c, _ in sorted(moved, key=lambda cv: -abs(cv[1]))]
