"""Inputs by URL, against a real S3-compatible server (moto's standalone server) and a real web server,
both started on 127.0.0.1 for these tests: a prefix of rank files and one file give what the same files
give on disk, on the local process pool and on a Dask cluster whose workers fetch their own ranks;
``diff`` and ``logs`` take URLs; the bounds of local files hold (a gzip bomb in a bucket); and each of
the store's failures is one line saying which and what to do.
"""

from __future__ import annotations

import functools
import gzip
import http.server
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from log_fixtures import hf_trainer_state
from test_job import write_gpu_job

boto3 = pytest.importorskip("boto3")
pytest.importorskip("s3fs")
pytest.importorskip("moto.server")

ROOT = Path(__file__).resolve().parents[1]
BUCKET = "runs"
CLI_TIMEOUT_S = 180


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_moto(**env) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=dict(os.environ, **env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).close()
            return proc, endpoint
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError(f"moto's server did not start on {endpoint}") from None
            time.sleep(0.1)


def _stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


def _store_env(endpoint: str, **extra) -> dict:
    """The standard AWS environment pointed at the local server, isolated from any real configuration."""
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        "AWS_CONFIG_FILE": os.devnull,
    }
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A running server holding bucket ``runs``: ``job/`` (4 rank files), ``one/trace.json.gz``,
    ``logs/trainer_state.json``, ``bomb/rank0.json.gz`` (a trace padded to 70 MB with white space); and the local
    copies."""
    proc, endpoint = _start_moto()
    try:
        local = tmp_path_factory.mktemp("store")
        job = write_gpu_job(local / "job")
        (local / "trainer_state.json").write_text(hf_trainer_state(n=200))
        client = boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        )
        client.create_bucket(Bucket=BUCKET)
        for f in sorted(job.iterdir()):
            client.put_object(Bucket=BUCKET, Key=f"job/{f.name}", Body=f.read_bytes())
        client.put_object(Bucket=BUCKET, Key="one/trace.json.gz", Body=(job / "rank3.pt.trace.json.gz").read_bytes())
        client.put_object(
            Bucket=BUCKET, Key="logs/trainer_state.json", Body=(local / "trainer_state.json").read_bytes()
        )
        client.put_object(Bucket=BUCKET, Key="job/notes.txt", Body=b"not a trace")  # not read, as in a directory
        client.put_object(
            Bucket=BUCKET,
            Key="bomb/rank0.json.gz",
            Body=gzip.compress(b'{"traceEvents": [' + b" " * (70 << 20) + b"]}", 9),
        )
        yield endpoint, local
    finally:
        _stop(proc)


@pytest.fixture
def store_env(s3, monkeypatch):
    endpoint, _ = s3
    for k, v in _store_env(endpoint).items():
        monkeypatch.setenv(k, v)
    import fsspec

    fsspec.filesystem("s3").clear_instance_cache()  # each test's environment, not a cached file system's
    return endpoint


def _cli(*args, env: dict, timeout: float = CLI_TIMEOUT_S) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    full.update(env)
    return subprocess.run(
        [sys.executable, "-m", "tracedoc", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=full,
        timeout=timeout,
    )


def _in_process(capsys, monkeypatch, *args, env: dict) -> tuple[int, list[str]]:
    """The command line run in this process (no interpreter to start): its exit code and stderr lines."""
    import fsspec

    from tracedoc.cli import main

    for k, v in env.items():
        monkeypatch.setenv(k, v)
    fsspec.filesystem("s3").clear_instance_cache()
    capsys.readouterr()
    rc = main([str(a) for a in args])
    return rc, capsys.readouterr().err.strip().splitlines()


def _ranks(doc: dict) -> dict:
    return {r["rank"]: r["metrics"] for r in doc["ranks"]}


def _metrics(result) -> dict:
    """Each rank's metrics as the JSON report has them."""
    return {r.rank: json.loads(json.dumps(r.metrics)) for r in result.ranks}


@pytest.fixture(scope="module")
def on_disk(s3):
    import tracedoc

    return tracedoc.analyze(s3[1] / "job", jobs=1)


def test_a_prefix_of_rank_files_is_the_directory(s3, store_env, on_disk):
    import tracedoc

    by_url = tracedoc.analyze(f"s3://{BUCKET}/job/", jobs=2)
    assert [i.path for i in by_url.inputs] == [f"s3://{BUCKET}/job/rank{r}.pt.trace.json.gz" for r in range(4)]
    assert [i.sha256 for i in by_url.inputs] == [i.sha256 for i in on_disk.inputs]  # the same bytes were read
    assert [r.metrics for r in by_url.ranks] == [r.metrics for r in on_disk.ranks]
    assert [r.source for r in by_url.ranks] == [i.path for i in by_url.inputs]
    assert by_url.job.straggler_ranks == on_disk.job.straggler_ranks == [3]
    traces = tracedoc.load_dir(f"s3://{BUCKET}/job/")
    assert [(t.meta.rank, t.source) for t in traces] == [
        (r, f"s3://{BUCKET}/job/rank{r}.pt.trace.json.gz") for r in range(4)
    ]
    # no prefix ending in /: the store says it is a folder
    assert [r.metrics for r in tracedoc.analyze(f"s3://{BUCKET}/job", jobs=1).ranks] == [
        r.metrics for r in on_disk.ranks
    ]


def test_one_file_by_url_and_the_command_line(s3, store_env):
    endpoint, local = s3
    p = _cli("analyze", f"s3://{BUCKET}/one/trace.json.gz", "-f", "json", env=_store_env(endpoint))
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    import tracedoc

    assert _ranks(doc) == _metrics(tracedoc.analyze(local / "job" / "rank3.pt.trace.json.gz"))
    assert doc["inputs"][0]["path"] == f"s3://{BUCKET}/one/trace.json.gz"
    assert "/tmp" not in json.dumps(doc["ranks"])  # the local copy is never named


def test_the_ranks_of_a_prefix_are_fetched_by_the_cluster_workers(s3, store_env, on_disk):
    distributed = pytest.importorskip("distributed")
    import tracedoc

    # the workers are processes of their own, started with the store's credentials in their environment
    with (
        distributed.LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None, host="127.0.0.1", protocol="tcp"
        ) as c,
        distributed.Client(c) as client,
    ):
        by_url = tracedoc.analyze(f"s3://{BUCKET}/job/", scheduler=client)
    assert _metrics(by_url) == _metrics(on_disk)
    assert [i.path for i in by_url.inputs] == [f"s3://{BUCKET}/job/rank{r}.pt.trace.json.gz" for r in range(4)]
    assert by_url.job.straggler_ranks == [3]


def test_a_gzip_bomb_in_a_bucket_is_bounded_as_on_disk(s3, store_env, capsys, monkeypatch):
    endpoint, _ = s3
    rc, lines = _in_process(capsys, monkeypatch, "analyze", f"s3://{BUCKET}/bomb/rank0.json.gz", env={})
    assert rc == 1
    (line,) = lines
    assert line.startswith(f"tracedoc: error: s3://{BUCKET}/bomb/rank0.json.gz: inflates past "), line
    assert "gzip bomb" in line


def test_diff_and_logs_take_urls(s3, store_env, tmp_path):
    endpoint, local = s3
    env = _store_env(endpoint)
    saved = tmp_path / "base.json"
    assert _cli("analyze", local / "job" / "rank0.pt.trace.json.gz", "-o", saved, env={}).returncode == 0
    boto3.client("s3", endpoint_url=endpoint).put_object(
        Bucket=BUCKET, Key="reports/base.json", Body=saved.read_bytes()
    )
    p = _cli("diff", f"s3://{BUCKET}/reports/base.json", f"s3://{BUCKET}/one/trace.json.gz", "-f", "json", env=env)
    assert p.returncode == 0, p.stderr
    doc = json.loads(p.stdout)
    here = _cli("diff", saved, local / "job" / "rank3.pt.trace.json.gz", "-f", "json", env={})
    same = ("step_delta_ns", "step_pct", "attribution", "pairs")
    assert {k: doc[k] for k in same} == {k: json.loads(here.stdout)[k] for k in same}
    assert (doc["before"]["path"], doc["before"]["kind"]) == (f"s3://{BUCKET}/reports/base.json", "report")
    assert (doc["after"]["path"], doc["after"]["kind"]) == (f"s3://{BUCKET}/one/trace.json.gz", "trace")

    p = _cli("logs", f"s3://{BUCKET}/logs/trainer_state.json", "-f", "json", env=env)
    assert p.returncode == 0, p.stderr
    by_url, on_disk = (
        json.loads(p.stdout),
        json.loads(_cli("logs", local / "trainer_state.json", "-f", "json", env={}).stdout),
    )
    assert by_url["input"]["path"] == f"s3://{BUCKET}/logs/trainer_state.json"
    assert by_url["input"]["sha256"] == on_disk["input"]["sha256"]
    assert by_url["metrics"] == on_disk["metrics"] and by_url["anomalies"] == on_disk["anomalies"]


@pytest.mark.parametrize(
    "url, env, said, todo",
    [
        ("s3://no-such-bucket/run/", {}, "its bucket does not exist", "check the bucket's name"),
        (f"s3://{BUCKET}/no/such/trace.json.gz", {}, "does not exist", "check the URL"),
        (f"s3://{BUCKET}/empty/", {}, "does not exist", "check the URL"),
        (
            f"s3://{BUCKET}/job/",
            {"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""},
            "no credentials for the store were found",
            "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
        ),
        ("ftp2://host/trace.json", {}, "uses a protocol tracedoc cannot read", "use one of"),
    ],
)
def test_each_store_failure_is_one_line_saying_which(s3, store_env, capsys, monkeypatch, url, env, said, todo):
    rc, lines = _in_process(capsys, monkeypatch, "analyze", url, env=env)
    assert rc in (1, 2)
    (line,) = lines
    assert line.startswith(f"tracedoc: error: {url}: "), line
    assert said in line and todo in line, line


def test_access_denied_is_one_line_saying_so(capsys, monkeypatch):
    """A server that checks credentials (moto with authentication on), given keys it does not know."""
    proc, endpoint = _start_moto(INITIAL_NO_AUTH_ACTION_COUNT="1")
    try:
        boto3.client(
            "s3",
            endpoint_url=endpoint,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
            region_name="us-east-1",
        ).create_bucket(Bucket=BUCKET)  # the one request let through
        for url in (f"s3://{BUCKET}/job/", f"s3://{BUCKET}/job/rank0.json"):
            rc, lines = _in_process(capsys, monkeypatch, "analyze", url, env=_store_env(endpoint))
            assert rc == 1
            (line,) = lines
            assert line.startswith(f"tracedoc: error: {url}: cannot be read: access denied"), line
            assert "check that the credentials in the environment may list and read it" in line
    finally:
        _stop(proc)


def test_one_file_from_a_web_server(s3, tmp_path):
    pytest.importorskip("aiohttp")
    _, local = s3
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(local / "job"))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/rank2.pt.trace.json.gz"
        p = _cli("analyze", url, "-f", "json", env={})
        missing = _cli("analyze", url.replace("rank2", "rank9"), env={})
    finally:
        server.shutdown()
        server.server_close()
    assert p.returncode == 0, p.stderr
    here = _cli("analyze", local / "job" / "rank2.pt.trace.json.gz", "-f", "json", env={})
    assert _ranks(json.loads(p.stdout)) == _ranks(json.loads(here.stdout))
    assert missing.returncode == 1
    (line,) = missing.stderr.strip().splitlines()
    assert "rank9.pt.trace.json.gz: does not exist" in line


def test_rank_picks_a_rank_of_a_prefix(s3, store_env, capsys, monkeypatch, tmp_path):
    """--rank on a URL prefix: no local file to sniff, so the check of the rank waits for the ranks read (it
    once sniffed the URL as a local path, which does not exist)."""
    endpoint, _ = s3
    out = tmp_path / "r.json"
    rc, err = _in_process(
        capsys,
        monkeypatch,
        "analyze",
        f"s3://{BUCKET}/job/",
        "--rank",
        "1",
        "-j",
        "1",
        "--no-progress",
        "-o",
        out,
        env=_store_env(endpoint),
    )
    assert rc == 0, err
    assert json.loads(out.read_text())["job"]["focus_rank"] == 1
