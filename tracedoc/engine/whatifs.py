"""What a finding's what-if is (a rule's ``what_if``): a critical-path replay of one fix, today's share of
the step as an upper bound, the rule's impact formula as an estimate, or nothing (the fix's effect cannot
be told from the trace); and each verdict label's default."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..analyses.critical_path.whatif import FIXES
from ..labels import ADVICE_LABEL
from .expr import suggest

WHAT_IF_SHARE, WHAT_IF_ESTIMATE, WHAT_IF_NONE = "share", "estimate", "none"
REPLAYED: tuple[str, ...] = tuple(FIXES)
WHAT_IF_KINDS: tuple[str, ...] = REPLAYED + (WHAT_IF_SHARE, WHAT_IF_ESTIMATE, WHAT_IF_NONE)
# Without ``what_if``: the replay of the fix a label stands for; other labels, today's share; advice, none.
LABEL_WHAT_IF = {
    "io_bound": "dataloader",
    "sync_bound": "sync",
    "comm_bound": "comm",
    "small_batch_bound": "launch",
    "host_bound": "host",
    "straggler_bound": "straggler",
    "compute_bound": WHAT_IF_NONE,
    "memory_pressure": WHAT_IF_NONE,
}


def what_if_kind(label: str, what_if: str | None) -> str | None:
    """How a rule's finding predicts its gain: the rule's ``what_if``, else its label's default
    (``LABEL_WHAT_IF``; other verdict labels: today's share; advice: no what-if)."""
    if what_if is not None:
        return what_if
    if label == ADVICE_LABEL:
        return None
    return LABEL_WHAT_IF.get(label, WHAT_IF_SHARE)


def rule_what_if(data: Mapping[str, Any], checker: Any) -> str | None:
    """A rule file's ``what_if`` (``replays_label_fix = false``, its older spelling, means ``share``),
    its problems told to ``checker`` (the rule file's ``_FileChecker``)."""
    legacy = data.get("replays_label_fix")
    if legacy is not None and checker.typed("replays_label_fix", legacy, bool, "true or false") and not legacy:
        if "what_if" in data:
            checker.problem(
                "replays_label_fix",
                'give what_if alone (replays_label_fix = false is its older spelling of what_if = "share")',
            )
        return WHAT_IF_SHARE
    value = data.get("what_if")
    if value is None:
        return None
    if not checker.typed("what_if", value, str, "a string"):
        return None
    if value not in WHAT_IF_KINDS:
        checker.problem(
            "what_if", f"unknown what-if {value!r}{suggest(value, WHAT_IF_KINDS)}; one of: {', '.join(WHAT_IF_KINDS)}"
        )
        return None
    if value == WHAT_IF_NONE and data.get("label") == ADVICE_LABEL:
        return None
    return value
