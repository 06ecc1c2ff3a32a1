"""Kernel names normalised for alignment across runs.

The same kernel carries a different name from one build, library version or problem size to the
next: template arguments (``<float, 4>``), the argument list, a return type, a hash or numeric
suffix (Triton/Inductor ``_0``, ``_0d1d2de``), and launch-configuration tokens (cuBLAS/CUTLASS tile
shapes ``128x64``, ``tilesize128x128x32``, ``stage4``, Tensile ``MT128x128x32``). ``normalise_kernel``
strips all of these so that kernels doing the same work in two runs share a key; copies and memsets
keep their names (their direction and memory kinds are what identify them).
"""

from __future__ import annotations

import re
from functools import lru_cache

# Wrappers whose first template argument is the real kernel (``cutlass::Kernel<cutlass_80_...>``).
_WRAPPERS = {"cutlass::Kernel", "cutlass::Kernel2", "cutlass::device_kernel", "cute::device_kernel"}
_TOKEN_DROP = re.compile(
    r"^(?:[A-Za-z]{0,10}\d+(?:x\d+)+"  # tile / MMA shapes: 128x64, tilesize128x128x32, MT64x64x8
    r"|(?:stage|stages|align|splitk|slice|warps|ws|wg|cga|cta)\d*"  # pipeline / alignment knobs
    r"|\d+[\dde]*"  # numeric and Triton signature suffixes: 0, 12, 0d1d2de
    r"|(?=[0-9a-f]*\d)[0-9a-f]{8,}"  # hex hashes
    r"|(?:nn|nt|tn|tt|NN|NT|TN|TT|NNN|TNN|NTN|TTN))$"
)  # operand layouts
_COPY_RE = re.compile(r"^(Memcpy|Memset|memcpy|memset|\[memcpy\]|\[memset\])")


@lru_cache(maxsize=65536)
def normalise_kernel(name: str) -> str:
    """The name without template arguments, argument list, return type, hashes and launch config."""
    text = name.strip()
    if _COPY_RE.match(text):
        return text
    text = text.replace("(anonymous namespace)", "anon")
    base, first_template = _strip_brackets(text)
    base = base.split()[-1] if base.split() else base  # drop a return type ("void ")
    if base in _WRAPPERS and first_template:
        inner = normalise_kernel(first_template.split(",")[0].strip())
        return f"{base}<{inner}>"
    if "::" in base:
        head, _, last = base.rpartition("::")
        return f"{head}::{_strip_tokens(last)}"
    return _strip_tokens(base)


def _strip_tokens(identifier: str) -> str:
    parts = identifier.split("_")
    kept = [p for i, p in enumerate(parts) if not (p and _TOKEN_DROP.match(p) and i > 0)]
    out = "_".join(kept)
    out = re.sub(r"_+", "_", out).strip("_")
    return out or identifier


def _strip_brackets(text: str) -> tuple[str, str]:
    """``text`` without any ``<...>`` or ``(...)`` groups (nesting-aware), and the first top-level
    template argument list's contents."""
    out: list[str] = []
    depth = 0
    first: str | None = None
    current: list[str] = []
    opening = {"<": ">", "(": ")"}
    stack: list[str] = []
    for ch in text:
        if ch in opening:
            if depth == 0 and ch == "<" and first is None:
                current = []
            elif depth > 0:
                current.append(ch)
            stack.append(opening[ch])
            depth += 1
            continue
        if stack and ch == stack[-1]:
            stack.pop()
            depth -= 1
            if depth == 0:
                if first is None and ch == ">":
                    first = "".join(current)
                current = []
            else:
                current.append(ch)
            continue
        if depth == 0:
            out.append(ch)
        else:
            current.append(ch)
    base = "".join(out).strip()
    if depth != 0 or not base:  # unbalanced (a name cut short): keep the text before the first bracket
        base = re.split(r"[<(]", text, maxsplit=1)[0].strip() or text
    return base, first or ""
