"""Build small Kineto (torch.profiler) traces by hand for tests.

Times are given in microseconds, as Kineto writes them. Every GPU op gets a launch call on the
main thread with a correlation id and ``ac2g`` flow events, linked to an optional CPU op through
External id, exactly as torch.profiler records them.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PID = 1000
MAIN_TID = 1000
DEVICE_PROPS = {
    "A100": {
        "name": "NVIDIA A100-SXM4-80GB",
        "totalGlobalMem": 85899345920,
        "computeMajor": 8,
        "computeMinor": 0,
        "numSms": 108,
        "maxThreadsPerBlock": 1024,
        "warpSize": 32,
    },
    "V100": {
        "name": "Tesla V100-SXM2-32GB",
        "totalGlobalMem": 34089730048,
        "computeMajor": 7,
        "computeMinor": 0,
        "numSms": 80,
        "maxThreadsPerBlock": 1024,
        "warpSize": 32,
    },
    "MI300X": {
        "name": "AMD Instinct MI300X",
        "totalGlobalMem": 206141652992,
        "computeMajor": 9,
        "computeMinor": 4,
        "numSms": 304,
        "maxThreadsPerBlock": 1024,
        "warpSize": 64,
    },
    "P100": {
        "name": "Tesla P100-PCIE-16GB",
        "totalGlobalMem": 17071734784,
        "computeMajor": 6,
        "computeMinor": 0,
        "numSms": 56,
        "maxThreadsPerBlock": 1024,
        "warpSize": 32,
    },
}


@dataclass
class TraceBuilder:
    rank: int | None = 0
    world_size: int | None = 1
    backend: str | None = "nccl"
    gpu: str = "A100"
    devices: int = 1
    legacy: bool = False  # torch 1.8 categories (Operator/Runtime/Kernel/Memcpy), lowercase "external id"
    base_time_ns: int | None = None  # 2024+ relative timestamps
    events: list[dict] = field(default_factory=list)
    extra_meta: dict[str, Any] = field(default_factory=dict)
    _ext: int = 1
    _corr: int = 1000

    # -- CPU side ----------------------------------------------------------------------------
    def cpu_op(
        self,
        name: str,
        start: float,
        end: float,
        tid: int = MAIN_TID,
        cat: str | None = None,
        args: dict | None = None,
        stack: list[str] | None = None,
    ) -> int:
        ext = self._ext
        self._ext += 1
        a = {"External id": ext, **(args or {})}
        if stack:
            a["Call stack"] = ";".join(stack)
        self.events.append(
            {
                "ph": "X",
                "cat": cat or ("Operator" if self.legacy else "cpu_op"),
                "name": name,
                "pid": PID,
                "tid": str(tid) if self.legacy else tid,
                "ts": start,
                "dur": end - start,
                "args": a,
            }
        )
        return ext

    def annotation(self, name: str, start: float, end: float, tid: int = MAIN_TID) -> int:
        return self.cpu_op(name, start, end, tid=tid, cat="Operator" if self.legacy else "user_annotation")

    def step(self, n: int, start: float, end: float) -> int:
        return self.annotation(f"ProfilerStep#{n}", start, end)

    def dataloader(self, start: float, end: float, multiprocess: bool = False) -> int:
        it = "_MultiProcessingDataLoaderIter" if multiprocess else "_SingleProcessDataLoaderIter"
        return self.annotation(f"enumerate(DataLoader)#{it}.__next__", start, end)

    def runtime(
        self, name: str, start: float, end: float, ext: int | None = None, corr: int | None = None, tid: int = MAIN_TID
    ) -> None:
        args: dict[str, Any] = {"cbid": 211}
        if corr is not None:
            args["correlation"] = corr
        if ext is not None:
            args["external id" if self.legacy else "External id"] = ext
        self.events.append(
            {
                "ph": "X",
                "cat": "Runtime" if self.legacy else "cuda_runtime",
                "name": name,
                "pid": PID,
                "tid": str(tid) if self.legacy else tid,
                "ts": start,
                "dur": end - start,
                "args": args,
            }
        )

    def sync(
        self, start: float, end: float, name: str = "cudaStreamSynchronize", op: str | None = "aten::item"
    ) -> None:
        """A blocking sync call, optionally inside a CPU op (``.item()`` -> _local_scalar_dense)."""
        ext = None
        if op:
            ext = self.cpu_op(op, start - 1, end + 1)
        self.runtime(name, start, end, ext=ext)

    def stream_wait(self, at: float, stream: int, wait_on_stream: int, device: int = 0) -> None:
        """``cudaStreamWaitEvent``: ``stream``'s next op waits for ``wait_on_stream``'s last one, with
        the GPU-side marker torch >= 2.1 records (category ``cuda_sync``)."""
        corr = self._corr
        self._corr += 1
        self.runtime("cudaStreamWaitEvent", at, at + 2.0, corr=corr)
        self.events.append(
            {
                "ph": "X",
                "cat": "cuda_sync",
                "name": "Stream Wait Event",
                "pid": device,
                "tid": stream,
                "ts": at + 1.0,
                "dur": 1.0,
                "args": {
                    "cuda_sync_kind": "Stream Wait Event",
                    "wait_on_stream": wait_on_stream,
                    "stream": stream,
                    "correlation": corr,
                    "device": device,
                },
            }
        )

    def memory(self, ts: float, nbytes: int, allocated: int, reserved: int, device: int = 0) -> None:
        self.events.append(
            {
                "ph": "i",
                "cat": "cpu_instant_event",
                "s": "t",
                "name": "[memory]",
                "pid": PID,
                "tid": MAIN_TID,
                "ts": ts,
                "args": {
                    "Device Type": 1,
                    "Device Id": device,
                    "Addr": 140000000000 + int(ts),
                    "Bytes": nbytes,
                    "Total Allocated": allocated,
                    "Total Reserved": reserved,
                },
            }
        )

    # -- GPU side ----------------------------------------------------------------------------
    def gpu_op(
        self,
        kind: str,
        name: str,
        start: float,
        dur: float,
        stream: int = 7,
        device: int = 0,
        launch_at: float | None = None,
        launch_dur: float = 4.0,
        op: str | None = None,
        launch_name: str | None = None,
        args: dict | None = None,
        link: bool = True,
        op_args: dict | None = None,
        flow: bool = True,
    ) -> int:
        corr = self._corr
        self._corr += 1
        ext = None
        launch_at = start - 10.0 if launch_at is None else launch_at
        if op:
            ext = self.cpu_op(op, launch_at - 1.0, launch_at + launch_dur + 1.0, args=op_args)
        call = (
            launch_name
            or {"kernel": "cudaLaunchKernel", "memcpy": "cudaMemcpyAsync", "memset": "cudaMemsetAsync"}[kind]
        )
        self.runtime(call, launch_at, launch_at + launch_dur, ext=ext, corr=corr)
        cat = {
            "kernel": "Kernel" if self.legacy else "kernel",
            "memcpy": "Memcpy" if self.legacy else "gpu_memcpy",
            "memset": "Memset" if self.legacy else "gpu_memset",
        }[kind]
        a: dict[str, Any] = {"device": device, "context": 1, "stream": stream}
        if link:
            a["correlation"] = corr
        if ext is not None:
            a["external id" if self.legacy else "External id"] = ext
        a.update(args or {})
        tid: Any = f"stream {stream}" if self.legacy else stream
        self.events.append(
            {"ph": "X", "cat": cat, "name": name, "pid": device, "tid": tid, "ts": start, "dur": dur, "args": a}
        )
        flow_cat = "async" if self.legacy else "ac2g"
        if flow:  # without flow events (and ``link``), nothing in the file ties the op to its launch call
            self.events.append(
                {"ph": "s", "id": corr, "pid": PID, "tid": MAIN_TID, "ts": launch_at, "cat": flow_cat, "name": flow_cat}
            )
            self.events.append(
                {
                    "ph": "f",
                    "id": corr,
                    "pid": device,
                    "tid": tid,
                    "ts": start,
                    "cat": flow_cat,
                    "name": flow_cat,
                    "bp": "e",
                }
            )
        return corr

    def unlaunched(
        self, name: str, start: float, dur: float, stream: int = 7, device: int = 0, correlation: int | None = None
    ) -> None:
        """A kernel with no launch call in the trace: launched before the profiler opened (a pre-window
        backlog), with the correlation id the driver gave it then (below the trace's own ids)."""
        a: dict[str, Any] = {"device": device, "context": 1, "stream": stream}
        if correlation is not None:
            a["correlation"] = correlation
        tid: Any = f"stream {stream}" if self.legacy else stream
        self.events.append(
            {
                "ph": "X",
                "cat": "Kernel" if self.legacy else "kernel",
                "name": name,
                "pid": device,
                "tid": tid,
                "ts": start,
                "dur": dur,
                "args": a,
            }
        )

    def overhead(self, name: str, start: float, end: float) -> None:
        """A CUPTI overhead span as Kineto records it (category ``overhead``, no process or thread), e.g.
        ``Command Buffer Full`` inside a launch call that waited for a slot in the launch queue."""
        self.events.append(
            {"ph": "X", "cat": "overhead", "name": name, "pid": -1, "tid": 0, "ts": start, "dur": end - start}
        )

    def kernel(self, name: str, start: float, dur: float, **kw) -> int:
        extra = {}
        for key, arg in (
            ("grid", "grid"),
            ("block", "block"),
            ("blocks_per_sm", "blocks per SM"),
            ("occupancy", "est. achieved occupancy %"),
        ):
            if key in kw:
                extra[arg] = kw.pop(key)
        if extra:
            kw["args"] = {**kw.get("args", {}), **extra}
        return self.gpu_op("kernel", name, start, dur, **kw)

    def graph_replay(
        self,
        launch_at: float,
        kernels: list[tuple[str, float, float]],
        launch_dur: float = 10.0,
        stream: int = 7,
        device: int = 0,
        name: str = "cudaGraphLaunch",
    ) -> int:
        """One graph launch call that runs many kernels (name, start, dur), all sharing its correlation id."""
        corr = self._corr
        self._corr += 1
        self.runtime(name, launch_at, launch_at + launch_dur, corr=corr)
        flow_cat = "async" if self.legacy else "ac2g"
        self.events.append(
            {"ph": "s", "id": corr, "pid": PID, "tid": MAIN_TID, "ts": launch_at, "cat": flow_cat, "name": flow_cat}
        )
        tid: Any = f"stream {stream}" if self.legacy else stream
        for kname, start, dur in kernels:
            self.events.append(
                {
                    "ph": "X",
                    "cat": "Kernel" if self.legacy else "kernel",
                    "name": kname,
                    "pid": device,
                    "tid": tid,
                    "ts": start,
                    "dur": dur,
                    "args": {"device": device, "context": 1, "stream": stream, "correlation": corr},
                }
            )
        return corr

    def nccl(
        self,
        start: float,
        dur: float,
        collective: str = "AllReduce",
        nelems: int = 1 << 20,
        dtype: str = "Float",
        stream: int = 20,
        **kw,
    ) -> int:
        name = f"ncclDevKernel_{collective}_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
        op = kw.pop("op", "record_param_comms")
        return self.kernel(
            name,
            start,
            dur,
            stream=stream,
            op=op,
            args={
                "Collective name": collective.lower(),
                "In msg nelems": nelems,
                "Out msg nelems": nelems,
                "Group size": self.world_size or 1,
                "dtype": dtype,
            },
            **kw,
        )

    def memcpy(
        self,
        start: float,
        dur: float,
        direction: str = "HtoD",
        src: str = "Pageable",
        dst: str = "Device",
        nbytes: int = 1 << 20,
        **kw,
    ) -> int:
        name = f"Memcpy {direction} ({src} -> {dst})"
        return self.gpu_op("memcpy", name, start, dur, args={"bytes": nbytes}, **kw)

    # -- output ------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        events = [dict(e) for e in self.events]
        meta: dict[str, Any] = {"schemaVersion": 1}
        props = DEVICE_PROPS[self.gpu]
        meta["deviceProperties"] = [{"id": i, **props} for i in range(self.devices)]
        if self.rank is not None:
            meta["distributedInfo"] = {"backend": self.backend, "rank": self.rank, "world_size": self.world_size}
        meta.update(self.extra_meta)
        if self.base_time_ns is not None:
            base_us = self.base_time_ns / 1000
            for e in events:
                if "ts" in e:
                    e["ts"] = round(e["ts"] - base_us, 3)
            meta["baseTimeNanoseconds"] = self.base_time_ns
        meta["traceEvents"] = events
        meta["traceName"] = "/tmp/builder.pt.trace.json"
        return meta

    def write(self, path: str | Path, compress: bool | None = None) -> Path:
        path = Path(path)
        data = json.dumps(self.to_dict(), indent=1).encode()
        if compress or (compress is None and path.suffix == ".gz"):
            path.write_bytes(gzip.compress(data, mtime=0))
        else:
            path.write_bytes(data)
        return path


def training_steps(
    b: TraceBuilder,
    steps: int = 3,
    step_us: float = 10_000.0,
    kernels: int = 20,
    kernel_us: float = 400.0,
    dataloader_us: float = 0.0,
    start: float = 1_000_000.0,
) -> list[tuple[float, float]]:
    """A plain training loop: per step, an optional DataLoader wait, then back-to-back kernels."""
    spans = []
    for i in range(steps):
        s = start + i * step_us
        b.step(i + 1, s, s + step_us)
        t = s + 1.0
        if dataloader_us:
            b.dataloader(t, t + dataloader_us)
            t += dataloader_us
        gpu_t = t + 20.0
        for k in range(kernels):
            b.kernel(
                "ampere_sgemm_128x64_tn" if k % 2 else "void at::native::vectorized_elementwise_kernel<4>()",
                gpu_t,
                kernel_us,
                launch_at=t + k * 5.0,
                op="aten::mm" if k % 2 else "aten::add",
            )
            gpu_t += kernel_us
        spans.append((s, s + step_us))
    return spans
