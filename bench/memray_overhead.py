"""What memray costs a run, with and without native frames: perfstack's memray backend
against ``memray run`` by hand and against the workload alone.

    .venv/bin/python bench/memray_overhead.py [--rounds 3] [--steps 24]

Each round times, side by side and in an order reversed from the round before,
workloads/mem_leak.py run plainly; under ``python -m memray run --native`` and ``python -m
memray run`` by hand (memray's own cost); and under the installed ``perfstack run --plugins
memray`` with native frames (the default) and with ``--memray-no-native`` (``--repeat 0``: the
memray run's own wall time is read from the report, and perfstack's reading of the capture is
the rest of the command's time). perfstack's tracker takes a memory snapshot every 2 ms
(``memray run``: 10 ms), so that a step's low point has two. Prints, for each, the ratio to
the plain run and, for perfstack's runs, to ``memray run`` by hand, both taken within each
round (min, median, max). Run it alone on the machine: two profiled runs must never share
the CPUs.
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


def _timed(argv: list[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def _run_wall(path: Path) -> float:
    """The memray run's own wall time, as the report recorded it."""
    report = json.loads(path.read_text())
    return float(next(r["wall_s"] for r in report["run"]["runs"] if r["backend"] == "memray"))


def _spread(values: list[float]) -> str:
    return f"{min(values):5.2f}x {statistics.median(values):5.2f}x {max(values):5.2f}x"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=24)
    ns = parser.parse_args()
    script = str(ROOT / "workloads/mem_leak.py")
    args = ["--steps", str(ns.steps)]
    py, perfstack = sys.executable, perfstack_command()
    sides = {
        "python script.py": [py, script, *args],
        "memray run --native": [py, "-m", "memray", "run", "--native", "-f", "-o",
                                "native.bin", script, *args],
        "memray run": [py, "-m", "memray", "run", "-f", "-o", "plain.bin", script, *args],
        "perfstack memray": [perfstack, "run", "-q", "--plugins", "memray", "--repeat", "0",
                             "--warmup", "0", "-o", "native.json", script, "--", *args],
        "perfstack memray, no native": [perfstack, "run", "-q", "--plugins", "memray",
                                        "--memray-no-native", "--repeat", "0", "--warmup",
                                        "0", "-o", "plain.json", script, "--", *args],
    }
    own_run = {"perfstack memray": "native.json", "perfstack memray, no native": "plain.json"}
    by_hand = {"perfstack memray": "memray run --native",
               "perfstack memray, no native": "memray run"}
    walls: dict[str, list[float]] = {name: [] for name in sides}
    reading: dict[str, list[float]] = {name: [] for name in own_run}
    names = list(sides)
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(ns.rounds):
            for name in names if n % 2 == 0 else reversed(names):
                took = _timed(sides[name], tmp)
                if name in own_run:  # the memray run alone; the rest is reading the capture
                    run = _run_wall(Path(tmp) / own_run[name])
                    reading[name].append(took - run)
                    took = run
                walls[name].append(took)
    plain = walls["python script.py"]
    print(f"mem_leak.py --steps {ns.steps}, {ns.rounds} rounds; ratios taken within each "
          "round (min, median, max)")
    print(f"  python script.py               {statistics.median(plain):6.2f} s (median)")
    for name in names[1:]:
        over = [w / p for w, p in zip(walls[name], plain, strict=True)]
        line = (f"  {name:<29} {statistics.median(walls[name]):6.2f} s  / plain "
                f"{_spread(over)}")
        if name in by_hand:
            hand = [w / h for w, h in zip(walls[name], walls[by_hand[name]], strict=True)]
            line += (f"  / {by_hand[name]} {_spread(hand)}; reading the capture "
                     f"{statistics.median(reading[name]):.2f} s")
        print(line)


if __name__ == "__main__":
    main()
