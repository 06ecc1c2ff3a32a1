"""The order in which a rank issued its calls of a group, and the calls whose kernel the trace lacks
(docs/job.md: matched instance).

A GPU rank's trace holds three kinds of collective rows: calls launched inside the window with their
kernel; kernels with no call, launched before the window opened and run after it (the pre-window
backlog); and calls launched as the window closed whose kernel ran after the profiler stopped. The
CPU runs ahead of the GPU, by up to a step, so a backlog kernel often runs after the first calls of
the window were issued: ordering it by when it ran puts it after calls issued after it, and a
sequence aligned in that order pairs calls a few positions off (their ends then disagree, or the
call looks missing on the other ranks). A kernel that ran before the first kernel of a launched call
was issued before that call: it is ordered before every call recorded. A call with no kernel of a
group whose other calls have kernels has no GPU arrival or end; its launch time is not an arrival
(the CPU runs ahead by a different amount on every rank), so it cannot be matched or timed.
"""

from __future__ import annotations

import numpy as np


def _per_key(rank: np.ndarray, group: np.ndarray) -> tuple[np.ndarray, int]:
    """One code per (rank, group) pair, and how many codes."""
    ranks, rcode = np.unique(rank, return_inverse=True)
    n_groups = int(group.max()) + 1 if group.size else 1
    return rcode * n_groups + group, ranks.size * n_groups


def issue_order(
    rank: np.ndarray, group: np.ndarray, call_start: np.ndarray, gpu_start: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per row, a time that orders each rank's calls of a group as they were issued: the call's start;
    for a kernel with no call, when it ran, except that a backlog kernel (run before the first kernel
    of a call launched in the window) comes before every recorded call, in the order it ran. And
    which rows are backlog kernels: the step a trace gives them is the one whose launches were under
    way when they ran, not the step that launched them."""
    issued = np.where(call_start >= 0, call_start, gpu_start).astype(np.int64)
    if not rank.size:
        return issued, np.zeros(0, dtype=bool)
    key, n = _per_key(rank, group)
    big = np.iinfo(np.int64).max
    launched = (call_start >= 0) & (gpu_start >= 0)
    first_gpu = np.full(n, big, dtype=np.int64)
    np.minimum.at(first_gpu, key[launched], gpu_start[launched])
    first_call = np.full(n, big, dtype=np.int64)
    has_call = call_start >= 0
    np.minimum.at(first_call, key[has_call], call_start[has_call])
    backlog = (call_start < 0) & (gpu_start >= 0) & (gpu_start < first_gpu[key]) & (first_call[key] < big)
    if not backlog.any():
        return issued, backlog
    last_backlog = np.full(n, -big, dtype=np.int64)
    np.maximum.at(last_backlog, key[backlog], gpu_start[backlog])
    k = key[backlog]
    issued[backlog] = first_call[k] - 1 - (last_backlog[k] - gpu_start[backlog])
    return issued, backlog


def kernel_unseen(rank: np.ndarray, group: np.ndarray, call_start: np.ndarray, gpu_start: np.ndarray) -> np.ndarray:
    """Per row: a call with no kernel, of a group whose calls launch kernels on that rank, issued after
    the last call whose kernel the trace holds (its kernel ran after the profiler stopped)."""
    out = np.zeros(rank.size, dtype=bool)
    if not rank.size:
        return out
    key, n = _per_key(rank, group)
    launched = (call_start >= 0) & (gpu_start >= 0)
    if not launched.any():
        return out
    last_call = np.full(n, -1, dtype=np.int64)
    np.maximum.at(last_call, key[launched], call_start[launched])
    return (call_start >= 0) & (gpu_start < 0) & (last_call[key] >= 0) & (call_start > last_call[key])
