"""GPU utilization, est. SM efficiency and est. achieved occupancy, as the TensorBoard plugin defines them.

The figures follow the PyTorch Profiler TensorBoard plugin (pytorch/kineto ``tb_plugin``,
``torch_tb_profiler/profiler/gpu_metrics_parser.py`` with ``range_utils.merge_ranges_with_value``;
kernel fields from ``trace.py`` ``KernelEvent``; GPU-metrics tooltip text in ``run.py``).
Everything below is per device and uses kernels only (``kind == KERNEL``; memcpy and memset do not
count). ``[lo, hi)`` is the analysis window; the plugin uses its "all steps" span (first step start to
the end of the last step's device work), which is what ``find_window`` returns for a trace with steps.

Definitions (``K`` = the device's kernels, each ``[s_i, e_i)``; ``|.|`` = length in ns):

``gpu_utilization``
    ``|union_i [s_i, e_i) ∩ [lo, hi)| / (hi - lo)``: the share of the window with at least one kernel
    running. ``None`` when the window is empty.

``sm_efficiency`` ("Est. SM Efficiency")
    Per kernel the plugin takes the profiler's own ``"blocks per SM"`` argument ``b_i`` (Kineto writes
    it as grid blocks / the device's SM count, so it is already normalised by the SM count; kernels
    without it, or with ``b_i <= 0``, are left out). The instantaneous value is
    ``f(t) = min(sum of b_i over the kernels running at t, 1)`` — i.e. ``min(b_i, 1)`` for a lone
    kernel; overlapping kernels add their ``b_i`` first and the *sum* is capped at 1. The figure is
    ``integral of f over [lo, hi) / (hi - lo)`` (duration-weighted, divided by the whole window, idle
    time counting as 0). ``None`` when no kernel with ``b_i > 0`` overlaps the window.

``est_occupancy`` ("Est. Achieved Occupancy", percent)
    Duration-weighted mean of the kernels' ``"est. achieved occupancy %"`` argument over kernel time
    inside the window: ``sum_i o_i * |[s_i, e_i) ∩ [lo, hi)| / sum_i |[s_i, e_i) ∩ [lo, hi)|`` over
    kernels with ``o_i >= 0`` (NaN / absent / negative are left out). Overlapping kernels each count
    their full clipped duration. ``None`` when that kernel time is 0.

``sm_efficiency_timeline``
    The step function ``f`` as change points ``[(ts_ns, value), ...]``: ``value`` holds from ``ts_ns``
    to the next change point; the last point has value 0. Like the plugin's trace counter it covers
    every kernel of the device, not only the window (``clip_timeline=True`` clips it to
    ``[lo, hi)``). The plugin writes each constant stretch as a (start, value), (end, 0) counter pair;
    this is the same function with equal neighbours merged.

About ``tbp_gpu_metrics_expected.json`` (the plugin's ``tb_plugin/test/gpu_metrics_expected.json``):
its "GPU 0 Est. SM Efficiency" counters read 0.25 / 0.125 / 0.5 where the input kernels carry
``blocks per SM`` 0.025 / 0.0125 / 0.05 (2, 1 and 4 blocks on an 80-SM V100, ``multiProcessorCount``
80). The plugin did not compute that file from the input: its ``test_dump_gpu_metrics``
(``tb_plugin/test/test_profiler.py``) assigns hand-written buckets and ranges and only checks the
counter serialisation, with the comments "Faked data for easy to see in UI. Real data values are
1/10 of these" (SM efficiency) and "... 1/100 of these" (the "GPU 0 Utilization" buckets). The real
values are the ``blocks per SM`` figures themselves; the SM count source is Kineto's division by the
device's SM count, not anything the plugin does. The first two counters of each series (values 1
then 0 at the first bucket start) are the plugin's "baseline" so the chart's y axis reaches 1.
"""

from __future__ import annotations

import numpy as np

from ...model import intervals as iv
from ...model import trace as M
from ...model.groups import distinct
from ...model.trace import Trace

# Running sums of blocks-per-SM below this are float residue of a +v ... -v cancellation, i.e. 0.
_EPS = 1e-12


def sm_efficiency_steps(
    starts: np.ndarray, ends: np.ndarray, blocks_per_sm: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The SM-efficiency step function of a set of kernels.

    Returns ``(points, values)``: ``values[k]`` holds on ``[points[k], points[k + 1])`` and the last
    value is 0. Kernels with a non-finite or non-positive ``blocks_per_sm`` or no duration are ignored.
    """
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    b = np.asarray(blocks_per_sm, dtype=np.float64)
    ok = np.isfinite(b) & (b > 0) & (ends > starts)
    s, e, b = starts[ok], ends[ok], b[ok]
    if s.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    pts = np.concatenate([s, e])
    delta = np.concatenate([b, -b])
    order = np.argsort(pts, kind="stable")
    pts, running = pts[order], np.cumsum(delta[order])
    last = np.append(pts[1:] != pts[:-1], True)  # state after every event at the same time
    pts, running = pts[last], running[last]
    running[running < _EPS] = 0.0
    values = np.minimum(running, 1.0)
    values[-1] = 0.0
    keep = np.ones(values.size, dtype=bool)
    keep[1:] = values[1:] != values[:-1]  # merge equal neighbours
    return pts[keep], values[keep]


def _integral(points: np.ndarray, values: np.ndarray, lo: int, hi: int) -> tuple[float, bool]:
    """Integral of the step function over [lo, hi), and whether any positive stretch overlaps it."""
    if points.size < 2:
        return 0.0, False
    seg = np.clip(np.minimum(points[1:], hi) - np.maximum(points[:-1], lo), 0, None)
    v = values[:-1]
    # np.sum of the products, not np.dot: BLAS splits long dot products across threads, so their last
    # digit would depend on the machine's thread count; numpy's own pairwise sum does not.
    return float(np.sum(v * seg.astype(np.float64))), bool(((v > 0) & (seg > 0)).any())


def _clip_timeline(points: np.ndarray, values: np.ndarray, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    if points.size == 0 or hi <= lo:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float64)
    at_lo = values[np.searchsorted(points, lo, side="right") - 1] if points[0] <= lo else 0.0
    inside = (points > lo) & (points < hi)
    p = np.concatenate([[lo], points[inside], [hi]])
    v = np.concatenate([[at_lo], values[inside], [0.0]])
    keep = np.ones(v.size, dtype=bool)
    keep[1:] = v[1:] != v[:-1]
    p, v = p[keep], v[keep]
    if v.size and v[0] == 0.0:
        p, v = p[1:], v[1:]
    return p, v


def gpu_metrics(trace: Trace, lo: int, hi: int, clip_timeline: bool = False, timeline: bool = True) -> list[dict]:
    """Per-device GPU utilization, est. SM efficiency, est. achieved occupancy and SM-efficiency timeline.

    One dict per device that ran at least one kernel (anywhere in the trace), sorted by device:
    ``device``, ``sm_count`` (from the device properties, informational), ``kernels_in_window``,
    ``gpu_utilization``, ``sm_efficiency``, ``est_occupancy`` (percent) and
    ``sm_efficiency_timeline`` (list of ``(ts_ns, value)``). See the module docstring for the exact
    definitions.
    """
    g = trace.gpu_ops
    if not len(g):
        return []
    lo, hi = int(lo), int(hi)
    length = hi - lo
    kern = (g["kind"] == M.KERNEL) & (g["device"] >= 0)
    by_id = {d.id: d for d in trace.meta.devices}
    out = []
    for dev in distinct(g["device"][kern]):
        rows = np.flatnonzero(kern & (g["device"] == dev))
        s, e = g["start_ns"][rows], g["end_ns"][rows]
        clipped = np.clip(np.minimum(e, hi) - np.maximum(s, lo), 0, None)

        util = iv.total(iv.clip(iv.union(s, e), lo, hi)) / length if length > 0 else None

        points, values = sm_efficiency_steps(s, e, g["blocks_per_sm"][rows])
        area, any_positive = _integral(points, values, lo, hi)
        sm_eff = area / length if (length > 0 and any_positive) else None
        if clip_timeline:
            points, values = _clip_timeline(points, values, lo, hi)

        occ = g["est_occupancy"][rows]
        ok = ~np.isnan(occ) & (occ >= 0) & (clipped > 0)
        w = clipped[ok].astype(np.float64)
        est_occ = float(np.sum(occ[ok] * w) / w.sum()) if w.sum() > 0 else None  # not np.dot: see _integral

        out.append(
            {
                "device": int(dev),
                "sm_count": by_id[int(dev)].sm_count if int(dev) in by_id else None,
                "kernels_in_window": int((clipped > 0).sum()),
                "gpu_utilization": util,
                "sm_efficiency": sm_eff,
                "est_occupancy": est_occ,
                "sm_efficiency_timeline": list(zip(points.tolist(), values.tolist())) if timeline else None,
            }
        )
    return out


def utilization_buckets(trace: Trace, device: int, start_ns: int, end_ns: int) -> list[tuple[int, float]]:
    """The plugin's "GPU Utilization" counter timeline for one device over ``[start_ns, end_ns)``.

    Bucket width is the smallest power of ten microseconds giving at most 100 buckets; the number of
    buckets is ``int(span / width)`` and the last bucket runs to ``end_ns`` (so it may be longer).
    Each bucket's value is the kernel-busy time inside it (union of kernels) over its own length.
    Returns ``[(bucket_start_ns, value), ..., (end_ns, 0.0)]``. The plugin uses the trace's
    "PyTorch Profiler (0)" span as ``[start_ns, end_ns)``.
    """
    span_us = (end_ns - start_ns) / 1000
    if span_us <= 0:
        return []
    width_us = 1
    while span_us / width_us > 100:
        width_us *= 10
    n = max(int(span_us / width_us), 1)
    edges = start_ns + np.arange(n + 1, dtype=np.int64) * (width_us * 1000)
    edges[-1] = end_ns
    g = trace.gpu_ops
    rows = (g["kind"] == M.KERNEL) & (g["device"] == device)
    busy = iv.union(g["start_ns"][rows], g["end_ns"][rows])
    covered = iv.overlap_per_interval(edges[:-1], edges[1:], busy)
    values = covered / np.diff(edges).astype(np.float64)
    return [(int(t), float(v)) for t, v in zip(edges[:-1].tolist(), values.tolist())] + [(int(end_ns), 0.0)]
