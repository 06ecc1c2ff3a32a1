"""Numbers as text for people: the one module every renderer formats values with.

Units follow the value's name (``*_ns``, ``*_ms``, ``*_bytes``, ``*_fraction``); ``n/a`` (or the
dash a table asks for) stands for a value that could not be measured, never zero.
"""

from __future__ import annotations

import math
from typing import Any


def fmt_pct(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "n/a"
    return f"{100 * v:.{digits}f}%"


def fmt_ns(v: float | int | None) -> str:
    """A duration in ns in the unit that reads best: ``830 ns``, ``12.5 µs``, ``4.2 ms``, ``1.05 s``."""
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


def fmt_ms(v: float | None, digits: int = 1, missing: str = "—") -> str:
    """A duration in ms with a fixed number of decimals: ``1,234.5 ms`` (tables of ranks and collectives)."""
    return missing if v is None else f"{v:,.{digits}f} ms"


def fmt_ms_short(v: float) -> str:
    """A step time in ms in two significant figures at most below 10 ms: ``176 ms``, ``4.2 ms``."""
    return f"{v:.0f} ms" if v >= 10 else f"{v:.2g} ms"


def ms_figure(ns: float, signed: bool = False) -> str:
    """ns as a bare figure in ms with three decimals (a column headed ``ms``): ``12.345``, ``+0.120``."""
    return f"{ns / 1e6:+.3f}" if signed else f"{ns / 1e6:.3f}"


def fmt_bytes(v: float | int | None) -> str:
    if v is None:
        return "n/a"
    v = float(v)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{v:.1f} TiB"


def fmt_bytes_si(v: float | None) -> str:
    """Bytes in decimal units (a roofline's bytes moved): ``1.25 GB``."""
    if v is None:
        return "n/a"
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.2f} {unit}"
    return f"{v:.0f} B"


def fmt_rate(v: float | None) -> str:
    """A rate (TFLOP/s, TB/s) with the digits its size needs: ``42.0``, ``1.25``, ``0.052``."""
    if v is None:
        return "—"
    return f"{v:.1f}" if v >= 10 else f"{v:.2f}" if v >= 0.1 else f"{v:.3f}"


def fmt_flops(v: float | None) -> str:
    if v is None:
        return "n/a"
    for unit, scale in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6)):
        if abs(v) >= scale:
            return f"{v / scale:.2f} {unit}"
    return f"{v:.0f} FLOP"


def fmt_tflops(v: float | None) -> str:
    return "n/a" if v is None else (f"{v:.1f} TFLOP/s" if v >= 1 else f"{v:.3g} TFLOP/s")


def fmt_unit(v: float | None, unit: str) -> str:
    """A metric's value by its unit (the metric table's): fractions in %, ns in µs or ms, bytes in MiB."""
    if v is None:
        return "n/a"
    if unit == "fraction":
        return f"{100 * v:.1f}%"
    if unit == "ns":
        return f"{v / 1e6:.3f} ms" if abs(v) >= 1e5 else f"{v / 1e3:.1f} µs"
    if unit == "bytes":
        return f"{v / 2**20:.1f} MiB"
    return f"{v:.4g}"


def fmt_unit_delta(v: float | None, unit: str) -> str:
    """A change of a metric: fractions in percentage points, others signed in the value's unit."""
    if v is None:
        return "n/a"
    if unit == "fraction":
        return f"{100 * v:+.1f} pp"
    return ("+" if v >= 0 else "-") + fmt_unit(abs(v), unit)


def fmt_value(v: Any, spec: str = ".4g") -> str:
    """Any metric value: a number with ``spec``, yes/no, a name as it is, n/a for None."""
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return format(v, spec) if math.isfinite(v) else str(v)
    return str(v)


def readable(v: float) -> str:
    """A number for a reader: thousands grouped without an exponent (10,050 not 1.005e+04), 4 significant
    digits below 1,000, an exponent only for very small or huge values."""
    a = abs(v)
    if a >= 1e15 or (0 < a < 1e-3):
        return f"{v:.3g}"
    if a >= 1000:
        return f"{v:,.0f}"
    return f"{v:.4g}"


def fmt_log_value(v: Any, spec: str | None = None) -> str:
    """A training log's value: ``fmt_value``, a float ``readable`` unless ``spec`` is given."""
    if isinstance(v, float) and spec is None and math.isfinite(v):
        return readable(v)
    return fmt_value(v, spec or ".4g")


def fmt_what_if(what_if: dict | None, per: str = "step") -> str | None:
    """A finding's predicted step time in words: ``step 176 ms → ~121 ms, −31%`` (an upper bound says so);
    ``per`` names the repeating unit (``iteration`` without step spans)."""
    w = what_if
    if not w or not w.get("step_ms_before"):
        return None
    before, after = w["step_ms_before"], w["step_ms_after"]
    if after is None:  # the fix's effect cannot be modelled from the trace
        return f"{per} {fmt_ms_short(before)} → not predicted ({w['method'].removeprefix('not modelled: ')})"
    pct = 100.0 * (after - before) / before
    bound = w["method"].startswith("upper bound")
    return (
        f"{per} {fmt_ms_short(before)} → {'≥ ' if bound else '~'}{fmt_ms_short(after)}, "
        f"{'up to ' if bound else ''}−{abs(pct):.0f}%" + (" (upper bound)" if bound else "")
    )


def plural(count: int, noun: str, many: str | None = None) -> str:
    """``1 step``, ``2 steps``, ``1,024 ranks``: a count with its noun in the right number."""
    return f"{count:,} {noun if count == 1 else (many or noun + 's')}"
