"""The machine-speed probe: a fixed, deterministic piece of work timed inside every run.

Cloud and CI machines change speed under a workload's feet (another tenant on the host, a
vCPU moved to a busier core): measured on the 2-vCPU VM perfstack is developed on, the same
pure-Python loop took 2.85 ms in one process and 4.8 ms in the next, in stretches lasting
seconds to minutes. A comparison of two sessions that ignores this calls machine drift a
change. So the bootstrap times this probe in the workload's own process, before the script
starts and after it ends, and ``perfstack.analysis.diff.drift`` compares the two sessions' probes.

Standard library only, and cheap (about 10 ms a measurement): it runs inside the workload.
The work is fixed, so its instruction count is too, and only the machine can change its time.

The probe's rounds are timed in the thread's CPU time: they measure how fast the machine runs
code once it runs, and a round the scheduler interrupts to run another program is not
slower. A CPU shared with other programs is measured on its own: the bootstrap reads the
kernel's scheduler accounting of
the workload's main thread (``/proc/self/schedstat``): the time it ran on a CPU and the time it
was ready to run but waited for one. Between them they say how much slower the machine made
this run: two CPU-bound programs competing for 2 CPUs make a CPU-bound workload wait about
half as long again as it runs, and the waiting shows here.
"""

from __future__ import annotations

import hashlib
import time

#: Rounds per measurement; the median is kept, so one preemption does not count.
ROUNDS = 3

_BLOCK = bytes(range(256)) * 1024  # 256 KiB to hash: a native loop of fixed length


def _python_work() -> int:
    """Interpreter-bound work: integer arithmetic, a dict and a sort (about 3 ms)."""
    table: dict[int, int] = {}
    acc = 0
    for i in range(20_000):
        acc = (acc * 31 + i) & 0xFFFFFFFF
        table[i & 511] = acc
    return acc ^ sorted(table.values())[0]


def _native_work() -> bytes:
    """Native work with no Python in the loop: SHA-256 of a fixed 1 MiB (about 1 ms)."""
    digest = hashlib.sha256()
    for _ in range(4):
        digest.update(_BLOCK)
    return digest.digest()


def _median_time(work: object, rounds: int) -> float:
    # CPU time of this thread, not wall time: a round cut by the scheduler to run another
    # program is not slower code; that share of the machine is scheduler_times()' to tell.
    assert callable(work)
    times = []
    for _ in range(rounds):
        begin = time.thread_time()
        work()
        times.append(time.thread_time() - begin)
    times.sort()
    return times[len(times) // 2]


def scheduler_times() -> tuple[float, float] | None:
    """Return (seconds on a CPU, seconds waiting for one) of this process's main thread so far,
    or None where the kernel does not keep them (not Linux, or no scheduler statistics)."""
    try:
        with open("/proc/self/schedstat", encoding="ascii") as fh:
            on_cpu, waiting = fh.read().split()[:2]
        return int(on_cpu) / 1e9, int(waiting) / 1e9
    except (OSError, ValueError):
        return None


def measure(rounds: int = ROUNDS) -> dict[str, float]:
    """Return the probe's times in seconds: ``python_s`` (interpreter) and ``native_s``."""
    return {"python_s": _median_time(_python_work, rounds),
            "native_s": _median_time(_native_work, rounds)}
