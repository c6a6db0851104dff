"""Timing helpers for the benchmarks: commands measured interleaved, medians and ratios."""

from __future__ import annotations

import statistics
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path


def time_commands(
    commands: dict[str, Sequence[str]], rounds: int, cwd: Path
) -> dict[str, list[float]]:
    """Run each command once per round, interleaved (so drift hits all alike); return wall times."""
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(rounds):
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(list(argv), cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            times[name].append(time.perf_counter() - start)
    return times


def print_table(times: dict[str, list[float]], reference: str) -> None:
    """Print median, spread and the ratio of each median to the reference's median."""
    ref = statistics.median(times[reference])
    print(f"{'command':<44} {'median':>9} {'stdev':>8} {'ratio':>7}   (n={len(times[reference])})")
    for name, values in times.items():
        med = statistics.median(values)
        spread = statistics.stdev(values) if len(values) > 1 else float("nan")
        print(f"{name:<44} {med * 1e3:7.1f}ms {spread * 1e3:6.1f}ms {med / ref:6.2f}x")
