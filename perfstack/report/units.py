"""Formatting numbers with their units for people: 1.5 ms, 212 MiB, 12,345."""

from __future__ import annotations

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


def fmt_bytes(value: float) -> str:
    """Return a size in B, KiB, MiB or GiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def fmt_value(value: float | int | None, unit: str, reason: str | None = None) -> str:
    """Return ``value`` with its unit; 'n/a (reason)' when it could not be measured."""
    if value is None:
        return f"n/a ({reason})" if reason else "n/a"
    if unit == "s":
        return fmt_seconds(float(value))
    if unit == "B":
        return fmt_bytes(float(value))
    if unit == "%":
        return f"{value:.1f}%"
    if unit == "count":
        return f"{value:,.0f}"
    number = f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"
    return f"{number} {unit}" if unit else number


def fmt_quantity(q: Quantity) -> str:
    """Return a Quantity formatted with its unit."""
    return fmt_value(q.value, q.unit, q.reason)


def pct(value: float) -> str:
    """Return a share as people read it: 68%, 4.2%, 0.3% (every format and finding title
    writes shares this way, so the same figure reads the same everywhere)."""
    return f"{value:.0f}%" if value >= 10 else f"{value:.1f}%"
