"""Ranks on a real Dask cluster: a scheduler and worker processes on 127.0.0.1, tracedoc's command line
in a process of its own pointed at them with ``--scheduler``.

Covered: the same job as a local run; what travels back per rank (packed compact results, measured);
a worker SIGKILLed mid-job (its ranks recomputed, the same result); a rank whose worker dies on every
try (that rank alone lost, and named); a scheduler that vanishes mid-job, and an address nobody
answers (one error line, exit 1); the progress bar of ranks on a terminal, and none on a pipe.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from trace_builder import TraceBuilder

distributed = pytest.importorskip("distributed")

ROOT = Path(__file__).resolve().parents[1]
CLI_TIMEOUT_S = 180


def _env(**extra) -> dict:
    """The environment of the processes started here: tracedoc, and this folder (a scheduler of its own
    process unpickles ``_tracedoc_tasks`` by reference), importable."""
    paths = [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, paths)))
    env.update(extra)
    return env


def _cli(*args, **popen) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tracedoc", *map(str, args)],
        cwd=ROOT,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **popen,
    )


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RANKS, SLOW_RANK = 8, 5
STEP_US, KERNELS, LATE_US = 10_000.0, 300, 4_000.0


def write_job(d: Path, steps: int = 6) -> Path:
    """An 8-rank NCCL job: per step every rank runs ``KERNELS`` short kernels, then an all-reduce that
    rank 5 reaches ``LATE_US`` later than the others (the straggler). Enough events per rank that a job
    lasts long enough to be disturbed."""
    d.mkdir(parents=True, exist_ok=True)
    for r in range(RANKS):
        b = TraceBuilder(rank=r, world_size=RANKS)
        for k in range(steps):
            base = 1_000_000.0 + k * STEP_US
            b.step(k + 1, base, base + STEP_US - 100.0)
            t = base + 50.0
            for j in range(KERNELS):
                b.kernel(f"ampere_sgemm_{j % 5}", t, 10.0, op="aten::mm")
                t += 12.0
            arrive = t + (LATE_US if r == SLOW_RANK else 0.0)
            b.nccl(arrive, t + LATE_US + 1_000.0 - arrive)
        b.write(d / f"rank{r}.pt.trace.json.gz")
    return d


def _same_job(doc: dict) -> dict:
    """The parts of a JSON report that a run on other processes must reproduce exactly."""
    return {"inputs": doc["inputs"], "ranks": doc["ranks"], "job": doc["job"]}


@pytest.fixture(scope="module")
def job_dir(tmp_path_factory) -> Path:
    return write_job(tmp_path_factory.mktemp("cluster") / "run")


@pytest.fixture(scope="module")
def local_report(job_dir) -> dict:
    p = _cli("analyze", job_dir, "-f", "json", "-j", "1")
    out, err = p.communicate(timeout=CLI_TIMEOUT_S)
    assert p.returncode == 0, err
    return json.loads(out)


@pytest.fixture
def cluster():
    """Two worker processes (each restarted by its nanny when killed) and the scheduler, over TCP."""
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None, host="127.0.0.1", protocol="tcp"
        ) as c,
        distributed.Client(c) as client,
    ):
        yield c, client


def _tracedoc_tasks(dask_scheduler) -> dict:
    """On the scheduler: each tracedoc task being processed -> (its worker's address, the worker's pid)."""
    return {
        str(ts.key): (ts.processing_on.address, ts.processing_on.pid)
        for ts in dask_scheduler.tasks.values()
        if str(ts.key).startswith("tracedoc-") and ts.processing_on is not None
    }


def test_cluster_gives_the_local_job_and_little_travels_back(job_dir, local_report, cluster, tmp_path):
    c, client = cluster
    p = _cli("analyze", job_dir, "-f", "json", "--scheduler", c.scheduler_address)
    out, err = p.communicate(timeout=CLI_TIMEOUT_S)
    assert p.returncode == 0, err
    doc = json.loads(out)
    assert _same_job(doc) == _same_job(local_report)
    assert doc["job"]["straggler_ranks"] == [SLOW_RANK]
    assert [i.get("error") for i in doc["inputs"]] == [None] * 8


@pytest.mark.shared
def test_a_large_rank_sends_back_under_one_percent_of_its_file(cluster, tmp_path):
    """A 21 MiB rank (the shared V100 rank scaled up by the benchmarks' generator), analysed by a worker:
    the bytes its task hands the client are counted, and stay under 1% of the file (unpacked they are
    about 1.06%)."""
    c, client = cluster
    big = tmp_path / "rank1.json"
    subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "make_big_trace.py"), "--size-mb", "21", "-o", str(big), "-q"],
        check=True,
        cwd=ROOT,
        env=_env(),
        timeout=CLI_TIMEOUT_S,
    )
    from tracedoc.fanout.pool import fan_out
    from tracedoc.stages import rank_from_name

    size = big.stat().st_size
    assert size >= 20 << 20
    done = fan_out([str(big)], {}, scheduler=client, rank_of=rank_from_name)
    assert not done.failed and len(done.outputs) == 1
    sent = done.received[str(big)]
    assert 0 < sent <= 0.01 * size, f"{sent:,} bytes sent back for a {size:,}-byte rank"
    assert done.outputs[0].tables is not None  # what the job view needs came back with it


def test_a_worker_killed_mid_job_has_its_ranks_recomputed(job_dir, local_report, cluster):
    c, client = cluster
    p = _cli("analyze", job_dir, "-f", "json", "--scheduler", c.scheduler_address)
    killed = None
    deadline = time.monotonic() + CLI_TIMEOUT_S
    while killed is None and p.poll() is None and time.monotonic() < deadline:
        busy = client.run_on_scheduler(_tracedoc_tasks)
        if busy:
            key, (_, pid) = sorted(busy.items())[0]
            os.kill(pid, signal.SIGKILL)  # mid-task: the scheduler saw it processing there
            killed = key
        else:
            time.sleep(0.02)
    out, err = p.communicate(timeout=CLI_TIMEOUT_S)
    assert killed is not None, "the job ended before a worker could be killed"
    assert p.returncode == 0, err
    assert _same_job(json.loads(out)) == _same_job(local_report)


def test_a_rank_whose_worker_dies_on_every_try_costs_only_that_rank(job_dir, local_report, tmp_path):
    import dask

    victim = "rank2.pt.trace.json.gz"
    report = tmp_path / "report.json"
    # one retry; and one task at a time on each worker, so that a kill hits the victim's task alone
    settings = {"distributed.scheduler.allowed-failures": 1, "distributed.scheduler.worker-saturation": 1.0}
    with (
        dask.config.set(settings),
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None, host="127.0.0.1", protocol="tcp"
        ) as c,
        distributed.Client(c) as client,
    ):
        p = _cli("analyze", job_dir, "-o", report, "--scheduler", c.scheduler_address)
        kills: list[int] = []
        deadline = time.monotonic() + CLI_TIMEOUT_S
        while p.poll() is None and time.monotonic() < deadline:
            for key, (_, pid) in client.run_on_scheduler(_tracedoc_tasks).items():
                if key.endswith(victim) and pid not in kills:
                    os.kill(pid, signal.SIGKILL)
                    kills.append(pid)
            time.sleep(0.02)
        out, err = p.communicate(timeout=CLI_TIMEOUT_S)
    assert len(kills) == 2  # the first try and the one retry allowed
    assert p.returncode == 0, err
    doc = json.loads(report.read_text())
    errors = {Path(i["path"]).name: i.get("error") for i in doc["inputs"]}
    assert "died" in errors.pop(victim)
    assert set(errors.values()) == {None}
    assert sorted(r["rank"] for r in doc["ranks"]) == [0, 1, 3, 4, 5, 6, 7]
    assert doc["job"]["missing_ranks"] == [2], doc["job"]["issues"]  # the job view knows a member is missing
    own = ("gpu_busy_fraction", "kernel_count", "kernel_median_ns")  # a rank's own figures, not the job's
    kept = {r["rank"]: [r["metrics"][k] for k in own] for r in local_report["ranks"] if r["rank"] != 2}
    assert {r["rank"]: [r["metrics"][k] for k in own] for r in doc["ranks"]} == kept
    from tracedoc.render.text import render_text
    from tracedoc.result import AnalysisResult

    text = " ".join(render_text(AnalysisResult.from_dict(doc)).split())  # words, as wrapped lines hold them
    assert f"not analysed: {victim}: " in text and "died" in text


def test_a_scheduler_that_vanishes_mid_job_is_one_clear_error(tmp_path):
    d = write_job(tmp_path / "run", steps=12)
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    scheduler = subprocess.Popen(
        ["dask", "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = subprocess.Popen(
        ["dask", "worker", address, "--nworkers", "1", "--nthreads", "1", "--no-dashboard"],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        with distributed.Client(address, timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
            p = _cli("analyze", d, "-f", "json", "--scheduler", address)
            deadline = time.monotonic() + CLI_TIMEOUT_S
            while p.poll() is None and time.monotonic() < deadline:
                if client.run_on_scheduler(_tracedoc_tasks):
                    scheduler.send_signal(signal.SIGKILL)
                    break
                time.sleep(0.02)
            out, err = p.communicate(timeout=CLI_TIMEOUT_S)
    finally:
        for proc in (worker, scheduler):
            proc.kill()
            proc.wait(timeout=30)
    assert p.returncode == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"tracedoc: error: {address}: lost the Dask scheduler while the ranks were read")
    assert out == ""


def test_an_address_nobody_answers_is_one_clear_error(job_dir):
    address = f"tcp://127.0.0.1:{_free_port()}"
    p = subprocess.run(
        [sys.executable, "-m", "tracedoc", "analyze", str(job_dir), "--scheduler", address],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=CLI_TIMEOUT_S,
        env=_env(DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="2s"),
    )
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith(f"tracedoc: error: {address}: cannot reach the Dask scheduler")


def _on_a_terminal(*args) -> tuple[int, str]:
    """Run the command line with stderr on a pseudo-terminal; its exit code and what the terminal showed."""
    import pty

    leader, follower = pty.openpty()
    p = subprocess.Popen(
        [sys.executable, "-m", "tracedoc", *map(str, args)],
        cwd=ROOT,
        env=_env(COLUMNS="100"),
        stdout=subprocess.DEVNULL,
        stderr=follower,
        stdin=subprocess.DEVNULL,
    )
    os.close(follower)
    shown = bytearray()
    while True:
        try:
            block = os.read(leader, 65536)
        except OSError:  # the terminal closed: the process has ended
            break
        if not block:
            break
        shown += block
    os.close(leader)
    return p.wait(timeout=CLI_TIMEOUT_S), shown.decode("utf-8", "replace")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pseudo-terminals as Linux has them")
def test_progress_of_ranks_on_a_terminal_in_the_pool_and_on_the_cluster(job_dir, cluster):
    c, _ = cluster
    for extra in ((), ("--scheduler", c.scheduler_address)):
        rc, shown = _on_a_terminal("analyze", job_dir, "-q", *extra)
        assert rc == 0, shown
        assert "ranks" in shown and "8/8" in shown, shown  # the bar counts the rank files done
    p = _cli("analyze", job_dir, "-q", "--scheduler", c.scheduler_address)
    _, err = p.communicate(timeout=CLI_TIMEOUT_S)
    assert p.returncode == 0 and err == ""  # a pipe gets no bar
