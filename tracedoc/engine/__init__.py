"""The rules engine: metrics × rule files → trace-health messages and ranked findings.

Public API::

    from tracedoc.engine import evaluate, load_ruleset
    ruleset = load_ruleset({"TD301.stall_threshold": 0.1}, rule_dirs=())  # once per run
    verdict = evaluate(metrics, evidence, step_time_ns, ruleset=ruleset)
    verdict.labels, verdict.findings, verdict.health, verdict.confidence, verdict.to_dict()
"""

from .evaluate import SCHEMA_VERSION, Finding, Verdict, evaluate
from .expr import ExprError, compile_expr
from .health import HealthMessage, check_health
from .ruleset import Ruleset, load_ruleset
from .params import ParamError, collect_params, parse_assignments, read_pyproject, resolve_params
from ..labels import ADVICE_LABEL, LABELS, SEVERITIES, VERDICT_LABELS
from .rulefile import RuleError, find_rule, load_rules, rules_version
from .rulemodel import EVIDENCE_TABLES, Rule

__all__ = [
    "ADVICE_LABEL",
    "EVIDENCE_TABLES",
    "LABELS",
    "SCHEMA_VERSION",
    "SEVERITIES",
    "VERDICT_LABELS",
    "ExprError",
    "Finding",
    "HealthMessage",
    "ParamError",
    "Rule",
    "RuleError",
    "Ruleset",
    "Verdict",
    "check_health",
    "collect_params",
    "compile_expr",
    "evaluate",
    "find_rule",
    "load_rules",
    "load_ruleset",
    "parse_assignments",
    "read_pyproject",
    "resolve_params",
    "rules_version",
]
