"""Termination signals as interruptions: SIGTERM and SIGHUP stop a session as Ctrl-C does.

A cancelled CI job, ``timeout``, a closed terminal: perfstack stops the run's process group,
writes the partial report and exits ``128 + signal`` (143 for SIGTERM, 129 for SIGHUP, 130 for
Ctrl-C). The workload runs in its own session, so the signal never reaches it directly; the
driver's interruption path (the same as Ctrl-C's) stops it and everything it started.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, NoReturn

#: The signals that stop a session, besides SIGINT (which Python raises as KeyboardInterrupt).
STOPPING = (signal.SIGTERM, signal.SIGHUP)

_received: int | None = None


class Terminated(KeyboardInterrupt):
    """A termination signal arrived: handled wherever Ctrl-C is."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


#: The stopping signal (or Ctrl-C) whose handler raised, kept: where its exception was lost
#: (raised inside a finalizer, which Python reports as "Exception ignored in" and drops: a
#: Dask future let go), ``check`` raises it again.
_raised: int | None = None


def _raise(signum: int, frame: FrameType | None) -> None:
    global _received, _raised
    if _received is None:
        _received = signum
    _raised = signum
    raise Terminated(signum)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    global _raised
    _raised = signum
    raise KeyboardInterrupt


def _unraisable(hook: Callable[[Any], Any]) -> Callable[[Any], None]:
    """``sys.unraisablehook`` that says nothing of an interruption raised where Python drops
    exceptions (a finalizer): it is kept (``_raised``) and acted on at the next ``check``, not
    printed as a traceback; anything else goes to ``hook``."""
    def unraisable(info: Any) -> None:
        if isinstance(getattr(info, "exc_value", None), KeyboardInterrupt) and \
                _raised is not None:
            return
        hook(info)
    unraisable.wrapped = hook  # type: ignore[attr-defined]
    return unraisable


def check() -> None:
    """Raise the interruption a signal's handler raised where it may have been lost: a long
    wait's poll calls it, so that no Ctrl-C, TERM or HUP is swallowed (SIGTERM 2 s into
    analyze on a Dask cluster was raised inside a Dask future's finalizer, dropped, and
    analyze ran on to exit 0)."""
    if _raised is None:
        return
    if _raised == signal.SIGINT:
        raise KeyboardInterrupt
    raise Terminated(_raised)


def install() -> None:
    """Make SIGTERM and SIGHUP interrupt perfstack as Ctrl-C does (main thread only); a
    Ctrl-C that ``defer_early`` recorded is raised as Python raises Ctrl-C again."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in STOPPING:
        signal.signal(sig, _raise)
    if signal.getsignal(signal.SIGINT) in (_postpone, signal.default_int_handler):
        signal.signal(signal.SIGINT, _interrupt)  # Python's own, but remembered
    if not hasattr(sys.unraisablehook, "wrapped"):
        sys.unraisablehook = _unraisable(sys.unraisablehook)


def defer_early(program: str) -> None:
    """From the command line's first import until ``main`` installs its handlers, record a
    Ctrl-C, TERM or HUP instead of acting on it: the interpreter's own action killed the
    process by the signal (exit -15) before anything could be said; ``main`` then ends at
    once with the signal's code (``pending``). Only where perfstack is the program
    (``program``: ``sys.argv[0]``), never in a process that imports it as a library."""
    name = program.replace("\\", "/").rstrip("/")
    if not (name.endswith("/perfstack") or name == "perfstack"
            or name.endswith("/perfstack/__main__.py")):
        return
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, *STOPPING):
            signal.signal(sig, _postpone)


def note_interrupt() -> None:
    """Record a Ctrl-C (when no termination signal came first)."""
    global _received
    if _received is None:
        _received = signal.SIGINT


def exit_code() -> int:
    """128 + the signal that interrupted perfstack (130 when none was recorded: Ctrl-C)."""
    return 128 + int(_received or signal.SIGINT)


def received() -> int | None:
    """The signal that interrupted this perfstack, if one did."""
    return _received


_pending: int | None = None


def pending() -> int | None:
    """A signal that arrived inside a ``deferred()`` window and is waiting to be acted on."""
    return _pending


def raise_pending() -> None:
    """At a safe point: act on a signal ``deferred()`` postponed, as it would have been acted
    on had it come now (KeyboardInterrupt for Ctrl-C, Terminated for TERM and HUP)."""
    global _pending
    signum, _pending = _pending, None
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    if signum is not None:
        raise Terminated(signum)


class WaitInterrupted(OSError):
    """A signal ended a wait inside a ``deferred()`` window (it stays pending)."""


_waiting = 0


@contextlib.contextmanager
def interruptible() -> Iterator[None]:
    """A wait (a database server that may never answer) that a signal postponed by
    ``deferred()`` ends at once, with WaitInterrupted, instead of when the wait times out."""
    global _waiting
    _waiting += 1
    try:
        yield
    finally:
        _waiting -= 1


def _postpone(signum: int, frame: FrameType | None) -> None:
    global _pending, _received
    if _pending is None:
        _pending = signum
    if _received is None:
        _received = signum
    if _waiting:
        raise WaitInterrupted(f"{signal.Signals(signum).name} came while waiting")


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """While cleaning up (stopping children, writing the report, the history), a Ctrl-C, TERM
    or HUP is postponed, not acted on, so it cannot leave anything running or half-written;
    nor is it lost: ``pending()`` says it came, ``raise_pending()`` acts on it at the next
    safe point, and a wait inside the window (the history's lock) ends at once."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.signal(sig, _postpone) for sig in (signal.SIGINT, *STOPPING)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def exit_with(run: Callable[[], int]) -> NoReturn:
    """Exit with ``run()``'s code, as a command line's entry point does. Once that code is
    known, Ctrl-C, TERM and HUP are ignored for the rest of the process's life: Python's
    interpreter puts its own handlers back to the default action as it ends, and a second
    Ctrl-C that came then, or while the first was being handled, killed the process by the
    signal (exit -2) instead of the 130 the first one had decided. A second signal raised
    while the first is handled ends it with the first one's code."""
    try:
        try:
            code = run()
        finally:
            for sig in (signal.SIGINT, *STOPPING):
                signal.signal(sig, signal.SIG_IGN)
    except KeyboardInterrupt:
        code = exit_code()
    sys.exit(code)
