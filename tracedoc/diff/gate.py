"""The regression gate: ``--fail-on-regression PCT`` on step time and ``--fail-if EXPR`` on metric deltas.

An expression is in the rules' safe expression language (``tracedoc.engine.expr``, never ``eval``;
the command line compiles it against ``gate_names()``) and reads, for every numeric metric, its change
(``exposed_comm_fraction > +0.05``) and its two values (``exposed_comm_fraction_before``, ``..._after``), plus
``step_ms`` and ``step_pct`` (the step-time change in ms and percent) and ``<category>_ms`` (each category's share
of it). It is checked on every aligned rank pair and fails the gate when it holds on any of them.
"""

from __future__ import annotations

from typing import Any, Protocol

from .metrics import numeric_metrics
from .model import DiffResult, RankDiff, step_change_pct
from .steps import CATEGORIES


class Condition(Protocol):
    """A compiled ``--fail-if`` expression (``tracedoc.engine.expr.Expr``)."""

    source: str
    names: frozenset[str]

    def holds(self, env: dict[str, Any]) -> bool: ...


def gate_names() -> list[str]:
    """Every name a ``--fail-if`` expression may read (all numbers)."""
    names = ["step_ms", "step_pct"]
    for m in numeric_metrics():
        names += [m, f"{m}_before", f"{m}_after"]
    return names + [f"{c}_ms" for c in CATEGORIES]


def pair_values(pair: RankDiff) -> dict[str, Any]:
    env: dict[str, Any] = {"step_ms": pair.step_delta_ns / 1e6, "step_pct": step_change_pct(pair.before, pair.after)}
    for m in pair.metrics:
        env[m.name], env[f"{m.name}_before"], env[f"{m.name}_after"] = m.delta, m.before, m.after
    for c, ns in pair.attribution_ns.items():
        env[f"{c}_ms"] = ns / 1e6
    return env


def gate_failures(
    diff: DiffResult, fail_on_regression_pct: float | None = None, fail_if: list[Condition] | tuple[Condition, ...] = ()
) -> list[str]:
    """Why the gate fails (one line per reason); empty when it passes."""
    reasons = []
    if fail_on_regression_pct is not None:
        pct = diff.step_pct
        before, after = diff.before.step_ns / 1e6, diff.after.step_ns / 1e6
        if pct is None:
            reasons.append(f"step time cannot be judged: the base run's step time is {before:g} ms")
        elif pct > fail_on_regression_pct:
            led = ", ".join(f"{c} {diff.attribution_ns[c] / 1e6:+.3f} ms" for c in diff.led_by[:3])
            iv = diff.step_interval_ms
            unsure = (
                f"; the steps' spread leaves it uncertain (95% interval {iv[0]:+.3f} to {iv[1]:+.3f} ms)"
                if iv and iv[0] <= 0 <= iv[1]
                else ""
            )
            reasons.append(
                f"step time regressed {pct:+.1f}% ({before:.3f} -> {after:.3f} ms per step), above "
                f"--fail-on-regression {fail_on_regression_pct:g}%" + (f"; led by {led}" if led else "") + unsure
            )
    for expr in fail_if:
        for pair in diff.pairs:
            env = pair_values(pair)
            if expr.holds(env):
                shown = ", ".join(f"{n} = {_fmt(env.get(n))}" for n in sorted(expr.names))
                where = f" on rank {pair.rank_before}" if len(diff.pairs) > 1 else ""
                reasons.append(f"--fail-if {expr.source!r} holds{where} ({shown})")
                break
    return reasons


def _fmt(v: Any) -> str:
    if v is None:
        return "unknown"
    return f"{v:+.6g}" if isinstance(v, float) else str(v)
