"""Critical path and what-if: hand-built before/after pairs with answers worked out by hand, the
replay checked against an independent relaxation over networkx, and the breakdown summing to the
step time on every shared trace with steps."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from conftest import shared_names, shared_traces
from trace_builder import TraceBuilder

from tracedoc.analyses.kernels import classify as C
from tracedoc.analyses.host import links
from tracedoc.analyses.critical_path import critical_path
from tracedoc.render.format import fmt_what_if
from tracedoc.analyses.critical_path import graph as G
from tracedoc.analyses.critical_path import solve as S
from tracedoc.analyses.critical_path import whatif as W
from tracedoc.analyses.gputime.backlog import find_backlog
from tracedoc.analyses.gputime.window import find_steps
from tracedoc.api import analyze, load

TOLERANCE = 0.15  # each prediction within 15% of the measured "after" step


class Timeline:
    """Places GPU ops as a GPU runs them: an op starts once its launch call began plus the launch
    latency, its stream is free, and the op it waits for (an event) has ended."""

    LATENCY_US = 5.0

    def __init__(self, b: TraceBuilder):
        self.b = b
        self.free: dict[int, float] = {}

    def kernel(self, launch_at: float, dur: float, stream: int = 7, after: float = 0.0, comm: bool = False) -> float:
        start = max(launch_at + self.LATENCY_US, self.free.get(stream, 0.0), after)
        if comm:
            self.b.nccl(start, dur, stream=stream, launch_at=launch_at)
        else:
            self.b.kernel("ampere_sgemm_128x64_tn", start, dur, stream=stream, launch_at=launch_at, op="aten::mm")
        self.free[stream] = start + dur
        return start + dur

    def drained(self) -> float:
        return max(self.free.values(), default=0.0)


def _graph(path):
    trace = load(path)
    steps = find_steps(trace)
    comm = C.comm_kernel_mask(trace, links.gpu_external_ids(trace))
    return trace, steps, comm


def measured_step_ms(path) -> float:
    """The step time of a trace (the median of the intervals between consecutive completions, find_steps'
    ends; after a pre-window backlog, from its first completion on), independent of the graph."""
    steps = find_steps(load(path))
    done = np.maximum.accumulate(steps.end_ns)
    return float(np.median(np.diff(np.r_[steps.cpu_start_ns[0], done])[steps.timed_from :])) / 1e6


def predicted(path, fix: str) -> W.Prediction:
    trace, steps, comm = _graph(path)
    cp = critical_path(trace, steps, comm)
    assert cp.available, cp.reason
    return cp.predictions[fix]


def assert_close(pred_ms: float, after_ms: float) -> None:
    assert abs(pred_ms - after_ms) <= TOLERANCE * after_ms, (
        f"predicted {pred_ms:.3f} ms, measured after {after_ms:.3f} ms"
    )


# -- before/after pairs --------------------------------------------------------------------------
def dataloader_loop(tmp_path, dataloader_us: float, steps: int = 6) -> tuple:
    """Each step: a DataLoader wait, then 10 launches of 1 ms kernels; the CPU runs ahead (no sync).
    With a 12 ms wait the CPU needs 12.12 ms per step and the GPU 10 ms: 2.12 ms of the wait are
    exposed, the other 9.9 ms hidden behind the previous step's kernels. Without it, 10 ms."""
    b = TraceBuilder()
    tl = Timeline(b)
    t = 1_000_000.0
    for i in range(steps):
        s = t
        if dataloader_us:
            b.dataloader(t + 1.0, t + 1.0 + dataloader_us)
            t += 1.0 + dataloader_us
        for k in range(10):
            tl.kernel(t + 10.0 * k, 1000.0)
        t += 120.0
        b.step(i + 1, s, t)
    return b.write(tmp_path / f"dl{int(dataloader_us)}.pt.trace.json.gz")


def test_dataloader_wait_half_hidden_by_gpu_work(tmp_path):
    before, after = dataloader_loop(tmp_path, 12_000.0), dataloader_loop(tmp_path, 0.0)
    # by hand: steady state 12.121 ms per step before (CPU-bound), 10 ms after (GPU-bound)
    # first step: the wait, launches, then 10 ms of kernels (22.1 ms); then 12.121 ms each: the median
    assert measured_step_ms(before) == pytest.approx(12.121, rel=0.005)
    after_ms = measured_step_ms(after)
    assert after_ms == pytest.approx(10.0, rel=0.02)
    p = predicted(before, "dataloader")
    assert_close(p.step_ms_after, after_ms)
    assert p.gain_ms < 0.35 * 12.0  # not the whole 12 ms wait: most of it was hidden
    # the path of a steady step: 10 ms of kernels, the rest the exposed tail of the DataLoader wait
    trace, steps, comm = _graph(before)
    row = critical_path(trace, steps, comm).steps[3]
    assert row["compute_ns"] == pytest.approx(10_000_000, rel=0.01)
    # from the previous completion to this step's first launch (+5 us latency): inside the wait
    assert row["dataloader_ns"] == 12_121_000 - 10_000_000 - 5_000


def sync_loop(tmp_path, mid_sync: bool, steps: int = 5):
    """Kernel A (5 ms, stream 7) then kernel B (5 ms, stream 20), independent. A ``.item()`` between
    them makes the CPU launch B only after A ends: the streams run one after the other (10 ms per
    step). Without it they overlap (5 ms). Each step ends with a device synchronisation."""
    b = TraceBuilder()
    tl = Timeline(b)
    t = 1_000_000.0
    for i in range(steps):
        s = t
        a_end = tl.kernel(t, 5000.0, stream=7)
        t += 10.0
        if mid_sync:
            b.sync(t, a_end + 2.0)
            t = a_end + 7.0
        tl.kernel(t, 5000.0, stream=20)
        t += 10.0
        end = max(t, tl.drained()) + 2.0
        b.sync(t, end, name="cudaDeviceSynchronize", op=None)
        t = end + 5.0
        b.step(i + 1, s, t)
    return b.write(tmp_path / f"sync{int(mid_sync)}.pt.trace.json.gz")


def test_sync_that_serialises_two_streams(tmp_path):
    before, after = sync_loop(tmp_path, True), sync_loop(tmp_path, False)
    assert measured_step_ms(before) == pytest.approx(10.03, rel=0.01)
    after_ms = measured_step_ms(after)
    assert after_ms == pytest.approx(5.02, rel=0.01)
    p = predicted(before, "sync")
    assert_close(p.step_ms_after, after_ms)
    trace, steps, comm = _graph(before)
    row = critical_path(trace, steps, comm).steps[2]
    assert row["compute_ns"] == pytest.approx(10_000_000, rel=0.01)  # both kernels are on the path


def comm_loop(tmp_path, bucketed: bool, dataloader_us: float = 0.0, comm_us: float = 4000.0, steps: int = 6):
    """DDP-like step: backward kernels (6 ms), an all-reduce on stream 20 that waits for them, the
    optimizer kernel (1 ms) that waits for the all-reduce. Exposed: 6 + 4 + 1 = 11 ms. Bucketed: the
    all-reduce starts after half of backward and overlaps the rest: 3 + 4 + 1 = 8 ms."""
    b = TraceBuilder(world_size=2)
    tl = Timeline(b)
    t = 1_000_000.0
    for i in range(steps):
        s = t
        if dataloader_us:
            b.dataloader(t + 1.0, t + 1.0 + dataloader_us)
            t += 1.0 + dataloader_us
        first = tl.kernel(t, 3000.0)
        second = tl.kernel(t + 10.0, 3000.0)
        b.stream_wait(t + 20.0, 20, 7)
        c_end = tl.kernel(t + 25.0, comm_us, stream=20, after=first if bucketed else second, comm=True)
        b.stream_wait(t + 35.0, 7, 20)
        tl.kernel(t + 40.0, 1000.0, after=c_end)
        t += 60.0
        b.step(i + 1, s, t)
    return b.write(tmp_path / f"comm{int(bucketed)}_{int(dataloader_us)}_{int(comm_us)}.pt.trace.json.gz")


def test_exposed_comm_on_the_path(tmp_path):
    before, after = comm_loop(tmp_path, False), comm_loop(tmp_path, True)
    assert measured_step_ms(before) == pytest.approx(11.0, rel=0.01)
    after_ms = measured_step_ms(after)
    assert after_ms == pytest.approx(8.0, rel=0.01)
    p = predicted(before, "comm")
    assert_close(p.step_ms_after, after_ms)
    trace, steps, comm = _graph(before)
    row = critical_path(trace, steps, comm).steps[3]
    assert row["comm_ns"] == pytest.approx(4_000_000, rel=0.01)


def test_exposed_comm_not_on_the_path(tmp_path):
    """A 10 ms DataLoader wait sets the step: the 3 ms all-reduce is exposed (nothing computes while
    it runs) but off the critical path, so overlapping it gains nothing."""
    before = comm_loop(tmp_path, False, dataloader_us=10_000.0, comm_us=3000.0)
    after = comm_loop(tmp_path, True, dataloader_us=10_000.0, comm_us=3000.0)
    after_ms = measured_step_ms(after)
    # first step: the wait, then 3 + 3 (the all-reduce overlapping) + 1 ms; then the CPU's 10.061 ms each
    assert after_ms == pytest.approx(10.061, rel=0.001)
    p = predicted(before, "comm")
    assert_close(p.step_ms_after, after_ms)
    assert p.gain_ms < 0.02 * p.step_ms_before
    result = analyze(before)
    assert result.metrics["exposed_comm_fraction"] > 0.2  # today's share would promise a 20%+ gain
    # The all-reduce still lies between two completions (each step ends with its own GPU work), but
    # moving it shifts every completion alike: the DataLoader sets the interval.
    trace, steps, comm = _graph(before)
    assert critical_path(trace, steps, comm).steps[3]["comm_ns"] == 3_000_000


def test_findings_carry_the_what_if_and_rank_by_predicted_gain(tmp_path):
    result = analyze(dataloader_loop(tmp_path, 12_000.0))
    io = next(f for f in result.verdicts[0].findings if f.label == "io_bound")
    w = io.to_dict()["what_if"]
    assert set(w) == {"step_ms_before", "step_ms_after", "gain_ms", "method", "share_fraction"}
    assert 0.0 < w["share_fraction"] <= 1.0  # the DataLoader's share of the step today, beside the prediction
    assert w["gain_ms"] == pytest.approx(w["step_ms_before"] - w["step_ms_after"], abs=1e-3)
    assert io.impact_ms_per_step == pytest.approx(w["gain_ms"], abs=1e-3)
    assert w["method"].startswith("critical-path replay")
    assert "→ ~" in fmt_what_if(io.what_if) and fmt_what_if(io.what_if).endswith("%")
    impacts = [f.impact_fraction for f in result.verdicts[0].findings if f.impact_fraction is not None]
    assert impacts == sorted(impacts, reverse=True)


def test_without_steps_the_share_is_an_upper_bound(tmp_path):
    b = TraceBuilder()
    t = 1_000_000.0
    for _ in range(3):
        b.dataloader(t, t + 8000.0)
        b.kernel("ampere_sgemm_128x64_tn", t + 8020.0, 2000.0, launch_at=t + 8001.0)
        t += 10_100.0
    result = analyze(b.write(tmp_path / "nosteps.pt.trace.json.gz"))
    assert result.ranks[0].critical_path.available is False
    assert "no steps" in result.ranks[0].critical_path.reason
    for f in result.verdicts[0].findings:
        if f.is_verdict and f.impact_fraction is not None:
            assert f.what_if["method"].startswith("upper bound") and "no steps" in f.what_if["method"]


# -- the replay ----------------------------------------------------------------------------------
def _relax_with_networkx(m: S.Model) -> np.ndarray:
    """Longest-path times by a plain relaxation in networkx's topological order (independent of
    the vectorised scan)."""
    n = m.chain.size
    H = nx.DiGraph()
    H.add_nodes_from(range(n))
    head = np.r_[True, m.chain[1:] != m.chain[:-1]]
    edges: dict[tuple[int, int], int] = {}
    for v in np.flatnonzero(~head).tolist():
        edges[(v - 1, v)] = int(m.chain_w[v])
    for u, v, w in zip(m.src.tolist(), m.dst.tolist(), m.lag.tolist()):
        edges[(u, v)] = max(edges.get((u, v), w), w)
    H.add_weighted_edges_from((u, v, w) for (u, v), w in edges.items())
    assert nx.is_directed_acyclic_graph(H)
    t = {v: (int(m.floor[v]) if head[v] or m.floor[v] > G.NEG // 2 else G.NEG) for v in H}
    for v in nx.topological_sort(H):
        for u in H.predecessors(v):
            t[v] = max(t[v], t[u] + H[u][v]["weight"])
    return np.array([t[v] for v in range(n)])


def _random_model(rng: np.random.Generator) -> S.Model:
    """Chains of points in time order, cross edges from earlier to later true times, and recorded
    times with a per-chain clock offset, so some edges lead back in recorded time (clock skew)."""
    n_chains = int(rng.integers(1, 5))
    sizes = rng.integers(1, 12, n_chains)
    chain = np.repeat(np.arange(n_chains), sizes)
    true_t = np.concatenate([np.sort(rng.choice(200, size=k, replace=False)) for k in sizes]).astype(np.int64)
    recorded = true_t + rng.integers(-15, 16, n_chains)[chain]
    n = chain.size
    w = rng.integers(0, 20, n)
    head = np.r_[True, chain[1:] != chain[:-1]]
    w[head] = 0
    floor = np.where(rng.random(n) < 0.3, rng.integers(0, 150, n), G.NEG)
    floor[head] = rng.integers(0, 50, int(head.sum()))  # as in built graphs: every chain starts somewhere
    src, dst = rng.integers(0, n, (2, 3 * n))
    keep = true_t[src] < true_t[dst]
    src, dst = src[keep], dst[keep]
    lag = rng.integers(-5, 30, src.size)
    starts = np.sort(rng.choice(np.unique(recorded), size=min(4, np.unique(recorded).size), replace=False))
    return S.Model(chain, w, floor, src, dst, lag, recorded, starts)


def test_replay_by_windows_matches_a_networkx_relaxation_with_clock_skew(monkeypatch):
    """Replaying window by window (steps merged to a minimum size, joined where an edge leads back
    in recorded time) gives the same times as one relaxation over the whole graph."""
    monkeypatch.setattr(S, "MIN_WINDOW_POINTS", 3)
    rng = np.random.default_rng(11)
    windows = []
    for _ in range(300):
        m = _random_model(rng)
        assert np.array_equal(S.replay(m), _relax_with_networkx(m))
        windows.append(int(S._blocks(m, np.r_[True, m.chain[1:] != m.chain[:-1]]).max()) + 1)
    assert max(windows) >= 3  # the replays did run in several windows


@pytest.mark.parametrize("fix", [None, "dataloader", "sync", "comm", "launch"])
def test_replay_matches_a_networkx_relaxation(tmp_path, fix):
    path = sync_loop(tmp_path, True) if fix == "sync" else comm_loop(tmp_path, False, dataloader_us=3000.0)
    trace, steps, comm = _graph(path)
    g = G.build_graph(trace, steps, comm)
    if fix is None:
        m, inv = S.Model.of(g), None
    else:
        m, inv = W.TRANSFORMS[fix](g)
    got = S.replay(m)
    want = _relax_with_networkx(m)
    assert np.array_equal(got, want)
    if fix is None:
        assert np.array_equal(got, g.time)  # the recorded graph replays the recorded times


@pytest.mark.parametrize("fix", [None, "dataloader", "sync", "comm", "launch"])
def test_replay_in_short_windows_matches_a_networkx_relaxation(tmp_path, monkeypatch, fix):
    """Steps cut into windows of a few points each: the replay settles one window after another,
    the windows sharing one layout (built once per graph, for every what-if that keeps its chains)."""
    monkeypatch.setattr(S, "MIN_WINDOW_POINTS", 4)
    monkeypatch.setattr(S, "MAX_WINDOW_POINTS", 8)
    path = sync_loop(tmp_path, True) if fix == "sync" else comm_loop(tmp_path, False, dataloader_us=3000.0)
    trace, steps, comm = _graph(path)
    g = G.build_graph(trace, steps, comm)
    m = S.Model.of(g) if fix is None else W.TRANSFORMS[fix](g)[0]
    if fix in (None, "dataloader", "sync", "launch"):
        assert m.layout is g.replay_layout is not None
    assert len((m.layout or S.Layout.of(m)).windows) > len(steps)  # steps were cut further
    assert np.array_equal(S.replay(m), _relax_with_networkx(m))


def test_replay_joins_windows_an_edge_goes_back_across(monkeypatch):
    """Two chains of four points 10 ns apart; an edge from the second chain's third point (recorded at
    25) to the first chain's third point (recorded at 20) goes back in recorded time, and one from the
    first chain's last point holds the second chain's last point 5 ns after it."""
    m = S.Model(
        chain=np.array([0, 0, 0, 0, 1, 1, 1, 1]),
        chain_w=np.array([0, 10, 10, 10, 0, 10, 10, 10]),
        floor=np.array([0, G.NEG, G.NEG, G.NEG, 5, G.NEG, G.NEG, G.NEG]),
        src=np.array([6, 3]),
        dst=np.array([2, 7]),
        lag=np.array([0, 5]),
        time=np.array([0, 10, 20, 30, 5, 15, 25, 35]),
        window_starts=np.arange(0, 40, 5),
    )
    # chain 0: 0, 10, then max(20, 25 + 0) = 25, 35; chain 1: 5, 15, 25, then max(35, 35 + 5) = 40
    want = [0, 10, 25, 35, 5, 15, 25, 40]
    monkeypatch.setattr(S, "MIN_WINDOW_POINTS", 1)
    assert S.replay(m).tolist() == want
    # a window from each step start (one point each); the windows holding 20 and 25 become one
    assert len(S.Layout.of(m).windows) == 7
    monkeypatch.setattr(S, "MAX_WINDOW_POINTS", 1)  # without steps, cut at equal stretches of time
    m.window_starts = None
    assert S.replay(m).tolist() == want and len(S.Layout.of(m).windows) > 2
    monkeypatch.setattr(S, "MIN_WINDOW_POINTS", 100)  # one window
    assert S.replay(m).tolist() == want and len(S.Layout.of(m).windows) == 1


def test_graph_exports_to_networkx(tmp_path):
    trace, steps, comm = _graph(sync_loop(tmp_path, True))
    g = G.build_graph(trace, steps, comm)
    H = g.to_networkx()
    assert H.number_of_nodes() == len(g)
    kinds = {d["type"] for _, _, d in H.edges(data=True)}
    assert {"order", "launch", "sync"} <= kinds
    assert nx.is_directed_acyclic_graph(H)


# -- shared traces -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "name", shared_names("kineto", "*.json*") + shared_names("nsys", "*.sqlite") + shared_names("h100", "*.json.gz")
)
def test_breakdown_sums_to_the_step_time_on_shared_traces(name):
    sub = "nsys" if name.endswith(".sqlite") else "h100" if (shared_traces() / "h100" / name).exists() else "kineto"
    trace = load(shared_traces() / sub / name)
    backlog = find_backlog(trace)
    steps = find_steps(trace, backlog)
    if not len(steps):
        pytest.skip("no steps")
    comm = C.comm_kernel_mask(trace, links.gpu_external_ids(trace))
    g = G.build_graph(trace, steps, comm, backlog=backlog)
    assert np.array_equal(S.replay(S.Model.of(g)), g.time)
    assert np.array_equal(S.completions(g, g.time) + g.origin_ns, steps.end_ns)
    cp = critical_path(trace, steps, comm, backlog=backlog)
    done = np.maximum.accumulate(steps.end_ns)
    want = np.diff(np.r_[steps.cpu_start_ns[0], done])
    for i, (row, step_ns) in enumerate(zip(cp.steps, want)):
        assert row["step_ns"] == step_ns
        assert row["timed"] == (i >= steps.timed_from)
        assert sum(row[f"{c}_ns"] for c in S.CATEGORIES) == step_ns
        assert all(row[f"{c}_ns"] >= 0 for c in S.CATEGORIES)
    for p in cp.predictions.values():
        assert 0 <= p.step_ms_after <= p.step_ms_before
        # every replay starts from the report's step: the median of the step times the window covers (a
        # prediction holds its times as saved, to 0.1 us)
        assert p.step_ms_before == pytest.approx(float(np.median(want[steps.timed_from :])) / 1e6, abs=5e-5)


# -- a captured run ------------------------------------------------------------------------------
def test_captured_cpu_run_dataloader_sleep(tmp_path):
    """A real torch.profiler capture of a tiny CPU training loop with a 60 ms sleep per batch in data
    loading; the same loop without it is the measured "after". Each step is about a millisecond of CPU
    work and a 40 ms wait standing for device work, so the step times hold on a loaded machine (see
    loader_pair.py for why). Five pairs alternate, so drift on the machine hits both alike; the median
    of the per-pair differences between predicted and measured "after" must be within 30% of the
    "after" step. A prediction that kept the DataLoader wait (about 100 ms) or dropped the rest of the
    step with it (about 1 ms) is off by 40 ms or more."""
    pytest.importorskip("torch")
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parent / "capture_scripts" / "loader_pair.py"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    pairs = 5
    proc = subprocess.run(
        [sys.executable, str(script), str(tmp_path), "0.06", str(pairs), "0.04"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    preds = [predicted(tmp_path / f"before{i}.pt.trace.json", "dataloader") for i in range(pairs)]
    afters = [measured_step_ms(tmp_path / f"after{i}.pt.trace.json") for i in range(pairs)]
    befores = [measured_step_ms(tmp_path / f"before{i}.pt.trace.json") for i in range(pairs)]
    assert [p.step_ms_before for p in preds] == pytest.approx(befores, rel=1e-6)
    after = float(np.median(afters))
    assert float(np.median(befores)) > after + 50.0  # the sleep is there
    diffs = [p.step_ms_after - a for p, a in zip(preds, afters)]
    print("predicted - measured after, per pair (ms):", [round(d, 2) for d in diffs], f"after {after:.2f} ms")
    # Twice the hand-built traces' tolerance: on a machine running a dozen other processes, every pair's
    # "before" step (woken from a 60 ms sleep each batch) came out about 10 ms (20%) slower in the rest of
    # the step than its "after" (seen once in a full run at load 12). A wrong model is off by 40 ms or more.
    assert abs(float(np.median(diffs))) <= 2 * TOLERANCE * after, (diffs, afters)
