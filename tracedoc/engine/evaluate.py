"""Evaluate rules against one rank's metrics.

Input: the metrics dict (names from ``tracedoc.analyses.core.registry.METRICS``; None = not measurable),
evidence tables, the step time (the median) and the run's ``Ruleset`` (rules, parameter values).
Output: a :class:`Verdict` holding trace-health messages and findings ranked by the share of the
step each one explains.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..model.evidence import copy_row
from ..model.plain import plain
from ..model.record import replace
from ..model.reportstep import report_step
from ..model.verdict import VERDICT_SCHEMA_VERSION, Finding, HealthMessage, Verdict
from .health import check_health, host_verdict_allowed, lowest
from ..labels import SEVERITIES
from .rulemodel import SCOPE_TRACE, Rule
from .ruleset import Ruleset, load_ruleset
from .whatifs import REPLAYED, WHAT_IF_ESTIMATE, WHAT_IF_NONE, WHAT_IF_SHARE

# Why a label's fix cannot be predicted from the trace ("not modelled: ...").
NOT_MODELLED = {
    "compute_bound": "faster kernels (fusion, better attention kernels, lower precision) change kernel durations, "
    "which the trace cannot tell in advance",
    "memory_pressure": "memory use changes no recorded duration",
    "low_mfu": "another precision, bigger GEMMs or fused attention change kernel durations, which the trace cannot "
    "tell in advance; what reaching the threshold would take: see what the next profile should show",
    "": "the fix changes what the trace cannot tell in advance",
}

SCHEMA_VERSION = VERDICT_SCHEMA_VERSION
# A finding carries its verdict label only when its what-if predicts at least this share of the step
# (docs/critical-path.md); below it the finding is minor. Where no gain can be predicted at all, its share
# of the step decides.
MIN_GAIN_FRACTION = 0.02


def evaluate(
    metrics: Mapping[str, Any],
    evidence: Mapping[str, list[Mapping[str, Any]]] | None = None,
    step_time_ns: float | None = None,
    *,
    ruleset: Ruleset | None = None,
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

    ``ruleset`` (``load_ruleset(params, rule_dirs)``, once per run) holds the rules and their parameter
    values with the overrides applied; without one, the shipped rules at their defaults.
    ``step_time_ns`` (default: the report's one step time, ``model.reportstep``, of the metrics) converts impact
    fractions into milliseconds per step.
    Only the rules of ``scope`` are evaluated: ``"trace"`` (per-rank trace metrics) or ``"log"``
    (training-log metrics); trace-health checks run for traces only.
    """
    if ruleset is None:
        ruleset = load_ruleset()
    rules, values = ruleset.of_scope(scope), ruleset.values
    env_metrics = {name: plain(value) for name, value in metrics.items()}
    if step_time_ns is None:
        step_time_ns = report_step(
            env_metrics.get("step_time_p50_ns"), env_metrics.get("window_ns"), env_metrics.get("steps")
        ).ns
    step_time_ns = plain(step_time_ns)
    evidence = evidence or {}
    health = check_health(env_metrics) if scope == SCOPE_TRACE else []
    withheld = next((m.message for m in health if m.withhold), None)

    findings: list[Finding] = []
    deferred: list[Rule] = []

    def predict(finding: Finding, rule: Rule) -> Finding:  # step-time what-ifs are for trace findings only
        if scope != SCOPE_TRACE:
            return finding
        return _minor(
            _with_what_if(finding, rule.what_if_kind, what_ifs, what_if_unavailable, step_time_ns), step_time_ns
        )

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


def _with_what_if(
    finding: Finding,
    kind: str | None,
    what_ifs: Mapping[str, Mapping[str, Any]] | None,
    unavailable: str | None,
    step_time_ns: float | None,
) -> Finding:
    """Attach the predicted step time of the finding's fix (the rule's ``what_if``), framed on the report's
    step: a replay's gain, else today's share as an upper bound, the rule's estimate, or nothing."""
    if kind is None:
        return finding
    before = float(step_time_ns) / 1e6 if step_time_ns else None
    if kind == WHAT_IF_NONE:
        if before is None:
            return finding
        return replace(
            finding,
            what_if={
                "step_ms_before": round(before, 4),
                "step_ms_after": None,
                "gain_ms": None,
                "method": f"not modelled: {NOT_MODELLED.get(finding.label, NOT_MODELLED[''])}",
            },
        )
    predicted = None
    if kind not in (WHAT_IF_SHARE, WHAT_IF_ESTIMATE):
        predicted = (what_ifs or {}).get(kind) or (what_ifs or {}).get(finding.label)
    if predicted is not None and predicted.get("step_ms_before"):
        gain = max(float(predicted["gain_ms"]), 0.0)
        start = before if before is not None else float(predicted["step_ms_before"])
        gain = min(gain, start)
        what_if = {
            "step_ms_before": round(start, 4),
            "step_ms_after": round(start - gain, 4),
            "gain_ms": round(gain, 4),
            "method": predicted["method"],
        }
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
    return replace(
        finding,
        what_if={
            "step_ms_before": round(before, 4),
            "step_ms_after": round(before * (1.0 - finding.impact_fraction), 4),
            "gain_ms": round(before * finding.impact_fraction, 4),
            "method": method,
        },
    )


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
    return (
        finding.minor,
        impact is None,
        -(impact or 0.0),
        not finding.is_verdict,
        -SEVERITIES.index(finding.severity),
        finding.rule_id,
    )


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
        evidence={
            spec.table: [copy_row(r) for r in list(evidence.get(spec.table) or [])[: spec.rows]]
            for spec in rule.evidence
        },
        fixes=fixes,
        expect=rule.expect.render(env),
        confidence=lowest(m.confidence for m in health if m.applies_to(used)),
        params=dict(params),
    )
