"""Match collective instances across ranks (DESIGN.md: matched instance).

All ranks' compact collective tables are stacked into one long table (one row per rank and call)
and grouped by a key: (group, sequence number) where every call of the group records one, else
(group, type, size, order of that signature on the rank) -- the order counted within each step
when every call of the group lies in a recorded step, so one dropped call cannot shift the calls of
later steps. All-to-all calls are keyed by dtype, not
size: ``all_to_allv`` sends a different amount from every rank. A key present on fewer than all
member ranks of its group is a disagreement, reported, never silently dropped.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model.groups import first_rows, isin, row_codes, stable_order
from ..analyses.instances import COLUMNS, RankTables

KEY_SEQ = "group+seq"
KEY_ORDER = "group+type+size+order"
KEY_ORDER_NO_SIZE = "group+type+order"
MAX_DISAGREEMENTS = 20


@dataclass
class Stacked:
    """Every rank's collective calls in one long table; string columns hold job-wide codes."""

    rank: np.ndarray
    cols: dict[str, np.ndarray]
    groups: list[str]
    types: list[str]
    dtypes: list[str]

    def __len__(self) -> int:
        return self.rank.size


@dataclass
class Matches:
    """Which rows of the stacked table are the same collective on every member rank."""

    instance: np.ndarray  # per stacked row: matched instance id, -1 when unmatched
    count: int  # matched instances
    key: str  # the key used for most matched instances
    keys_by_group: dict[str, str]
    members: dict[str, list[int]]  # present member ranks of each group
    expected: dict[str, list[int]]  # member ranks each group should have (pg_config / world size)
    disagreements: list[dict] = field(default_factory=list)
    unmatched_calls: int = 0


def stack(ranks: list[RankTables]) -> Stacked:
    """One long table of all ranks' calls, with codes mapped to job-wide vocabularies."""
    vocab = {"group": {}, "type": {}, "dtype": {}}
    parts: dict[str, list[np.ndarray]] = {}
    rank_col = []
    for rt in ranks:
        n = len(rt)
        if not n:
            continue
        for col, words in (("group", rt.groups), ("type", rt.types), ("dtype", rt.dtypes)):
            lut = np.array([vocab[col].setdefault(w, len(vocab[col])) for w in words] or [0], dtype=np.int64)
            parts.setdefault(col, []).append(lut[rt.collectives[col]])
        for col, arr in rt.collectives.items():
            if col not in ("group", "type", "dtype"):
                parts.setdefault(col, []).append(arr)
        rank_col.append(np.full(n, rt.rank, dtype=np.int64))
    cols = {k: np.concatenate(parts[k]) if k in parts else np.zeros(0, dtype=np.int64) for k in COLUMNS}
    words = {k: sorted(v, key=v.get) for k, v in vocab.items()}
    return Stacked(rank=np.concatenate(rank_col) if rank_col else np.zeros(0, np.int64), cols=cols,
                   groups=words["group"], types=words["type"], dtypes=words["dtype"])


def group_members(ranks: list[RankTables], groups: list[str]) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Present and expected member ranks of each group, from ``pg_config`` (else every rank)."""
    present = sorted({rt.rank for rt in ranks if rt.rank is not None})
    config: dict[str, list[int]] = {}
    world = None
    for rt in ranks:
        world = world or rt.info.get("world_size")
        for pg in rt.info.get("pg_config") or []:
            if isinstance(pg, dict) and isinstance(pg.get("ranks"), list):
                config.setdefault(str(pg.get("pg_name")), [int(r) for r in pg["ranks"] if isinstance(r, int)])
        for g, text in (rt.info.get("group_ranks") or {}).items():  # Process Group Ranks of the calls
            config.setdefault(g, [int(r) for r in text.split(",") if r.strip().lstrip("-").isdigit()])
    everyone = list(range(world)) if isinstance(world, int) and world >= len(present) else present
    expected, members = {}, {}
    for g in groups:
        exp = config.get(g)
        if exp is None and g == "" and len(config) == 1:
            exp = next(iter(config.values()))  # calls without a group name in a single-group job
        exp = exp if exp else everyone
        expected[g] = exp
        members[g] = [r for r in present if r in set(exp)] or present
    return members, expected


def match(stacked: Stacked, members: dict[str, list[int]], expected: dict[str, list[int]]) -> Matches:
    n = len(stacked)
    instance = np.full(n, -1, dtype=np.int64)
    if not n:
        return Matches(instance, 0, KEY_ORDER_NO_SIZE, {}, members, expected)
    c = stacked.cols
    group = c["group"]
    use_seq = _all_in_group(c["seq"] >= 0, group, len(stacked.groups))[group]
    is_a2a = isin(c["type"], [i for i, t in enumerate(stacked.types) if t == "all_to_all"])
    size = np.where(c["bytes"] >= 0, c["bytes"], c["in_nelems"])
    size = np.where(is_a2a, -2 - c["dtype"], size)
    t = np.where(c["gpu_start_ns"] >= 0, c["gpu_start_ns"], c["call_start_ns"])
    use_step = _all_in_group(c["step"] >= 0, group, len(stacked.groups))[group]
    step = np.where(use_step, c["step"], -1)
    # k: how many calls of the same (rank, group, step, type, size) the rank made before this one
    k = _count_before(row_codes(stacked.rank, group, step, c["type"], size)[0], np.lexsort((t, stacked.rank)))
    # a call of a group whose calls all carry a sequence number is keyed by (group, seq) alone
    codes = _codes_by_appearance(group, np.where(use_seq, c["seq"], -1), np.where(use_seq, -1, step),
                                 np.where(use_seq, -1, c["type"]), np.where(use_seq, -1, size), np.where(use_seq, -1, k))
    n_codes = int(codes.max()) + 1
    n_members = np.array([len(members.get(g, [])) for g in stacked.groups], dtype=np.int64)
    # a key matched: one row on each present member rank of its group
    in_group = _member_mask(stacked, members)
    counts = np.bincount(codes[in_group], minlength=n_codes)
    pairs = _keys(codes, stacked.rank)[1]
    distinct = np.bincount(codes[pairs], minlength=n_codes)  # ranks with the key
    ok_code = (counts == n_members[_group_of_code(codes, group)]) & (distinct == counts)
    ok_row = ok_code[codes] & in_group
    uniq, inst = np.unique(codes[ok_row], return_inverse=True)
    instance[ok_row] = inst
    keys_by_group = {}
    for gi, g in enumerate(stacked.groups):
        rows = group == gi
        if not rows.any():
            continue
        if use_seq[rows].all():
            keys_by_group[g] = KEY_SEQ
        else:
            sized = (size[rows & ~is_a2a] >= 0).any() or (rows & is_a2a).all()
            name = KEY_ORDER if sized else KEY_ORDER_NO_SIZE
            keys_by_group[g] = name.replace("group+", "group+step+") if use_step[rows].all() else name
    matched_by_group = np.bincount(group[ok_row], minlength=len(stacked.groups))
    votes: dict[str, int] = {}
    for gi, g in enumerate(stacked.groups):
        if g in keys_by_group:
            votes[keys_by_group[g]] = votes.get(keys_by_group[g], 0) + int(matched_by_group[gi])
    main_key = max(votes, key=votes.get) if votes else KEY_ORDER_NO_SIZE
    dis = _disagreements(stacked, codes, ok_code, members, size)
    return Matches(instance, int(uniq.size), main_key, keys_by_group, members, expected, dis,
                   unmatched_calls=int((~ok_row).sum()))


def _all_in_group(flag: np.ndarray, group: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group: is ``flag`` true on every row of it (False for a group without rows)."""
    present = np.bincount(group, minlength=n_groups) > 0
    return present & (np.bincount(group[~flag], minlength=n_groups) == 0)


def _count_before(key: np.ndarray, order: np.ndarray) -> np.ndarray:
    """Per row: the rows with the same ``key`` (codes 0..) that come before it in ``order`` (a permutation)."""
    n = key.size
    size = int(key.max()) + 1 if n else 0
    in_order = key[order]
    by_key = stable_order(in_order, size)
    starts = np.zeros(size, dtype=np.int64)  # where each key's run begins among the sorted rows
    np.cumsum(np.bincount(in_order, minlength=size)[:-1], out=starts[1:])
    out = np.empty(n, dtype=np.int64)
    out[order[by_key]] = np.arange(n) - starts[in_order[by_key]]
    return out


def _keys(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct key tuples of ``columns`` in ascending order (first column major): per row the
    number of its key, and per key its first row."""
    index, _, size = row_codes(*columns)
    return index, first_rows(index, size)


def _codes_by_appearance(*columns: np.ndarray) -> np.ndarray:
    """Per row: the number of its key (the tuple of ``columns``), keys numbered by first appearance."""
    index, first = _keys(*columns)
    renumber = np.empty(first.size, dtype=np.int64)
    renumber[np.argsort(first, kind="stable")] = np.arange(first.size)
    return renumber[index]


def _group_of_code(codes: np.ndarray, group: np.ndarray) -> np.ndarray:
    out = np.zeros(codes.max() + 1, dtype=np.int64)
    out[codes] = group
    return out


def _member_mask(stacked: Stacked, members: dict[str, list[int]]) -> np.ndarray:
    mask = np.zeros(len(stacked), dtype=bool)
    for gi, g in enumerate(stacked.groups):
        rows = stacked.cols["group"] == gi
        mask |= rows & isin(stacked.rank, members.get(g, []))
    return mask


def _disagreements(stacked: Stacked, codes, ok_code, members, size) -> list[dict]:
    """Collectives not found on every member rank, summarised per (group, type, size): the calls each
    rank made of them, and the member ranks that made none. The largest first, at most
    ``MAX_DISAGREEMENTS``."""
    bad = np.flatnonzero(~ok_code[codes])
    if not bad.size:
        return []
    c = stacked.cols
    group, step, ctype, rank = c["group"][bad], c["step"][bad], c["type"][bad], stacked.rank[bad]
    part, part_first = _keys(group, step, ctype, size[bad])
    triples = _keys(part, rank, codes[bad])[1]  # distinct (part, rank, key), ascending
    pair_of, pair_first = _keys(part[triples], rank[triples])  # (part, rank), ascending
    n_calls = np.bincount(pair_of, minlength=pair_first.size)  # keys each rank called in the part
    pair_part, pair_rank = part[triples][pair_first], rank[triples][pair_first]
    total = np.bincount(pair_part, weights=n_calls, minlength=part_first.size)
    appearance = np.argsort(part_first, kind="stable")
    chosen = appearance[np.argsort(-total[appearance], kind="stable")][:MAX_DISAGREEMENTS]
    bounds = np.searchsorted(pair_part, np.arange(part_first.size + 1))
    out = []
    for p in chosen.tolist():
        r0 = int(part_first[p])
        gname = stacked.groups[int(group[r0])]
        span = slice(bounds[p], bounds[p + 1])
        have = dict(zip(pair_rank[span].tolist(), n_calls[span].tolist()))
        s = int(size[bad][r0])
        out.append({"group": gname or "(default)", "step": int(step[r0]) if step[r0] >= 0 else None,
                    "collective": stacked.types[int(ctype[r0])], "size": s if s >= 0 else None,
                    "dtype": stacked.dtypes[int(c["dtype"][bad][r0])] or None,
                    "calls_by_rank": {str(int(r)): int(k) for r, k in have.items()},  # JSON object keys are text
                    "ranks_without": [r for r in members.get(gname, []) if r not in have][:16]})
    return out
