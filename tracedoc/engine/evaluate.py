"""Evaluate rules against one rank's metrics.

Input: the metrics dict (names from ``tracedoc.analyses.registry.METRICS``; None = not measurable),
evidence tables, the step time (the median), threshold overrides and extra rule directories.
Output: a :class:`Verdict` holding trace-health messages and findings ranked by the share of the
step each one explains.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tracedoc.engine.health import HealthMessage, check_health, host_verdict_allowed, lowest
from tracedoc.engine.params import resolve_params
from tracedoc.engine.rulefile import (ADVICE_LABEL, REPLAYED, SCOPE_TRACE, SEVERITIES, WHAT_IF_ESTIMATE, WHAT_IF_NONE,
                                      WHAT_IF_SHARE, Rule, load_rules)

# Why a label's fix cannot be predicted from the trace ("not modelled: ...").
NOT_MODELLED = {
    "compute_bound": "faster kernels (fusion, better attention kernels, lower precision) change kernel durations, "
                     "which the trace cannot tell in advance",
    "memory_pressure": "memory use changes no recorded duration",
    "": "the fix changes what the trace cannot tell in advance",
}

SCHEMA_VERSION = 1
# A finding carries its verdict label only when its what-if predicts at least this share of the step
# (DESIGN.md, round 3); below it the finding is minor. Where no gain can be predicted at all, its share
# of the step decides.
MIN_GAIN_FRACTION = 0.02


@dataclass(frozen=True)
class Finding:
    """A rule that fired, with what it measured, what it explains and what to do."""

    rule_id: str
    name: str
    title: str
    label: str
    severity: str
    message: str
    impact_fraction: float | None
    impact_ms_per_step: float | None
    evidence: dict[str, list[dict[str, Any]]]
    fixes: list[str]
    expect: str
    confidence: str
    params: dict[str, Any] = field(default_factory=dict)
    what_if: dict[str, Any] | None = None  # {step_ms_before, step_ms_after, gain_ms, method}
    # under MIN_GAIN_FRACTION of the step: listed, but its label is not part of the verdict
    minor: bool = False

    def __repr__(self) -> str:
        impact = f", {self.impact_fraction:.1%} of the step" if self.impact_fraction is not None else ""
        return f"<Finding {self.rule_id} {self.label}{impact}: {self.title}>"

    def table(self, name: str):
        """One of this finding's evidence tables as a pandas DataFrame."""
        import pandas as pd

        if name not in self.evidence:
            raise KeyError(f"no evidence table {name!r} in {self.rule_id}; tables: {', '.join(sorted(self.evidence)) or 'none'}")
        return pd.DataFrame(self.evidence[name])

    @property
    def is_verdict(self) -> bool:
        """The finding names a verdict label of the run: a label rule that predicts a gain worth one."""
        return self.label != ADVICE_LABEL and not self.minor

    @property
    def what_if_text(self) -> str | None:
        """``step 176 ms → ~121 ms, −31%`` (an upper bound says so)."""
        return self.what_if_line()

    def what_if_line(self, per: str = "step") -> str | None:
        """The prediction in words; ``per`` names the repeating unit (``iteration`` without step spans)."""
        w = self.what_if
        if not w or not w.get("step_ms_before"):
            return None
        before, after = w["step_ms_before"], w["step_ms_after"]
        if after is None:  # the fix's effect cannot be modelled from the trace
            return f"{per} {_ms(before)} → not predicted ({w['method'].removeprefix('not modelled: ')})"
        pct = 100.0 * (after - before) / before
        bound = w["method"].startswith("upper bound")
        return (f"{per} {_ms(before)} → {'≥ ' if bound else '~'}{_ms(after)}, "
                f"{'up to ' if bound else ''}−{abs(pct):.0f}%" + (" (upper bound)" if bound else ""))

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule_id": self.rule_id,
            "name": self.name,
            "title": self.title,
            "label": self.label,
            "severity": self.severity,
            "message": self.message,
            "impact_fraction": self.impact_fraction,
            "impact_ms_per_step": self.impact_ms_per_step,
            "confidence": self.confidence,
            "params": dict(self.params),
            "fixes": list(self.fixes),
            "expect": self.expect,
            "evidence": {k: [dict(r) for r in v] for k, v in self.evidence.items()},
            "what_if": dict(self.what_if) if self.what_if is not None else None,
            "minor": self.minor,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Finding":
        """The finding a saved report holds (the inverse of ``to_dict``)."""
        return cls(rule_id=d["rule_id"], name=d["name"], title=d["title"], label=d["label"], severity=d["severity"],
                   message=d["message"], impact_fraction=d["impact_fraction"],
                   impact_ms_per_step=d["impact_ms_per_step"],
                   evidence={k: [dict(r) for r in v] for k, v in d["evidence"].items()}, fixes=list(d["fixes"]),
                   expect=d["expect"], confidence=d["confidence"], params=dict(d.get("params") or {}),
                   what_if=dict(d["what_if"]) if d.get("what_if") is not None else None,
                   minor=bool(d.get("minor", False)))


def _ms(value: float) -> str:
    return f"{value:.0f} ms" if value >= 10 else f"{value:.2g} ms"


@dataclass
class Verdict:
    """The engine's answer for one rank."""

    findings: list[Finding]
    health: list[HealthMessage]
    confidence: str
    withheld: str | None = None
    step_time_ns: float | None = None

    def __repr__(self) -> str:
        state = f"withheld: {self.withheld}" if self.withheld else ", ".join(self.labels) or "no finding"
        return (f"<Verdict {state[:200]} (confidence {self.confidence}; {len(self.findings)} findings, "
                f"{len(self.health)} health messages)>")

    @property
    def labels(self) -> list[str]:
        """Verdict labels (not advice), most impactful first."""
        out: list[str] = []
        for finding in self.findings:  # already ranked
            if finding.is_verdict and finding.label not in out:
                out.append(finding.label)
        return out

    @property
    def top_label(self) -> str | None:
        labels = self.labels
        return labels[0] if labels else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "labels": self.labels,
            "confidence": self.confidence,
            "withheld": self.withheld,
            "step_time_ns": self.step_time_ns,
            "health": [m.to_dict() for m in self.health],
            "findings": [f.to_dict() for f in self.findings],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Verdict":
        """The verdict a saved report holds; ``labels`` is derived from the findings again."""
        return cls(findings=[Finding.from_dict(f) for f in d["findings"]],
                   health=[HealthMessage.from_dict(h) for h in d["health"]], confidence=d["confidence"],
                   withheld=d["withheld"], step_time_ns=d["step_time_ns"])

    @property
    def top_impact_fraction(self) -> float:
        """The largest share of the step any finding explains (0 without findings)."""
        return max(((f.impact_fraction or 0.0) for f in self.findings), default=0.0)


def _plain(value: Any) -> Any:
    """Turn numpy scalars into Python values and NaN into None."""
    if value is not None and not isinstance(value, (bool, int, float, str)) and hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def evaluate(
    metrics: Mapping[str, Any],
    evidence: Mapping[str, list[Mapping[str, Any]]] | None = None,
    step_time_ns: float | None = None,
    params: Mapping[str, Any] | None = None,
    extra_rule_dirs: Iterable[str | Path] = (),
    *,
    rules: list[Rule] | None = None,
    scope: str = SCOPE_TRACE,
    what_ifs: Mapping[str, Mapping[str, Any]] | None = None,
    what_if_unavailable: str | None = None,
) -> Verdict:
    """Run trace-health checks, then every rule; return findings ranked by impact.

    ``what_ifs`` maps a fix (``dataloader``, ``sync``, ``comm``, ``launch``, ``batch``, ``host``,
    ``straggler``; a verdict label is accepted too) to the replayed prediction
    (``{step_ms_before, step_ms_after, gain_ms, method}``). Each rule names the fix its finding
    recommends (its ``what_if``); the finding's impact becomes that replay's gain, framed on the
    report's step. Without a replay the finding keeps its share of the step, reported as an upper
    bound (``what_if_unavailable`` says why no replay was possible), or as the rule's own estimate, or
    as not modelled. A verdict finding whose predicted gain is under ``MIN_GAIN_FRACTION`` of the step
    is minor: listed, without a place in the verdict's labels.

    ``params`` maps ``"RULE.param"`` (rule id or name) to a value and overrides defaults.
    ``step_time_ns`` (default: the ``step_time_p50_ns`` metric, the report's one step time) converts impact fractions into
    milliseconds per step. ``rules`` replaces loading from disk (for tests and embedding).
    Only the rules of ``scope`` are evaluated: ``"trace"`` (per-rank trace metrics) or ``"log"``
    (training-log metrics); trace-health checks run for traces only.
    """
    if rules is None:
        rules = load_rules(extra_rule_dirs)
    values = resolve_params(rules, params)
    rules = [rule for rule in rules if rule.scope == scope]
    env_metrics = {name: _plain(value) for name, value in metrics.items()}
    if step_time_ns is None:
        step_time_ns = env_metrics.get("step_time_p50_ns")
    step_time_ns = _plain(step_time_ns)
    evidence = evidence or {}
    health = check_health(env_metrics) if scope == SCOPE_TRACE else []
    withheld = next((m.message for m in health if m.withhold), None)

    findings: list[Finding] = []
    deferred: list[Rule] = []

    def predict(finding: Finding, rule: Rule) -> Finding:  # step-time what-ifs are for trace findings only
        if scope != SCOPE_TRACE:
            return finding
        return _minor(_with_what_if(finding, rule.what_if_kind, what_ifs, what_if_unavailable, step_time_ns),
                      step_time_ns)

    for rule in rules:
        if withheld is not None and rule.requires_gpu:
            continue
        if rule.requires_no_other_verdict:
            deferred.append(rule)
            continue
        finding = _apply(rule, env_metrics, values[rule.id], evidence, step_time_ns, health)
        if finding is not None:
            findings.append(predict(finding, rule))
    if not any(f.is_verdict for f in findings):
        for rule in deferred:
            finding = _apply(rule, env_metrics, values[rule.id], evidence, step_time_ns, health)
            if finding is not None:
                findings.append(predict(finding, rule))
    findings.sort(key=_rank_key)
    if withheld is not None and host_verdict_allowed(health) and any(f.is_verdict for f in findings):
        withheld = None  # a run on the CPU alone: the host-side evidence gives the verdict, GPU rules stay silent
    return Verdict(
        findings=findings,
        health=health,
        confidence=lowest(m.confidence for m in health),
        withheld=withheld,
        step_time_ns=step_time_ns,
    )


def _with_what_if(finding: Finding, kind: str | None, what_ifs: Mapping[str, Mapping[str, Any]] | None,
                  unavailable: str | None, step_time_ns: float | None) -> Finding:
    """Attach the predicted step time of the finding's fix (the rule's ``what_if``), framed on the report's
    step: a replay's gain, else today's share as an upper bound, the rule's estimate, or nothing."""
    if kind is None:
        return finding
    before = float(step_time_ns) / 1e6 if step_time_ns else None
    if kind == WHAT_IF_NONE:
        if before is None:
            return finding
        return replace(finding, what_if={"step_ms_before": round(before, 4), "step_ms_after": None, "gain_ms": None,
                                         "method": f"not modelled: {NOT_MODELLED.get(finding.label, NOT_MODELLED[''])}"})
    predicted = None
    if kind not in (WHAT_IF_SHARE, WHAT_IF_ESTIMATE):
        predicted = (what_ifs or {}).get(kind) or (what_ifs or {}).get(finding.label)
    if predicted is not None and predicted.get("step_ms_before"):
        gain = max(float(predicted["gain_ms"]), 0.0)
        start = before if before is not None else float(predicted["step_ms_before"])
        gain = min(gain, start)
        what_if = {"step_ms_before": round(start, 4), "step_ms_after": round(start - gain, 4),
                   "gain_ms": round(gain, 4), "method": predicted["method"]}
        if finding.impact_fraction is not None:  # today's share of the step, which the replay may not win back
            what_if["share_fraction"] = finding.impact_fraction
        return replace(finding, what_if=what_if, impact_ms_per_step=gain, impact_fraction=min(gain / start, 1.0))
    if finding.impact_fraction is None or before is None:
        return finding
    if kind == WHAT_IF_ESTIMATE:
        method = "upper bound: the rule's estimate of the fix applied to today's step (no replay models this fix)"
    else:
        why = (unavailable if kind in REPLAYED else None) or "no replay models this fix"
        method = f"upper bound: today's share of the step ({why})"
    return replace(finding, what_if={"step_ms_before": round(before, 4),
                                     "step_ms_after": round(before * (1.0 - finding.impact_fraction), 4),
                                     "gain_ms": round(before * finding.impact_fraction, 4), "method": method})


def _minor(finding: Finding, step_time_ns: float | None) -> Finding:
    """Minor: the predicted gain (else, without a what-if, the share of the step) is under
    ``MIN_GAIN_FRACTION``. Findings whose gain cannot be predicted or measured are never minor."""
    w = finding.what_if or {}
    gain = w.get("gain_ms")
    if isinstance(gain, (int, float)) and w.get("step_ms_before"):
        small = gain < MIN_GAIN_FRACTION * float(w["step_ms_before"])
    elif w:
        small = False  # not modelled: no prediction to judge
    elif finding.impact_fraction is not None:
        small = finding.impact_fraction < MIN_GAIN_FRACTION
    else:
        small = False
    return replace(finding, minor=True) if small else finding


def _rank_key(finding: Finding) -> tuple[Any, ...]:
    impact = finding.impact_fraction
    return (finding.minor, impact is None, -(impact or 0.0), not finding.is_verdict, -SEVERITIES.index(finding.severity),
            finding.rule_id)


def _apply(
    rule: Rule,
    metrics: Mapping[str, Any],
    params: Mapping[str, Any],
    evidence: Mapping[str, list[Mapping[str, Any]]],
    step_time_ns: float | None,
    health: list[HealthMessage],
) -> Finding | None:
    env = {**metrics, **params}
    if not rule.when.holds(env):
        return None
    impact = rule.impact.evaluate(env) if rule.impact is not None else None
    if impact is not None:
        impact = min(max(float(impact), 0.0), 1.0)
    impact_ms = impact * step_time_ns / 1e6 if impact is not None and step_time_ns else None
    fixes = [fix.text.render(env) for fix in rule.fixes if fix.when is None or fix.when.holds(env)]
    used = rule.metrics_used
    return Finding(
        rule_id=rule.id,
        name=rule.name,
        title=rule.title,
        label=rule.label,
        severity=rule.severity,
        message=rule.message.render(env),
        impact_fraction=impact,
        impact_ms_per_step=impact_ms,
        evidence={spec.table: [dict(r) for r in list(evidence.get(spec.table) or [])[: spec.rows]] for spec in rule.evidence},
        fixes=fixes,
        expect=rule.expect.render(env),
        confidence=lowest(m.confidence for m in health if m.applies_to(used)),
        params=dict(params),
    )
