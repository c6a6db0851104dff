"""A job of many ranks: one row per op, kernel or function, not one per rank.

Each rank's rows carry their rank (``attrs.rank``, keys ``rank3:...``). From ``MANY_RANKS``
ranks on, the rows of one key are merged across the ranks that have them, so that a report
grows with what differs, not with ranks x ops: each value is the **mean per rank** over the
ranks that measured it (a typical rank), and ``attrs.across_ranks`` keeps, per value, the
least and the most with the rank of each (the ranks that stand out), and how many ranks had
the row (``attrs.ranks``). Figures across ranks (step times, collective waits, the
straggler) are computed from the per-rank rows before they are merged.
"""

from __future__ import annotations

import re
from typing import Any

from perfstack.report import Quantity, Report, Row
from perfstack.report.units import numeric

#: From this many ranks a job's rows are merged across ranks, and every table speaks in
#: distributions, not one line per rank.
MANY_RANKS = 8

_PREFIX = re.compile(r"^rank\d+:")
_NAME_PREFIX = re.compile(r"^\[rank \d+\] ")


def _merge(key: str, rows: list[Row]) -> Row:
    first = rows[0]
    values: dict[str, Quantity] = {}
    spread: dict[str, dict[str, float | int]] = {}
    for name in dict.fromkeys(n for row in rows for n in row.values):
        known = [(v, int(row.attrs["rank"])) for row in rows
                 if name in row.values and (v := numeric(row.values[name].value)) is not None]
        unit = next(row.values[name].unit for row in rows if name in row.values)
        if not known:
            why = next((row.values[name].reason for row in rows if name in row.values
                        and row.values[name].reason), None) or "unknown on every rank"
            values[name] = Quantity(None, unit, why)
            continue
        values[name] = Quantity(sum(v for v, _ in known) / len(known), unit)
        low, high = min(known), max(known)
        spread[name] = {"min": low[0], "min_rank": low[1], "max": high[0], "max_rank": high[1]}
    attrs: dict[str, Any] = {k: v for k, v in first.attrs.items() if k != "rank"}
    attrs["ranks"] = len(rows)
    attrs["across_ranks"] = spread
    links = {layer: list(dict.fromkeys(_PREFIX.sub("", k) for row in rows
                                       for k in row.links.get(layer, [])))
             for layer in dict.fromkeys(lay for row in rows for lay in row.links)}
    return Row(key, _NAME_PREFIX.sub("", first.name), first.source, values, attrs, links)


def merge_across_ranks(report: Report) -> int:
    """Merge the rows of a job of ``MANY_RANKS`` ranks or more by key; return how many rows
    were merged away (0: fewer ranks, nothing changed)."""
    ranks = {r.attrs["rank"] for rows in report.layers.values() for r in rows
             if isinstance(r.attrs.get("rank"), int)}
    if len(ranks) < MANY_RANKS:
        return 0
    before = sum(len(rows) for rows in report.layers.values())
    for layer, rows in report.layers.items():
        out: list[Row | tuple[str, str]] = []
        groups: dict[tuple[str, str], list[Row]] = {}
        for row in rows:
            if not isinstance(row.attrs.get("rank"), int):
                out.append(row)
                continue
            group = (row.source, _PREFIX.sub("", row.key))
            if group not in groups:
                groups[group] = []
                out.append(group)  # the merged row takes its first rank's place
            groups[group].append(row)
        report.layers[layer] = [item if isinstance(item, Row) else _merge(item[1], groups[item])
                                for item in out]
    return before - sum(len(rows) for rows in report.layers.values())
