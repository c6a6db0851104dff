"""Shared by the threaded workloads: how many threads to use, and a timed, split run.

The thread count comes from the ``PERFSTACK_THREADS`` environment variable (default 1). The
``gil`` backend sets it for each point of its thread sweep; any workload can read it::

    threads = int(os.environ.get("PERFSTACK_THREADS", "1"))

A fixed amount of work is split evenly over the threads, so perfect scaling halves the wall
time when the threads double. The throughput (work items per second) is printed and, under
perfstack, reported as the ``throughput`` metric. Standard library only: these workloads also
run on a free-threaded interpreter, where nothing else may be installed. It also reports
``cpu_utilisation``: CPU seconds of the whole process per wall second over the timed part,
which tells waiting on I/O (well below the thread count) from computing (close to it).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

try:
    import perfstack
except ImportError:  # run without perfstack installed
    perfstack = None  # type: ignore[assignment]

THREADS_ENV = "PERFSTACK_THREADS"


def thread_count(default: int = 1) -> int:
    """Return the thread count the sweep asked for (``PERFSTACK_THREADS``), else ``default``."""
    text = os.environ.get(THREADS_ENV, "")
    return int(text) if text.isdigit() and int(text) > 0 else default


def run(name: str, items: int, work: Callable[[int], object], threads: int | None = None) -> float:
    """Do ``work(i)`` for ``items`` items split over the threads; print and return items/s."""
    threads = threads or thread_count()
    chunks = [range(t, items, threads) for t in range(threads)]

    def worker(chunk: range) -> None:
        for i in chunk:
            work(i)

    pool = [threading.Thread(target=worker, args=(c,), name=f"worker-{k}")
            for k, c in enumerate(chunks)]
    start = time.perf_counter()
    cpu_start = time.process_time()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    rate = items / elapsed
    print(f"{name}: {items} items on {threads} thread(s) in {elapsed:.3f} s")
    print(f"throughput: {rate:.1f} items/s")
    if perfstack is not None:
        perfstack.report_metric("throughput", rate, "items/s", "higher")
        perfstack.report_metric("cpu_utilisation", cpu / elapsed, "cpus", "neither")
    return rate
