"""Match collective instances across ranks (docs/job.md: matched instance, matching across
ranks whose windows differ).

All ranks' compact collective tables are stacked into one long table (one row per rank and call)
and grouped by a key: (group, sequence number) where every call of the group records one; else
(group, signature, position), the position found by aligning each rank's sequence of the signature
with a reference rank's by where the calls end (``align.py``). The signature is the type and size;
all-to-all calls are keyed by dtype, not size: ``all_to_allv`` sends a different amount from every
rank. A key present on every member rank of its group is a matched instance. Every other call is
unmatched with its reason (``REASONS``): outside the span every member's window covers (windows
differ), its end disagrees with its partner's (refused), or missing on some member inside the span
(a disagreement, reported, never silently dropped).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..model.groups import distinct, first_rows, isin, row_codes, stable_order
from ..model.stats import median
from .align import SignatureAlignment, _group_median, align_signature, nearest_distance, noise_of, refuse
from .order import issue_order, kernel_unseen
from ..analyses.comm.instances import COLUMNS, RankTables

KEY_SEQ = "group+seq"
KEY_ALIGNED = "group+type+size+aligned-ends"
KEY_ALIGNED_NO_SIZE = "group+type+aligned-ends"
# why a call is unmatched (Matches.reason), with its key in job.alignment
REASONS = (
    "matched",
    "before the time every member rank's trace window covers",
    "after the time every member rank's trace window covers",
    "its end disagrees with its partner's by more than the end-skew tolerance (not the same call)",
    "missing on some member rank although every member's window covers its time",
    "its rank is not a member of the group",
)
REASON_KEYS = ("matched", "before_span", "after_span", "ends_disagree", "missing_on_member", "not_member")
REASON_MATCHED, REASON_BEFORE, REASON_AFTER, REASON_REFUSED, REASON_MISSING, REASON_NOT_MEMBER = range(6)
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
    reason: np.ndarray | None = None  # per stacked row: REASON_* (why it is unmatched)
    step_shift: dict[int, int] = field(default_factory=dict)  # per rank: + to its step numbers = the lowest rank's
    alignment: dict = field(default_factory=dict)  # job.alignment


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
    return Stacked(
        rank=np.concatenate(rank_col) if rank_col else np.zeros(0, np.int64),
        cols=cols,
        groups=words["group"],
        types=words["type"],
        dtypes=words["dtype"],
    )


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


def match(
    stacked: Stacked,
    members: dict[str, list[int]],
    expected: dict[str, list[int]],
    half_step_ns: float | None = None,
    coarse: dict[int, int] | None = None,
    windows: dict[int, tuple[int, int]] | None = None,
) -> Matches:
    """Match every call to the same call on the other member ranks of its group.

    ``half_step_ns``: half the job's step, how far apart two ends may be and still count as ending
    together when the sequences are aligned (``align.py``); ``coarse``: per rank, what to subtract
    from its times to read them on one clock (``timing.coarse_offsets``); ``windows``: per rank, the
    span of time its trace covers (first to last event), which says whether a call missing on a rank
    is outside that rank's window or missing from it."""
    n = len(stacked)
    instance = np.full(n, -1, dtype=np.int64)
    if not n:
        return Matches(instance, 0, KEY_ALIGNED_NO_SIZE, {}, members, expected, reason=np.zeros(0, dtype=np.int8))
    c = stacked.cols
    group = c["group"]
    use_seq = _all_in_group(c["seq"] >= 0, group, len(stacked.groups))[group]
    is_a2a = isin(c["type"], [i for i, t in enumerate(stacked.types) if t == "all_to_all"])
    size = np.where(c["bytes"] >= 0, c["bytes"], c["in_nelems"])
    size = np.where(is_a2a, -2 - c["dtype"], size)
    in_group = _member_mask(stacked, members)
    sig = _codes_by_appearance(group, c["type"], size)
    position = np.where(use_seq, c["seq"], -1)
    refused = np.zeros(n, dtype=bool)
    deviation = np.zeros(n, dtype=np.float64)
    aligned: dict[int, SignatureAlignment] = {}
    arrival = np.where(c["gpu_start_ns"] >= 0, c["gpu_start_ns"], c["call_start_ns"])
    end = np.where(c["gpu_end_ns"] >= 0, c["gpu_end_ns"], c["work_end_ns"])
    if coarse:
        shift = _per_row(stacked.rank, coarse)
        arrival, end = arrival - shift, end - shift
        windows = {r: (a - coarse.get(r, 0), b - coarse.get(r, 0)) for r, (a, b) in (windows or {}).items()}
    # a rank's sequence is in the order its calls were issued (NCCL requires the same order on every
    # member); a kernel with no call launched before the window opened, before every call recorded
    issued, backlog = issue_order(stacked.rank, group, c["call_start_ns"], c["gpu_start_ns"])
    step_of = np.where(backlog, -1, c["step"])  # a backlog kernel's step is not known
    # a call of a GPU group whose kernel ran after its rank's profiler stopped has neither arrival
    # nor end: it is left out (after the window), not timed by its launch
    unseen = kernel_unseen(stacked.rank, group, c["call_start_ns"], c["gpu_start_ns"])
    in_match = in_group & ~unseen
    todo = np.flatnonzero(~use_seq & in_match)
    noise = 0.0
    if todo.size:
        todo = todo[np.argsort(sig[todo], kind="stable")]
        bounds = np.flatnonzero(np.append(True, sig[todo][1:] != sig[todo][:-1]))
        blocks = [todo[lo:hi] for lo, hi in zip(bounds.tolist(), np.append(bounds[1:], todo.size).tolist())]
        noise = noise_of(np.concatenate([nearest_distance(stacked.rank[b], end[b]) for b in blocks]))
        difference, scale = np.full(n, np.nan), np.full(n, np.inf)
        for rows in blocks:
            al = align_signature(
                stacked.rank[rows],
                issued[rows],
                end[rows],
                step_of[rows],
                noise,
                half_step_ns,
                on_cpu=not (c["gpu_end_ns"][rows] >= 0).any(),
            )
            position[rows], difference[rows], scale[rows] = al.position, al.difference_ns, al.scale_ns
            aligned[int(sig[rows[0]])] = al
        refused[todo], deviation[todo] = refuse(stacked.rank[todo], difference[todo], scale[todo])
    # a call of a group whose calls all carry a sequence number is keyed by (group, seq); every other
    # call by (group, signature, its position in the reference rank's sequence)
    codes = _codes_by_appearance(group, np.where(use_seq, -1, sig), position)
    n_codes = int(codes.max()) + 1
    n_members = np.array([len(members.get(g, [])) for g in stacked.groups], dtype=np.int64)
    countable = in_match & ~refused
    counts = np.bincount(codes[countable], minlength=n_codes)
    pairs = _keys(codes[countable], stacked.rank[countable])[1]
    distinct = np.bincount(codes[countable][pairs], minlength=n_codes)  # ranks with the key
    ok_code = (counts == n_members[_group_of_code(codes, group)]) & (distinct == counts)
    ok_row = ok_code[codes] & countable
    uniq, inst = np.unique(codes[ok_row], return_inverse=True)
    instance[ok_row] = inst
    reason = _reasons(stacked, ok_row, in_group, refused, arrival, end, members, windows)
    reason[in_group & unseen] = REASON_AFTER
    keys_by_group = {}
    for gi, g in enumerate(stacked.groups):
        rows = group == gi
        if not rows.any():
            continue
        if use_seq[rows].all():
            keys_by_group[g] = KEY_SEQ
        else:
            sized = (size[rows & ~is_a2a] >= 0).any() or (rows & is_a2a).all()
            keys_by_group[g] = KEY_ALIGNED if sized else KEY_ALIGNED_NO_SIZE
    matched_by_group = np.bincount(group[ok_row], minlength=len(stacked.groups))
    votes: dict[str, int] = {}
    for gi, g in enumerate(stacked.groups):
        if g in keys_by_group:
            votes[keys_by_group[g]] = votes.get(keys_by_group[g], 0) + int(matched_by_group[gi])
    main_key = max(votes, key=votes.get) if votes else KEY_ALIGNED_NO_SIZE
    report = np.isin(reason, (REASON_REFUSED, REASON_MISSING))
    dis = _disagreements(stacked, np.flatnonzero(report), codes, members, size)
    shift = _step_shift(stacked, instance, ok_row)
    alignment = _alignment_report(stacked, aligned, sig, group, reason, deviation, ok_row, shift, refused, noise)
    return Matches(
        instance,
        int(uniq.size),
        main_key,
        keys_by_group,
        members,
        expected,
        dis,
        unmatched_calls=int((~ok_row).sum()),
        reason=reason,
        step_shift=shift,
        alignment=alignment,
    )


def _reasons(stacked: Stacked, ok_row, in_group, refused, arrival, end, members, windows) -> np.ndarray:
    """Why each call is unmatched (``REASONS``): it is not wholly inside the span of time every
    member's trace window covers (it began before, or ended after: a kernel still running when a
    member's profiler stopped is missing there), its end disagrees with its partner's, or it is
    missing on some member although every member's window covers it."""
    n = len(stacked)
    reason = np.full(n, REASON_MISSING, dtype=np.int8)
    reason[ok_row] = REASON_MATCHED
    reason[~in_group] = REASON_NOT_MEMBER
    reason[in_group & refused] = REASON_REFUSED
    rows = np.flatnonzero(in_group & ~refused & ~ok_row)
    if not rows.size or not windows:
        return reason
    group = stacked.cols["group"]
    for gi, g in enumerate(stacked.groups):
        spans = [windows[r] for r in members.get(g, []) if r in windows]
        if not spans:
            continue
        lo, hi = max(s[0] for s in spans), min(s[1] for s in spans)
        mine = rows[group[rows] == gi]
        reason[mine[arrival[mine] < lo]] = REASON_BEFORE
        reason[mine[np.maximum(arrival[mine], end[mine]) > hi]] = REASON_AFTER
    return reason


def _step_shift(stacked: Stacked, instance: np.ndarray, ok_row: np.ndarray) -> dict[int, int]:
    """Per rank: what to add to its step numbers to get the lowest rank's numbers for the same
    steps (the median over the matched calls the two share); 0 where they share none."""
    rows = np.flatnonzero(ok_row & (stacked.cols["step"] >= 0))
    if not rows.size:
        return {}
    rank = stacked.rank[rows]
    anchor = int(rank.min())
    inst = instance[rows]
    anchor_step = np.full(int(inst.max()) + 1, np.iinfo(np.int64).min, dtype=np.int64)
    a = rank == anchor
    anchor_step[inst[a]] = stacked.cols["step"][rows][a]
    has = anchor_step[inst] != np.iinfo(np.int64).min
    d = anchor_step[inst][has] - stacked.cols["step"][rows][has]
    ranks, code = np.unique(rank[has], return_inverse=True)
    med = _group_median(code, d.astype(np.float64), ranks.size)
    return {int(r): int(np.round(v)) for r, v in zip(ranks.tolist(), med.tolist())}


def _alignment_report(
    stacked: Stacked, aligned: dict, sig, group, reason, deviation, ok_row, shift, refused, noise: float
) -> dict:
    """``job.alignment``: per group aligned by ends, the offsets found per rank (for the group's most
    frequent signature); per rank, its unmatched calls by reason and the shift of its step numbers."""
    groups = []
    for gi, g in enumerate(stacked.groups):
        sigs = [(int(np.count_nonzero(sig == s)), s) for s in aligned if int(group[sig == s][0]) == gi]
        if not sigs:
            continue
        _, s = max(sigs, key=lambda x: (x[0], -x[1]))
        al = aligned[s]
        row = np.flatnonzero(sig == s)[0]
        start = -al.offset  # the reference's index of each rank's first call
        rel = start - start.min()
        per_step = al.calls_per_step
        in_group = group == gi
        kept = np.bincount(
            np.searchsorted(al.ranks, stacked.rank[in_group & ~refused & (sig >= 0)]), minlength=al.ranks.size
        )
        calls = np.bincount(np.searchsorted(al.ranks, stacked.rank[in_group]), minlength=al.ranks.size)
        ranks = [
            {
                "rank": int(r),
                "offset_calls": int(o),
                "offset_steps": round(float(o) / per_step, 2) if per_step else None,
                "calls": int(k),
                "refused": int(k - a),
            }
            for r, o, k, a in zip(al.ranks.tolist(), rel.tolist(), calls.tolist(), kept.tolist())
        ]
        groups.append(
            {
                "group": g or "(default)",
                "collective": stacked.types[int(stacked.cols["type"][row])],
                "size": _size_of(stacked, row),
                "signatures": len(sigs),
                "reference_rank": al.reference,
                "calls_per_step": per_step,
                "ranks": ranks,
            }
        )
    by_rank = []
    ranks = distinct(stacked.rank)
    rcode = np.searchsorted(ranks, stacked.rank)
    counts = np.bincount(rcode * len(REASONS) + reason, minlength=ranks.size * len(REASONS)).reshape(
        ranks.size, len(REASONS)
    )
    for i, r in enumerate(ranks.tolist()):
        unmatched = {REASON_KEYS[k]: int(counts[i, k]) for k in range(1, len(REASONS)) if counts[i, k]}
        by_rank.append(
            {
                "rank": int(r),
                "matched": int(counts[i, REASON_MATCHED]),
                "unmatched": unmatched,
                "step_number_shift": shift.get(int(r), 0),
            }
        )
    skew = np.abs(deviation[ok_row])
    return {
        "groups": groups,
        "ranks": by_rank,
        "end_skew_p50_us": round(float(median(skew)) / 1e3, 2) if skew.size else None,
        "end_skew_noise_us": round(noise / 1e3, 1) if groups else None,
        "reasons": dict(zip(REASON_KEYS[1:], REASONS[1:])),
    }


def _per_row(rank: np.ndarray, by_rank: dict[int, int]) -> np.ndarray:
    """``by_rank[r]`` (0 where absent) for every row's rank."""
    ranks, inverse = np.unique(rank, return_inverse=True)
    return np.array([by_rank.get(int(r), 0) for r in ranks.tolist()], dtype=np.int64)[inverse]


def _size_of(stacked: Stacked, row: int) -> int | None:
    b = int(stacked.cols["bytes"][row])
    return b if b >= 0 else None


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


def _disagreements(stacked: Stacked, bad: np.ndarray, codes, members, size) -> list[dict]:
    """Collectives not found on every member rank, summarised per (group, type, size): the calls each
    rank made of them, and the member ranks that made none. The largest first, at most
    ``MAX_DISAGREEMENTS``."""
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
        out.append(
            {
                "group": gname or "(default)",
                "step": int(step[r0]) if step[r0] >= 0 else None,
                "collective": stacked.types[int(ctype[r0])],
                "size": s if s >= 0 else None,
                "dtype": stacked.dtypes[int(c["dtype"][bad][r0])] or None,
                "calls_by_rank": {str(int(r)): int(k) for r, k in have.items()},  # JSON object keys are text
                "ranks_without": [r for r in members.get(gname, []) if r not in have][:16],
            }
        )
    return out
