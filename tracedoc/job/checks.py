"""Which ranks of a directory form one job: duplicates, ranks of another job, unknown ranks.

Bad input costs the ranks concerned, not the job: each is excluded with the reason, and the job
view is built from the largest consistent set (best effort).
"""

from __future__ import annotations

from collections import Counter
import os

from ..analyses.comm.instances import RankTables


def admit(tables: list[RankTables]) -> tuple[list[RankTables], list[str], list[dict]]:
    """The ranks the job view uses (sorted by rank), messages for the user, and the excluded ranks."""
    issues: list[str] = []
    excluded: list[dict] = []

    def drop(rt: RankTables, why: str) -> None:
        excluded.append({"source": rt.source, "rank": rt.rank, "reason": why})

    known = []
    for rt in sorted(tables, key=lambda t: (t.rank is None, t.rank or 0, t.source)):
        if rt.rank is None:
            drop(rt, "its rank is unknown (no distributedInfo rank in the trace, no rank number in the file name)")
        else:
            known.append(rt)
    # ranks of another job: a different world size than most ranks
    sizes = Counter(rt.info.get("world_size") for rt in known if rt.info.get("world_size"))
    if len(sizes) > 1:
        size, _ = sizes.most_common(1)[0]
        others = [rt for rt in known if rt.info.get("world_size") not in (None, size)]
        issues.append(
            f"the directory mixes jobs: {len(known) - len(others)} ranks say world size {size}, "
            f"{len(others)} say {', '.join(str(s) for s in sorted(sizes) if s != size)}; "
            "the job view uses the world-size-" + str(size) + " ranks"
        )
        for rt in others:
            drop(rt, f"world size {rt.info.get('world_size')}, not {size}: another job")
        known = [rt for rt in known if rt not in others]
    # ranks whose trace does not overlap in time the job's median rank (another run of the job)
    if len(known) > 2:
        ref = sorted(known, key=lambda t: t.info["span_ns"][0])[len(known) // 2]
        lo, hi = ref.info["span_ns"]
        others = [rt for rt in known if rt.info["span_ns"][1] < lo or rt.info["span_ns"][0] > hi]
        if others and len(others) < len(known) / 2:
            issues.append(
                f"{len(others)} rank file(s) do not overlap in time with the others "
                f"(e.g. {os.path.basename(others[0].source)}): another run; left out of the job view"
            )
            for rt in others:
                drop(rt, "its trace does not overlap in time with the other ranks': another run")
            known = [rt for rt in known if rt not in others]
    # duplicate ranks: keep the first file of each rank
    seen: dict[int, RankTables] = {}
    for rt in known:
        if rt.rank in seen:
            issues.append(
                f"rank {rt.rank} appears twice ({os.path.basename(seen[rt.rank].source)} and "
                f"{os.path.basename(rt.source)}); the job view uses the first"
            )
            drop(rt, f"duplicate of rank {rt.rank} ({os.path.basename(seen[rt.rank].source)})")
        else:
            seen[rt.rank] = rt
    return list(seen.values()), issues, excluded
