"""The test suite's time, per file, as pytest measures it: where the five minutes go.

    .venv/bin/python bench/suite_time.py [PYTEST ARGS...]

Runs the whole suite once (alone on the machine: its two workers take the machine's two
CPUs), with every test's setup, call and teardown timed (``--durations=0``), and prints each
file's seconds, its share of the summed test time and its slowest test, the largest first,
then the suite's wall time and each worker's lane (tests/lanes.py): the seconds its tests held
their CPU, the seconds they waited for one, and the seconds of tests that ran alone on every
CPU. A shared run is charged to the first test that uses it (one made before the first test,
tests/conftest.py's ``EARLY``, to none: it is the first test's start).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: A line of pytest's durations report: '12.34s call     tests/test_x.py::test_y[param]'
LINE = re.compile(r"^(?P<s>\d+(?:\.\d+)?)s\s+(?P<phase>setup|call|teardown)\s+"
                  r"(?P<file>[^:\s]+)::(?P<test>\S+)")


def main() -> None:
    """Run the suite and print its time per file."""
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "lanes.jsonl"
        began = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               "--durations=0", "--durations-min=0", *sys.argv[1:]],
                              cwd=ROOT, capture_output=True, text=True, check=False,
                              env={**os.environ, "PERFSTACK_LANES_LOG": str(log)})
        wall = time.perf_counter() - began
        lanes = [json.loads(line) for line in log.read_text().splitlines()] \
            if log.exists() else []
    per_file: dict[str, float] = defaultdict(float)
    slowest: dict[str, tuple[float, str]] = {}
    for line in done.stdout.splitlines():
        found = LINE.match(line.strip())
        if found is None:
            continue
        seconds, file = float(found["s"]), found["file"]
        per_file[file] += seconds
        if file not in slowest or seconds > slowest[file][0]:
            slowest[file] = (seconds, f"{found['test']} ({found['phase']})")
    total = sum(per_file.values()) or 1.0
    print(f"{'file':<34} {'seconds':>8} {'share':>6}  slowest test")
    for file, seconds in sorted(per_file.items(), key=lambda kv: -kv[1]):
        top_s, top = slowest[file]
        print(f"{file:<34} {seconds:8.1f} {100 * seconds / total:5.1f}%  {top_s:.1f} s {top}")
    summary = next((ln for ln in reversed(done.stdout.splitlines()) if " in " in ln), "")
    print(f"\nsuite wall time {wall:.0f} s (tests summed {total:.0f} s); pytest: "
          f"{summary.strip('= ')}")
    workers: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for test in lanes:
        w = workers[test["worker"]]
        w["tests"] += 1
        w["held"] += test["held_s"]
        w["waited"] += test["waited_s"]
        if len(test["cpus"]) > 1:
            w["alone"] += test["held_s"]
    for name, w in sorted(workers.items()):
        print(f"{name}: {w['tests']:.0f} tests held a CPU {w['held']:.0f} s, waited "
              f"{w['waited']:.0f} s; {w['alone']:.0f} s of them alone on every CPU")
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
