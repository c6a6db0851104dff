"""One call into a plugin, its result or its error: a plugin's bug is recorded, never raised.

Every call the driver makes into a backend (``run_count``, ``launch``, ``attach``,
``wait_ready``, an attachment's ``stop``) goes through :func:`call`, which returns what the
call gave or the traceback it raised, with how long it took (pytest's ``CallInfo.from_call``
is the model). Ctrl-C is not a plugin's bug: it goes through.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Called(Generic[T]):
    """What one call gave: ``value``, or ``error`` (the traceback it raised)."""

    value: T | None
    error: str | None
    duration_s: float

    @property
    def ok(self) -> bool:
        """Whether the call returned (its value may still be None)."""
        return self.error is None

    def failure(self, what: str) -> str:
        """The error as a report says it: ``WHAT raised:`` and the traceback."""
        return f"{what} raised:\n{self.error}"


def call(func: Callable[[], T]) -> Called[T]:
    """Call ``func``; return its value, or the traceback of the exception it raised."""
    start = time.perf_counter()
    try:
        value = func()
    except Exception:  # a plugin's bug: recorded by the caller, the session goes on
        return Called(None, traceback.format_exc(), time.perf_counter() - start)
    return Called(value, None, time.perf_counter() - start)
