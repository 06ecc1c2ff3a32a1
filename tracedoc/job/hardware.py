"""What bus bandwidth a job's GPUs' links should give, for comparing with the measured busbw.

Figures are typical nccl-tests all-reduce bus bandwidths (doc/PERFORMANCE.md convention), not
link peaks: NVLink4 H100/H200 SXM ~360-480 GB/s inside a node, A100 NVLink3 ~230 GB/s, V100
NVLink2 ~130 GB/s; PCIe Gen4 x16 ~20 GB/s, Gen5 ~40 GB/s; one 400 Gb/s InfiniBand NIC per GPU
~45 GB/s between nodes. Unknown GPU or unknown hosts: None (no comparison is made).
"""

from __future__ import annotations

from ..analyses.comm.instances import RankTables

_INTRA_NODE = (  # (substring of the device name, GB/s), first match wins
    ("H100 PCIe", 40.0),
    ("H100", 360.0),
    ("H200", 360.0),
    ("H800", 180.0),
    ("B200", 700.0),
    ("GB200", 700.0),
    ("A100-PCIE", 20.0),
    ("A100 PCIe", 20.0),
    ("A100", 230.0),
    ("A800", 150.0),
    ("V100-PCIE", 10.0),
    ("V100", 130.0),
    ("MI300", 300.0),
    ("MI250", 150.0),
)
INTER_NODE_GBPS = 45.0


def link_busbw_gbps(ranks: list[RankTables]) -> float | None:
    """Expected busbw: the GPU's intra-node figure when every rank is on one known host, the
    InfiniBand figure when ranks span several known hosts, None when hosts or GPU are unknown."""
    hosts = {rt.info.get("host") for rt in ranks}
    if None in hosts or not hosts:
        return None
    if len(hosts) > 1:
        return INTER_NODE_GBPS
    name = next((rt.info.get("gpu") for rt in ranks if rt.info.get("gpu")), None)
    if not name:
        return None
    for key, gbps in _INTRA_NODE:
        if key.lower() in name.lower():
            return gbps
    return None
