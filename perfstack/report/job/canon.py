"""One copy of what many ranks repeat: equal facts and texts shared, not held once a rank.

A job's ranks say the same things: the same device properties, the same metric descriptions
and units. Read on workers and sent back pickled, each rank's copy is a new object; kept per
rank for the report, they made most of what the parent held per rank. :class:`Canon` hands
back the first equal value it saw, so that later ranks' copies are dropped. The JSON written
is the same: a shared object is written where each copy was.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from perfstack.report.measures import Metric


class Canon:
    """Equal values, shared: texts interned, containers by their JSON text."""

    #: the most distinct containers remembered (each job's few kinds of facts)
    KEPT = 4096

    def __init__(self) -> None:
        """An empty canon."""
        self._seen: dict[str, Any] = {}
        self._held: set[int] = set()  # the ids of the containers in ``_seen`` (held: stable)
        self._wholes: dict[tuple[Any, ...], dict[str, Any]] = {}

    def same(self, value: Any) -> Any:
        """``value``, or an equal one seen before (texts and JSON-able containers)."""
        if isinstance(value, str):
            return sys.intern(value)
        if not isinstance(value, (dict, list)) or not value:
            return value
        try:
            key = json.dumps(value, sort_keys=True, allow_nan=True)
        except (TypeError, ValueError):  # not JSON: kept as it is
            return value
        kept = self._kept(self._seen, key, value)
        if key in self._seen:
            self._held.add(id(kept))  # (held from now on: its id is not reused)
        return kept

    def _kept(self, store: dict[Any, Any], key: Any, value: Any) -> Any:
        """What ``store`` holds under ``key``, else ``value``, kept there while the store
        has room (KEPT)."""
        found = store.get(key)
        if found is not None:
            return found
        if len(store) < self.KEPT:
            store[key] = value
        return value

    def facts(self, facts: dict[str, Any]) -> dict[str, Any]:
        """A rank's facts with each value shared where an earlier rank had it, and the whole
        shared where an earlier rank's facts were equal (not to be changed in place)."""
        values = {self.same(k): self.same(v) for k, v in facts.items()}
        key = self._identity(values)
        if key is None:
            shared: dict[str, Any] = self.same(values)
            return shared
        whole: dict[str, Any] = self._kept(self._wholes, key, values)
        return whole

    def _identity(self, values: dict[str, Any]) -> tuple[Any, ...] | None:
        """What makes facts whose values are shared equal: each key, and its value's own
        identity (a container held here) or a scalar's type and text; None where a value is
        neither (the whole is then compared by its JSON text, each value written again)."""
        key: list[Any] = []
        for name, value in values.items():
            if isinstance(value, (dict, list)):
                if value and id(value) not in self._held:
                    return None
                key.append((name, "id", id(value)) if value else (name, type(value).__name__))
            elif value is None or isinstance(value, (str, int, float)):
                key.append((name, type(value).__name__, repr(value)))
            else:
                return None
        return tuple(key)

    def metric(self, metric: Metric) -> Metric:
        """A metric's texts shared with the other ranks' (in place; returned)."""
        metric.unit = sys.intern(metric.unit)
        metric.layer = sys.intern(metric.layer)
        metric.source = sys.intern(metric.source)
        metric.samples_of = sys.intern(metric.samples_of)
        for name in ("description", "reason", "group"):
            text = getattr(metric, name)
            if text is not None:
                setattr(metric, name, sys.intern(text))
        return metric
