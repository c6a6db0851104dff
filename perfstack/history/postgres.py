"""The history in a PostgreSQL database, named by a ``postgresql://user:password@host:port/db``
URL, through the pure-Python driver pg8000: its placeholders and the few types that differ
are translated here, and nowhere else."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import ParseResult, parse_qs, unquote, urlparse

from perfstack import signals
from perfstack.errors import UsageError
from perfstack.history.database import LOCK_TIMEOUT_S, Database

URL_SCHEMES = ("postgresql", "postgres")


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


def _connect(url: str) -> Any:
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


class PostgreSQL:
    """A history on a PostgreSQL server."""

    server = True

    def claims(self, location: str | Path) -> bool:
        """A ``postgresql://`` (or ``postgres://``) URL."""
        return isinstance(location, str) and location.split(":", 1)[0].lower() in URL_SCHEMES

    def exists(self, location: str | Path) -> bool:
        """A server is asked when connecting."""
        return True

    def describe(self, location: str | Path) -> str:
        """The URL without its password."""
        try:
            url = parse_url(str(location))
        except UsageError:
            return describe_raw(str(location))
        host = url.hostname or "localhost"
        port = f":{url.port}" if url.port else ""
        user = f"{url.username}@" if url.username else ""
        return f"{url.scheme}://{user}{host}{port}{url.path}"

    def errors(self) -> tuple[type[BaseException], ...]:
        """The driver's errors, once a URL has imported it (38 ms an import, for every run
        that writes an SQLite history)."""
        pg = sys.modules.get("pg8000.dbapi")
        return (pg.Error, pg.InterfaceError) if pg is not None else ()

    def sql(self, text: str) -> str:
        """SQLite's SQL for PostgreSQL: ``%s`` placeholders, its serial keys and doubles."""
        return (text.replace("?", "%s")
                .replace("INTEGER PRIMARY KEY", "BIGSERIAL PRIMARY KEY")
                .replace(" REAL", " DOUBLE PRECISION"))

    def attempt(self, db: Database, call: Callable[..., Any], *args: Any) -> Any:
        """Run ``call``; a server that never answers: a signal ends the wait."""
        with signals.interruptible():
            return call(*args)

    def executemany(self, db: Database, cursor: Any, text: str,
                    rows: Sequence[tuple[Any, ...]]) -> None:
        """Many rows per statement, within PostgreSQL's 65,535 parameters (pg8000 sends
        one statement per row, a round trip each: 20,000 rows took 5 s)."""
        head, _, one = text.rpartition("VALUES")
        batch = max(1, 30_000 // max(len(rows[0]), 1))
        for start in range(0, len(rows), batch):
            chunk = rows[start:start + batch]
            values = ", ".join([one.strip()] * len(chunk))
            self.attempt(db, cursor.execute, self.sql(f"{head}VALUES {values}"),
                         tuple(v for r in chunk for v in r))

    def begin(self) -> str:
        """Writers serialise with row locks and unique keys."""
        return "BEGIN"

    def schema_lock(self, db: Database) -> None:
        """Concurrent CREATE TABLE IF NOT EXISTS can collide in PostgreSQL: an advisory
        lock for the transaction."""
        db.execute("SELECT pg_advisory_xact_lock(7468307)")

    @contextmanager
    def open(self, location: str | Path, read_only: bool) -> Iterator[Database]:
        """Connect (a signal ends the wait for a server that never answers)."""
        with signals.interruptible():
            con = _connect(str(location))
        try:
            yield Database(con, self)
        finally:
            con.close()
