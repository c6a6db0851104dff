"""Rows of many ranks folded into one row per key, a rank at a time.

A job's rows merged across ranks (``perfstack.report.job.rankrows``) keep, per key and value, the
mean per rank over the ranks that measured it, the least and the most with their ranks, and
how many ranks had the row. All of it folds: :class:`RowFold` takes one rank's rows as they
come (:meth:`RowFold.add`), and two folds of different ranks combine (:meth:`RowFold.merge`),
so that a reader holds the rows that differ, never every rank's rows.

The result does not depend on the order the ranks came in: sums are exact (Shewchuk's
partials, as ``math.fsum``), ties between ranks are broken by rank, and everything taken
from "the first row" (its name, attributes, a value's unit, the order of values and links) is
taken from the row with the least position, the place it had among every rank's rows.
"""

from __future__ import annotations

import math
import re
from typing import Any

from perfstack.records import datarecord, field
from perfstack.report.measures import Quantity, Row
from perfstack.report.units import numeric

#: Where a row was among every rank's rows (the rank's unit, the row's index): ties of
#: "the first" are broken by it, so that the fold's order is the merged list's order.
Position = tuple[int, ...]

_PREFIX = re.compile(r"^rank\d+:")
_NAME_PREFIX = re.compile(r"^\[rank \d+\] ")


def _add(partials: list[float], x: float) -> None:
    """Add ``x`` to an exact sum kept as non-overlapping partials (``math.fsum``'s own)."""
    i = 0
    for y in partials:
        if abs(x) < abs(y):
            x, y = y, x
        hi = x + y
        lo = y - (hi - x)
        if lo:
            partials[i] = lo
            i += 1
        x = hi
    partials[i:] = [x]


@datarecord
class _Value:
    """One value name of one key, over the ranks folded so far."""

    first: Position  # where the name first appeared: the values' order, and its unit
    unit: str
    partials: list[float] = field(default_factory=list)
    odd: float = 0.0  # infinities and NaN, which an exact sum cannot hold
    known: int = 0
    #: (value, rank), as ``min`` and ``max`` of such pairs pick them: a tie goes to the
    #: lower rank for the least, to the higher for the most
    low: tuple[float, int] | None = None
    high: tuple[float, int] | None = None
    reason_at: Position | None = None  # the first row that gave a reason it is unknown
    reason: str | None = None

    def add(self, q: Quantity, rank: int, at: Position) -> None:
        v = numeric(q.value)
        if v is None:
            if q.reason and (self.reason_at is None or at < self.reason_at):
                self.reason_at, self.reason = at, q.reason
            return
        if math.isfinite(v):
            _add(self.partials, v)
        else:
            self.odd += v
        self.known += 1
        self.low = (v, rank) if self.low is None else min(self.low, (v, rank))
        self.high = (v, rank) if self.high is None else max(self.high, (v, rank))

    def merge(self, other: _Value) -> None:
        if other.first < self.first:
            self.first, self.unit = other.first, other.unit
        for p in other.partials:
            _add(self.partials, p)
        self.odd += other.odd
        self.known += other.known
        if other.low is not None:
            self.low = other.low if self.low is None else min(self.low, other.low)
        if other.high is not None:
            self.high = other.high if self.high is None else max(self.high, other.high)
        if other.reason_at is not None and (self.reason_at is None
                                            or other.reason_at < self.reason_at):
            self.reason_at, self.reason = other.reason_at, other.reason


@datarecord
class _Group:
    """One key's rows over the ranks folded so far."""

    first: Position
    row: Row  # the first row: its name, source and attributes
    rows: int = 0
    values: dict[str, _Value] = field(default_factory=dict)
    #: each link's layer and key with where it first appeared (their order)
    links: dict[str, dict[str, Position]] = field(default_factory=dict)
    link_layers: dict[str, Position] = field(default_factory=dict)

    def add(self, row: Row, rank: int, at: Position) -> None:
        self.rows += 1
        if at < self.first:
            self.first, self.row = at, row
        for i, (name, q) in enumerate(row.values.items()):
            where = (*at, i)
            value = self.values.get(name)
            if value is None:
                value = self.values[name] = _Value(where, q.unit)
            elif where < value.first:
                value.first, value.unit = where, q.unit
            value.add(q, rank, at)
        for i, (layer, keys) in enumerate(row.links.items()):
            _first(self.link_layers, layer, (*at, i))
            known = self.links.setdefault(layer, {})
            for j, key in enumerate(keys):
                _first(known, _PREFIX.sub("", key), (*at, i, j))

    def merge(self, other: _Group) -> None:
        self.rows += other.rows
        if other.first < self.first:
            self.first, self.row = other.first, other.row
        for name, value in other.values.items():
            if name in self.values:
                self.values[name].merge(value)
            else:
                self.values[name] = value
        for layer, at in other.link_layers.items():
            _first(self.link_layers, layer, at)
        for layer, keys in other.links.items():
            known = self.links.setdefault(layer, {})
            for key, at in keys.items():
                _first(known, key, at)

    def merged(self, key: str) -> Row:
        """The row of every rank folded: each value the mean per rank over the ranks that
        measured it, ``attrs.across_ranks`` its least and most with their ranks."""
        values: dict[str, Quantity] = {}
        spread: dict[str, dict[str, float | int]] = {}
        for name, value in sorted(self.values.items(), key=lambda kv: kv[1].first):
            if not value.known or value.low is None or value.high is None:
                values[name] = Quantity(None, value.unit, value.reason or "unknown on every rank")
                continue
            total = math.fsum(value.partials) + value.odd
            values[name] = Quantity(total / value.known, value.unit)
            spread[name] = {"min": value.low[0], "min_rank": value.low[1],
                            "max": value.high[0], "max_rank": value.high[1]}
        attrs: dict[str, Any] = {k: v for k, v in self.row.attrs.items() if k != "rank"}
        attrs["ranks"] = self.rows
        attrs["across_ranks"] = spread
        links = {layer: [k for k, _ in sorted(self.links[layer].items(), key=lambda kv: kv[1])]
                 for layer, _ in sorted(self.link_layers.items(), key=lambda kv: kv[1])}
        return Row(key, _NAME_PREFIX.sub("", self.row.name), self.row.source, values, attrs,
                   links)


def _first(seen: dict[str, Position], name: str, at: Position) -> None:
    if name not in seen or at < seen[name]:
        seen[name] = at


@datarecord
class RowFold:
    """Every rank's rows of a report's layers folded by (layer, source, key): add a rank's
    rows, merge another fold, then take the merged rows in the order a list of every rank's
    rows would have had them."""

    groups: dict[tuple[Any, str, str], _Group] = field(default_factory=dict)
    rows_in: int = 0  # rows folded, every rank's
    ranks: set[int] = field(default_factory=set)

    def add(self, layer: Any, row: Row, rank: int, at: Position) -> None:
        """Fold one rank's row of ``layer``; ``at`` is its place among every rank's rows."""
        self.rows_in += 1
        self.ranks.add(rank)
        group_key = (layer, row.source, _PREFIX.sub("", row.key))
        group = self.groups.get(group_key)
        if group is None:
            group = self.groups[group_key] = _Group(at, row)
        group.add(row, rank, at)

    def merge(self, other: RowFold) -> None:
        """Fold in another fold (of other ranks)."""
        self.rows_in += other.rows_in
        self.ranks |= other.ranks
        for key, group in other.groups.items():
            if key in self.groups:
                self.groups[key].merge(group)
            else:
                self.groups[key] = group

    def rows(self) -> dict[Any, list[tuple[Position, Row]]]:
        """Each layer's merged rows with the place of their first rank's row, in order."""
        out: dict[Any, list[tuple[Position, Row]]] = {}
        for (layer, _, key), group in sorted(self.groups.items(), key=lambda kv: kv[1].first):
            out.setdefault(layer, []).append((group.first, group.merged(key)))
        return out
