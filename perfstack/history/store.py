"""Adding a report to the history: one transaction per report.

Every write is one transaction (SQLite: ``BEGIN IMMEDIATE`` in WAL mode): a writer killed
halfway leaves nothing of its entry, and two writers wait for each other (SQLite's lock, with a
timeout) instead of corrupting the file. A report already in the history (same digest) is not
added twice (the digest's unique key decides between two writers of one report).
"""

from __future__ import annotations

import hashlib
import json
import os
from datetime import datetime, timezone
from pathlib import Path

from perfstack.analysis.primary import Primary
from perfstack.history.identity import (
    Location,
    disturbed,
    fingerprint,
    machine_facts,
    speeds,
    workload_of,
)
from perfstack.history.location import connect
from perfstack.history.schema import ensure_schema
from perfstack.report import Report


def _digest(path: Path) -> str:
    """The SHA-256 of a file, read a MiB at a time (a job's report is tens of MB)."""
    found = hashlib.sha256()
    with open(path, "rb") as fh:
        while piece := fh.read(1 << 20):
            found.update(piece)
    return found.hexdigest()


def add(location: Location, report: Report, report_path: Path,
        data: bytes | None = None) -> bool:
    """Add one report to the history at ``location`` in one transaction; return False when it
    was there already (the same digest). ``data`` is the report file's bytes, when the caller
    has them."""
    digest = hashlib.sha256(data).hexdigest() if data is not None else _digest(report_path)
    facts = machine_facts(report)
    repo = report.environment.get("repository")
    repo = repo if isinstance(repo, dict) else {}
    workload = workload_of(report)
    primary = Primary(report)
    from perfstack.analysis.origin import workload_dir
    from perfstack.analysis.views.layers import display_name

    home = workload_dir(report)
    layer_rows = []
    for layer, rows in report.layers.items():
        for row in rows:
            if row.attrs.get("metric"):
                continue  # it restates a metric (stored once, under the metric's name)
            name = primary.name(row)
            q = row.values.get(name) if name is not None else None
            # Shown by its function, line and a short path: never a venv's absolute path.
            layer_rows.append((layer.value, row.source, row.key, display_name(row, home), name,
                               float(q.value) if q is not None and q.value is not None
                               else None, q.unit if q is not None else None))
    with connect(location) as db:
        ensure_schema(db)
        db.begin()
        try:
            # Two writers of one report: the unique digest lets one in, the other does nothing.
            run = db.execute(
                "INSERT INTO runs (digest, report_path, workload, workload_key, commit_id, "
                "branch, dirty, machine, machine_facts, started, added, perfstack_version, "
                "speed_wall, speed_cpu, disturbed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
                "?, ?) "
                "ON CONFLICT (digest) DO NOTHING RETURNING id",
                # A path that is not UTF-8 (bytes a file system allows) is kept readable
                # for people, its odd bytes as \xNN: a database stores text.
                (digest, os.fsencode(report_path.resolve()).decode("utf-8", "backslashreplace"),
                 json.dumps(workload[0]), workload[1], repo.get("commit"), repo.get("branch"),
                 None if repo.get("dirty") is None else int(bool(repo.get("dirty"))),
                 fingerprint(facts), json.dumps(facts, sort_keys=True), report.run.started,
                 datetime.now(timezone.utc).isoformat(timespec="seconds"),
                 report.run.perfstack_version, *speeds(report),
                 disturbed(report))).fetchone()
            if run is None:
                db.rollback()
                return False
            run_id = run[0]
            db.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?, ?)",
                           [(run_id, m.name, m.source, float(m.value)
                             if isinstance(m.value, (int, float))
                             and not isinstance(m.value, bool) else None, m.unit, m.layer,
                             m.better.value) for m in report.metrics])
            db.executemany("INSERT INTO rows VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           [(run_id, *r) for r in layer_rows])
            db.commit()
        except BaseException:
            db.rollback()
            raise
    return True
