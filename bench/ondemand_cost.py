"""What an armed, idle on-demand rider costs a job (``perfstack run --on-demand``: the torch
backend armed, nothing recording): the workload's step time armed and plain, side by side.

    .venv/bin/python bench/ondemand_cost.py [--rounds 6] [--workload workloads/tiny_mlp.py]

Each round runs the installed perfstack twice on the workload, in an order reversed every
other round: ``run --on-demand --plugins torch`` (one run, armed, never captured) and
``run --plugins resources --repeat 1 --warmup 0`` (one plain run); it reads each run's
``step_time`` (else ``wall_time``) and prints each way's median and the ratio armed/plain
taken within each round (min, median, max); then the idle rider's own cost a step, timed in
this process (``Rider.on_step`` with no request: one ``os.stat``), which is what the armed
job pays beyond the plain one. Run it alone on the machine.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import tempfile
import timeit
from pathlib import Path

from timing import perfstack_command, side_by_side, spread, step_figure

from perfstack.inprocess.ondemand import Rider

ARMED = ["--on-demand", "--plugins", "torch"]
PLAIN = ["--plugins", "resources", "--repeat", "1", "--warmup", "0"]


def _figure(workload: str, args: list[str], folder: Path, armed: bool) -> tuple[str, float]:
    report = folder / ("armed.json" if armed else "plain.json")
    subprocess.run([perfstack_command(), "run", *(ARMED if armed else PLAIN), "-q", "-o",
                    str(report), workload, "--", *args], check=True, cwd=folder,
                   env={**os.environ, "PERFSTACK_HISTORY": "off"},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return step_figure(report)


def main() -> None:
    """Print each way's median figure and the ratio within rounds, then the idle check's."""
    workload, name, rounds, armed, plain, ratios = side_by_side(__doc__ or "", _figure)
    print(f"{workload}, {name} of one run, {rounds} rounds: armed "
          f"{statistics.median(armed) * 1e3:.3f} ms, plain {statistics.median(plain) * 1e3:.3f}"
          f" ms; armed/plain {spread(ratios, '.3f')}")
    with tempfile.TemporaryDirectory() as tmp:
        idle = Rider(tmp, [])
        calls = 200_000
        seconds = timeit.timeit(idle.on_step, number=calls)
    print(f"the idle rider at each step: {seconds / calls * 1e6:.2f} µs")


if __name__ == "__main__":
    main()
