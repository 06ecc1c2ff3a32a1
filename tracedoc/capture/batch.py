"""How many samples and tokens a batch holds, from its first tensor (for the step monitor's throughput)."""

from __future__ import annotations


def first_tensor(obj, torch, depth: int = 0):
    if isinstance(obj, torch.Tensor):
        return obj
    if depth >= 3:
        return None
    if isinstance(obj, dict):
        if "input_ids" in obj and isinstance(obj["input_ids"], torch.Tensor):
            return obj["input_ids"]
        items = obj.values()
    elif isinstance(obj, (list, tuple)):
        items = obj
    else:
        return None
    for x in items:
        t = first_tensor(x, torch, depth + 1)
        if t is not None:
            return t
    return None


def batch_counts(obj, torch) -> tuple[int | None, int | None]:
    """(samples, tokens) of a batch: the first tensor's leading dimension; tokens for integer 2-D ids."""
    t = first_tensor(obj, torch)
    if t is None or t.dim() == 0:
        return None, None
    samples = int(t.shape[0])
    tokens = None
    if t.dim() == 2 and not t.is_floating_point() and not t.is_complex() and t.dtype != torch.bool:
        tokens = samples * int(t.shape[1])
    return samples, tokens
