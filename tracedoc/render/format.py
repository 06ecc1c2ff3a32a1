"""Number formatting shared by every renderer."""

from __future__ import annotations


def fmt_pct(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "n/a"
    return f"{100 * v:.{digits}f}%"


def fmt_ns(v: float | int | None) -> str:
    if v is None:
        return "n/a"
    v = float(v)
    a = abs(v)
    if a >= 1e9:
        return f"{v / 1e9:.2f} s"
    if a >= 1e6:
        return f"{v / 1e6:.1f} ms" if a < 1e8 else f"{v / 1e6:.0f} ms"
    if a >= 1e3:
        return f"{v / 1e3:.1f} µs"
    return f"{v:.0f} ns"


def fmt_bytes(v: float | int | None) -> str:
    if v is None:
        return "n/a"
    v = float(v)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{v:.1f} TiB"


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 step``, ``2 steps``, ``1,024 ranks``: a count with its noun in the right number."""
    return f"{count:,} {noun if count == 1 else (many or noun + 's')}"
