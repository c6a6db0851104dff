"""Processes a run left behind, found by a mark in their environment, and stopped.

A workload's child that starts its own session (``Popen(start_new_session=True)``, a
double-forked daemon) leaves the run's process group, so stopping the group does not stop it.
Every run's environment carries ``PERFSTACK_RUN_TOKEN``, which its descendants inherit; after
the run, every process whose environment holds that run's token is stopped (SIGTERM, then
SIGKILL), and the report says which.
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
