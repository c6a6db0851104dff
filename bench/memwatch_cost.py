"""What the in-process memory watch (perfstack/inprocess/memwatch.py, on in every run) costs
the workload: its step time with the watch and without (``PERFSTACK_MEMORY_WATCH=0``), side
by side.

    .venv/bin/python bench/memwatch_cost.py [--rounds 6] [--workload workloads/tiny_mlp.py]

Each round runs the installed ``perfstack run --plugins resources --repeat 3 --warmup 0`` on
the workload twice, once each way, the order reversed every other round, and reads the
baseline's ``step_time`` (else ``wall_time``) from the report; it prints each way's median
and the ratio with/without taken within each round (min, median, max). Run it alone on the
machine.
"""

from __future__ import annotations

import os
import statistics
import subprocess
from pathlib import Path

from timing import perfstack_command, side_by_side, spread, step_figure


def _figure(workload: str, args: list[str], folder: Path, watch: bool) -> tuple[str, float]:
    report = folder / ("on.json" if watch else "off.json")
    env = {**os.environ, "PERFSTACK_MEMORY_WATCH": "1" if watch else "0",
           "PERFSTACK_HISTORY": "off"}
    subprocess.run([perfstack_command(), "run", "--plugins", "resources", "--repeat", "3",
                    "--warmup", "0", "-q", "-o", str(report), workload, "--", *args],
                   check=True, env=env, cwd=folder, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return step_figure(report)


def main() -> None:
    """Print each way's median figure and the ratio within rounds."""
    workload, name, rounds, on, off, ratios = side_by_side(__doc__ or "", _figure)
    print(f"{workload}, {name} (baseline median of 3 runs), {rounds} rounds: "
          f"with the watch {statistics.median(on) * 1e3:.3f} ms, without "
          f"{statistics.median(off) * 1e3:.3f} ms; with/without {spread(ratios, '.3f')}")


if __name__ == "__main__":
    main()
