"""Summary tiles: a number in the big font and a short caption; what qualifies the number goes in a
smaller line under it. A GPU figure of a trace with no GPU ops is "n/a", never a measured-looking zero."""

from __future__ import annotations

import re

from .views import Item

# Tiles whose figure only a trace with GPU ops can have (summary keys, efficiency labels, GPU figures).
GPU_TILES = frozenset(
    {
        "gpu_busy",
        "compute",
        "comm",
        "exposed_comm",
        "comm_overlap",
        "memcpy",
        "idle",
        "dataloader_stall",
        "tensor_core",
        "flops:achieved",
        "flops:MFU",
        "flops:FLOPs known for",
        "flops:model FLOPs/step",
        "gpu_busy_fraction",
        "sm_efficiency",
        "est_occupancy_mean",
        "blocks_per_sm_mean",
    }
)
NO_GPU_DETAIL = "no GPU ops recorded"
_NUMBER = re.compile(
    r"^(n/a|not recorded|[-+~]?[\d.,]+(?:\s?(?:%|x|[KMGTP]?i?B|[kMGTP]?FLOP(?:/s)?|[mµn]?s))?)\s*(.*)$"
)
BIG_CHARS = 12  # longer than this, the value is split into its number and a caption


def tile(item: Item, has_gpu_ops: bool = True) -> Item:
    """``item`` as a tile: its number alone in ``value``, the rest in ``detail``; n/a for a GPU figure of a
    trace without GPU ops."""
    if not has_gpu_ops and item.key in GPU_TILES:
        return Item(label=item.label, value="n/a", key=item.key, detail=NO_GPU_DETAIL)
    value = item.value
    if len(value) <= BIG_CHARS:
        return item
    m = _NUMBER.match(value)
    if m is None or not m.group(2):
        return Item(label=item.label, value=value, key=item.key, detail=item.detail)
    detail = m.group(2).strip()
    if detail.startswith("(") and detail.endswith(")"):
        detail = detail[1:-1]
    return Item(label=item.label, value=m.group(1), key=item.key, detail=detail)


def tiles(items: list[Item], has_gpu_ops: bool = True) -> list[Item]:
    return [tile(i, has_gpu_ops) for i in items]
