"""The stores a history can live in, and the choice of one from a location: the first store
that claims it (a third store is one more entry in ``STORES``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from perfstack.history.database import Database, Dialect
from perfstack.history.postgres import PostgreSQL
from perfstack.history.sqlite import SQLite

#: The stores, asked in order: the first that claims a location opens it (SQLite claims every
#: path, so it comes last).
STORES: tuple[Dialect, ...] = (PostgreSQL(), SQLite())


def store_of(location: str | Path) -> Dialect:
    """The store whose history ``location`` names."""
    return next(s for s in STORES if s.claims(location))


def is_url(location: str | Path) -> bool:
    """Return True when ``location`` names a server rather than a file."""
    return store_of(location).server


def describe(location: str | Path) -> str:
    """Return ``location`` for messages, without its password."""
    return store_of(location).describe(location)


def exists(location: str | Path) -> bool:
    """Return True when there may be a history at ``location`` (a server is asked later)."""
    return store_of(location).exists(location)


def errors() -> tuple[type[BaseException], ...]:
    """Return the exceptions a history raises when it cannot be read or written."""
    return tuple(e for s in STORES for e in s.errors())


@contextmanager
def connect(location: str | Path, read_only: bool = False) -> Iterator[Database]:
    """Open the history at ``location`` (a path or a server's URL), in the store that claims
    it. With ``read_only`` (a command that only reads it), a file this process cannot write
    is opened for reading instead of refused."""
    with store_of(location).open(location, read_only) as db:
        yield db
