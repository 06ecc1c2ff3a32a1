"""Long analyses run in a forked child process while this process runs the others.

The critical path replays every step five times (the trace, then each what-if); on a large trace it
takes as long as all the other analyses together, and only the timeline waits for it. With a spare
core it runs in a child forked as soon as its inputs are ready. The child holds a copy-on-write image
of this process, so it computes exactly what this process would; its ``Produced`` comes back as plain
data (MessagePack; arrays as an allow-listed dtype, a shape and bytes), rebuilt here into the value types
the analysis declares (``offload=``), never unpickled. A child that fails in any way (an exception, a
signal, an answer that does not decode into those types) is not trusted: the analysis runs again here,
so an error surfaces exactly as it would have.

Input: the planned analyses, the trace, and a bound on processes (``workers=1``: none, as in a rank
fan-out, which already keeps every core busy). Output: each offloaded analysis's ``Produced``, when
asked for.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import msgspec
import numpy as np

from ...gcpause import release_free_memory
from ...model.evidence import typed_evidence
from ...model.trace import Trace
from .registry import Analysis, Produced

# Ops (GPU ops, CPU ops, runtime calls) from which a child is worth its start: below this the
# fork, the result's trip and the copy-on-write faults cost more than the overlap saves. Measured on 2
# cores, whole analyses in fresh processes: 28K ops (10 MB of JSON) 0.154 s here, 0.145 s with the
# child; 45K ops the same either way; below ~20K the child's start is most of what it would save.
OFFLOAD_MIN_OPS = 20_000


def worth_offloading(trace: Trace, workers: int | None) -> bool:
    """Whether this run may fork: a large trace, a spare core, Linux, and no other thread (a fork copies
    only the calling thread; locks other threads hold would stay held in the child). macOS has fork,
    but its system libraries (numpy's Accelerate among them) are not safe to use in a forked child."""
    if workers == 1 or (os.cpu_count() or 1) < 2 or not sys.platform.startswith("linux"):
        return False
    if threading.active_count() != 1:
        return False
    ops = sum(len(trace.tables[t]) for t in ("gpu_ops", "cpu_ops", "runtime") if t in trace.tables)
    return ops >= OFFLOAD_MIN_OPS and child_fits(trace)


# What a child computing the critical path holds of its own, per byte of the trace's columns (pages it
# writes are copied from this process; its working arrays measured about 1.8x at 1 GiB of JSON), with a
# margin for what this process allocates meanwhile (its other analyses, 0.5-0.8x the columns at 1 GiB).
CHILD_NEED_PER_TABLE_BYTE = 3


def child_fits(trace: Trace) -> bool:
    """Whether the memory free now holds a child as well: when it does not, the analysis runs in this
    process, which needs less than this process and a child together."""
    from ...ingest.memory import free_memory

    free = free_memory().bytes
    return free is None or free >= CHILD_NEED_PER_TABLE_BYTE * sum(t.nbytes for t in trace.tables.values())


# -- the child's answer as plain data ---------------------------------------------------------------
_EXT_ARRAY = 1
_ARRAY_DTYPES = frozenset(np.dtype(t).str for t in ("i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f4", "f8", "?"))


class _Answer(msgspec.Struct):
    metrics: dict[str, Any]
    evidence: dict[str, list[Any]]
    values: dict[str, Any]
    warnings: list[str]


def _enc_hook(value: Any) -> Any:
    if isinstance(value, np.ndarray) and value.dtype.str in _ARRAY_DTYPES:
        a = np.ascontiguousarray(value)
        return msgspec.msgpack.Ext(_EXT_ARRAY, msgspec.msgpack.encode((a.dtype.str, list(a.shape), a.tobytes())))
    raise TypeError(f"{type(value).__name__} values do not leave the child")


def _ext_hook(code: int, data: memoryview) -> np.ndarray:
    dtype, shape, raw = msgspec.msgpack.decode(data, type=tuple[str, list[int], bytes])
    if code != _EXT_ARRAY or dtype not in _ARRAY_DTYPES:
        raise ValueError(f"not an array of a plain dtype ({code}, {dtype!r})")
    return np.frombuffer(bytearray(raw), dtype=dtype).reshape(shape)  # reshape refuses a wrong size


def _dec_hook(kind: type, value: Any) -> Any:
    if kind is np.ndarray and isinstance(value, np.ndarray):
        return value
    raise TypeError(f"{kind!r} is not rebuilt from the child's answer")


_ENCODER = msgspec.msgpack.Encoder(enc_hook=_enc_hook)
_DECODER = msgspec.msgpack.Decoder(_Answer, ext_hook=_ext_hook)


def encode(produced: Produced) -> bytes:
    """An offloaded analysis's ``Produced`` as MessagePack (what the child sends)."""
    return _ENCODER.encode(_Answer(produced.metrics, produced.evidence, produced.values, produced.warnings))


def decode(data: bytes, value_types: Mapping[str, type]) -> Produced:
    """``encode``'s answer rebuilt, each value into its declared type; raises on anything else."""
    answer = _DECODER.decode(data)
    if set(answer.values) != set(value_types):
        raise ValueError(f"values {sorted(answer.values)}, declared {sorted(value_types)}")
    values = {k: msgspec.convert(v, value_types[k], dec_hook=_dec_hook) for k, v in answer.values.items()}
    return Produced(answer.metrics, typed_evidence(answer.evidence), values, answer.warnings)


class _Child:
    """One analysis running in a forked child; its ``Produced`` comes back as plain data, written to an
    anonymous in-memory file (Linux's ``memfd``) the child fills and leaves, else through a pipe.

    Through a pipe the answer (tens of MB at 1 GiB: the critical path's overlay) moves 64 KB at a time,
    and only once this process reads it, the child waiting; the in-memory file is written as soon as the
    answer exists, the child ends and frees its memory, and this process reads the file in one go."""

    def __init__(self, entry: Analysis, trace: Trace, inputs: Mapping):
        read_fd, write_fd = _answer_fds()
        self.in_file = read_fd == write_fd
        pid = os.fork()
        if pid == 0:  # the child: compute, send, and leave without running any of the parent's exit code
            code = 1
            try:
                if not self.in_file:
                    os.close(read_fd)
                data = encode(entry.run(trace, inputs))
                with os.fdopen(write_fd, "wb") as out:
                    out.write(data)
                code = 0
            except BaseException:  # noqa: BLE001 - any failure: the parent runs the analysis itself
                pass
            finally:
                os._exit(code)
        if not self.in_file:
            os.close(write_fd)
        self.pid, self.fd, self.value_types = pid, read_fd, entry.offload

    def result(self) -> Produced | None:
        """The child's ``Produced`` (waiting for it), or None if it failed in any way."""
        if self.in_file:
            _, status = os.waitpid(self.pid, 0)
            os.lseek(self.fd, 0, os.SEEK_SET)
        with os.fdopen(self.fd, "rb") as answer:
            data = answer.read()
        if not self.in_file:
            _, status = os.waitpid(self.pid, 0)
        self.pid = None
        if status != 0 or not data:
            return None
        try:
            return decode(data, self.value_types)
        except Exception:  # noqa: BLE001 - an answer that is not the declared values: recompute
            return None

    def cancel(self) -> None:
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        self.pid = None
        try:
            os.close(self.fd)
        except OSError:
            pass


def _answer_fds() -> tuple[int, int]:
    """(read, write) ends for a child's answer: one in-memory file for both, else a pipe (no
    ``memfd_create`` in this Python, or a sandbox that refuses it)."""
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None:
        try:
            fd = memfd("tracedoc-answer", os.MFD_CLOEXEC)
        except OSError:
            pass
        else:
            return fd, fd
    return os.pipe()


class Offloader:
    """Starts the offloadable analyses of a plan in children once their inputs exist, and collects them."""

    def __init__(self, order: list[Analysis], trace: Trace, workers: int | None):
        self.trace = trace
        self.waiting = [e for e in order if e.offload is not None] if worth_offloading(trace, workers) else []
        self.names = {e.name for e in self.waiting}
        self.running: dict[str, tuple[Analysis, Mapping, _Child]] = {}  # analysis name -> its child

    def handles(self, entry: Analysis) -> bool:
        return entry.name in self.names

    def start_ready(self, values: Mapping) -> None:
        """Fork a child for each waiting analysis whose inputs are all in ``values``."""
        for entry in [e for e in self.waiting if all(n in values for n in e.needs)]:
            self.waiting.remove(entry)
            inputs = MappingProxyType({n: values[n] for n in entry.needs})
            # Free heap pages go back first: after the fork, this process's writes to a page it shares
            # with the child copy it, and the child's copy stays until the child ends.
            release_free_memory()
            self.running[entry.name] = (entry, inputs, _Child(entry, self.trace, inputs))

    def collect(self, names, merge: Callable[[Analysis, Produced], None]) -> None:
        """Wait for the children whose analyses output any of ``names`` (values, metrics or evidence
        tables; None: every child) and ``merge`` their results; an analysis whose child failed runs here
        instead."""
        for key, (entry, inputs, child) in list(self.running.items()):
            outputs = (*entry.provides, *entry.produces, *entry.evidence)
            if names is not None and not any(n in outputs for n in names):
                continue
            del self.running[key]
            produced = child.result()
            merge(entry, produced if produced is not None else entry.run(self.trace, inputs))

    def cancel(self) -> None:
        for _, _, child in self.running.values():
            child.cancel()
        self.running.clear()
