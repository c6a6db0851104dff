"""Where the history lives, behind one interface: a store opens a location and says how its
SQL differs (its ``Dialect``); ``perfstack.history.location.connect`` chooses the store once,
from the location.

The SQL is written once, for SQLite with ``?`` placeholders; each dialect translates it. The
stores are ``perfstack.history.sqlite`` (a file, the default) and
``perfstack.history.postgres`` (a ``postgresql://user:password@host:port/db`` URL): a third
is one module with a ``Dialect`` and one line in ``perfstack.history.location``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol

from perfstack.records import datarecord
from perfstack.report.files import utf8_safe

#: Seconds a writer waits for another to finish before giving up.
LOCK_TIMEOUT_S = 30.0
#: Where a store says what it waits for (the command prints it on stderr).
log = logging.getLogger("perfstack.history")


class Dialect(Protocol):
    """What one kind of store does its own way; everything else is shared."""

    #: True for a server named by a URL, False for a file named by a path
    server: bool

    def claims(self, location: str | Path) -> bool:
        """Whether ``location`` names a history of this store."""

    def open(self, location: str | Path, read_only: bool) -> AbstractContextManager[Database]:
        """Open the history at ``location``; ``read_only``: for a command that only reads
        it (a file this process cannot write is read, not refused)."""

    def exists(self, location: str | Path) -> bool:
        """Whether there may be a history at ``location`` (a server is asked later)."""

    def describe(self, location: str | Path) -> str:
        """``location`` for messages, without a password."""

    def errors(self) -> tuple[type[BaseException], ...]:
        """The exceptions the store raises when it cannot be read or written."""

    def sql(self, text: str) -> str:
        """``text`` (SQLite's SQL) in this store's dialect."""

    def attempt(self, db: Database, call: Callable[..., Any], *args: Any) -> Any:
        """Run one call of the driver, waiting for another writer as the store must."""

    def executemany(self, db: Database, cursor: Any, text: str,
                    rows: Sequence[tuple[Any, ...]]) -> None:
        """Run one ``INSERT ... VALUES (?, ...)`` for many rows."""

    def begin(self) -> str:
        """The statement that starts a write transaction holding out other writers."""

    def schema_lock(self, db: Database) -> None:
        """Within a transaction: wait until no other writer is creating the schema."""


@datarecord
class Database:
    """One open connection, through its store's dialect."""

    con: Any
    dialect: Dialect
    waited: bool = False  # whether the wait for another writer was announced
    readonly: bool = False  # opened for reading a file this process cannot write

    def execute(self, text: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement; return a cursor. Text that UTF-8 cannot hold (an undecodable
        byte of a file name or an argument) is stored escaped (``utf8_safe``)."""
        cur = self.con.cursor()
        self.dialect.attempt(self, cur.execute, self.dialect.sql(text), _storable(params))
        return cur

    def executemany(self, text: str, rows: Sequence[Sequence[Any]]) -> None:
        """Run one ``INSERT ... VALUES (?, ...)`` for many rows."""
        if rows:
            self.dialect.executemany(self, self.con.cursor(), text,
                                     [_storable(r) for r in rows])

    def script(self, text: str) -> None:
        """Run several statements separated by ';'."""
        for statement in text.split(";"):
            if statement.strip():
                self.execute(statement)

    def begin(self) -> None:
        """Start a write transaction that holds the database against other writers (SQLite)
        or that other writers serialise with (PostgreSQL's row locks and unique keys)."""
        self.execute(self.dialect.begin())

    def commit(self) -> None:
        """End the transaction, keeping what it wrote."""
        self.execute("COMMIT")

    def rollback(self) -> None:
        """End the transaction, keeping nothing."""
        self.execute("ROLLBACK")

    def schema_lock(self) -> None:
        """Within a transaction: wait until no other writer is creating the schema."""
        self.dialect.schema_lock(self)


def _storable(params: Sequence[Any]) -> tuple[Any, ...]:
    """Statement parameters, each text one as UTF-8 can hold it (ASCII text, nearly all of
    it, as it is: a job's history entry binds ~200,000 parameters)."""
    if isinstance(params, tuple) and not any(isinstance(v, str) and not v.isascii()
                                             for v in params):
        return params  # no copy: a job's entry holds a hundred thousand rows
    return tuple(utf8_safe(v) if isinstance(v, str) and not v.isascii() else v
                 for v in params)


def retry_while(locked: Callable[[BaseException], bool], db: Database,
                call: Callable[..., Any], *args: Any, interrupted: Callable[[], bool],
                step_s: float = 0.02) -> Any:
    """Run ``call``; while ``locked`` says another process holds the lock it raised on, say
    so once and try again in short steps until LOCK_TIMEOUT_S, so that a signal
    (``interrupted``) ends the wait at once."""
    deadline: float | None = None
    while True:
        try:
            return call(*args)
        except Exception as exc:
            if not locked(exc):
                raise
            now = time.monotonic()
            deadline = deadline or now + LOCK_TIMEOUT_S
            if now > deadline:
                raise
            if interrupted():  # Ctrl-C, TERM or HUP while saving
                raise type(exc)("interrupted while waiting for another process's lock") \
                    from None
            if not db.waited:
                db.waited = True
                log.warning("perfstack: waiting for the history: another process holds its "
                            "lock (up to %.0f s; Ctrl-C stops)", LOCK_TIMEOUT_S)
            time.sleep(step_s)
