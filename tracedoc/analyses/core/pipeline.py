"""Run the analyses a request needs, in dependency order, and check each against its declaration.

Input: a ``Trace`` and the metrics, evidence tables and values wanted (default: everything the
registered analyses produce, except ``on_demand`` ones). Output: one :class:`Produced` with them.
An analysis runs only when something wanted needs it, directly or through the values it provides.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

from ...gcpause import RELEASE_MIN_BYTES, release_free_memory
from ...model.trace import Trace
from .offload import Offloader
from .registry import ANALYSES, GIVEN, PRODUCERS, Analysis, ContractError, Produced

_KINDS = ("metrics", "evidence", "values")
# From RELEASE_MIN_BYTES of columns the memory freed so far is given back to the system before the first
# analysis and before a child is forked (``offload``): the analyses, and the child, start from what is live.


_registered = False


def register_all() -> None:
    """Import every module of this package (once), so every ``@analysis`` in it is registered."""
    global _registered
    if _registered:
        return
    _registered = True
    package = __name__.rsplit(".", 2)[0]  # tracedoc.analyses
    path = importlib.import_module(package).__path__
    for info in pkgutil.walk_packages(path, package + "."):
        importlib.import_module(info.name)


def declared(kind: str) -> tuple[str, ...]:
    """Every name of ``kind`` (``metrics``, ``evidence`` or ``values``) some analysis declares it produces."""
    register_all()
    return tuple(PRODUCERS[kind])


def default_request() -> dict[str, tuple[str, ...]]:
    """Every output of the analyses that are not on demand."""
    register_all()
    request: dict[str, tuple[str, ...]] = {}
    for kind, attr in zip(_KINDS, ("produces", "evidence", "provides")):
        request[kind] = tuple(n for a in ANALYSES.values() if not a.on_demand for n in getattr(a, attr))
    return request


def plan(
    metrics: Iterable[str] = (), evidence: Iterable[str] = (), values: Iterable[str] = (), given: Iterable[str] = ()
) -> list[Analysis]:
    """The analyses that produce what is asked for and what they need, each after its inputs. An analysis
    needing a stage input (``GIVEN``) that is not ``given`` is left out, with whatever needs its outputs."""
    register_all()
    given = frozenset(given)
    order: list[Analysis] = []
    state: dict[str, str] = {}  # analysis name -> "visiting" | "done" | "skipped"

    def visit(kind: str, name: str, wanted_by: str) -> bool:
        """Plan the producer of ``name``; False when it cannot run (a stage input is missing)."""
        if kind == "values" and name in GIVEN:
            return name in given
        producer = PRODUCERS[kind].get(name)
        if producer is None:
            raise ContractError(f"{wanted_by} asks for {kind} {name!r}, which no analysis produces")
        if state.get(producer) in ("done", "skipped"):
            return state[producer] == "done"
        if state.get(producer) == "visiting":
            raise ContractError(f"analyses depend on each other in a cycle through {producer}")
        state[producer] = "visiting"
        entry = ANALYSES[producer]
        inputs = (
            [("values", n) for n in entry.needs]
            + [("metrics", n) for n in entry.reads]
            + [("evidence", n) for n in entry.reads_tables]
        )
        ok = all([visit(k, n, producer) for k, n in inputs])
        state[producer] = "done" if ok else "skipped"
        if ok:
            order.append(entry)
        return ok

    for kind, names in zip(_KINDS, (metrics, evidence, values)):
        for name in names:
            visit(kind, name, "the request")
    return order


def run_analyses(
    trace: Trace,
    metrics: Iterable[str] | None = None,
    evidence: Iterable[str] | None = None,
    values: Iterable[str] | None = None,
    *,
    workers: int | None = None,
    given: Mapping[str, Any] | None = None,
) -> Produced:
    """Run what ``metrics``, ``evidence`` and ``values`` need (None: the default request for that kind).

    ``given``: the stage inputs (``GIVEN``) the caller has, by name. On a large trace, ``offload``
    analyses run in a child process beside the others, unless ``workers=1`` (the caller already runs
    one process per core). Outputs of analyses that could not run (a stage input missing) are absent."""
    default = default_request()
    asked = {
        kind: tuple(default[kind] if names is None else names)
        for kind, names in zip(_KINDS, (metrics, evidence, values))
    }
    out = Produced(values=dict(given or {}))
    done: dict[str, Produced] = {}

    def merge(entry: Analysis, produced: Produced) -> None:
        check(entry, produced)
        out.metrics.update(produced.metrics)
        out.evidence.update(produced.evidence)
        out.values.update(produced.values)
        done[entry.name] = produced

    order = plan(**asked, given=tuple(given or ()))
    release = release_free_memory if sum(t.nbytes for t in trace.tables.values()) >= RELEASE_MIN_BYTES else _no_op
    release()
    away = Offloader(order, trace, workers)
    try:
        for entry in order:
            away.start_ready(out.values)
            if away.handles(entry):
                continue
            away.collect((*entry.needs, *entry.reads, *entry.reads_tables), merge)
            merge(entry, entry.run(trace, inputs_for(entry, out)))
        away.collect(None, merge)
    finally:
        away.cancel()
    # Metrics, evidence and warnings in the plan's order, wherever and whenever each analysis ran.
    ran = [done[e.name] for e in order if e.name in done]
    out.metrics = {k: v for p in ran for k, v in p.metrics.items()}
    out.evidence = {k: v for p in ran for k, v in p.evidence.items()}
    out.warnings = [w for p in ran for w in p.warnings]
    return out


def _no_op() -> None:
    pass


def inputs_for(entry: Analysis, out: Produced) -> MappingProxyType:
    """What ``entry`` declares it reads, from what the analyses before it produced: the values it needs,
    the metrics it reads and the evidence tables it reads, by name."""
    return MappingProxyType(
        {
            **{name: out.values[name] for name in entry.needs},
            **{name: out.metrics[name] for name in entry.reads},
            **{name: out.evidence[name] for name in entry.reads_tables},
        }
    )


def check(entry: Analysis, produced: Produced) -> None:
    """Raise :class:`ContractError` unless ``produced`` holds exactly what ``entry`` declares."""
    if not isinstance(produced, Produced):
        raise ContractError(f"analysis {entry.name} returned {type(produced).__name__}, not Produced")
    problems = []
    for kind, declared in zip(_KINDS, (entry.produces, entry.evidence, entry.provides)):
        got = getattr(produced, kind)
        extra = sorted(set(got) - set(declared))
        missing = sorted(set(declared) - set(got))
        if extra:
            problems.append(f"undeclared {kind} {', '.join(extra)}")
        if missing:
            problems.append(f"declared {kind} {', '.join(missing)} not returned")
    if problems:
        raise ContractError(f"analysis {entry.name}: " + "; ".join(problems))
