"""What the rules engine concludes, as saved values: trace-health messages, findings and the verdict.

The engine (``tracedoc.engine``) produces them; reports, the diff and CI read them back from JSON.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from ..labels import ADVICE_LABEL
from .evidence import plain_rows
from .record import Record

VERDICT_SCHEMA_VERSION = 1


class HealthMessage(Record, frozen=True, kw_only=False):
    """One trace-health observation. ``affects``: the metrics it makes unreliable (None: all of them);
    findings that read one get at most ``confidence``. ``withhold``: no GPU verdict at all."""

    code: str  # slug, e.g. few-steps, missing-launch-links
    level: str  # info, warning or error
    message: str  # what was seen and what it means for the numbers
    confidence: str = "high"  # the highest confidence a finding reading an affected metric can have
    affects: tuple[str, ...] | None = None  # the metrics it makes unreliable (sorted); null: all of them
    withhold: bool = False  # no GPU verdict can be given

    def __post_init__(self) -> None:
        if self.affects is not None:
            msgspec.structs.force_setattr(self, "affects", tuple(sorted(self.affects)))

    def applies_to(self, metric_names: Iterable[str]) -> bool:
        return self.affects is None or not set(self.affects).isdisjoint(metric_names)


class Finding(Record, frozen=True, kw_only=True):
    """A rule that fired, with what it measured, what it explains and what to do."""

    rule_id: str  # e.g. TD301
    name: str  # the rule's kebab-case name
    title: str  # the problem in a line
    label: str  # a verdict label (labels.MEANINGS) or advice
    severity: str  # info, warning or error
    message: str  # what was measured, against the threshold used
    # share of the step the fix gains: the replayed gain, or today's share as an upper bound
    impact_fraction: float | None
    impact_ms_per_step: float | None  # the same in ms per step
    confidence: str  # high, medium or low: the lowest any trace-health message allows for the metrics it reads
    params: dict[str, Any] = {}  # the rule's thresholds as used
    fixes: list[str]  # what to do, most likely first
    expect: str  # what the next profile should show once fixed
    evidence: dict[str, list[Any]]  # the tables the rule cites (rows cut to the rule's limit)
    # the step time predicted once fixed: {step_ms_before, step_ms_after, gain_ms, method[, share_fraction]};
    # null for advice; step_ms_after and gain_ms null when the fix's effect is not modelled
    what_if: dict[str, Any] | None = None
    # its predicted gain (else its share of the step) is under the engine's MIN_GAIN_FRACTION: listed, but
    # its label is not part of the verdict
    minor: bool = False

    def __repr__(self) -> str:
        impact = f", {self.impact_fraction:.1%} of the step" if self.impact_fraction is not None else ""
        return f"<Finding {self.rule_id} {self.label}{impact}: {self.title}>"

    def table(self, name: str):
        """One of this finding's evidence tables as a pandas DataFrame."""
        import pandas as pd

        if name not in self.evidence:
            raise KeyError(
                f"no evidence table {name!r} in {self.rule_id}; tables: {', '.join(sorted(self.evidence)) or 'none'}"
            )
        return pd.DataFrame(plain_rows(self.evidence[name]))

    @property
    def is_verdict(self) -> bool:
        """The finding names a verdict label of the run: a label rule that predicts a gain worth one."""
        return self.label != ADVICE_LABEL and not self.minor


def verdict_labels(findings: Iterable[Finding]) -> list[str]:
    """Verdict labels (not advice) in the order of the findings, each once."""
    out: list[str] = []
    for finding in findings:
        if finding.is_verdict and finding.label not in out:
            out.append(finding.label)
    return out


class Verdict(Record, kw_only=True):
    """The engine's answer for one rank (or the job): health messages, findings ranked by impact, and
    the labels they carry (derived from the findings, most impactful first)."""

    schema_version: int = VERDICT_SCHEMA_VERSION  # of the verdict's own layout
    labels: list[str] = []  # verdict labels (not advice) of the findings, most impactful first
    confidence: str  # the lowest confidence any health message allows
    withheld: str | None = None  # why no GPU verdict was given, when none was
    step_time_ns: float | None = None  # the step the findings' shares are of
    health: list[HealthMessage]  # trace-health messages, checked before any rule
    findings: list[Finding]  # ranked by the share of the step they explain

    def __post_init__(self) -> None:
        self.labels = verdict_labels(self.findings)

    def __repr__(self) -> str:
        state = f"withheld: {self.withheld}" if self.withheld else ", ".join(self.labels) or "no finding"
        return (
            f"<Verdict {state[:200]} (confidence {self.confidence}; {len(self.findings)} findings, "
            f"{len(self.health)} health messages)>"
        )

    def with_findings(self, findings: list[Finding]) -> "Verdict":
        """This verdict with other findings (and the labels they carry)."""
        return Verdict(
            confidence=self.confidence,
            withheld=self.withheld,
            step_time_ns=self.step_time_ns,
            health=self.health,
            findings=findings,
        )

    @property
    def top_label(self) -> str | None:
        return self.labels[0] if self.labels else None

    @property
    def top_impact_fraction(self) -> float:
        """The largest share of the step any finding explains (0 without findings)."""
        return max(((f.impact_fraction or 0.0) for f in self.findings), default=0.0)
