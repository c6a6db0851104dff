"""The workload's process and its children in one py-spy profile (``--pyspy-subprocesses``).

py-spy names each profile by its thread, and by its process when it follows children:
``Process 4242 Thread 4242 "MainThread"``. The workload's own process is the one whose time
the report's shares are of (its wall time, its main thread's budget); its children (DataLoader
workers, a multiprocessing pool, a compiler) run beside it, so their samples are summed apart
and their rows keyed ``child:``, the same in every run whatever their pids.
"""

from __future__ import annotations

import re
from typing import Any

from perfstack.report import Layer, Row

#: The key prefix of a child process's row: stable across runs (pids are not).
CHILD_PREFIX = "child:"
#: How a child process's function is named in the layer tables.
NAME_PREFIX = "[child processes]"

_PROCESS = re.compile(r"^Process (\d+) ")


def process_of(profile: dict[str, Any]) -> int | None:
    """The pid in a profile's name, or None when py-spy followed one process only."""
    match = _PROCESS.match(str(profile.get("name", "")))
    return int(match[1]) if match else None


def split(profiles: list[dict[str, Any]], main_pid: int | None) -> tuple[
        list[dict[str, Any]], list[dict[str, Any]], int]:
    """Return (the workload's own profiles, its children's, how many child processes).

    The workload's process is ``main_pid`` where py-spy sampled it, else the lowest pid (a
    parent starts before its children; only a wrap of the pid counter breaks that)."""
    of = [(process_of(p), p) for p in profiles]
    pids = {pid for pid, _ in of if pid is not None}
    if not pids:
        return profiles, [], 0
    main = main_pid if main_pid in pids else min(pids)
    own = [p for pid, p in of if pid in (main, None)]
    children = [p for pid, p in of if pid not in (main, None)]
    return own, children, len(pids - {main})


def as_children(rows: dict[Layer, list[Row]], processes: int) -> list[Row]:
    """The Python rows of the children's samples, keyed apart (``child:``, ``thread:child:``)
    and marked with how many child processes they sum. The imports a function made late are
    the workload's start-up finding's, so only its own process's rows keep them (how much of
    a function ran inside imports stays: the tree leaves such functions out); the native
    frames too are its own process's: the kernel layer's split of native time is."""
    marked = []
    for row in rows.get(Layer.PYTHON, []):
        attrs = {k: v for k, v in row.attrs.items() if k != "late_imports"}
        attrs.update(process="child", processes=processes)
        if row.key.startswith("thread:"):
            key = "thread:" + CHILD_PREFIX + row.key.removeprefix("thread:")
            name = f"child {row.name}"
        else:
            key, name = CHILD_PREFIX + row.key, f"{NAME_PREFIX} {row.name}"
        marked.append(Row(key, name, row.source, row.values, attrs, row.links))
    return marked
