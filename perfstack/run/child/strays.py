"""Processes a run left behind, found by a mark in their environment, and stopped.

A workload's child that starts its own session (``Popen(start_new_session=True)``, a
double-forked daemon) leaves the run's process group, so stopping the group does not stop it.
Every run's environment carries ``PERFSTACK_RUN_TOKEN``, which its descendants inherit; after
the run, every process whose environment holds that run's token is stopped (SIGTERM, then
SIGKILL), and the report says which. Before that, what stayed in the run's own process group
gets a moment to end by itself (``end_group``), then is stopped without a word: a
multiprocessing resource tracker or forkserver exits once the workload has.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from pathlib import Path

TOKEN_VAR = "PERFSTACK_RUN_TOKEN"


def new_token() -> str:
    """A mark for one run's processes."""
    return uuid.uuid4().hex


def _marked(token: str) -> dict[int, str]:
    """Processes whose environment holds the token: pid -> command line."""
    needle = f"{TOKEN_VAR}={token}".encode()
    found: dict[int, str] = {}
    me = os.getpid()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes()
            if needle not in environ.split(b"\0"):
                continue
            if (entry / "stat").read_text().split(") ")[-1].split()[0] == "Z":
                continue  # a zombie: already ended, waiting for its parent
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                "utf-8", "replace").strip()
        except OSError:  # gone, or not ours to read
            continue
        found[int(entry.name)] = cmd[:200] or "?"
    return found


def stop_marked(token: str, grace_s: float = 1.0) -> list[str]:
    """Stop every process still carrying ``token``; return them as 'pid N: command'."""
    if not Path("/proc").is_dir():
        return []
    left = _marked(token)
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and _marked(token):
        time.sleep(0.05)
    for pid in _marked(token):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return [f"pid {pid}: {cmd}" for pid, cmd in sorted(left.items())]


#: How long what the workload left in its own process group may take to end by itself, and
#: then to be gone after SIGKILL.
GROUP_GRACE_S = 0.5


def _group_running(pgid: int) -> bool:
    """Whether a process of the group runs (a zombie has ended); with no /proc, whether the
    group has a member at all."""
    if not Path("/proc").is_dir():
        try:
            os.killpg(pgid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] == str(pgid) and fields[0] != "Z":
            return True
    return False


def end_group(pgid: int, grace_s: float = GROUP_GRACE_S) -> None:
    """Let the processes the workload left in its process group end by themselves (a
    multiprocessing resource tracker exits once its parent has; SIGKILL would keep it from
    cleaning up), then SIGKILL the rest and wait until none runs, so that the sweep for
    processes that left the group does not find them dying and report them."""
    if _gone(pgid, grace_s):
        return
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    _gone(pgid, grace_s)


def _gone(pgid: int, grace_s: float) -> bool:
    """Wait up to ``grace_s`` for no process of the group to run; whether none does."""
    deadline = time.monotonic() + grace_s
    while _group_running(pgid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
    return True
