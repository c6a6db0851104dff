"""The history of runs: every report remembered in an embedded SQLite database, or for a team
in PostgreSQL (``perfstack.historydb`` holds the difference).

``.perfstack/history.sqlite`` (next to the run folders) holds one entry per report: where the
report is and its digest, the workload's identity (its command), the git commit, branch and
dirty state of the workload's repository when the run recorded them, a machine fingerprint
(CPU model, ISA, usable CPUs, torch build, Python), when it ran, and every metric and every
row's primary value, so that a metric's or a row's series is read without opening reports.

Every write is one transaction (SQLite: ``BEGIN IMMEDIATE`` in WAL mode): a writer killed
halfway leaves nothing of its entry, and two writers wait for each other (SQLite's lock, with a
timeout) instead of corrupting the file. A report already in the history (same digest) is not
added twice (the digest's unique key decides between two writers of one report).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfstack import cpus, errors
from perfstack.analysis.primary import Primary
from perfstack.historydb import Database, connect, exists, is_url
from perfstack.historydb import errors as db_errors
from perfstack.report import Report

FILE_NAME = "history.sqlite"
#: Set to "off" (or "0") to write no history; or to a database path.
HISTORY_ENV = "PERFSTACK_HISTORY"
SCHEMA_VERSION = 4  # 2: metrics.better; 3: runs.speed_wall, runs.speed_cpu; 4: runs.disturbed

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    digest TEXT NOT NULL UNIQUE,
    report_path TEXT NOT NULL,
    workload TEXT NOT NULL,
    workload_key TEXT NOT NULL,
    commit_id TEXT,
    branch TEXT,
    dirty INTEGER,
    machine TEXT NOT NULL,
    machine_facts TEXT NOT NULL,
    started TEXT NOT NULL,
    added TEXT NOT NULL,
    perfstack_version TEXT,
    speed_wall REAL,
    speed_cpu REAL,
    disturbed TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_workload ON runs (workload_key, machine, started);
CREATE TABLE IF NOT EXISTS metrics (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name TEXT NOT NULL, source TEXT NOT NULL, value REAL, unit TEXT NOT NULL,
    layer TEXT NOT NULL, better TEXT
);
CREATE INDEX IF NOT EXISTS metrics_by_name ON metrics (name, source, run_id);
CREATE TABLE IF NOT EXISTS rows (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    layer TEXT NOT NULL, source TEXT NOT NULL, key TEXT NOT NULL, name TEXT NOT NULL,
    value_name TEXT, value REAL, unit TEXT
);
CREATE INDEX IF NOT EXISTS rows_by_key ON rows (key, source, run_id);
"""


@dataclass(frozen=True)
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
    #: why the run's baseline was disturbed by other programs (perfstack.machineload), or None
    disturbed: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {"id": self.id, "started": self.started, "workload": self.workload,
                "commit": self.commit, "branch": self.branch, "dirty": self.dirty,
                "machine": self.machine, "report": self.report_path,
                "wall_time": self.wall_time, "disturbed": self.disturbed}


@dataclass(frozen=True)
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


#: A history's location: an SQLite file, or a PostgreSQL URL (``postgresql://...``).
Location = str | Path


def default_path(runs_dir: Path) -> Location | None:
    """Return the history database for reports under ``runs_dir`` (``.perfstack/runs``): the
    PERFSTACK_HISTORY variable's path or PostgreSQL URL when set, None when it is "off"."""
    chosen = os.environ.get(HISTORY_ENV, "").strip()
    if chosen.lower() in ("off", "0", "no", "false"):
        return None
    if chosen:
        return chosen if is_url(chosen) else Path(chosen)
    return runs_dir.parent / FILE_NAME


def repository_of(folder: Path, script: Path | None = None) -> dict[str, Any] | None:
    """Return the git commit, branch and dirty state of the repository holding ``folder``,
    or None outside a repository (or without git). With the workload's ``script``: whether
    git tracks it (``script_tracked``); an untracked or modified script makes the run dirty,
    since the commit does not hold the code that ran."""
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(folder), *args], capture_output=True,
                                  text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    branch = git("rev-parse", "--abbrev-ref", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    out: dict[str, Any] = {"commit": commit,
                           "branch": None if branch in (None, "HEAD") else branch,
                           "dirty": None if status is None else bool(status)}
    if script is not None:
        tracked = git("ls-files", "--error-unmatch", "--", str(script)) is not None
        out["script_tracked"] = tracked
        if not tracked:
            out["dirty"] = True
    return out


def machine_facts(report: Report) -> dict[str, Any]:
    """Return what identifies the machine a report ran on: runs on other machines are never
    compared in a series."""
    env = report.environment
    cpu, torch, python = (env.get(k) or {} for k in ("cpu", "torch", "python"))
    return {"cpu_model": cpu.get("model"), "isa": sorted(cpu.get("isa") or []),
            "usable_cpus": cpus.usable_cpus(env),
            "torch": torch.get("version"), "torch_git": torch.get("git_version"),
            "torch_cuda": torch.get("cuda"), "python": python.get("version")}


def fingerprint(facts: dict[str, Any]) -> str:
    """Return a short stable name for ``machine_facts``."""
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:12]


def workload_key(command: Sequence[str]) -> str:
    """Return a short stable name for a workload's command."""
    return hashlib.sha256(json.dumps(list(command)).encode()).hexdigest()[:12]


def workload_of(report: Report) -> tuple[list[str], str]:
    """Return what a report's series are keyed by: the workload's command (the script or
    module and its arguments) and its short key. A report of traces (``perfstack analyze``)
    is its traces, resolved, and the GPUs that recorded them: two unrelated analyses are two
    series, one folder analyzed again is one."""
    command = list(report.run.command)
    if command or not report.run.analyzed:
        return command, workload_key(command)
    paths = sorted({os.path.realpath(a.get("path", "")) for a in report.run.analyzed})
    recorded = report.environment.get("recorded")
    names = sorted({str(d) for rank in (recorded or {}).values() if isinstance(rank, dict)
                    for d in rank.get("devices") or []}) if isinstance(recorded, dict) else []
    shown = ["perfstack", "analyze", *paths]
    return shown, workload_key([*shown, *names])


def _refuse_newer(db: Database) -> None:
    """Raise NewerHistory, before anything is written, for a history a newer perfstack made:
    bringing it "up to date" would write an older version over its own."""
    found = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
    if found and str(found[0][0]).isdigit() and int(found[0][0]) > SCHEMA_VERSION:
        raise errors.NewerHistory(
            f"the history was written by a newer perfstack (schema {found[0][0]}; this one "
            f"reads up to {SCHEMA_VERSION}): upgrade perfstack to read it; nothing was changed")


def _version(db: Database) -> int | None:
    """The schema version the history records (None: no tables yet, or none recorded)."""
    try:
        found = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
    except db_errors():
        return None  # no meta table: an empty database (PostgreSQL ends no transaction here)
    return int(found[0][0]) if found and str(found[0][0]).isdigit() else None


def read_schema(db: Database) -> None:
    """Before reading: refuse a newer history; bring an older one up to date (a write, the
    only one a reader makes); a current one is read as it is, so a read takes no write lock
    and a history this process cannot write can be read."""
    version = _version(db)
    if version == SCHEMA_VERSION:
        return
    if version is not None and version > SCHEMA_VERSION:
        _refuse_newer(db)
    if db.readonly:
        what = f"of an older schema ({version})" if version else "holds no runs table"
        raise errors.HistoryUnavailable(
            f"the history is read-only and {what}: perfstack must bring it up to date once, "
            "with write access")
    ensure_schema(db)


def ensure_schema(db: Database) -> None:
    """Create the history's tables where they are missing (and bring an older one up to
    date), in one transaction that other writers wait for."""
    db.begin()
    try:
        db.schema_lock()
        db.script(_SCHEMA)
        _refuse_newer(db)  # raised inside the transaction: its rollback undoes the above
        columns = [c[0] for c in db.execute("SELECT * FROM metrics LIMIT 0").description]
        if "better" not in columns:  # a history written before schema 2
            db.execute("ALTER TABLE metrics ADD COLUMN better TEXT")
        columns = [c[0] for c in db.execute("SELECT * FROM runs LIMIT 0").description]
        for name, kind in (("speed_wall", "REAL"), ("speed_cpu", "REAL"),  # before schema 3
                           ("disturbed", "TEXT")):  # before schema 4
            if name not in columns:
                db.execute(f"ALTER TABLE runs ADD COLUMN {name} {kind}")
        db.execute("INSERT INTO meta VALUES ('schema_version', ?) ON CONFLICT (key) DO "
                   "UPDATE SET value = excluded.value", (str(SCHEMA_VERSION),))
        db.commit()
    except BaseException:
        db.rollback()
        raise


def add(location: Location, report: Report, report_path: Path,
        data: bytes | None = None) -> bool:
    """Add one report to the history at ``location`` in one transaction; return False when it
    was there already (the same digest). ``data`` is the report file's bytes, when the caller
    has them."""
    raw = data if data is not None else report_path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    facts = machine_facts(report)
    repo = report.environment.get("repository")
    repo = repo if isinstance(repo, dict) else {}
    workload = workload_of(report)
    primary = Primary(report)
    metric_rows = [(m.name, m.source, float(m.value) if isinstance(m.value, (int, float))
                    and not isinstance(m.value, bool) else None, m.unit, m.layer,
                    m.better.value) for m in report.metrics]
    from perfstack.analysis.origin import workload_dir
    from perfstack.analysis.view import display_name

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
                 report.run.perfstack_version, *_speeds(report),
                 disturbed(report))).fetchone()
            if run is None:
                db.rollback()
                return False
            run_id = run[0]
            db.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?, ?)",
                           [(run_id, *m) for m in metric_rows])
            db.executemany("INSERT INTO rows VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           [(run_id, *r) for r in layer_rows])
            db.commit()
        except BaseException:
            db.rollback()
            raise
    return True


def disturbed(report: Report) -> str | None:
    """Return why a report's figures were disturbed by other programs, or None: when half or
    more of its clean baseline runs (the figures are their medians) were disturbed
    (``perfstack.machineload``), the median run's reason."""
    from perfstack import machineload

    clean = [r for r in report.run.runs if r.role == "baseline" and r.exit.clean]
    measured = [r for r in clean if r.machine_load]
    if not measured:
        return None
    hit = [r for r in measured if machineload.disturbed(r.machine_load)]
    if 2 * len(hit) < len(measured):
        return None
    hit.sort(key=lambda r: float((r.machine_load or {}).get("others_cpus") or 0.0))
    why = machineload.disturbed(hit[len(hit) // 2].machine_load)
    return f"{why} in {len(hit)} of {len(measured)} baseline runs"


def _speeds(report: Report) -> tuple[float | None, float | None]:
    """The machine's slowness during a report's baseline runs (medians of the probes),
    wall-clock and CPU-only."""
    from perfstack.analysis.drift import baseline_speeds

    out = []
    for wall_clock in (True, False):
        found = baseline_speeds(report, wall_clock)
        out.append(statistics.median(found) if found else None)
    return out[0], out[1]


def _where(workload: str | None, branch: str | None, machine: str | None,
           since: str | None) -> tuple[str, list[Any]]:
    clauses, params = [], []
    if workload:
        clauses.append("(r.workload LIKE ? OR r.workload_key = ?)")
        params += [f"%{workload}%", workload]
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
    with connect(location, read_only=True) as db:
        read_schema(db)
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
    with connect(location, read_only=True) as db:
        read_schema(db)
        found = db.execute(query + where + " ORDER BY r.started, r.id",
                           [wanted, *params]).fetchall()
    return [Point(int(i), str(started), commit, value, unit or "")
            for i, started, commit, value, unit in found]


@dataclass(frozen=True)
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
    from perfstack.analysis.lead import pick_figure

    if not exists(location):
        return []
    where, params = _where(workload, branch, machine, since)
    with connect(location, read_only=True) as db:
        read_schema(db)
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
