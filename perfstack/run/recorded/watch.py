"""Watching the workers that read a job's ranks, so that no wait on them is for ever.

While no result comes, ``perfstack.run.recorded.reduce`` asks the executor's ``health()`` every
second: a local worker stopped by a signal is ended (its pool breaks, and its unit is read
again); a Dask scheduler that went away, or that has had no worker for Dask's connect timeout,
gives up the ranks left, each marked with why.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any

#: How long a question to the Dask scheduler (how many workers?) may take at most.
ASK_S = 5.0


class Watched(Executor):
    """An executor with a way to tell, while no result comes, that its workers will not
    finish the work: ``health()`` returns why (then the work left is given up), or None
    (and may act: a local worker stopped by a signal is ended, so that its pool breaks and
    its unit is read again)."""

    def __init__(self, inner: Executor, health: Callable[[], str | None],
                 client: Any = None) -> None:
        """``client``: a Dask cluster's, whose workers can merge what they read
        (``perfstack.run.recorded.clustermerge``); None for a local pool."""
        self.inner = inner
        self.health = health
        self.client = client

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        """Submit to the executor watched."""
        return self.inner.submit(fn, *args, **kwargs)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Shut the executor watched down (Dask's takes no ``cancel_futures``: it cancels
        its futures when not told to wait)."""
        try:
            self.inner.shutdown(wait=wait, cancel_futures=cancel_futures)
        except TypeError:
            self.inner.shutdown(wait=wait)


def _state(pid: int) -> str:
    """A process's state letter (``/proc/PID/stat``: R, S, T for stopped...), or ''."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def pool_health() -> Callable[[], str | None]:
    """A local pool's watch: a worker found stopped (SIGSTOP, a debugger gone) at two checks
    in a row is killed: its pool breaks and its unit is read again by a fresh one, instead of
    the reading waiting for ever."""
    stopped: set[int] = set()

    def health() -> str | None:
        for child in multiprocessing.active_children():
            pid = child.pid
            if pid is None or _state(pid) not in ("T", "t"):
                stopped.discard(pid or -1)
            elif pid in stopped:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            else:
                stopped.add(pid)
        return None

    return health


def dask_workers(client: Any, timeout: float) -> int | None:
    """How many worker threads the scheduler has now, asked within ``timeout``; None when it
    does not answer (the call is made in a thread, since a scheduler gone holds it)."""
    box: dict[str, int] = {}

    def ask() -> None:
        with contextlib.suppress(Exception):
            box["n"] = sum(int(n) for n in client.nthreads().values())

    thread = threading.Thread(target=ask, name="perfstack-dask-workers", daemon=True)
    thread.start()
    thread.join(min(timeout, ASK_S))
    return box.get("n")


def dask_health(client: Any, where: str, grace: float) -> Callable[[], str | None]:
    """A Dask cluster's watch: the scheduler gone (it no longer answers, or the client is
    no longer running), or no worker left for longer than ``grace`` (every worker killed: the
    scheduler would wait for new ones for ever), gives up the ranks left, saying so."""
    since: list[float] = []
    gone = f"not read: the Dask scheduler at {where} went away"
    said: list[str] = []  # once gone, gone: asked again, it answers at once

    def health() -> str | None:
        if said:
            return said[0]
        if getattr(client, "status", "running") not in ("running", "connecting", "newly-created"):
            said.append(gone)
            return gone
        workers = dask_workers(client, grace)
        if workers is None or getattr(client, "status", "running") != "running":
            said.append(gone)
            return gone
        if workers:
            since.clear()
            return None
        if not since:
            since.append(time.monotonic())
        if time.monotonic() - since[0] >= grace:
            return (f"not read: the Dask scheduler at {where} has had no worker for "
                    f"{grace:g} s (every worker ended)")
        return None

    return health
