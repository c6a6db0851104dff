"""Reading the history: the runs, a metric's or a row's series, and the runs grouped by
workload and machine for trend and gate. Reads take no write lock."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from perfstack.history.database import Database
from perfstack.history.identity import Location
from perfstack.history.location import connect, exists, is_url
from perfstack.history.schema import read_schema
from perfstack.records import datarecord


@datarecord(frozen=True)
class Entry:
    """One run of the history, as listed."""

    id: int
    started: str
    workload: list[str]
    commit: str | None
    branch: str | None
    dirty: bool | None
    machine: str
    report_path: str
    wall_time: float | None  # the run's wall_time metric, when it has one
    #: how slow the machine was during the run's baseline runs (the probe, median; larger is
    #: slower), wall-clock and CPU-only; None without probes
    speed_wall: float | None = None
    speed_cpu: float | None = None
    #: why the run's baseline was disturbed by other programs (perfstack.machine.load), or None
    disturbed: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {"id": self.id, "started": self.started, "workload": self.workload,
                "commit": self.commit, "branch": self.branch, "dirty": self.dirty,
                "machine": self.machine, "report": self.report_path,
                "wall_time": self.wall_time, "disturbed": self.disturbed}


@datarecord(frozen=True)
class Point:
    """One value of a series: which run, when, at which commit."""

    run_id: int
    started: str
    commit: str | None
    value: float | None
    unit: str

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {"run": self.run_id, "started": self.started, "commit": self.commit,
                "value": self.value, "unit": self.unit}


@contextmanager
def _reading(location: Location) -> Iterator[Database]:
    """Open the history for reading: no write lock, a read-only file read as it is, a newer
    schema refused and an older one brought up to date."""
    with connect(location, read_only=True) as db:
        read_schema(db)
        yield db


def _where(workload: str | None, branch: str | None, machine: str | None,
           since: str | None) -> tuple[str, list[Any]]:
    clauses, params = [], []
    if workload:
        # the command is stored as JSON: an undecodable byte of it (\udcff) as JSON escapes it
        escaped = json.dumps(workload)[1:-1]
        clauses.append("(r.workload LIKE ? OR r.workload LIKE ? OR r.workload_key = ?)")
        params += [f"%{workload}%", f"%{escaped}%", workload]
    if branch:
        clauses.append("r.branch = ?")
        params.append(branch)
    if machine:
        clauses.append("r.machine LIKE ?")
        params.append(f"{machine}%")
    if since:
        clauses.append("r.started >= ?")
        params.append(since)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def runs(location: Location, workload: str | None = None, branch: str | None = None,
         machine: str | None = None, since: str | None = None) -> list[Entry]:
    """Return the runs in the history (filtered), oldest first."""
    if not exists(location):
        return []
    where, params = _where(workload, branch, machine, since)
    with _reading(location) as db:
        found = db.execute(
            f"SELECT {_RUN_COLUMNS}, (SELECT value FROM metrics m WHERE m.run_id = r.id AND "
            "m.name = 'wall_time' LIMIT 1) FROM runs r" + where + " ORDER BY r.started, r.id",
            params).fetchall()
    return [_entry(row[:-1], row[-1]) for row in found]


#: The columns an Entry is made of, in ``_entry``'s order.
_RUN_COLUMNS = ("r.id, r.started, r.workload, r.commit_id, r.branch, r.dirty, r.machine, "
                "r.report_path, r.speed_wall, r.speed_cpu, r.disturbed")


def _entry(row: Sequence[Any], wall: float | None = None) -> Entry:
    """An Entry from a row of ``_RUN_COLUMNS``."""
    i, started, wl, commit, branch, dirty, machine, path, speed_wall, speed_cpu, hit = row
    return Entry(int(i), str(started), json.loads(wl), commit, branch,
                 None if dirty is None else bool(dirty), machine, path, wall, speed_wall,
                 speed_cpu, hit)


def series(location: Location, metric: str | None = None, row: str | None = None,
           workload: str | None = None, branch: str | None = None,
           machine: str | None = None, since: str | None = None) -> list[Point]:
    """Return one metric's (by name) or one row's (by key, its primary value) series over the
    runs, oldest first."""
    if not exists(location) or (metric is None) == (row is None):
        return []
    where, params = _where(workload, branch, machine, since)
    table, column, wanted = ("metrics", "name", metric) if metric is not None else (
        "rows", "key", row)
    query = (f"SELECT r.id, r.started, r.commit_id, x.value, x.unit FROM runs r JOIN {table} "
             f"x ON x.run_id = r.id AND x.{column} = ?")
    with _reading(location) as db:
        found = db.execute(query + where + " ORDER BY r.started, r.id",
                           [wanted, *params]).fetchall()
    return [Point(int(i), str(started), commit, value, unit or "")
            for i, started, commit, value, unit in found]


@datarecord(frozen=True)
class Group:
    """Every series of one workload on one machine, read in one pass: the runs oldest first,
    and per metric (by name) and per row (by key) one value per run (None where a run had
    none)."""

    workload: list[str]
    workload_key: str
    machine: str
    runs: list[Entry]
    metrics: dict[str, list[float | None]]
    metric_info: dict[str, tuple[str, str, str]]  # name -> (unit, layer, better)
    rows: dict[str, list[float | None]]
    row_info: dict[str, tuple[str, str, str]]  # key -> (name, unit, layer)
    #: the workload's own figure (a metric it reported with a better direction: a throughput
    #: first), the series ``trend`` and ``gate`` hold to a family of one; None without one
    figure: str | None = None


def groups(location: Location, workload: str | None = None, branch: str | None = None,
           machine: str | None = None, since: str | None = None,
           top_rows: int = 5, row_keys: Sequence[str] = ()) -> list[Group]:
    """Return every (workload, machine) group of the history with its series: every metric,
    the ``top_rows`` largest rows of each layer (by primary value in the group's newest run
    that has rows in that layer), and the rows named in ``row_keys``."""
    from perfstack.analysis.diff.lead import pick_figure

    if not exists(location):
        return []
    where, params = _where(workload, branch, machine, since)
    with _reading(location) as db:
        listed = db.execute(
            f"SELECT {_RUN_COLUMNS}, r.workload_key FROM runs r" + where
            + " ORDER BY r.workload_key, r.machine, r.started, r.id", params).fetchall()
        by_group: dict[tuple[str, str], list[Any]] = {}
        for found in listed:
            by_group.setdefault((found[-1], found[6]), []).append(found[:-1])
        out = []
        for (key, mach), members in by_group.items():
            ids = [int(m[0]) for m in members]
            position = {run_id: i for i, run_id in enumerate(ids)}
            marks = ",".join("?" * len(ids))
            metrics: dict[str, list[float | None]] = {}
            metric_info: dict[str, tuple[str, str, str]] = {}
            own: set[str] = set()
            for run_id, name, value, unit, layer, better, source in db.execute(
                    f"SELECT run_id, name, value, unit, layer, better, source FROM metrics "
                    f"WHERE run_id IN ({marks})", ids).fetchall():
                metrics.setdefault(name, [None] * len(ids))[position[int(run_id)]] = value
                metric_info[name] = (unit, layer, better or "neither")
                if source == "workload" and better in ("higher", "lower"):
                    own.add(name)
            chosen = _top_row_keys(db, ids, marks, top_rows)
            chosen += [k for k in row_keys if k not in chosen]
            rows: dict[str, list[float | None]] = {}
            row_info: dict[str, tuple[str, str, str]] = {}
            if chosen:
                keys = ",".join("?" * len(chosen))
                for run_id, row_key, name, value, unit, layer in db.execute(
                        f"SELECT run_id, key, name, value, unit, layer FROM rows WHERE run_id "
                        f"IN ({marks}) AND key IN ({keys})", [*ids, *chosen]).fetchall():
                    rows.setdefault(row_key, [None] * len(ids))[position[int(run_id)]] = value
                    row_info.setdefault(row_key, (name, unit or "", layer))
            entries = [_entry(found) for found in members]
            figure = pick_figure(own)
            out.append(Group(entries[-1].workload, key, mach, entries, metrics, metric_info,
                             rows, row_info, figure))
    return out


def _top_row_keys(db: Database, ids: list[int], marks: str, top: int) -> list[str]:
    """The ``top`` largest rows of each layer in the newest run that has rows in it."""
    if top <= 0:
        return []
    order = {run_id: i for i, run_id in enumerate(ids)}  # ids are oldest first
    newest: dict[str, int] = {}
    for run_id, layer in db.execute(
            f"SELECT DISTINCT run_id, layer FROM rows WHERE run_id IN ({marks})", ids):
        if layer not in newest or order[int(run_id)] > order[newest[layer]]:
            newest[layer] = int(run_id)
    chosen: list[str] = []
    for layer, run_id in sorted(newest.items()):
        found = db.execute(
            "SELECT key FROM rows WHERE run_id = ? AND layer = ? AND value IS NOT NULL "
            "ORDER BY value DESC, key LIMIT ?", (run_id, layer, top)).fetchall()
        chosen += [k for (k,) in found if k not in chosen]
    return chosen


def integrity(location: Location) -> str:
    """Return the database's integrity check ("ok" when sound; PostgreSQL checks its own)."""
    if is_url(location):
        return "ok"
    with connect(location, read_only=True) as db:
        return str(db.execute("PRAGMA integrity_check").fetchone()[0])
