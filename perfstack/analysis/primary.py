"""A row's primary value: the one diff compares and every table and tree ranks rows by.

Defined once. A backend declares it (``Backend.primary``: a value name, or one per row kind),
the report keeps the declaration (``backends[].primary``), and this module reads it. Rows of a
backend that declared nothing (an older report, a plugin that did not say) fall back to the
first of ``FALLBACK`` the row has in seconds, else the first of them it has at all, else its
first numeric value.
"""

from __future__ import annotations

from perfstack.report import Quantity, Report, Row

#: The value names tried, in order, for a backend that declared no primary value.
FALLBACK = ("self_time", "self", "time", "device", "total", "cpu_time", "median", "mean",
            "share", "samples", "value")


class Primary:
    """The primary value of each row of one report."""

    def __init__(self, report: Report | None = None) -> None:
        self.declared: dict[str, dict[str, str]] = {}
        if report is not None:
            self.declared = {b.name: b.primary for b in report.backends if b.primary}

    def name(self, row: Row) -> str | None:
        """Return the name of the row's primary value, or None when it has no number."""
        by_kind = self.declared.get(row.source)
        if by_kind:
            kind = row.attrs.get("kind")
            name = by_kind.get(kind if isinstance(kind, str) else "", by_kind.get(""))
            if name is not None and _number(row.values.get(name)):
                return name
        for name in FALLBACK:
            q = row.values.get(name)
            if q is not None and q.unit == "s" and _number(q):
                return name
        for name in FALLBACK:
            if _number(row.values.get(name)):
                return name
        return next((n for n, q in row.values.items() if _number(q)), None)

    def value(self, row: Row) -> float:
        """Return the row's primary value (0 when it has none), to rank rows by."""
        name = self.name(row)
        q = row.values.get(name) if name is not None else None
        return float(q.value) if q is not None and q.value is not None else 0.0


def _number(q: Quantity | None) -> bool:
    return q is not None and isinstance(q.value, (int, float)) and not isinstance(q.value, bool)
