"""Each out-of-process backend's cost: against plain runs, and against the same tool by hand.

    .venv/bin/python bench/out_of_process.py [--rounds 3]

For each workload: the script run plainly; under `perf stat`, `perf record` and `py-spy record`
run by hand; and under perfstack's perf, perftop and pyspy backends (each backend's own run's
wall time, from the report). Interleaved round by round; medians and ratios.
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
PY = sys.executable
PYSPY = str(Path(PY).parent / "py-spy")
EVENTS = ("cycles,instructions,branches,branch-misses,cache-references,cache-misses,"
          "L1-dcache-load-misses,LLC-load-misses,task-clock,context-switches,cpu-migrations,"
          "page-faults")
WORKLOADS = {
    "split_3_to_1.py (pure Python)": [str(ROOT / "tests/workloads/split_3_to_1.py")],
    "tiny_mlp.py --num-batches 300 (torch)": [str(ROOT / "workloads/tiny_mlp.py"),
                                              "--num-batches", "300"],
}


def _timed(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for label, argv in WORKLOADS.items():
            by_hand = {
                "plain": [PY, *argv],
                "perf stat by hand": ["perf", "stat", "-x,", "-o", f"{tmp}/s.csv", "-e", EVENTS,
                                      "--", PY, *argv],
                "perf record by hand": ["perf", "record", "-q", "-e", "cpu-clock", "-F", "999",
                                        "--call-graph", "fp", "-o", f"{tmp}/p.data", "--", PY,
                                        *argv],
                "py-spy record by hand": [PYSPY, "record", "--nonblocking", "--function",
                                          "--format", "speedscope", "--rate", "250", "-o",
                                          f"{tmp}/s.json", "--", PY, *argv],
            }
            times: dict[str, list[float]] = {k: [] for k in by_hand}
            ours: dict[str, list[float]] = {"perf": [], "perftop": [], "pyspy": []}
            for i in range(rounds):
                for name, cmd in by_hand.items():
                    times[name].append(_timed(cmd, work))
                report = work / f"r{i}.json"
                subprocess.run([PY, "-m", "perfstack", "run", "-q", "--plugins",
                                "perf,perftop,pyspy", "--repeat", "1", "--warmup", "0", "-o",
                                str(report), argv[0], "--", *argv[1:]], cwd=work, check=True,
                               stderr=subprocess.DEVNULL)
                runs = {r["id"]: r for r in json.loads(report.read_text())["run"]["runs"]}
                for backend in ours:
                    ours[backend].append(runs[backend]["wall_s"])
            plain = statistics.median(times["plain"])
            print(f"\n{label} (n={rounds}, medians, ratio to plain)")
            for name, values in times.items():
                med = statistics.median(values)
                print(f"  {name:<28} {med:7.3f} s  {med / plain:5.2f}x")
            for backend, hand in (("perf", "perf stat by hand"),
                                  ("perftop", "perf record by hand"),
                                  ("pyspy", "py-spy record by hand")):
                med = statistics.median(ours[backend])
                ref = statistics.median(times[hand])
                print(f"  perfstack {backend:<18} {med:7.3f} s  {med / plain:5.2f}x   "
                      f"vs by hand {med / ref:5.3f}x")


if __name__ == "__main__":
    main()
