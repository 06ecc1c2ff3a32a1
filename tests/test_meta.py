"""Typed trace metadata (tracedoc/model/meta.py): devices, process groups, rank and versions."""

from __future__ import annotations

from conftest import shared_traces
from trace_builder import TraceBuilder

import tracedoc
from tracedoc.model.meta import Device, ProcessGroup, TraceMeta

PG = {"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": 4, "ranks": [0, 1, 2, 3]}


def built(tmp_path) -> TraceMeta:
    b = TraceBuilder(rank=1, world_size=4, gpu="V100", devices=2)
    b.extra_meta = {
        "distributedInfo": {"backend": "nccl", "rank": 1, "world_size": 4, "nccl_version": "2.21.5", "pg_config": [PG]},
        "torch_version": "2.5.1",
        "cuda_runtime_version": 12040,
    }
    b.step(1, 1000.0, 2000.0)
    b.kernel("k", 1100.0, 100.0, device=1)
    return tracedoc.load(b.write(tmp_path / "t.json")).meta


def test_kineto_devices_are_typed(tmp_path):
    meta = built(tmp_path)
    assert meta.format == "kineto" and meta.rank == 1 and meta.world_size == 4 and meta.backend == "nccl"
    assert len(meta.devices) == 2
    d = meta.device(1)
    assert (d.name, d.compute_major, d.compute_minor, d.sm_count, d.memory_bytes) == (
        "Tesla V100-SXM2-32GB",
        7,
        0,
        80,
        34089730048,
    )
    assert d.compute_capability == 7.0 and d.peak_flops["fp16"] == 125e12 and not d.is_rocm  # V100 datasheet
    assert d.properties["warpSize"] == 32  # what the trace recorded is kept
    assert meta.device(5) is None


def test_kineto_process_groups_and_versions(tmp_path):
    meta = built(tmp_path)
    assert meta.process_groups == [
        ProcessGroup(name="0", description="default_pg", backend="cuda:nccl", size=4, ranks=(0, 1, 2, 3), properties=PG)
    ]
    assert meta.versions.nccl == "2.21.5" and meta.versions.torch == "2.5.1"
    assert meta.versions.cuda_runtime == 12040 and meta.versions.cuda_driver is None


def test_the_recorded_values_stay_and_the_environment_summarises_them(tmp_path):
    from tracedoc.analyses.core.rank import environment

    meta = built(tmp_path)
    assert meta.devices[1].properties["computeMajor"] == 7 and [g.properties for g in meta.process_groups] == [PG]
    env = environment(meta)
    assert env.nccl_version == "2.21.5" and env.torch_version == "2.5.1" and env.device_count == len(meta.devices)
    assert TraceMeta().process_groups is None  # not recorded, not an empty list


def test_devices_from_properties_tolerate_odd_values():
    d = Device.from_properties(
        {"id": "3", "name": 7, "computeMajor": "x", "multiProcessorCount": 132.0, "totalGlobalMem": True}
    )
    assert (d.id, d.name, d.compute_major, d.sm_count, d.memory_bytes) == (3, "7", None, 132, None)
    assert d.compute_capability is None


def test_shared_traces_record_groups_and_versions():
    meta = tracedoc.load(shared_traces() / "kineto" / "a100_2rank_nccl_rank0.json.gz").meta
    assert [(g.name, g.description, g.size, g.ranks) for g in meta.process_groups] == [("0", "default_pg", 2, (0, 1))]
    assert meta.versions.nccl == "2.17.1" and len(meta.devices) == 8 and meta.devices[0].sm_count == 108
    meta = tracedoc.load(shared_traces() / "kineto" / "h100_2026_format.json").meta
    v = meta.versions
    assert (v.cuda_driver, v.cuda_runtime, v.cupti) == (13000, 12090, 28)
    assert meta.process_groups is None and meta.rank is None
