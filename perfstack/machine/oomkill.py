"""How many processes the kernel's OOM killer has killed in this process's memory cgroup
(cgroup v2's ``memory.events``, v1's ``memory.oom_control``): read before and after a run,
a count that rose while the workload died of SIGKILL says the OOM killer ended it."""

from __future__ import annotations

import contextlib
from pathlib import Path


def _memory_cgroup() -> tuple[Path, str] | None:
    """This process's memory cgroup folder and the file that counts its OOM kills."""
    try:
        lines = Path("/proc/self/cgroup").read_text("utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return Path("/sys/fs/cgroup/memory" + path), "memory.oom_control"
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":
            return Path("/sys/fs/cgroup" + path), "memory.events"
    return None


def kills() -> int | None:
    """The OOM kills counted in this process's memory cgroup so far, or None where the
    machine does not say (no cgroup memory controller, an old kernel without the count)."""
    where = _memory_cgroup()
    if where is None:
        return None
    folder, name = where
    with contextlib.suppress(OSError, ValueError):
        for line in (folder / name).read_text("utf-8").splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    return None
