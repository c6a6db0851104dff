"""The history in an SQLite file (the default store): WAL mode, one writer at a time, a
wait for another writer's lock that a signal ends."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from perfstack import signals
from perfstack.history.database import Database, retry_while

#: How long SQLite itself waits for a lock inside one call: between calls perfstack looks at
#: its deadline and a signal is handled (SQLite's own wait is deaf to Ctrl-C and SIGTERM).
_BUSY_STEP_S = 0.1


def _locked(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and any(
        word in str(exc) for word in ("locked", "busy"))


def _writable(path: Path) -> bool:
    """Whether SQLite could write the file and its journal beside it (a read-only mount says
    no even to root)."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


def _open_readonly(path: Path) -> sqlite3.Connection:
    """Open a history this process cannot write, for reading. A WAL file in a folder it
    cannot write has no shared-memory index to open: read as immutable (nothing can be
    writing it that this process could see, as it could not write it either)."""
    uri = "file:" + quote(str(path.resolve()))
    try:
        lite = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=_BUSY_STEP_S,
                               isolation_level=None)
        lite.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return lite
    except sqlite3.OperationalError:
        return sqlite3.connect(f"{uri}?immutable=1", uri=True, isolation_level=None)


class SQLite:
    """A history file: any location no other store claims."""

    server = False

    def claims(self, location: str | Path) -> bool:
        """Every path (the last store asked)."""
        return True

    def exists(self, location: str | Path) -> bool:
        """Whether the file is there."""
        return Path(location).is_file()

    def describe(self, location: str | Path) -> str:
        """The path as given."""
        return str(location)

    def errors(self) -> tuple[type[BaseException], ...]:
        """SQLite's errors, and the file system's."""
        return (sqlite3.Error, OSError)

    def sql(self, text: str) -> str:
        """The SQL is written for SQLite."""
        return text

    def attempt(self, db: Database, call: Callable[..., Any], *args: Any) -> Any:
        """Run ``call``, waiting in short steps while another process holds the lock."""
        return retry_while(_locked, db, call, *args,
                           interrupted=lambda: signals.pending() is not None)

    def executemany(self, db: Database, cursor: Any, text: str,
                    rows: Sequence[tuple[Any, ...]]) -> None:
        """The driver's own ``executemany``."""
        self.attempt(db, cursor.executemany, text, rows)

    def begin(self) -> str:
        """A transaction that takes the write lock at once."""
        return "BEGIN IMMEDIATE"

    def schema_lock(self, db: Database) -> None:
        """``BEGIN IMMEDIATE`` already holds out every other writer."""

    @contextmanager
    def open(self, location: str | Path, read_only: bool) -> Iterator[Database]:
        """Open (or create) the file, in WAL mode; one this process cannot write is read
        when ``read_only``."""
        # Absolute, always: an SQLite built with URI filenames on (as Python's often is) takes
        # a name beginning 'file:' as a URI ('file:h.sqlite?mode=memory': an in-memory
        # database, every entry gone without a word), whatever the connect call says.
        path = Path(location).absolute()
        if read_only and path.is_file() and not _writable(path):
            with closing(_open_readonly(path)) as lite:
                yield Database(lite, self, readonly=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(path, timeout=_BUSY_STEP_S, isolation_level=None)) as lite:
            db = Database(lite, self)
            db.execute(f"PRAGMA busy_timeout={int(_BUSY_STEP_S * 1000)}")
            db.execute("PRAGMA foreign_keys=ON")
            # Switching to WAL takes the database alone and does not wait for a busy one (two
            # writers creating it at once): retried, as every statement is, until the other
            # is done.
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            yield db
