"""The test suite's time, per file, as pytest measures it: where the five minutes go.

    .venv/bin/python bench/suite_time.py [PYTEST ARGS...]

Runs the whole suite once (alone on the machine: a second job on 2 CPUs is exactly what
slows the tests that start real runs), with every test's setup, call and teardown timed
(``--durations=0``), and prints each file's seconds, its share of the summed test time and
its slowest test, the largest first, then the suite's wall time. A session fixture's real
run is charged to the first test that uses it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: A line of pytest's durations report: '12.34s call     tests/test_x.py::test_y[param]'
LINE = re.compile(r"^(?P<s>\d+(?:\.\d+)?)s\s+(?P<phase>setup|call|teardown)\s+"
                  r"(?P<file>[^:\s]+)::(?P<test>\S+)")


def main() -> None:
    """Run the suite and print its time per file."""
    began = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--durations=0", "--durations-min=0", *sys.argv[1:]],
                          cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - began
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
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
