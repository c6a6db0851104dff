"""The history of runs: every report remembered in an embedded SQLite database.

``.perfstack/history.sqlite`` (next to the run folders) holds one entry per report: where the
report is and its digest, the workload's identity (its command), the git commit, branch and
dirty state of the workload's repository when the run recorded them, a machine fingerprint
(CPU model, ISA, usable CPUs, torch build, Python), when it ran, and every metric and every
row's primary value, so that a metric's or a row's series is read without opening reports.

Every write is one transaction (``BEGIN IMMEDIATE``) in WAL mode: a writer killed halfway
leaves nothing of its entry, and two writers wait for each other (SQLite's lock, with a
timeout) instead of corrupting the file. A report already in the history (same digest) is not
added twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from perfstack import cpus
from perfstack.analysis.primary import Primary
from perfstack.report import Report

FILE_NAME = "history.sqlite"
#: Set to "off" (or "0") to write no history; or to a database path.
HISTORY_ENV = "PERFSTACK_HISTORY"
#: Seconds a writer waits for another to finish before giving up.
LOCK_TIMEOUT_S = 30.0
SCHEMA_VERSION = 1

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
    perfstack_version TEXT
);
CREATE INDEX IF NOT EXISTS runs_by_workload ON runs (workload_key, machine, started);
CREATE TABLE IF NOT EXISTS metrics (
    run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    name TEXT NOT NULL, source TEXT NOT NULL, value REAL, unit TEXT NOT NULL,
    layer TEXT NOT NULL
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

    def to_dict(self) -> dict[str, Any]:
        """Return the JSON form."""
        return {"id": self.id, "started": self.started, "workload": self.workload,
                "commit": self.commit, "branch": self.branch, "dirty": self.dirty,
                "machine": self.machine, "report": self.report_path,
                "wall_time": self.wall_time}


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


def default_path(runs_dir: Path) -> Path | None:
    """Return the history database for reports under ``runs_dir`` (``.perfstack/runs``), or
    None when PERFSTACK_HISTORY is "off"."""
    chosen = os.environ.get(HISTORY_ENV, "").strip()
    if chosen.lower() in ("off", "0", "no", "false"):
        return None
    if chosen:
        return Path(chosen)
    return runs_dir.parent / FILE_NAME


def repository_of(folder: Path) -> dict[str, Any] | None:
    """Return the git commit, branch and dirty state of the repository holding ``folder``,
    or None outside a repository (or without git)."""
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
    return {"commit": commit, "branch": None if branch in (None, "HEAD") else branch,
            "dirty": None if status is None else bool(status)}


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


@contextmanager
def _connect(path: Path) -> Iterator[sqlite3.Connection]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path, timeout=LOCK_TIMEOUT_S, isolation_level=None)) as con:
        con.execute(f"PRAGMA busy_timeout={int(LOCK_TIMEOUT_S * 1000)}")
        con.execute("PRAGMA foreign_keys=ON")
        # Switching to WAL takes the database alone and does not wait for a busy one (two
        # writers creating it at once): retry until the other is done.
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                if con.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    con.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield con


def _ensure_schema(con: sqlite3.Connection) -> None:
    con.executescript(_SCHEMA)
    con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),))


def add(path: Path, report: Report, report_path: Path, data: bytes | None = None) -> bool:
    """Add one report to the history database at ``path`` in one transaction; return False
    when it was there already (the same digest). ``data`` is the report file's bytes, when
    the caller has them."""
    raw = data if data is not None else report_path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    facts = machine_facts(report)
    repo = report.environment.get("repository")
    repo = repo if isinstance(repo, dict) else {}
    primary = Primary(report)
    metric_rows = [(m.name, m.source, float(m.value) if isinstance(m.value, (int, float))
                    and not isinstance(m.value, bool) else None, m.unit, m.layer)
                   for m in report.metrics]
    layer_rows = []
    for layer, rows in report.layers.items():
        for row in rows:
            name = primary.name(row)
            q = row.values.get(name) if name is not None else None
            layer_rows.append((layer.value, row.source, row.key, row.name, name,
                               float(q.value) if q is not None and q.value is not None
                               else None, q.unit if q is not None else None))
    with _connect(path) as con:
        _ensure_schema(con)
        con.execute("BEGIN IMMEDIATE")
        try:
            if con.execute("SELECT 1 FROM runs WHERE digest = ?", (digest,)).fetchone():
                con.execute("ROLLBACK")
                return False
            cur = con.execute(
                "INSERT INTO runs (digest, report_path, workload, workload_key, commit_id, "
                "branch, dirty, machine, machine_facts, started, added, perfstack_version) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (digest, str(report_path.resolve()), json.dumps(report.run.command),
                 workload_key(report.run.command), repo.get("commit"), repo.get("branch"),
                 None if repo.get("dirty") is None else int(bool(repo.get("dirty"))),
                 fingerprint(facts), json.dumps(facts, sort_keys=True), report.run.started,
                 datetime.now(timezone.utc).isoformat(timespec="seconds"),
                 report.run.perfstack_version))
            run_id = cur.lastrowid
            con.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?, ?, ?)",
                            [(run_id, *m) for m in metric_rows])
            con.executemany("INSERT INTO rows VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            [(run_id, *r) for r in layer_rows])
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return True


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
        clauses.append("r.machine = ?")
        params.append(machine)
    if since:
        clauses.append("r.started >= ?")
        params.append(since)
    return (" WHERE " + " AND ".join(clauses)) if clauses else "", params


def runs(path: Path, workload: str | None = None, branch: str | None = None,
         machine: str | None = None, since: str | None = None) -> list[Entry]:
    """Return the runs in the history (filtered), oldest first."""
    if not path.is_file():
        return []
    where, params = _where(workload, branch, machine, since)
    with _connect(path) as con:
        _ensure_schema(con)
        found = con.execute(
            "SELECT r.id, r.started, r.workload, r.commit_id, r.branch, r.dirty, r.machine, "
            "r.report_path, (SELECT value FROM metrics m WHERE m.run_id = r.id AND "
            "m.name = 'wall_time' LIMIT 1) FROM runs r" + where + " ORDER BY r.started, r.id",
            params).fetchall()
    return [Entry(i, started, json.loads(wl), commit, branch_, None if dirty is None
                  else bool(dirty), mach, rp, wall)
            for i, started, wl, commit, branch_, dirty, mach, rp, wall in found]


def series(path: Path, metric: str | None = None, row: str | None = None,
           workload: str | None = None, branch: str | None = None,
           machine: str | None = None, since: str | None = None) -> list[Point]:
    """Return one metric's (by name) or one row's (by key, its primary value) series over the
    runs, oldest first."""
    if not path.is_file() or (metric is None) == (row is None):
        return []
    where, params = _where(workload, branch, machine, since)
    table, column, wanted = ("metrics", "name", metric) if metric is not None else (
        "rows", "key", row)
    query = (f"SELECT r.id, r.started, r.commit_id, x.value, x.unit FROM runs r JOIN {table} "
             f"x ON x.run_id = r.id AND x.{column} = ?")
    first = [wanted]
    with _connect(path) as con:
        _ensure_schema(con)
        found = con.execute(query + where + " ORDER BY r.started, r.id",
                            [*first, *params]).fetchall()
    return [Point(i, started, commit, value, unit or "")
            for i, started, commit, value, unit in found]


def integrity(path: Path) -> str:
    """Return SQLite's integrity check of the database ("ok" when sound)."""
    with _connect(path) as con:
        return str(con.execute("PRAGMA integrity_check").fetchone()[0])
