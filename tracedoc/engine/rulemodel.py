"""A validated rule, and the vocabulary a rule file is checked against.

What a rule may read depends on its scope: per-rank trace metrics and the evidence tables some analysis
produces, or the metrics and tables of a training log. ``rulefile`` checks rule files against these
and builds the :class:`Rule` values defined here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analyses.core.pipeline import declared
from ..analyses.core.registry import EVIDENCE, METRICS
from ..labels import ADVICE_LABEL
from .expr import BOOL, NUM, STR, Expr, value_type
from .template import Template
from ..logs.registry import LOG_EVIDENCE_TABLES, LOG_METRICS
from ..model.metrics import Metric
from ..job.view import JOB_EVIDENCE
from .whatifs import what_if_kind

# Evidence tables a rule may cite: those some analysis declares it produces (``@analysis(evidence=...)``).
EVIDENCE_TABLES: tuple[str, ...] = tuple(name for name in EVIDENCE if name in declared("evidence")) + JOB_EVIDENCE
# What a rule reads: per-rank trace metrics, or the metrics of a training log and its config. A rule
# is evaluated only on its own scope's metrics.
SCOPE_TRACE, SCOPE_LOG = "trace", "log"
SCOPES: dict[str, tuple[Mapping[str, Metric], tuple[str, ...]]] = {
    SCOPE_TRACE: (METRICS, EVIDENCE_TABLES),
    SCOPE_LOG: (LOG_METRICS, LOG_EVIDENCE_TABLES),
}
MAX_EVIDENCE_ROWS = 100


def metric_type(name: str, registry: Mapping[str, Metric] = METRICS) -> str:
    """Return the rule-language type of a registered metric, from its unit."""
    unit = registry[name].unit
    if unit == "bool":
        return BOOL
    if unit == "name":
        return STR
    return NUM


METRIC_TYPES: dict[str, str] = {name: metric_type(name) for name in METRICS}
LOG_METRIC_TYPES: dict[str, str] = {name: metric_type(name, LOG_METRICS) for name in LOG_METRICS}
SCOPE_TYPES = {SCOPE_TRACE: METRIC_TYPES, SCOPE_LOG: LOG_METRIC_TYPES}


@dataclass(frozen=True)
class Param:
    """A named threshold of a rule."""

    name: str
    default: Any
    unit: str
    justification: str

    @property
    def type(self) -> str:
        return value_type(self.default) or NUM


@dataclass(frozen=True)
class Fix:
    """A fix a rule suggests, and the condition under which it applies."""

    text: Template
    when: Expr | None = None


@dataclass(frozen=True)
class EvidenceSpec:
    """An evidence table a rule cites and how many of its rows."""

    table: str
    rows: int


@dataclass(frozen=True)
class Rule:
    """A validated rule, ready to evaluate."""

    id: str
    name: str
    title: str
    label: str
    severity: str
    when: Expr
    message: Template
    expect: Template
    fixes: tuple[Fix, ...]
    docs: Mapping[str, Any]
    path: Path
    impact: Expr | None = None
    params: Mapping[str, Param] = field(default_factory=dict)
    evidence: tuple[EvidenceSpec, ...] = ()
    requires_no_other_verdict: bool = False
    requires_gpu: bool = True
    what_if: str | None = None  # one of WHAT_IF_KINDS; None: the label's default (``what_if_kind``)
    tests: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)
    scope: str = SCOPE_TRACE

    @property
    def is_verdict(self) -> bool:
        return self.label != ADVICE_LABEL

    @property
    def what_if_kind(self) -> str | None:
        """How this rule's finding predicts its gain (``whatifs.what_if_kind``)."""
        return what_if_kind(self.label, self.what_if)

    @property
    def metrics_used(self) -> frozenset[str]:
        """Metric names read by the condition, impact, message, fixes and expectation."""
        names = set(self.when.names) | set(self.message.names) | set(self.expect.names)
        if self.impact is not None:
            names |= self.impact.names
        for fix in self.fixes:
            names |= fix.text.names
            if fix.when is not None:
                names |= fix.when.names
        return frozenset(n for n in names if n in SCOPES[self.scope][0])
