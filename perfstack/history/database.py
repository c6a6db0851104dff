"""Where the history lives: an SQLite file (the default) or a PostgreSQL database.

Both take the same SQL, written for SQLite with ``?`` placeholders; for PostgreSQL (through
the pure-Python driver pg8000) the placeholders and the few types that differ are translated
here, and nowhere else. A location is a path, or a ``postgresql://user:password@host:port/db``
URL.
"""

from __future__ import annotations

import os
import sqlite3
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import ParseResult, parse_qs, quote, unquote, urlparse

from perfstack.errors import UsageError
from perfstack.report.files import utf8_safe
from perfstack.run import signals

#: Seconds a writer waits for another to finish before giving up.
LOCK_TIMEOUT_S = 30.0
URL_SCHEMES = ("postgresql", "postgres")


def is_url(location: str | Path) -> bool:
    """Return True when ``location`` names a PostgreSQL database rather than a file."""
    return isinstance(location, str) and location.split(":", 1)[0].lower() in URL_SCHEMES


def parse_url(url: str) -> ParseResult:
    """Return a PostgreSQL URL's parts; raise UsageError, one line, for one that cannot be
    read (a port out of range or not a number, an unclosed IPv6 bracket)."""
    try:
        parsed = urlparse(url)
        _ = parsed.port  # urllib checks the port only when it is asked for
        return parsed
    except ValueError as exc:
        raise UsageError(f"{describe_raw(url)}: not a PostgreSQL URL ({exc}); the form is "
                         "postgresql://user:password@host:port/database") from None


def describe_raw(url: str) -> str:
    """Return a URL that could not be parsed for a message, its password left out."""
    head, sep, tail = url.partition("@")
    return (head.split(":", 2)[0] + "://…@" + tail) if sep else url


def describe(location: str | Path) -> str:
    """Return ``location`` for messages, without its password."""
    if not is_url(location):
        return str(location)
    try:
        url = parse_url(str(location))
    except UsageError:
        return describe_raw(str(location))
    host = url.hostname or "localhost"
    port = f":{url.port}" if url.port else ""
    user = f"{url.username}@" if url.username else ""
    return f"{url.scheme}://{user}{host}{port}{url.path}"


def exists(location: str | Path) -> bool:
    """Return True when there may be a history at ``location`` (a server is asked later)."""
    return is_url(location) or Path(location).is_file()


def errors() -> tuple[type[BaseException], ...]:
    """Return the exceptions a history database raises when it cannot be read or written."""
    found: list[type[BaseException]] = [sqlite3.Error, OSError]
    # PostgreSQL's driver raises only once a URL has imported it (38 ms an import, for every
    # run that writes an SQLite history).
    pg = sys.modules.get("pg8000.dbapi")
    if pg is not None:
        found += [pg.Error, pg.InterfaceError]
    return tuple(found)


#: How long SQLite itself waits for a lock inside one call: between calls perfstack looks at
#: its deadline and a signal is handled (SQLite's own wait is deaf to Ctrl-C and SIGTERM).
_BUSY_STEP_S = 0.1


def _locked(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and any(
        word in str(exc) for word in ("locked", "busy"))


@dataclass
class Database:
    """One open connection, with the dialect's differences in one place."""

    con: Any
    postgres: bool
    waited: bool = False  # whether the wait for another writer was announced
    readonly: bool = False  # opened for reading a file this process cannot write

    def _retrying(self, call: Any, *args: Any) -> Any:
        """Run ``call``; while another process holds the SQLite file's lock, say so once on
        stderr and try again in short steps until LOCK_TIMEOUT_S, so that a signal ends the
        wait at once."""
        deadline: float | None = None
        while True:
            try:
                if self.postgres:  # a server that never answers: a signal ends the wait
                    with signals.interruptible():
                        return call(*args)
                return call(*args)
            except sqlite3.OperationalError as exc:
                if self.postgres or not _locked(exc):
                    raise
                now = time.monotonic()
                deadline = deadline or now + LOCK_TIMEOUT_S
                if now > deadline:
                    raise
                if signals.pending() is not None:  # Ctrl-C, TERM or HUP while saving
                    raise sqlite3.OperationalError(
                        "interrupted while waiting for another process's lock") from None
                if not self.waited:
                    self.waited = True
                    print(f"perfstack: waiting for the history: another process holds its "
                          f"lock (up to {LOCK_TIMEOUT_S:.0f} s; Ctrl-C stops)", file=sys.stderr,
                          flush=True)
                time.sleep(0.02)

    def sql(self, text: str) -> str:
        """Return ``text`` in this database's dialect."""
        if not self.postgres:
            return text
        return (text.replace("?", "%s")
                .replace("INTEGER PRIMARY KEY", "BIGSERIAL PRIMARY KEY")
                .replace(" REAL", " DOUBLE PRECISION"))

    def execute(self, text: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement; return a cursor. Text that UTF-8 cannot hold (an undecodable
        byte of a file name or an argument) is stored escaped (``utf8_safe``)."""
        cur = self.con.cursor()
        self._retrying(cur.execute, self.sql(text), _storable(params))
        return cur

    def executemany(self, text: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one ``INSERT ... VALUES (?, ...)`` for many rows."""
        if not rows:
            return
        cur = self.con.cursor()
        rows = [_storable(r) for r in rows]
        if not self.postgres:
            self._retrying(cur.executemany, text, rows)
            return
        # pg8000 sends one statement per row (a round trip each: 20,000 rows took 5 s);
        # many rows per statement instead, within PostgreSQL's 65,535 parameters.
        head, _, one = text.rpartition("VALUES")
        batch = max(1, 30_000 // max(len(rows[0]), 1))
        for start in range(0, len(rows), batch):
            chunk = rows[start:start + batch]
            values = ", ".join([one.strip()] * len(chunk))
            self._retrying(cur.execute, self.sql(f"{head}VALUES {values}"),
                           tuple(v for r in chunk for v in r))

    def script(self, text: str) -> None:
        """Run several statements separated by ';'."""
        for statement in text.split(";"):
            if statement.strip():
                self.execute(statement)

    def begin(self) -> None:
        """Start a write transaction that holds the database against other writers (SQLite)
        or that other writers serialise with (PostgreSQL's row locks and unique keys)."""
        self.execute("BEGIN" if self.postgres else "BEGIN IMMEDIATE")

    def commit(self) -> None:
        """End the transaction, keeping what it wrote."""
        self.execute("COMMIT")

    def rollback(self) -> None:
        """End the transaction, keeping nothing."""
        self.execute("ROLLBACK")

    def schema_lock(self) -> None:
        """Within a transaction: wait until no other writer is creating the schema."""
        if self.postgres:  # concurrent CREATE TABLE IF NOT EXISTS can collide in PostgreSQL
            self.execute("SELECT pg_advisory_xact_lock(7468307)")


def _storable(params: Sequence[Any]) -> tuple[Any, ...]:
    """Statement parameters, each text one as UTF-8 can hold it."""
    return tuple(utf8_safe(v) if isinstance(v, str) else v for v in params)


def _pg_connect(url: str) -> Any:
    try:
        import pg8000.dbapi
    except ImportError as exc:  # pragma: no cover - a dependency
        raise OSError("a PostgreSQL history needs the pg8000 driver: pip install pg8000") \
            from exc
    parsed = parse_url(url)
    query = {k: v[-1] for k, v in parse_qs(parsed.query).items()}
    kwargs: dict[str, Any] = {
        "user": unquote(parsed.username or "postgres"),
        "password": unquote(parsed.password) if parsed.password else None,
        "database": parsed.path.lstrip("/") or None,
        "timeout": LOCK_TIMEOUT_S,
    }
    if "unix_sock" in query or query.get("host", "").startswith("/"):
        folder = query.get("unix_sock") or query["host"]
        port = parsed.port or 5432
        kwargs["unix_sock"] = folder if folder.endswith(f".{port}") else \
            f"{folder.rstrip('/')}/.s.PGSQL.{port}"
    else:
        kwargs["host"] = parsed.hostname or "localhost"
        kwargs["port"] = parsed.port or 5432
    con = pg8000.dbapi.connect(**kwargs)
    con.autocommit = True  # transactions are begun and ended by hand, as with SQLite
    return con


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


@contextmanager
def connect(location: str | Path, read_only: bool = False) -> Iterator[Database]:
    """Open the history at ``location`` (a path or a PostgreSQL URL). With ``read_only``
    (a command that only reads it), a SQLite file this process cannot write is opened for
    reading instead of refused."""
    if is_url(location):
        with signals.interruptible():
            con = _pg_connect(str(location))
        try:
            yield Database(con, postgres=True)
        finally:
            con.close()
        return
    # Absolute, always: an SQLite built with URI filenames on (as Python's often is) takes a
    # name beginning 'file:' as a URI ('file:h.sqlite?mode=memory': an in-memory database,
    # every entry gone without a word), whatever the connect call says.
    path = Path(location).absolute()
    if read_only and path.is_file() and not _writable(path):
        with closing(_open_readonly(path)) as lite:
            yield Database(lite, postgres=False, readonly=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path, timeout=_BUSY_STEP_S, isolation_level=None)) as lite:
        db = Database(lite, postgres=False)
        db.execute(f"PRAGMA busy_timeout={int(_BUSY_STEP_S * 1000)}")
        db.execute("PRAGMA foreign_keys=ON")
        # Switching to WAL takes the database alone and does not wait for a busy one (two
        # writers creating it at once): retried, as every statement is, until the other is done.
        if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            db.execute("PRAGMA journal_mode=WAL")
        yield db
