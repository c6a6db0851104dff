"""Where the history lives: an SQLite file (the default) or a PostgreSQL database.

Both take the same SQL, written for SQLite with ``?`` placeholders; for PostgreSQL (through
the pure-Python driver pg8000) the placeholders and the few types that differ are translated
here, and nowhere else. A location is a path, or a ``postgresql://user:password@host:port/db``
URL.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import ParseResult, parse_qs, unquote, urlparse

from perfstack.errors import UsageError

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
    try:
        import pg8000.dbapi

        found += [pg8000.dbapi.Error, pg8000.dbapi.InterfaceError]
    except ImportError:
        pass
    return tuple(found)


@dataclass
class Database:
    """One open connection, with the dialect's differences in one place."""

    con: Any
    postgres: bool

    def sql(self, text: str) -> str:
        """Return ``text`` in this database's dialect."""
        if not self.postgres:
            return text
        return (text.replace("?", "%s")
                .replace("INTEGER PRIMARY KEY", "BIGSERIAL PRIMARY KEY")
                .replace(" REAL", " DOUBLE PRECISION"))

    def execute(self, text: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement; return a cursor."""
        cur = self.con.cursor()
        cur.execute(self.sql(text), tuple(params))
        return cur

    def executemany(self, text: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one ``INSERT ... VALUES (?, ...)`` for many rows."""
        if not rows:
            return
        cur = self.con.cursor()
        if not self.postgres:
            cur.executemany(text, [tuple(r) for r in rows])
            return
        # pg8000 sends one statement per row (a round trip each: 20,000 rows took 5 s);
        # many rows per statement instead, within PostgreSQL's 65,535 parameters.
        head, _, one = text.rpartition("VALUES")
        batch = max(1, 30_000 // max(len(rows[0]), 1))
        for start in range(0, len(rows), batch):
            chunk = rows[start:start + batch]
            values = ", ".join([one.strip()] * len(chunk))
            cur.execute(self.sql(f"{head}VALUES {values}"),
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


@contextmanager
def connect(location: str | Path) -> Iterator[Database]:
    """Open the history at ``location`` (a path or a PostgreSQL URL)."""
    if is_url(location):
        con = _pg_connect(str(location))
        try:
            yield Database(con, postgres=True)
        finally:
            con.close()
        return
    path = Path(location)
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path, timeout=LOCK_TIMEOUT_S, isolation_level=None)) as lite:
        lite.execute(f"PRAGMA busy_timeout={int(LOCK_TIMEOUT_S * 1000)}")
        lite.execute("PRAGMA foreign_keys=ON")
        # Switching to WAL takes the database alone and does not wait for a busy one (two
        # writers creating it at once): retry until the other is done.
        deadline = time.monotonic() + LOCK_TIMEOUT_S
        while True:
            try:
                if lite.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    lite.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield Database(lite, postgres=False)
