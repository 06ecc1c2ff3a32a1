"""Per matched instance: arrivals, waits, transfer, skew and bandwidth; clock offsets across hosts.

docs/job.md: arrival of rank r = its kernel start (GPU backends) or call start (CPU backends such as
gloo); wait = last arrival - own arrival; transfer = end - last arrival, measured on the last
arriver's own clock (its duration), so it needs no clock alignment; skew = last - first arrival;
algbw = bytes / transfer; busbw = algbw x the nccl-tests factor of the collective type.

Ranks on one host share a clock. Ranks on different hosts (or of unknown host) may not: members of
a synchronising collective leave it together (within microseconds on NCCL), so a host's offset is
the median, over instances, of how much later its ranks' ends read than the instance's median end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..analyses.comm.collectives import bus_factor
from ..model.groups import distinct, isin, lex_order
from ..model.stats import median
from .align import _group_median
from ..analyses.comm.instances import RankTables
from .match import Matches, Stacked

SYNCHRONISING = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "barrier", "reduce")
# An offset is applied only when it is this many times larger than the spread of the ends it rests on.
OFFSET_SIGNIFICANCE = 3.0
OFFSET_MIN_NS = 20_000
# Arrivals closer than this are a tie: nobody arrived last.
TIE_NS = 1_000


@dataclass
class Timing:
    """Long arrays, one row per (matched instance, member rank), plus one row per instance."""

    # per member row
    inst: np.ndarray
    rank: np.ndarray
    arrival_ns: np.ndarray
    end_ns: np.ndarray
    wait_ns: np.ndarray
    step: np.ndarray
    row: np.ndarray  # row of the stacked table
    # per instance
    last_rank: np.ndarray
    first_ns: np.ndarray
    last_ns: np.ndarray
    skew_ns: np.ndarray
    transfer_ns: np.ndarray
    bytes: np.ndarray
    group_size: np.ndarray
    type: np.ndarray
    busbw_gbps: np.ndarray
    algbw_gbps: np.ndarray
    mode: str  # "gpu", "cpu" or "mixed"
    untimed: int  # matched instances without an arrival on every member
    offsets_ns: dict[int, int] = field(default_factory=dict)
    clock_note: str = ""
    median_ns: np.ndarray | None = None  # per instance: the median arrival (waits.median_arrival fills it)


def coarse_offsets(ranks: list[RankTables]) -> dict[int, int]:
    """Per rank, what to subtract from its times to read them on the first rank's clock, from the
    traces' own time origins (Unix time of trace time 0: Kineto's baseTimeNanoseconds, nsys's session
    start); {} when every rank has the same origin or some rank has none."""
    origins = {rt.rank: int(rt.info.get("time_origin_ns") or 0) for rt in ranks}
    if not origins or 0 in origins.values() or len(set(origins.values())) == 1:
        return {}
    ref = origins[min(origins)]
    return {r: ref - o for r, o in origins.items() if o != ref}


def time_instances(
    stacked: Stacked, matches: Matches, ranks: list[RankTables], coarse: dict[int, int] | None = None
) -> Timing:
    """``coarse``: per rank, the offset between its clock and the first rank's that the traces' time
    origins give (``coarse_offsets``); the offsets estimated from collective ends come on top."""
    c = stacked.cols
    rows = np.flatnonzero(matches.instance >= 0)
    inst = matches.instance[rows]
    gpu = c["gpu_start_ns"][rows] >= 0
    cpu_ok = c["call_start_ns"][rows] >= 0
    # an instance is timed on the GPU when every member has its kernel, on the CPU when none has
    n_inst = matches.count
    all_gpu = np.ones(n_inst, dtype=bool)
    any_gpu = np.zeros(n_inst, dtype=bool)
    np.logical_and.at(all_gpu, inst, gpu)
    np.logical_or.at(any_gpu, inst, gpu)
    cpu_all = np.ones(n_inst, dtype=bool)
    np.logical_and.at(cpu_all, inst, cpu_ok)
    timed = all_gpu | (~any_gpu & cpu_all)
    keep = timed[inst]
    rows, inst = rows[keep], inst[keep]
    use_gpu = all_gpu[inst]
    arrival = np.where(use_gpu, c["gpu_start_ns"][rows], c["call_start_ns"][rows])
    end = np.where(use_gpu, c["gpu_end_ns"][rows], c["work_end_ns"][rows])
    rank = stacked.rank[rows]
    if coarse:
        first = np.array([coarse.get(int(r), 0) for r in rank.tolist()], dtype=np.int64)
        arrival, end = arrival - first, end - first
    # renumber timed instances densely
    uniq, inst = np.unique(inst, return_inverse=True)
    if not rows.size:
        z, f = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
        return Timing(
            inst=z,
            rank=z,
            arrival_ns=z,
            end_ns=z,
            wait_ns=z,
            step=z,
            row=z,
            last_rank=z,
            first_ns=z,
            last_ns=z,
            skew_ns=z,
            transfer_ns=z,
            bytes=z,
            group_size=z,
            type=z,
            busbw_gbps=f,
            algbw_gbps=f,
            mode="none",
            untimed=n_inst,
            clock_note="",
        )
    offsets, note = _clock_offsets(ranks, inst, rank, end, c["type"][rows], stacked.types)
    if offsets:
        shift = np.array([offsets.get(int(r), 0) for r in rank], dtype=np.int64)
        arrival, end = arrival - shift, end - shift
    if coarse:
        offsets = {r: offsets.get(r, 0) + coarse.get(r, 0) for r in set(offsets) | set(coarse)}
        note = "clocks read on one time base from the traces' time origins; " + note
    m = uniq.size
    last = np.full(m, np.iinfo(np.int64).min, dtype=np.int64)
    first = np.full(m, np.iinfo(np.int64).max, dtype=np.int64)
    np.maximum.at(last, inst, arrival)
    np.minimum.at(first, inst, arrival)
    wait = last[inst] - arrival
    # the last arriver of each instance (lowest rank on ties) and its duration = the transfer
    order = lex_order((rank, -arrival, inst))
    head = order[np.append(True, inst[order][1:] != inst[order][:-1])]
    last_rank = np.empty(m, dtype=np.int64)
    last_rank[inst[head]] = rank[head]
    last_rank[(last - first) < TIE_NS] = -1
    transfer = np.empty(m, dtype=np.int64)
    transfer[inst[head]] = np.maximum(end[head] - arrival[head], 0)
    byts = np.full(m, -1, dtype=np.int64)
    np.maximum.at(byts, inst, c["bytes"][rows])
    gsize = np.full(m, -1, dtype=np.int64)
    np.maximum.at(gsize, inst, c["group_size"][rows])
    members = np.bincount(inst, minlength=m)
    group_of = np.zeros(m, dtype=np.int64)
    group_of[inst] = c["group"][rows]
    expected = np.array([len(matches.expected.get(stacked.groups[g], [])) for g in group_of], dtype=np.int64)
    gsize = np.where(gsize > 0, gsize, np.maximum(expected, members))
    ctype = np.zeros(m, dtype=np.int64)
    ctype[inst] = c["type"][rows]
    algbw = np.where((byts > 0) & (transfer > 0), byts / np.maximum(transfer, 1), np.nan)  # bytes/ns = GB/s
    factor = np.array([bus_factor(stacked.types[t], int(n)) for t, n in zip(ctype, gsize)], dtype=np.float64)
    mode = "gpu" if use_gpu.all() else ("cpu" if not use_gpu.any() else "mixed")
    return Timing(
        inst=inst,
        rank=rank,
        arrival_ns=arrival,
        end_ns=end,
        wait_ns=wait,
        step=c["step"][rows],
        row=rows,
        last_rank=last_rank,
        first_ns=first,
        last_ns=last,
        skew_ns=last - first,
        transfer_ns=transfer,
        bytes=byts,
        group_size=gsize,
        type=ctype,
        busbw_gbps=algbw * factor,
        algbw_gbps=algbw,
        mode=mode,
        untimed=int(n_inst - uniq.size),
        offsets_ns=offsets,
        clock_note=note,
    )


def _clock_offsets(ranks: list[RankTables], inst, rank, end, ctype, types) -> tuple[dict[int, int], str]:
    """Per-rank clock offsets (ns, to subtract) from collective ends, one per host; and what was done."""
    hosts = {rt.rank: rt.info.get("host") for rt in ranks}
    known = {h for h in hosts.values() if h}
    if len(known) == 1 and all(hosts.values()):
        return {}, f"all ranks on host {next(iter(known))}: one clock, no offsets needed"
    sync = isin(ctype, [i for i, t in enumerate(types) if t in SYNCHRONISING])
    if not sync.any():
        return {}, "no synchronising collective to align clocks on; times are taken as recorded"
    i, r, e = inst[sync], rank[sync], end[sync]
    order = lex_order((e, i))
    i, r, e = i[order], r[order], e[order]
    bounds = np.flatnonzero(np.append(True, i[1:] != i[:-1]))
    counts = np.diff(np.append(bounds, i.size))
    med = np.array([median(e[b : b + k]) for b, k in zip(bounds, counts)])  # one per instance, not per event
    delta = e - np.repeat(med, counts)
    # clock domains: a known host, else the rank itself
    domain = {rk: (h if h else f"rank {rk}") for rk, h in hosts.items()}
    by_domain: dict[str, list[int]] = {}
    for rk in distinct(r).tolist():
        by_domain.setdefault(domain.get(rk, f"rank {rk}"), []).append(rk)
    if len(by_domain) < 2:
        return {}, "one clock domain; times are taken as recorded"
    names = list(by_domain)
    ranks_u, inverse = np.unique(r, return_inverse=True)
    dom_of_rank = {rk: i for i, d in enumerate(names) for rk in by_domain[d]}
    dcode = np.array([dom_of_rank[int(x)] for x in ranks_u.tolist()], dtype=np.int64)[inverse]
    off = _group_median(dcode, delta.astype(np.float64), len(names))
    spread = _group_median(dcode, np.abs(delta - off[dcode]), len(names))
    est = {d: (float(off[i]), float(spread[i])) for i, d in enumerate(names)}
    ref = domain.get(min(r.tolist()))
    ref_off = est[ref][0]
    offsets, shifted = {}, []
    for dom, (off, spread) in est.items():
        rel = off - ref_off
        if abs(rel) >= max(OFFSET_MIN_NS, OFFSET_SIGNIFICANCE * spread):
            for rk in by_domain[dom]:
                offsets[int(rk)] = int(round(rel))
            shifted.append(f"{dom} {rel / 1e3:+.0f} us")
    if shifted:
        return offsets, (
            "clocks aligned on collective ends (members leave a collective together): "
            + ", ".join(shifted[:8])
            + (" ..." if len(shifted) > 8 else "")
        )
    return {}, (
        "collective ends agree across clock domains within their spread; no offsets applied"
        + ("" if known else " (hosts unknown: each rank taken as its own clock)")
    )
