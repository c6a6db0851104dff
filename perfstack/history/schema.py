"""The history's tables, and bringing a database to this perfstack's schema (or refusing one a
newer perfstack wrote)."""

from __future__ import annotations

from perfstack import errors
from perfstack.history.database import Database
from perfstack.history.location import errors as db_errors

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
