"""One call into a plugin, its result or its error: a plugin's bug is recorded, never raised.

Every call perfstack makes into a plugin goes through :func:`call`: the hooks (the plugin
manager's ``call_loaded``), a backend's ``check``, the run's ``run_count``, ``launch``,
``attach``, ``wait_ready``, an attachment's ``stop`` and ``collect``, and the reading of
recorded files (``recognizes``, ``analysis_units``, ``analyze``). It returns what the call
gave or the exception it raised with its traceback, how long it took, and ``when``: the phase
it was made in (pytest's ``CallInfo.from_call`` is the model). Ctrl-C is not a plugin's bug:
it goes through.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Generic, TypeVar

from perfstack.records import datarecord, field

T = TypeVar("T")


@datarecord(frozen=True)
class Called(Generic[T]):
    """What one call gave: ``value``, or ``error`` (the traceback of ``exception``)."""

    #: the phase the call was made in: the hook's or the method's name (``"launch"``)
    when: str
    value: T | None
    error: str | None
    duration_s: float
    exception: Exception | None = field(default=None, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        """Whether the call returned (its value may still be None)."""
        return self.error is None

    def failure(self, what: str) -> str:
        """The error as a report says it: ``WHAT raised:`` and the traceback."""
        return f"{what} raised:\n{self.error}"

    def said(self) -> str:
        """The exception's first line (``""`` when the call returned)."""
        text = str(self.exception or "")
        return text.splitlines()[0] if text else ""


def call(func: Callable[[], T], when: str, limit: int | None = None) -> Called[T]:
    """Call ``func`` in phase ``when``; return its value, or the exception it raised with
    its traceback (``limit``: as ``traceback.format_exc`` takes it)."""
    start = time.perf_counter()
    try:
        value = func()
    except Exception as exc:  # a plugin's bug: recorded by the caller, the session goes on
        import traceback  # only on an error: not part of every command's start-up

        return Called(when, None, traceback.format_exc(limit), time.perf_counter() - start,
                      exc)
    return Called(when, value, None, time.perf_counter() - start)
