"""This process's memory cgroup: its limit, and how many processes the kernel's OOM killer
has killed in it (cgroup v2's ``memory.max`` and ``memory.events``, v1's
``memory.limit_in_bytes`` and ``memory.oom_control``). The kill count, read before and after
a run, says the OOM killer ended a workload that died of SIGKILL; the limit is what it
reached. Standard library only: the workload's memory watch reads the limit too."""

from __future__ import annotations

import contextlib
from pathlib import Path

#: The files of a memory cgroup, by version: its limit, and where it counts OOM kills.
FILES = {1: ("memory.limit_in_bytes", "memory.oom_control"), 2: ("memory.max", "memory.events")}


def memory_cgroup() -> tuple[Path, int] | None:
    """This process's memory cgroup folder and its version (v1's memory controller where it
    is mounted, a hybrid machine's included; else v2's), or None where there is none."""
    try:
        lines = Path("/proc/self/cgroup").read_text("utf-8").splitlines()
    except OSError:
        return None
    parsed = [line.split(":", 2) for line in lines if line.count(":") >= 2]
    for _, controllers, path in parsed:
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory" + path), 1
    for _, controllers, path in parsed:
        if controllers == "":
            return Path("/sys/fs/cgroup" + path), 2
    return None


def limit() -> int | None:
    """The memory limit of this process's cgroup in bytes, or None where it has none (v2's
    "max", v1's ~2^63) or it cannot be read."""
    where = memory_cgroup()
    if where is None:
        return None
    with contextlib.suppress(OSError, ValueError):
        text = (where[0] / FILES[where[1]][0]).read_text("utf-8").strip()
        if text != "max" and int(text) < 1 << 60:
            return int(text)
    return None


def kills() -> int | None:
    """The OOM kills counted in this process's memory cgroup so far, or None where the
    machine does not say (no cgroup memory controller, an old kernel without the count)."""
    where = memory_cgroup()
    if where is None:
        return None
    with contextlib.suppress(OSError, ValueError):
        for line in (where[0] / FILES[where[1]][1]).read_text("utf-8").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    return None
