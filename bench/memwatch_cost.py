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

import argparse
import os
import statistics
import subprocess
import tempfile
from pathlib import Path

from timing import add_workload, perfstack_command, spread, step_figure, two_ways, workload_of


def _figure(workload: str, args: list[str], folder: Path, watch: bool) -> float:
    report = folder / ("on.json" if watch else "off.json")
    env = {**os.environ, "PERFSTACK_MEMORY_WATCH": "1" if watch else "0",
           "PERFSTACK_HISTORY": "off"}
    subprocess.run([perfstack_command(), "run", "--plugins", "resources", "--repeat", "3",
                    "--warmup", "0", "-q", "-o", str(report), workload, "--", *args],
                   check=True, env=env, cwd=folder, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return step_figure(report)[1]


def main() -> None:
    """Print each way's median figure and the ratio within rounds."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=6)
    add_workload(p)
    ns = p.parse_args()
    workload, args = workload_of(ns)
    with tempfile.TemporaryDirectory() as tmp:
        on, off = two_ways(ns.rounds, lambda watch: _figure(workload, args, Path(tmp), watch))
        name = step_figure(Path(tmp) / "on.json")[0]
    ratios = [a / b for a, b in zip(on, off, strict=True)]
    print(f"{Path(workload).name}, {name} (baseline median of 3 runs), {ns.rounds} rounds: "
          f"with the watch {statistics.median(on) * 1e3:.3f} ms, without "
          f"{statistics.median(off) * 1e3:.3f} ms; with/without {spread(ratios, '.3f')}")


if __name__ == "__main__":
    main()
