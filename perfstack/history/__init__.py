"""The history room: every report remembered, and what changed over the runs.

- ``database``: where the history lives (an SQLite file, or PostgreSQL for a team) and the
  dialects' differences; ``schema``: its tables and versions.
- ``identity``: what a run is in the history (its workload, machine, commit, disturbance).
- ``store``: adding a report (one transaction each); ``queries``: reading runs and series.
- ``changepoints``, ``trend`` and ``gate``: change points over a series, every series'
  trend, and the CI gate on the newest run.

``from perfstack import history`` gives the store's API (``history.add``, ``history.runs``,
``history.series``, ...), as it did when the history was one module.
"""

from __future__ import annotations

from perfstack.history.identity import (
    FILE_NAME,
    HISTORY_ENV,
    Location,
    default_path,
    disturbed,
    fingerprint,
    machine_facts,
    repository_of,
    workload_key,
    workload_of,
)
from perfstack.history.queries import Entry, Group, Point, groups, integrity, runs, series
from perfstack.history.schema import SCHEMA_VERSION, ensure_schema, read_schema
from perfstack.history.store import add

__all__ = [
    "FILE_NAME", "HISTORY_ENV", "SCHEMA_VERSION", "Entry", "Group", "Location", "Point", "add",
    "default_path", "disturbed", "ensure_schema", "fingerprint", "groups", "integrity",
    "machine_facts", "read_schema", "repository_of", "runs", "series", "workload_key",
    "workload_of",
]
