"""Formatting numbers with their units for people: 1.5 ms, 212 MiB, 12,345."""

from __future__ import annotations

import math
from collections.abc import Sequence

from perfstack.report import Quantity


def fmt_seconds(value: float) -> str:
    """Return a duration in s, ms or µs with three significant digits."""
    size = abs(value)
    if size < 5e-10:  # below a nanosecond: float residue of a subtraction, not a duration
        return "0 s"
    if size < 1e-6:
        return f"{value * 1e9:.3g} ns"
    if size >= 1:
        return f"{value:.3g} s" if size < 1000 else f"{value:,.0f} s"
    if size >= 1e-3:
        return f"{value * 1e3:.3g} ms"
    return f"{value * 1e6:.3g} µs"


def fmt_bytes(value: float, digits: int = 3) -> str:
    """Return a size in B, KiB, MiB or GiB, to ``digits`` significant digits (never in
    exponent form: 1,020 MiB, not 1.02e+03 MiB)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= scale:
            scaled = value / scale
            if abs(scaled) >= 10 ** digits:
                return f"{scaled:,.0f} {unit}"
            return f"{scaled:.{digits}g} {unit}"
    return f"{value:.0f} B"


def fmt_bytes_apart(low: float, high: float) -> tuple[str, str]:
    """Two sizes written with just enough digits to read apart (an axis from 347.2 MiB to
    347.9 MiB read '347 MiB' at both ends)."""
    for digits in range(3, 8):
        a, b = fmt_bytes(low, digits), fmt_bytes(high, digits)
        if a != b or low == high:
            return a, b
    return a, b


#: Units written with a decimal prefix (a rate of work or of bytes, as datasheets write them).
SI_UNITS = {"flop": "FLOP", "flop/s": "FLOP/s", "B/s": "B/s"}


def fmt_si(value: float, unit: str) -> str:
    """Return a count or rate with a decimal prefix: 1.54 GFLOP, 312 TFLOP/s, 24.7 GB/s."""
    shown = SI_UNITS.get(unit, unit)
    for prefix, scale in (("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{shown}"
    return f"{value:.3g} {shown}"


def fmt_value(value: float | int | None, unit: str, reason: str | None = None) -> str:
    """Return ``value`` with its unit; 'n/a (reason)' when it could not be measured."""
    if value is None:
        return f"n/a ({reason})" if reason else "n/a"
    if unit == "s":
        return fmt_seconds(float(value))
    if unit == "B":
        return fmt_bytes(float(value))
    if unit == "%":
        return f"{value:.1f}%" if not 0 < value < 0.1 else pct_fine(float(value))
    if unit == "count":  # (a mean of counts, a queue's depth, keeps its fraction)
        whole = float(value).is_integer() or abs(value) >= 100
        return f"{value:,.0f}" if whole else f"{value:.3g}"
    if unit in SI_UNITS:
        return fmt_si(float(value), unit)
    number = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return f"{number} {unit}" if unit else number


def fmt_quantity(q: Quantity) -> str:
    """Return a Quantity formatted with its unit."""
    return fmt_value(q.value, q.unit, q.reason)


def pct(value: float) -> str:
    """Return a share as people read it: 68%, 4.2%, 0.3% (every format and finding title
    writes shares this way, so the same figure reads the same everywhere)."""
    return f"{value:.0f}%" if value >= 10 else f"{value:.1f}%"


def pct_fine(value: float) -> str:
    """A share as ``pct`` writes it, with two significant figures below 0.1% (a share of a
    roof can be 0.003%: "0.0%" would read as none), and "<0.0001%" below that."""
    if value >= 0.1 or value <= 0:
        return pct(value)
    if value < 1e-4:
        return "<0.0001%"
    decimals = 1 - math.floor(math.log10(value))
    return f"{value:.{decimals}f}%"


def nearest_rank(ordered: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0 to 1) of values already in order, by nearest rank: a value one
    of them is (the p90 every ranks table gives)."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def numeric(value: object) -> float | None:
    """A measured value as a float, or None when it is unknown (None) or not a number (a
    bool is not a number here)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) \
        else None
