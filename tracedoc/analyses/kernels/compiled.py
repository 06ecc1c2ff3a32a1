"""What each torch.compile region runs: its kernel sequence, as a content signature.

A region's name, "Torch-Compiled Region: 5/0", is the frame and recompile number Dynamo gave it; the
numbers change between runs of the same model (another frame compiled first, a recompile), so a diff
that matched regions by name would call the same region vanished in one run and new in the other.
Its content does not change: the GPU kernels its launch calls ran, in launch order. Triton kernels
carry a generated numeric suffix (``triton_poi_fused_gelu_3``) that changes as freely as the region
number, so it is left out of the content. The signature is a short hash of that sequence, kept on the
region's ``operator_totals`` row (``content``) for ``tracedoc diff`` to match regions by.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from ...model.trace import Trace
from . import classify as C

REGION_RE = re.compile(r"^Torch-Compiled Region: \d+/\d+$")
_TRITON_SUFFIX = re.compile(r"^(triton_\w+?)_\d+$")
MAX_REGIONS = 512  # distinct region names signed per trace; each costs a scan of the launch calls


def kernel_key(name: str) -> str:
    """A kernel's name as a region's content reads it: a Triton kernel without its generated suffix."""
    m = _TRITON_SUFFIX.match(name)
    return m.group(1) if m else name


def region_contents(trace: Trace, lo: int, hi: int) -> dict[int, tuple[str, int]]:
    """Per region name id (operators starting in ``[lo, hi)``): the signature of the kernel sequence its
    first call launched, and that sequence's length. Regions that launched no linked kernel are left out."""
    c, g, r = trace.cpu_ops, trace.gpu_ops, trace.runtime
    if not len(c) or not len(g) or not len(r):
        return {}
    is_region = C.name_mask(trace, REGION_RE, ids=c["name"])[c["name"]]
    sel = np.flatnonzero(is_region & (c["start_ns"] >= lo) & (c["start_ns"] < hi))
    if not sel.size:
        return {}
    sel = sel[np.argsort(c["start_ns"][sel], kind="stable")]
    _, first = np.unique(c["name"][sel], return_index=True)  # each name's first call
    launched = np.flatnonzero(g["launch"] >= 0)
    launch_row = g["launch"][launched]
    launch_at = r["start_ns"][launch_row]
    out: dict[int, tuple[str, int]] = {}
    for i in sel[np.sort(first)][:MAX_REGIONS]:
        inside = (
            (r["tid"][launch_row] == c["tid"][i])
            & (r["pid"][launch_row] == c["pid"][i])
            & (launch_at >= c["start_ns"][i])
            & (launch_at <= c["end_ns"][i])
        )
        ops = launched[inside]
        if not ops.size:
            continue
        ops = ops[np.argsort(launch_at[inside], kind="stable")]
        keys = [kernel_key(trace.string(int(n))) for n in g["name"][ops]]
        digest = hashlib.blake2b("\n".join(keys).encode("utf-8", "replace"), digest_size=8).hexdigest()
        out[int(c["name"][i])] = (digest, len(keys))
    return out
