"""Kernels and CPU operators of two runs aligned by name, as per-step deltas.

Kernels are keyed by their normalised name (``names.normalise_kernel``), CPU operators by name.
Totals come from the report's ``kernel_totals`` / ``operator_totals`` evidence (every name in the
window); reports written before those tables existed fall back to ``top_kernels`` /
``top_operators`` (the 15 largest), and the diff says so. Per-step values divide window totals by
the number of steps the side has.
"""

from __future__ import annotations

import re

from ..analyses.core.rank import RankResult
from ..model.evidence import KernelTotal, OperatorTotal, TopKernel
from ..model.record import Record
from .names import normalise_kernel


class KernelDelta(Record, kw_only=True):
    """A kernel group (by normalised name) in both runs, per step."""

    name: str  # normalised
    example: str  # one raw name of the group (the largest)
    category: str  # compute, communication, memcpy, memset
    count_before: float  # per step
    count_after: float  # per step
    time_before_ns: float  # its time per step
    time_after_ns: float  # its time per step
    mean_before_ns: float | None  # mean duration; null where absent
    mean_after_ns: float | None  # mean duration; null where absent
    status: str  # "new", "vanished", "changed", "same"
    delta_ns: float = 0.0  # time_after_ns - time_before_ns
    delta_count: float = 0.0  # count_after - count_before

    def __post_init__(self) -> None:
        self.delta_ns = self.time_after_ns - self.time_before_ns
        self.delta_count = self.count_after - self.count_before


class OperatorDelta(Record, kw_only=True):
    """A CPU operator (by name) in both runs, per step."""

    name: str  # the operator's
    calls_before: float  # per step
    calls_after: float  # per step
    cpu_before_ns: float  # inclusive CPU time per step
    cpu_after_ns: float  # inclusive CPU time per step
    gpu_before_ns: float  # GPU time it launched directly, per step
    gpu_after_ns: float  # GPU time it launched directly, per step
    status: str  # "new", "vanished", "changed", "same"
    delta_cpu_ns: float = 0.0  # cpu_after_ns - cpu_before_ns
    delta_gpu_ns: float = 0.0  # gpu_after_ns - gpu_before_ns

    def __post_init__(self) -> None:
        self.delta_cpu_ns = self.cpu_after_ns - self.cpu_before_ns
        self.delta_gpu_ns = self.gpu_after_ns - self.gpu_before_ns


class TableSizes(Record, kw_only=True):
    """A rank pair's tables before they were cut to their largest rows: rows per table, and what the new
    kernels add up to."""

    kernels: int  # kernel groups of either run
    changed_kernels: int  # of them, those whose time or launches per step changed (status changed)
    new_kernels: int  # only in the new run
    vanished_kernels: int  # only in the base run
    operators: int  # CPU operators of either run
    changed_operators: int  # of them, those not the same (changed, new or vanished)
    new_kernels_running: int  # new kernels with time or launches in the new run
    new_launches: float  # their launches per step
    new_time_ns: float  # their time per step


def table_sizes(kernels: list[KernelDelta], operators: list[OperatorDelta]) -> TableSizes:
    new = [k for k in kernels if k.status == "new"]
    running = [k for k in new if k.time_after_ns > 0 or k.count_after > 0]
    return TableSizes(
        kernels=len(kernels),
        changed_kernels=sum(k.status == "changed" for k in kernels),
        new_kernels=len(new),
        vanished_kernels=sum(k.status == "vanished" for k in kernels),
        operators=len(operators),
        changed_operators=sum(o.status != "same" for o in operators),
        new_kernels_running=len(running),
        new_launches=sum(k.count_after for k in running),
        new_time_ns=sum(k.time_after_ns for k in running),
    )


def largest_rows(
    kernels: list[KernelDelta], operators: list[OperatorDelta], rows: int
) -> tuple[list[KernelDelta], list[OperatorDelta]]:
    """The tables cut to their largest ``rows`` rows of each kind (kernels: of all, of the changed, the new and
    the vanished ones; operators: of all and of those not the same), in table order."""
    keep = set()
    for status in (None, "changed", "new", "vanished"):
        keep |= {id(k) for k in [k for k in kernels if status is None or k.status == status][:rows]}
    ops = {id(o) for o in operators[:rows]} | {id(o) for o in [o for o in operators if o.status != "same"][:rows]}
    return [k for k in kernels if id(k) in keep], [o for o in operators if id(o) in ops]


def kernel_order(k: KernelDelta) -> tuple:
    """Largest absolute change in time per step first, then in count, then by name."""
    return -abs(k.delta_ns), -abs(k.delta_count), k.name


def operator_order(o: OperatorDelta) -> tuple:
    """Largest absolute change in GPU or CPU time per step first, then by name."""
    return -max(abs(o.delta_gpu_ns), abs(o.delta_cpu_ns)), o.name


def kernel_table(rank: RankResult) -> tuple[list[KernelTotal] | list[TopKernel], bool]:
    """The rank's per-name GPU op totals, and whether the table is complete."""
    ev = rank.evidence
    if "kernel_totals" in ev:
        return ev["kernel_totals"] or [], True
    return ev.get("top_kernels") or [], False


def operator_table(rank: RankResult) -> tuple[list[OperatorTotal], bool]:
    ev = rank.evidence
    if "operator_totals" in ev:
        return ev["operator_totals"] or [], True
    return [
        OperatorTotal(name=r.name, calls=r.calls, cpu_ns=r.cpu_ns, gpu_ops=r.gpu_ops, gpu_ns=r.gpu_ns)
        for r in ev.get("top_operators") or []
    ], False


def _group_kernels(rows: list[KernelTotal] | list[TopKernel]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for r in rows:
        name = str(r.name)
        key = normalise_kernel(name)
        g = out.setdefault(
            key,
            {
                "count": 0,
                "total_ns": 0,
                "example": name,
                "example_ns": -1,
                "category": r.category or r.kind or "compute",
            },
        )
        total = int(r.total_ns or 0)
        g["count"] += int(r.count or 0)
        g["total_ns"] += total
        if total > g["example_ns"]:
            g["example"], g["example_ns"] = name, total
    return out


def _status(before: float, after: float, present_before: bool, present_after: bool) -> str:
    if present_after and not present_before:
        return "new"
    if present_before and not present_after:
        return "vanished"
    return "same" if before == after else "changed"


def kernel_deltas(before: RankResult, after: RankResult, steps_before: int, steps_after: int) -> list[KernelDelta]:
    """Every kernel group of either run, largest absolute change in time per step first.

    A side whose report lists only its top kernels says nothing about a kernel smaller than its
    smallest listed one: such a kernel, absent there, is left out rather than called new or vanished.
    """
    rows_b, complete_b = kernel_table(before)
    rows_a, complete_a = kernel_table(after)
    names_b, names_a = {r.name for r in rows_b}, {r.name for r in rows_a}
    floor_b = _listed_floor([r.total_ns for r in rows_b], complete_b, steps_before)
    floor_a = _listed_floor([r.total_ns for r in rows_a], complete_a, steps_after)
    if not complete_b:
        rows_a = [r for r in rows_a if r.name in names_b or (r.total_ns or 0) / steps_after >= floor_b]
    if not complete_a:
        rows_b = [r for r in rows_b if r.name in names_a or (r.total_ns or 0) / steps_before >= floor_a]
    b, a = _group_kernels(rows_b), _group_kernels(rows_a)
    out = []
    for key in set(b) | set(a):
        gb, ga = b.get(key), a.get(key)
        cb, ca = (gb or {}).get("count", 0), (ga or {}).get("count", 0)
        tb, ta = (gb or {}).get("total_ns", 0), (ga or {}).get("total_ns", 0)
        ref = ga if ga and (not gb or ga["total_ns"] >= gb["total_ns"]) else gb
        out.append(
            KernelDelta(
                name=key,
                example=ref["example"],
                category=ref["category"],
                count_before=cb / steps_before,
                count_after=ca / steps_after,
                time_before_ns=tb / steps_before,
                time_after_ns=ta / steps_after,
                mean_before_ns=tb / cb if cb else None,
                mean_after_ns=ta / ca if ca else None,
                status=_status(tb / steps_before, ta / steps_after, gb is not None, ga is not None),
            )
        )
    out.sort(key=kernel_order)
    return out


def _listed_floor(totals: list[int | None], complete: bool, steps: int) -> float:
    """Per-step time below which a kernel may be missing from a top-N table (0 for a full table), from
    the table's rows' total times."""
    if complete or not totals:
        return 0.0
    return min(int(t or 0) for t in totals) / steps


def operator_deltas(before: RankResult, after: RankResult, steps_before: int, steps_after: int) -> list[OperatorDelta]:
    """Every CPU operator of either run (left out as for kernels when a report lists only its top ones).
    torch.compile regions are matched by content, their numbers only a tiebreak (``match_regions``): a
    region renumbered in the new run shows as one row, named "Torch-Compiled Region: 5/0 (now 8/0)"."""
    rows_b, complete_b = operator_table(before)
    rows_a, complete_a = operator_table(after)
    b = {str(r.name): r for r in rows_b}
    a = {}
    renamed = match_regions(rows_b, rows_a)
    for r in rows_a:
        name = str(r.name)
        target = renamed.get(name, name)
        a[target if target == name else f"{target} (now {name.split(': ', 1)[-1]})"] = r
    for shown in [n for n in a if n not in b and n.endswith(")") and " (now " in n]:
        b[shown] = b.pop(shown.rsplit(" (now ", 1)[0])
    floor_b = _listed_floor([r.gpu_ns for r in rows_b], complete_b, steps_before)
    floor_a = _listed_floor([r.gpu_ns for r in rows_a], complete_a, steps_after)
    out = []
    for name in set(b) | set(a):
        rb, ra = b.get(name), a.get(name)
        (calls_b, cpu_b, gpu_b), (calls_a, cpu_a, gpu_a) = _amounts(rb), _amounts(ra)
        if (
            rb is None
            and gpu_a / steps_after <= floor_b
            and not complete_b
            or ra is None
            and gpu_b / steps_before <= floor_a
            and not complete_a
        ):
            continue
        od = OperatorDelta(
            name=name,
            calls_before=calls_b / steps_before,
            calls_after=calls_a / steps_after,
            cpu_before_ns=cpu_b / steps_before,
            cpu_after_ns=cpu_a / steps_after,
            gpu_before_ns=gpu_b / steps_before,
            gpu_after_ns=gpu_a / steps_after,
            status="same",
        )
        od.status = _status(
            od.cpu_before_ns + od.gpu_before_ns + od.calls_before,
            od.cpu_after_ns + od.gpu_after_ns + od.calls_after,
            rb is not None,
            ra is not None,
        )
        out.append(od)
    out.sort(key=operator_order)
    return out


def _amounts(row: OperatorTotal | None) -> tuple[int, int, int]:
    """An operator's calls, CPU time and GPU time (0 for an operator a run does not have)."""
    if row is None:
        return 0, 0, 0
    return row.calls or 0, row.cpu_ns or 0, row.gpu_ns or 0


_REGION = re.compile(r"^Torch-Compiled Region: (\d+)/(\d+)$")


def match_regions(rows_before: list[OperatorTotal], rows_after: list[OperatorTotal]) -> dict[str, str]:
    """The new run's torch.compile regions that are a base region under another number: {new name: base
    name}. Regions pair by content (the signature of the kernel sequence they ran), the nearest frame and
    recompile numbers deciding between regions of equal content; a region with no content (an older
    report) or none in common keeps its name."""

    def regions(rows: list[OperatorTotal]) -> dict[str, tuple[str, tuple[int, int]]]:
        out = {}
        for r in rows:
            m = _REGION.match(str(r.name))
            if m and isinstance(r.content, str):
                out[str(r.name)] = (r.content, (int(m.group(1)), int(m.group(2))))
        return out

    rb, ra = regions(rows_before), regions(rows_after)
    pairs = sorted(
        (
            (abs(nb[0] - na[0]), abs(nb[1] - na[1]), an != bn, an, bn)
            for an, (ca, na) in ra.items()
            for bn, (cb, nb) in rb.items()
            if ca == cb
        )
    )
    taken_a: set[str] = set()
    taken_b: set[str] = set()
    out: dict[str, str] = {}
    for _, _, _, an, bn in pairs:  # closest numbers first; the same name first among equals
        if an in taken_a or bn in taken_b:
            continue
        taken_a.add(an)
        taken_b.add(bn)
        if an != bn:
            out[an] = bn
    return out


def name_overlap(before: RankResult, after: RankResult) -> float | None:
    """Shared kernel groups over the smaller run's distinct groups (None when either has none)."""
    b = set(_group_kernels(kernel_table(before)[0]))
    a = set(_group_kernels(kernel_table(after)[0]))
    if not a or not b:
        return None
    return len(a & b) / min(len(a), len(b))


def operator_overlap(before: RankResult, after: RankResult) -> float | None:
    b = {str(r.name) for r in operator_table(before)[0]}
    a = {str(r.name) for r in operator_table(after)[0]}
    if not a or not b:
        return None
    return len(a & b) / min(len(a), len(b))
