"""Iterations of a trace without step marks, from its repeating sequence of GPU ops (docs/definitions.md:
captures without steps try to detect iterations).

A training or inference loop launches the same ops in the same order every iteration, so the
sequence of GPU op names on its busiest stream (concurrent streams interleave differently each time)
repeats with the iteration's op count as its period. The period is found
as the lag at which the sequence best matches itself (an autocorrelation of the names, computed with
one FFT: each name becomes a random point on the unit circle, so equal names add up and different
ones cancel). Shorter repeating units inside an iteration (the layers of a model) match only
within their part of it, so the whole iteration is the shortest lag at which nearly every op
matches. Iterations are then cut, one period apart, before the op that follows the longest GPU gap
of the period (the gap between two iterations: the host preparing the next one).

Input: a ``Trace``. Output: iteration boundaries as GPU-op rows, or none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...model.groups import dense_codes
from ...model.trace import Trace

MIN_PERIOD_OPS = 8  # an iteration launches at least this many ops (fewer: a toy or a one-op loop)
MIN_REPEATS = 3  # at least three iterations: two could match by chance of a short capture
# The share of ops that must equal the op one period later: all of them in a clean loop, less a few
# (data-dependent ops, an occasional extra copy); a model's repeated layers match far less.
MIN_MATCH = 0.95
MAX_OPS = 1 << 20  # longer sequences are cut to their first MAX_OPS ops (the period shows there too)


SEQUENCE_NAME = "GPU op sequence"  # how iterations found here are named (``iteration_name`` starts so)


@dataclass
class Period:
    """The repeating period of a GPU op sequence and where its iterations begin and end."""

    ops: int  # GPU ops per iteration
    match: float  # share of ops equal to the op one period later
    first: np.ndarray  # gpu_ops rows: the first op of each iteration, in time order
    completion_ns: np.ndarray  # per whole iteration: the end of its last op
    stream: int = -1

    @property
    def name(self) -> str:
        return f"{SEQUENCE_NAME} of {self.ops} ops on stream {self.stream} ({self.match:.0%} repeating)"


def find_period(trace: Trace, min_repeats: int = MIN_REPEATS) -> Period | None:
    """The repeating period of the trace's GPU op sequence, and where its iterations begin; None when the
    sequence does not repeat at least ``min_repeats`` times with ``MIN_MATCH`` of its ops matching."""
    g = trace.gpu_ops
    if len(g) < MIN_PERIOD_OPS * min_repeats:
        return None
    # the busiest stream's ops: ops of concurrent streams interleave differently every iteration
    streams, inv = dense_codes(g["device"].astype(np.int64) * (1 << 40) + g["stream"])
    busiest = int(np.argmax(np.bincount(inv)))
    rows = np.flatnonzero(inv == busiest)
    if rows.size < MIN_PERIOD_OPS * min_repeats:
        return None
    order = rows[np.argsort(g["start_ns"][rows], kind="stable")][:MAX_OPS]
    n = order.size
    _, code = dense_codes(g["name"][order])
    phase = np.exp(2j * np.pi * _unit_randoms(int(code.max()) + 1))[code]
    size = 1 << int(np.ceil(np.log2(2 * n)))
    f = np.fft.fft(phase, size)
    auto = np.fft.ifft(f * np.conj(f))[:n].real  # auto[p] ~ number of i with name[i] == name[i + p]
    lags = np.arange(n)
    overlap = np.maximum(n - lags, 1)
    match = auto / overlap
    # the shortest lag at which the sequence repeats is its period; shorter than an iteration's ops (the
    # same few kernels over and over), it shows no iteration at all
    cand = np.flatnonzero((lags >= 1) & (lags * min_repeats <= n) & (match >= MIN_MATCH))
    if not cand.size or cand[0] < MIN_PERIOD_OPS:
        return None
    p = int(cand[0])
    exact = float(np.mean(code[:-p] == code[p:]))  # the FFT's estimate, checked exactly
    if exact < MIN_MATCH:
        return None
    # cut before the op after the longest gap of the period (median over the iterations)
    s, e = g["start_ns"][order], g["end_ns"][order]
    prev_end = np.maximum.accumulate(e)
    gap = np.r_[0, s[1:] - prev_end[:-1]].astype(np.float64)
    whole = (n // p) * p
    by_phase = _column_medians(gap[:whole].reshape(-1, p))
    k = int(np.argmax(by_phase))
    first = order[k::p]
    # each whole iteration (from one cut to the next) completes when its last op ends
    reps = (n - k) // p
    done = np.maximum.accumulate(e)[k + p - 1 : k + reps * p : p] if reps else np.zeros(0, dtype=np.int64)
    return Period(p, exact, first[: reps + 1], done, int(g["stream"][order[0]]))


def _unit_randoms(k: int) -> np.ndarray:
    """``k`` pseudo-random numbers in [0, 1), a fixed function of their index (splitmix64's output
    function on the index times the golden ratio): the same trace gives the same answer. Not
    ``numpy.random``, whose import alone (14-17 ms) costs more than this whole period search on most
    traces."""
    z = np.arange(1, k + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)  # wraps modulo 2**64
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def _column_medians(a: np.ndarray) -> np.ndarray:
    """``np.median(a, axis=0)`` of a float array without NaN: the middle value of each column, or the mean
    of the two middle values. (``np.median`` with an axis imports ``numpy.ma`` on first use, which
    costs more than the whole median here.)"""
    s = np.sort(a, axis=0)
    mid = s.shape[0] // 2
    return s[mid] if s.shape[0] % 2 else (s[mid - 1] + s[mid]) / 2
