"""How soon ``perfstack run --quick`` answers, against the workload's own time.

    .venv/bin/python bench/quick.py [--rounds 5] [--batches 40]

Times, alternately in each round, tiny_mlp run plainly and under ``perfstack run --quick``
(one baseline run and one py-spy run, the answer printed at the end), and prints the medians
and their ratio. The target is 2x or less: two runs of the workload and perfstack's own start-up,
environment capture and report.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _timed(argv: list[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=40)
    ns = parser.parse_args()
    workload = [str(ROOT / "workloads/tiny_mlp.py"), "--num-batches", str(ns.batches)]
    plain, quick = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(ns.rounds):
            plain.append(_timed([sys.executable, *workload], tmp))
            quick.append(_timed([sys.executable, "-m", "perfstack", "run", "--quick",
                                 workload[0], "--", *workload[1:]], tmp))
    a, b = statistics.median(plain), statistics.median(quick)
    print(f"tiny_mlp --num-batches {ns.batches}, {ns.rounds} rounds, medians")
    print(f"  python script.py        {a:6.2f} s")
    print(f"  perfstack run --quick   {b:6.2f} s   {b / a:.2f}x the workload's own time")


if __name__ == "__main__":
    main()
