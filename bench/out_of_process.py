"""Each out-of-process backend's cost: against plain runs, and against the same tool by hand.

    .venv/bin/python bench/out_of_process.py [--rounds 3]
    .venv/bin/python bench/out_of_process.py --pyspy [--rounds 10]

For each workload: the script run plainly; under `perf stat`, `perf record` and `py-spy record`
run by hand; and under perfstack's perf, perftop and pyspy backends (each backend's own run's
wall time, from the report). Interleaved round by round; medians and ratios.

With ``--pyspy``, py-spy alone on tiny_mlp, as the issue measures it: the stated overhead of
perfstack's pyspy run (its wall time over the median of the session's baseline runs, as the
report states it), by default (the GIL pass beside the main sampler) and with
``--pyspy-no-gil`` (one sampler), against py-spy by hand: ``py-spy record --nonblocking -- python
...`` (py-spy starts the workload) and ``py-spy record --pid`` attached to a workload just
started (as perfstack attaches), each over the plain run's wall time.
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

from timing import perfstack_command

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


def _attached(argv: list[str], out: str) -> float:
    """Wall time of the workload with py-spy attached to its pid as it starts."""
    start = time.perf_counter()
    proc = subprocess.Popen([PY, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    spy = subprocess.Popen([PYSPY, "record", "--nonblocking", "--function", "--format",
                            "speedscope", "--rate", "250", "--pid", str(proc.pid), "-o", out],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    proc.wait()
    wall = time.perf_counter() - start
    spy.wait()
    return wall


def _stated(work: Path, argv: list[str], extra: list[str], name: str) -> float:
    """The pyspy run's overhead as the report states it: its wall over the baselines'."""
    report = work / name
    subprocess.run([perfstack_command(), "run", "-q", "--plugins", "pyspy", "--warmup", "0",
                    *extra, "-o", str(report), argv[0], "--", *argv[1:]], cwd=work, check=True,
                   stderr=subprocess.DEVNULL)
    runs = json.loads(report.read_text())["run"]["runs"]
    base = statistics.median(r["wall_s"] for r in runs if r["id"].startswith("baseline"))
    return float(next(r["wall_s"] for r in runs if r["id"] == "pyspy")) / base


def pyspy(rounds: int) -> None:
    """py-spy's stated overhead against py-spy by hand (``--pyspy``)."""
    argv = WORKLOADS["tiny_mlp.py --num-batches 300 (torch)"]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        walls: dict[str, list[float]] = {"plain": [], "by hand": [], "by hand, --pid": []}
        stated: dict[str, list[float]] = {"default": [], "--pyspy-no-gil": []}
        for i in range(rounds):
            walls["plain"].append(_timed([PY, *argv], work))
            walls["by hand"].append(_timed(
                [PYSPY, "record", "--nonblocking", "--function", "--format", "speedscope",
                 "--rate", "250", "-o", f"{tmp}/s.json", "--", PY, *argv], work))
            walls["by hand, --pid"].append(_attached(argv, f"{tmp}/p.json"))
            stated["default"].append(_stated(work, argv, ["--repeat", "3"], f"d{i}.json"))
            stated["--pyspy-no-gil"].append(_stated(work, argv, ["--repeat", "3",
                                                                 "--pyspy-no-gil"],
                                                    f"n{i}.json"))
        plain = statistics.median(walls["plain"])
        print(f"tiny_mlp --num-batches 300, {rounds} rounds interleaved, medians")
        print(f"  plain run                      {plain:7.3f} s")
        hands = {}
        for name in ("by hand", "by hand, --pid"):
            hands[name] = statistics.median(walls[name]) / plain
            print(f"  py-spy {name:<23} {statistics.median(walls[name]):7.3f} s  overhead "
                  f"{hands[name]:.3f}x")
        for name, values in stated.items():
            med = statistics.median(values)
            print(f"  perfstack pyspy, {name:<14} stated overhead {med:.3f}x  vs by hand "
                  f"{med / hands['by hand']:.3f}x, vs --pid {med / hands['by hand, --pid']:.3f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pyspy", action="store_true",
                        help="py-spy alone: the stated overhead against py-spy by hand")
    args = parser.parse_args()
    rounds = args.rounds
    if args.pyspy:
        pyspy(rounds)
        return
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
                subprocess.run([perfstack_command(), "run", "-q", "--plugins",
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
