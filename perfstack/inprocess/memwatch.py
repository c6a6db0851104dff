"""Runs inside the workload process: what an out-of-memory death leaves to explain it.

A process the kernel's OOM killer ends (SIGKILL) writes nothing on its way out. So a daemon
thread reads the process's resident memory (``/proc/self/statm``) every :data:`INTERVAL_S`;
when a sample finds it risen (:data:`RISE_BYTES`) while the workload's script runs, it takes
the main thread's Python stack (where the memory is being taken); and each time the memory
reaches a new high (:data:`GROWTH` over the last one written, and :data:`MIN_GROWTH_BYTES`
more), found by a sample or at a step the workload marks, it writes
:data:`~perfstack.runfolder.filenames.MEMWATCH_FILE` whole (a temporary file renamed over it): the
high, when, that stack, the last samples before it, the resident memory after each step so
far, and the limits the process runs under (its memory cgroup's, ``ulimit -v``, the
machine's memory). After an OOM kill the file holds the last high before the end. The cost
is one read of a small file each 50 ms and a write per new high (a few a run): measured
with bench/memwatch_cost.py (docs/performance.md). Standard library only.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections import deque
from typing import Any

from perfstack.inprocess import steps as marks
from perfstack.machine import oomkill
from perfstack.runfolder.filenames import MEMWATCH_FILE

#: Seconds between two reads of the resident memory.
INTERVAL_S = 0.05
#: A new high is written when it is this much over the last one written...
GROWTH = 1.05
#: ...and at least this many bytes more.
MIN_GROWTH_BYTES = 8 << 20
#: A sample this much over the one before takes the main thread's stack: where the memory
#: is being taken (a few microseconds, only while it rises).
RISE_BYTES = 1 << 20
#: Samples kept for the file (the last seconds before the high).
KEPT = 100
#: Frames of the main thread's stack kept, innermost first.
FRAMES = 40
#: perfstack's own in-process code: a sample that finds the main thread there (marking a
#: step) says nothing of where the workload takes memory.
OURS = os.path.dirname(os.path.abspath(__file__))
#: Set to "0" in the environment to start no watch.
OFF_ENV = "PERFSTACK_MEMORY_WATCH"


def limits() -> dict[str, int]:
    """The memory limits this process runs under, in bytes: ``cgroup`` (its memory
    cgroup's), ``address_space`` (``ulimit -v``), ``machine`` (MemTotal); those that exist."""
    out: dict[str, int] = {}
    cgroup = oomkill.limit()
    if cgroup is not None:
        out["cgroup"] = cgroup
    with contextlib.suppress(ImportError, OSError, ValueError):
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft != resource.RLIM_INFINITY:
            out["address_space"] = soft
    with contextlib.suppress(OSError, ValueError, IndexError), \
            open("/proc/meminfo", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("MemTotal:"):
                out["machine"] = int(line.split()[1]) * 1024
                break
    return out


def _stack(ident: int) -> list[list[Any]]:
    frame = sys._current_frames().get(ident)
    out: list[list[Any]] = []
    while frame is not None and len(out) < FRAMES:
        code = frame.f_code
        out.append([code.co_filename, frame.f_lineno, code.co_name])
        frame = frame.f_back
    return out


class Watch(threading.Thread):
    """The watching thread (a daemon: it never keeps the process alive)."""

    def __init__(self, path: str, statm: int, main_ident: int) -> None:
        super().__init__(name="perfstack-memory-watch", daemon=True)
        self.path = path
        self.statm = statm
        self.main_ident = main_ident
        self.page = os.sysconf("SC_PAGE_SIZE")
        self.recent: deque[tuple[float, int]] = deque(maxlen=KEPT)
        self.written = 0
        #: set when the workload's script starts: stacks before it are perfstack's own
        self.script = threading.Event()
        #: set once the workload's script has ended: what follows is perfstack's own
        self.stopped = threading.Event()
        #: the main thread's stack the last time a sample found the memory risen (where the
        #: memory was being taken), once the script runs
        self.stack: list[list[Any]] = []
        self.lock = threading.Lock()  # the sampler and a step's mark may both write

    def run(self) -> None:
        """Read, and write each new high, until the process ends."""
        last = 0
        while not self.stopped.is_set():
            with contextlib.suppress(Exception):  # never the workload's problem
                rss = int(os.pread(self.statm, 64, 0).split()[1]) * self.page
                now = time.time()
                self.recent.append((round(now, 3), rss))
                if rss - last >= RISE_BYTES and self.script.is_set():
                    stack = _stack(self.main_ident)
                    if stack and not stack[0][0].startswith(OURS):  # not in a step's mark
                        self.stack = stack
                last = rss
                if rss >= self.written * GROWTH and rss - self.written >= MIN_GROWTH_BYTES:
                    self._write(rss, now, self.stack)
            time.sleep(INTERVAL_S)

    def on_step(self) -> None:
        """After each step the workload marks (the step's resident memory is just read): a
        new high is written there too, so that memory rising step over step is on file
        before a kill however fast the steps are, with the stack of the sampler's last rise
        (the place the memory was being taken, not the step's mark) where there is one."""
        if marks.state.rss and not self.stopped.is_set():
            rss = marks.state.rss[-1]
            if rss >= self.written * GROWTH and rss - self.written >= MIN_GROWTH_BYTES:
                self._write(rss, time.time(), self.stack or _stack(self.main_ident))

    def _write(self, rss: int, now: float, stack: list[list[Any]]) -> None:
        with self.lock:
            self._write_locked(rss, now, stack)

    def _write_locked(self, rss: int, now: float, stack: list[list[Any]]) -> None:
        if rss < self.written:
            return  # the other writer wrote a higher one meanwhile
        self.written = rss
        state = {"peak_rss_bytes": rss, "peak_epoch_s": round(now, 3),
                 "stack": stack, "recent": list(self.recent),
                 "steps": marks.state.count, "step_rss_bytes": marks.state.rss[-50:],
                 "limits": limits(), "pid": os.getpid()}  # (the workload may set its own)
        tmp = f"{self.path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(state, fh)
        os.replace(tmp, self.path)


def start(folder: str, statm: int | None) -> Watch | None:
    """Start watching (unless ``PERFSTACK_MEMORY_WATCH=0``, or without ``/proc``)."""
    if statm is None or os.environ.get(OFF_ENV) == "0":
        return None
    watch = Watch(os.path.join(folder, MEMWATCH_FILE), statm, threading.main_thread().ident or 0)
    watch.start()
    marks.on_step(watch.on_step)
    return watch
