"""What memray costs a run, with and without native frames, against the workload alone.

    .venv/bin/python bench/memray_overhead.py [--rounds 5] [--steps 24]

Times, alternately in each round, workloads/mem_leak.py run plainly, under perfstack's memray
backend (native frames, the default) and under it with ``--memray-no-native`` (the runs only:
``--repeat 0``, so perfstack's own reading of the capture is timed apart), and prints the
medians and their ratios to the plain run, then the median time perfstack took to read one
capture. Run it alone on the machine: two profiled runs must never share the CPUs.
"""

from __future__ import annotations

import argparse
import json
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


def _run_wall(cwd: str) -> float:
    """The memray run's own wall time, as the report recorded it."""
    report = json.loads((Path(cwd) / "r.json").read_text())
    return float(next(r["wall_s"] for r in report["run"]["runs"] if r["backend"] == "memray"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=24)
    ns = parser.parse_args()
    workload = [str(ROOT / "workloads/mem_leak.py"), "--steps", str(ns.steps)]
    plain: list[float] = []
    runs: dict[str, list[float]] = {"native": [], "no native": []}
    whole: dict[str, list[float]] = {"native": [], "no native": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(ns.rounds):
            plain.append(_timed([sys.executable, *workload], tmp))
            for label, extra in (("native", []), ("no native", ["--memray-no-native"])):
                whole[label].append(_timed(
                    [sys.executable, "-m", "perfstack", "run", "-q", "--plugins", "memray",
                     *extra, "--repeat", "0", "--warmup", "0", "-o", "r.json", workload[0],
                     "--", *workload[1:]], tmp))
                runs[label].append(_run_wall(tmp))
    base = statistics.median(plain)
    print(f"mem_leak.py --steps {ns.steps}, {ns.rounds} rounds, medians")
    print(f"  python script.py               {base:6.2f} s")
    for label in runs:
        run, total = statistics.median(runs[label]), statistics.median(whole[label])
        print(f"  memray run ({label:9s})       {run:6.2f} s   {run / base:.2f}x;  the whole "
              f"perfstack run {total:.2f} s (reading the capture: {total - run:.2f} s)")


if __name__ == "__main__":
    main()
