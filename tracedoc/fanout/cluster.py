"""Ranks on a Dask cluster: one task per rank file, run by the cluster's workers.

Each worker reads its own files (local paths its machine sees, or URLs it fetches with the credentials
in its own environment) and sends back only the packed compact results (``ranktask.rank_task``).

Faults:

- a worker that dies mid-job (killed, out of memory): the scheduler runs its tasks again on another
  worker, up to ``distributed.scheduler.allowed-failures`` times (3 by default); the result is the one
  an undisturbed run gives;
- a rank whose task kills its worker on every try, or fails in a way tracedoc did not foresee: that rank
  alone is lost, and named in the report (``failed``) with why;
- an address that cannot be reached, a scheduler without workers, or a scheduler that goes away mid-job:
  one error naming the address, and no partial result.
"""

from __future__ import annotations

import logging
import re
import uuid
from contextlib import contextmanager
from typing import Any, Callable

from ..errors import TraceError, UsageError
from .tasks import FanOut, collect, rank_task

# Connecting to the scheduler, and waiting for its first worker: Dask's own setting
# (distributed.comm.timeouts.connect, e.g. DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=10s), unless set here.
DASK_CONNECT_TIMEOUT_S: float | None = None


def on_dask(
    scheduler: Any,
    files: list[str],
    options: dict,
    progress: Callable[[int, int], None] | None,
    rank_of,
    given: dict | None,
) -> FanOut:
    """Analyse ``files`` on the cluster of ``scheduler`` (an address, or a ``distributed.Client``)."""
    try:
        from distributed import Client
    except ImportError:
        raise UsageError(
            "--scheduler", "needs Dask's distributed package", None, "pip install 'tracedoc[dask]'"
        ) from None
    if isinstance(scheduler, Client):
        return _run(scheduler, str(scheduler.scheduler.address), files, options, progress, rank_of, given)
    address = str(scheduler)
    with _quiet():  # every failure is reported once, by us; Dask's own log lines would repeat it
        client = _connect(Client, address)
        try:
            _wait_for_workers(client, address)
            return _run(client, address, files, options, progress, rank_of, given)
        finally:
            client.close(timeout=5)


def connect_timeout_s() -> float:
    if DASK_CONNECT_TIMEOUT_S is not None:
        return DASK_CONNECT_TIMEOUT_S
    import dask.config
    from dask.utils import parse_timedelta

    return parse_timedelta(dask.config.get("distributed.comm.timeouts.connect", "30s"), default="s") or 30.0


def _connect(Client, address: str):
    try:
        return Client(address, timeout=connect_timeout_s(), set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise TraceError(
            address,
            "cannot reach the Dask scheduler",
            str(exc)[:200],
            "check the address (tcp://host:8786) and that the scheduler is running",
        ) from None
    except (ValueError, TypeError) as exc:
        raise UsageError(
            "--scheduler",
            f"{address!r} is not a Dask scheduler address",
            str(exc)[:200],
            "give it as tcp://host:port (e.g. tcp://10.0.0.5:8786)",
        ) from None


def _wait_for_workers(client, address: str) -> None:
    try:
        client.wait_for_workers(1, timeout=connect_timeout_s())
    except (OSError, TimeoutError) as exc:
        raise TraceError(
            address,
            f"has no workers (none joined within {connect_timeout_s():g} s)",
            str(exc)[:200],
            "start workers with `dask worker ADDRESS`, or point --scheduler at a running cluster",
        ) from None


def _run(client, address: str, files: list[str], options: dict, progress, rank_of, given) -> FanOut:
    from distributed import as_completed
    from distributed.client import FutureCancelledError
    from distributed.scheduler import KilledWorker

    run = uuid.uuid4().hex[:8]
    futures = {
        client.submit(rank_task, f, options, rank_of, given, key=task_key(run, i, f), pure=False): f
        for i, f in enumerate(files)
    }
    done = FanOut([])
    try:
        for n, fut in enumerate(as_completed(list(futures), loop=client.loop), 1):
            path = futures[fut]
            try:
                collect(done, path, fut.result())
            except KilledWorker as exc:
                done.failed.append(
                    {
                        "source": path,
                        "error": f"{path}: not read: each Dask worker that analysed it "
                        f"died (out of memory, or killed), on every try ({exc})"[:600],
                    }
                )
            except (FutureCancelledError, OSError) as exc:  # the scheduler went away: nothing more will come
                raise TraceError(
                    address,
                    f"lost the Dask scheduler while the ranks were read ({len(done.received)} of "
                    f"{len(files)} files done)",
                    str(exc)[:200],
                    "check that the scheduler is running, then run again",
                ) from None
            except UsageError:
                raise
            except Exception as exc:  # noqa: BLE001 -- a rank that failed as no reader foresaw costs only that rank
                done.failed.append(
                    {
                        "source": path,
                        "error": f"{path}: not read: its analysis failed on the Dask worker "
                        f"({type(exc).__name__}: {exc})"[:600],
                    }
                )
            if progress:
                progress(n, len(files))
    finally:
        client.cancel(list(futures))  # a job given up leaves no work behind on the cluster
    return done


def task_key(run: str, index: int, path: str) -> str:
    """The task's name on the cluster (shown on its dashboard): the file's base name, the run and its index."""
    base = re.sub(r"[^A-Za-z0-9._\-]", "_", path.rstrip("/").rsplit("/", 1)[-1])[:80]
    return f"tracedoc-{run}-{index:06d}-{base}"


@contextmanager
def _quiet():
    """Dask's own log lines silenced (its loggers set their levels one by one)."""
    names = ["distributed", "tornado", "asyncio"] + [
        n for n in logging.root.manager.loggerDict if n.startswith(("distributed.", "tornado."))
    ]
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
