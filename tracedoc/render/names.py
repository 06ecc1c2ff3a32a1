"""Short kernel and op names, one function for every renderer.

A C++ kernel name can run to thousands of characters of namespaces, template arguments and argument
lists; what tells a reader which kernel it is usually fits in a few words. ``short_name`` gives that
form; ``distinct_short_names`` gives each name of a table the shortest form that no other name in the
same table shares (more of the template arguments where two kernels differ only there); ``fit_names``
cuts forms to a column's width and keeps them distinct. JSON never goes through here: it keeps full names.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Iterable, Sequence

_ATTACHED_ARGS_RE = re.compile(r"^(.*?[\w\]])\(")
_GENERIC_KERNEL_RE = re.compile(r"^(Kernel\d*|kernel|device_kernel|generic_kernel|cutlass_kernel)$")
_QUALIFIER_RE = re.compile(r"(?:\(anonymous namespace\)|[A-Za-z_]\w*)::(?!\{)")
ELLIPSIS = "…"


def _without_templates(s: str) -> tuple[str, dict[int, str]]:
    """``s`` with every top-level ``<...>`` removed, and each removed text by where it stood in the result."""
    out: list[str] = []
    removed: dict[int, str] = {}
    depth, start = 0, 0
    for i, ch in enumerate(s):
        if ch == "<":
            if depth == 0:
                start = i + 1
            depth += 1
        elif ch == ">" and depth > 0:
            depth -= 1
            if depth == 0:
                removed[len(out)] = s[start:i]
        elif depth == 0:
            out.append(ch)
    return "".join(out), removed


def _split_kernel(text: str) -> tuple[str, list[str], str] | None:
    """(the kernel's own name, its namespaces, its template arguments) of a C++ signature, or None when
    ``text`` is not one (a description with a parenthesis after a space)."""
    s, removed = _without_templates(text.replace("(anonymous namespace)::", ""))
    m = _ATTACHED_ARGS_RE.match(s)
    if m is None and "(" in s:
        return None
    s = m.group(1) if m else s
    words = s.split()
    parts = words[-1].split("::") if words else []
    if not parts or not parts[-1]:
        return None
    return parts[-1], parts[:-1], removed.get(len(s)) or ""


def short_name(name: str) -> str:
    """A readable short form of a C++ kernel name: no return type, namespaces, template arguments or
    argument list (``void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)`` ->
    ``vectorized_elementwise_kernel``). A generic wrapper keeps what names it: its first template
    argument when that is a kernel's name (``Kernel2<cutlass_80_tensorop_s1688gemm_...>``), else its
    namespace (``gemvx::kernel``). Names that are not C++ signatures (``Memcpy HtoD (Pageable -> Device)``,
    ``triton_poi_fused_add_0``) are returned as they are."""
    text = str(name).strip()
    if not any(ch in text for ch in "<:("):
        return text
    split = _split_kernel(text)
    if split is None:
        return text  # a parenthesis after a space: a description, not an argument list
    base, spaces, targs = split
    if _GENERIC_KERNEL_RE.match(base):
        arg = targs.split(",")[0].strip().rsplit("::", 1)[-1]
        if re.fullmatch(r"[A-Za-z]\w*_\w*", arg):
            return f"{base}<{arg}>"
        if spaces and spaces[-1]:
            return f"{spaces[-1]}::{base}"
    return base


def _top_level_args(text: str) -> list[str]:
    """``text`` split at the commas outside any ``<>``, ``()``, ``[]`` or ``{}``."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}" and depth > 0:
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i].strip())
            start = i + 1
    out.append(text[start:].strip())
    return [a for a in out if a]


def _elide_nested(text: str) -> str:
    """``text`` with what stands inside each ``<>`` and ``()`` replaced by "…"."""
    out: list[str] = []
    depth = 0
    for ch in text:
        if ch in "<(":
            if depth == 0:
                out.append(ch + ELLIPSIS)
            depth += 1
        elif ch in ">)" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append(ch)
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def unqualified(text: str) -> str:
    """``text`` with every namespace qualifier dropped (``at::native::Foo<at::Half>`` -> ``Foo<Half>``)."""
    return _QUALIFIER_RE.sub("", text)


def _with_arguments(name: str, nested: bool = False) -> str:
    """The short name with its template arguments, unqualified, and what nests in them elided unless
    ``nested`` (``vectorized_elementwise_kernel<4, CUDAFunctor_add<…>, Array<…>>``)."""
    text = str(name).strip()
    split = _split_kernel(text)
    base = short_name(text)
    if split is None or not split[2] or "<" in base:
        return base
    args = [unqualified(a) for a in _top_level_args(split[2])]
    joined = ", ".join(args if nested else map(_elide_nested, args))
    return _tight(f"{base}<{joined}>")


def _with_nested_arguments(name: str) -> str:
    return _with_arguments(name, nested=True)


def _tight(text: str) -> str:
    """``> >`` as ``>>`` and runs of spaces as one."""
    return re.sub(r">\s+(?=>)", ">", " ".join(text.split()))


def _signature(name: str) -> str:
    """The whole name without return type or namespaces."""
    text = " ".join(str(name).split())
    split = _split_kernel(text)
    if split is None:
        return text
    s = unqualified(text)
    head, _ = _without_templates(s)
    words = head.split("(")[0].split()
    if len(words) > 1:  # drop a return type: everything before the last word of the part before "("
        s = s[s.index(words[-1]) :] if words[-1] in s else s
    return _tight(s)


# Forms of a name from the shortest to the whole: each table shows the first one that is distinct.
_LEVELS = (short_name, _with_arguments, _with_nested_arguments, _signature, lambda n: " ".join(str(n).split()))


def distinct_short_names(names: Sequence[str], full: bool = False) -> list[str]:
    """For each name, the shortest form that no different name in ``names`` shares: the short name, then
    with its template arguments (first with what nests in them elided), then the signature without namespaces, then
    the whole name. ``full``: the names as they are (one-line)."""
    if full:
        return [" ".join(str(n).split()) for n in names]
    level = {n: 0 for n in names}
    forms = {n: _LEVELS[0](n) for n in level}
    for _ in range(len(_LEVELS)):
        groups: dict[str, list[str]] = defaultdict(list)
        for n, f in forms.items():
            groups[f].append(n)
        clash = [n for g in groups.values() if len(g) > 1 for n in g]
        if not clash:
            break
        for n in clash:
            if level[n] + 1 < len(_LEVELS):
                level[n] += 1
                forms[n] = _LEVELS[level[n]](n)
    return [forms[n] for n in names]


def cut_middle(text: str, width: int) -> str:
    """``text`` within ``width`` characters: its start and end kept, "…" between them."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    head = max(1, (width - 1) * 2 // 5)
    tail = width - 1 - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def _common_prefix(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _around(text: str, at: int, width: int) -> str:
    """``text`` within ``width``: its first characters, "…", and the part from just before ``at``."""
    head = min(max(1, width // 4), at)
    room = width - head - 1
    start = max(head, at - max(2, room // 3))
    part = text[start : start + room]
    if start + room < len(text):
        part = part[:-1] + ELLIPSIS if room > 1 else ELLIPSIS
    return text[:head] + ELLIPSIS + part if start > head else text[:head] + part


def fit_names(forms: Sequence[str], width: int) -> list[str]:
    """Each form within ``width`` characters, and two different forms never the same after cutting: a
    form cut in the middle that another now shares keeps the part where it differs from the others."""
    width = max(1, width)
    out = [cut_middle(f, width) for f in forms]
    distinct = list(dict.fromkeys(forms))
    # A name too long for the column first loses its namespaces (aten::native_layer_norm -> native_layer_norm),
    # where no other name of the column then reads the same.
    bare = {f: unqualified(f) if len(f) > width else f for f in distinct}
    taken = defaultdict(int)
    for f in distinct:
        taken[bare[f]] += 1
    cut_of = {
        f: cut_middle(bare[f] if taken[bare[f]] == 1 and bare[f] not in distinct or bare[f] == f else f, width)
        for f in distinct
    }
    by_cut: dict[str, list[str]] = defaultdict(list)
    for f in distinct:
        by_cut[cut_of[f]].append(f)
    for group in by_cut.values():
        if len(group) < 2:
            continue
        for f in group:
            at = max(_common_prefix(f, g) for g in group if g != f)
            cut_of[f] = _around(f, at, width)
    # Anything still shared (forms equal over every part that fits): number them, which stays honest.
    seen: dict[str, list[str]] = defaultdict(list)
    for f in distinct:
        seen[cut_of[f]].append(f)
    for group in seen.values():
        if len(group) > 1:
            for k, f in enumerate(group, 1):
                mark = f" #{k}"
                cut_of[f] = cut_middle(f, max(1, width - len(mark))) + mark
    return [cut_of[f] for f in forms] if forms else out


def short_forms(names: Iterable[str], width: int | None = None, full: bool = False) -> list[str]:
    """The names of one table column as shown: distinct short forms, each within ``width`` when given."""
    forms = distinct_short_names(list(names), full=full)
    return fit_names(forms, width) if width is not None else forms
