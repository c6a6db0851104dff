"""Each out-of-process backend's cost: against plain runs, and against the same tool by hand.

    .venv/bin/python bench/out_of_process.py [--rounds 3]
    .venv/bin/python bench/out_of_process.py --pyspy [--rounds 10]

For each workload: the script run plainly; under `perf stat`, `perf record` and `py-spy record`
run by hand; and under perfstack's perf, perftop and pyspy backends (each backend's own run's
wall time, from the report). Interleaved round by round; medians and ratios.

With ``--pyspy``, py-spy alone on tiny_mlp, as the issue measures it: the stated overhead of
perfstack's pyspy run (its wall time over the median of the session's baseline runs, as the
report states it), by default (the GIL pass and the wait pass beside the main sampler),
with ``--pyspy-no-gil`` (no GIL pass) and with ``--pyspy-wait-rate 0`` (no wait pass),
against py-spy by hand: ``py-spy record --nonblocking -- python ...`` (py-spy starts the
workload) and ``py-spy record --pid`` attached to a workload just
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

from timing import perfstack_command, spread

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
        stated: dict[str, list[float]] = {"default": [], "--pyspy-no-gil": [],
                                          "--pyspy-wait-rate 0": []}
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
            stated["--pyspy-wait-rate 0"].append(_stated(
                work, argv, ["--repeat", "3", "--pyspy-wait-rate", "0"], f"w{i}.json"))
        plain = walls["plain"]
        print(f"tiny_mlp --num-batches 300, {rounds} rounds interleaved; medians; ratios "
              "within each round: min / median / max")
        print(f"  plain run                      {statistics.median(plain):7.3f} s")
        hands = {}
        for name in ("by hand", "by hand, --pid"):
            hands[name] = _over(walls[name], plain)
            print(f"  py-spy {name:<23} {statistics.median(walls[name]):7.3f} s  overhead "
                  f"{spread(hands[name], '.3f')}")
        for name, values in stated.items():
            print(f"  perfstack pyspy, {name:<19} stated overhead {spread(values, '.3f')}  vs "
                  f"by hand {spread(_over(values, hands['by hand']), '.3f')}, vs --pid "
                  f"{spread(_over(values, hands['by hand, --pid']), '.3f')}")


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
                order = [*by_hand, "perfstack"]
                for name in order if i % 2 == 0 else reversed(order):  # alternated
                    if name in by_hand:
                        times[name].append(_timed(by_hand[name], work))
                        continue
                    report = work / f"r{i}.json"
                    subprocess.run([perfstack_command(), "run", "-q", "--plugins",
                                    "perf,perftop,pyspy", "--repeat", "1", "--warmup", "0",
                                    "-o", str(report), argv[0], "--", *argv[1:]], cwd=work,
                                   check=True, stderr=subprocess.DEVNULL)
                    runs = {r["id"]: r for r in json.loads(report.read_text())["run"]["runs"]}
                    for backend in ours:
                        ours[backend].append(runs[backend]["wall_s"])
            plain = times["plain"]
            print(f"\n{label} (n={rounds}; medians; ratios within each round: min / median / "
                  "max)")
            for name, values in times.items():
                print(f"  {name:<28} {statistics.median(values):7.3f} s  "
                      f"{spread(_over(values, plain))} plain")
            for backend, hand in (("perf", "perf stat by hand"),
                                  ("perftop", "perf record by hand"),
                                  ("pyspy", "py-spy record by hand")):
                print(f"  perfstack {backend:<18} {statistics.median(ours[backend]):7.3f} s  "
                      f"{spread(_over(ours[backend], plain))} plain, vs by hand "
                      f"{spread(_over(ours[backend], times[hand]), '.3f')}")


def _over(values: list[float], reference: list[float]) -> list[float]:
    """Each round's value over the reference's in the same round."""
    return [v / r for v, r in zip(values, reference, strict=True)]


if __name__ == "__main__":
    main()
