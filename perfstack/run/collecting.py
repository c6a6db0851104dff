"""Calling a backend's collect step with a time limit, so a stuck plugin cannot hold a run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from perfstack.backend import Collected


class CollectTimeout(Exception):
    """A backend's collect() did not return in time."""


def call_with_timeout(func: Callable[[], Collected], timeout_s: float | None) -> Collected:
    """Return ``func()``, or raise CollectTimeout when it takes longer than ``timeout_s``.

    The call runs in a daemon thread: a plugin stuck in its collect step cannot be killed from
    Python, but it no longer holds the session; the thread is abandoned and dies with the
    process. KeyboardInterrupt still reaches the caller while it waits.
    """
    if timeout_s is None:
        return func()
    import threading

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = func()
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc

    thread = threading.Thread(target=target, name="perfstack-collect", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise CollectTimeout(f"collect() did not finish within {timeout_s:g} s (--collect-"
                             "timeout); it was abandoned and its results are missing")
    if "error" in box:
        raise box["error"]
    result: Collected = box["result"]
    return result
