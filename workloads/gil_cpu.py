"""Pure-Python CPU-bound work on threads: GIL-bound on a default CPython.

Each item is a small arithmetic loop in Python bytecode, so a thread holds the GIL the whole
time it works: more threads do not help on CPython with the GIL, and do on a free-threaded
build (``PYTHON_GIL=0``). The thread count comes from ``PERFSTACK_THREADS``.

    perfstack run --plugins gil workloads/gil_cpu.py
"""

from __future__ import annotations

import argparse

import threaded


def collatz_steps(n: int) -> int:
    """Return how many Collatz steps ``n`` takes to reach 1 (pure bytecode, no C helpers)."""
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def item(i: int) -> int:
    """One unit of work: the Collatz steps of 200 consecutive numbers."""
    total = 0
    for n in range(1 + i * 200, 201 + i * 200):
        total += collatz_steps(n)
    return total


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=400, help="work items (default 400)")
    args = parser.parse_args()
    threaded.run("gil_cpu", args.items, item)
