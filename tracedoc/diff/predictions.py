"""The base run's what-if predictions, checked against the run that followed.

Every finding of the base run that predicts a step time once fixed (``Finding.what_if`` with a
``step_ms_after``) is looked up in the new run by its rule and given a status:

- ``gone``: the rule no longer fires in the new run: the fix was made (or the problem went away);
- ``reduced`` / ``grew``: it still fires, and the step time it explains (the finding's ``impact_ms_per_step``) moved
  by more than the diff's noise floor (``noise_pct`` of the base step), down or up;
- ``still_present``: it still fires and its share moved less than that: the fix was not made.

Beside the prediction (the base's step before and after the fix, as the replay computed it) stands the
step the new run measured: for a finding that went, how close the prediction came; for one that stayed,
what the run would have gained. Measured steps are the diff's (median completion intervals), the same
quantity the prediction replays.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..model.record import Record
from ..model.verdict import Finding

STATUSES = ("gone", "reduced", "grew", "still_present")
ADDRESSED = ("gone", "reduced")


class PredictionCheck(Record, kw_only=True):
    """A prediction of the base run's finding, beside what the new run measured."""

    rule_id: str  # the base finding's rule
    name: str  # the rule's name (dataloader-stall, ...)
    label: str  # its label (io_bound, ...; advice for a rule that gives no verdict label)
    title: str  # the problem in a line
    status: str  # gone, reduced, grew or still_present in the new run
    method: str  # how the base report predicted the step once fixed (the replay, or an upper bound)
    predicted_before_ns: float  # the base step the prediction starts from
    predicted_after_ns: float  # the base step predicted once this finding is fixed
    measured_before_ns: float  # the base run's step, as the diff measures it
    measured_after_ns: float  # the new run's step, as the diff measures it
    impact_before_ns: float | None  # the step time the finding explained in the base run (per step)
    impact_after_ns: float | None  # the same rule's in the new run; null when it no longer fires
    # measured_after_ns - predicted_after_ns for a finding that was addressed (gone or reduced); null otherwise
    error_ns: float | None

    @property
    def addressed(self) -> bool:
        return self.status in ADDRESSED


def _predicted(f: Finding) -> tuple[int, int] | None:
    """The finding's what-if (ms in the analysis report, to 0.1 us) as ns."""
    w = f.what_if or {}
    before, after = w.get("step_ms_before"), w.get("step_ms_after")
    if (
        not isinstance(before, (int, float))
        or not isinstance(after, (int, float))
        or isinstance(before, bool)
        or isinstance(after, bool)
    ):
        return None
    return round(before * 1e6), round(after * 1e6)


def _ns(ms: float | None) -> float | None:
    """A finding's time per step (ms in the analysis report) as ns."""
    return None if ms is None else ms * 1e6


def check_predictions(
    before: Iterable[Finding], after: Iterable[Finding], step_before_ns: float, step_after_ns: float, noise_pct: float
) -> list[PredictionCheck]:
    """The base's findings that predict a step once fixed, each with its status in the new run and the step
    measured there; largest predicted gain first."""
    later = {}
    for f in after:
        later.setdefault(f.rule_id, f)
    tolerance_ns = noise_pct / 100.0 * step_before_ns
    out = []
    for f in before:
        predicted = _predicted(f)
        if predicted is None:
            continue
        g = later.get(f.rule_id)
        b_ns = _ns(f.impact_ms_per_step)
        a_ns = _ns(g.impact_ms_per_step) if g is not None else None
        if g is None:
            status = "gone"
        elif b_ns is None or a_ns is None or abs(a_ns - b_ns) <= tolerance_ns:
            status = "still_present"
        else:
            status = "reduced" if a_ns < b_ns else "grew"
        out.append(
            PredictionCheck(
                rule_id=f.rule_id,
                name=f.name,
                label=f.label,
                title=f.title,
                status=status,
                method=str((f.what_if or {}).get("method") or ""),
                predicted_before_ns=predicted[0],
                predicted_after_ns=predicted[1],
                measured_before_ns=step_before_ns,
                measured_after_ns=step_after_ns,
                impact_before_ns=b_ns,
                impact_after_ns=a_ns,
                error_ns=step_after_ns - predicted[1] if status in ADDRESSED else None,
            )
        )
    out.sort(key=lambda p: -(p.predicted_before_ns - p.predicted_after_ns))
    return out
