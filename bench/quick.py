"""How soon ``perfstack run --quick`` answers, against the workload's own time.

    .venv/bin/python bench/quick.py [--rounds 5] [--batches 40]

Times, alternately in each round, tiny_mlp run plainly and under ``perfstack run --quick``
(the py-spy run first, its answer said on stderr as soon as it is in, then one baseline run
and the report), and prints the medians: when the answer came and when the whole report
did, each as a ratio to the workload's own time. The target is 2x or less for the answer:
one run of the workload under py-spy and perfstack's own start-up and reading.
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


def _answered(argv: list[str], cwd: str) -> tuple[float, float]:
    """Seconds until stderr says the answer so far, and until the command ended."""
    start = time.perf_counter()
    answer = None
    with subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True) as proc:
        assert proc.stderr is not None
        for line in proc.stderr:
            if answer is None and "so far (" in line:
                answer = time.perf_counter() - start
    total = time.perf_counter() - start
    if proc.returncode != 0 or answer is None:
        raise SystemExit(f"perfstack run --quick: exit {proc.returncode}, answer {answer}")
    return answer, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--batches", type=int, default=40)
    ns = parser.parse_args()
    workload = [str(ROOT / "workloads/tiny_mlp.py"), "--num-batches", str(ns.batches)]
    plain, answers, reports = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(ns.rounds):
            plain.append(_timed([sys.executable, *workload], tmp))
            answer, total = _answered([sys.executable, "-m", "perfstack", "run", "--quick",
                                       workload[0], "--", *workload[1:]], tmp)
            answers.append(answer)
            reports.append(total)
    a = statistics.median(plain)
    b, c = statistics.median(answers), statistics.median(reports)
    print(f"tiny_mlp --num-batches {ns.batches}, {ns.rounds} rounds, medians")
    print(f"  python script.py                  {a:6.2f} s")
    print(f"  perfstack run --quick, answer     {b:6.2f} s   {b / a:.2f}x the workload's own time")
    print(f"  perfstack run --quick, report     {c:6.2f} s   {c / a:.2f}x")


if __name__ == "__main__":
    main()
