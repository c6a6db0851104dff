"""How often the verdicts the tests assert on recorded runs hold on live runs, on this machine.

    .venv/bin/python bench/live_verdicts.py [--rounds 5] [--only split,sweep,gil,drift]

The test suite judges these verdicts on recorded reports or measured figures
(tests/fixtures/reports/README.md), since on one live run each is a matter of chance; this
script repeats the live runs and counts:

- split: py-spy's interpreter and native shares of split_60_40.py within 5 points of the
  workload's own timing (tests/test_budget.py);
- sweep: omp_matmul at 2 OpenMP threads beats 1 beyond noise (tests/test_sweep.py);
- gil: the three thread-sweep verdicts (gil.bound, gil.io-bound, gil.releases) and the
  free-threaded speed-up of gil_cpu above 1.4 (tests/test_gil.py; needs the free-threaded
  CPython of scripts/build-free-threaded.sh);
- drift: the same workload on a machine made busy by two CPU-bound processes is not called a
  regression, and 30% more work is, alone and busy (tests/test_ab.py).

Run it alone on the machine (the drift case makes its own load). It prints one line per round
and a count per verdict.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from timing import perfstack_command

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests/workloads"


def _perfstack(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([perfstack_command(), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)


def _metrics(report: dict[str, Any]) -> dict[str, Any]:
    return {m["name"]: m["value"] for m in report["metrics"]}


def split(cwd: Path) -> dict[str, bool]:
    """py-spy's split of split_60_40.py against the workload's own timing."""
    proc = _perfstack(cwd, "run", "-q", "--repeat", "1", "--warmup", "0", "--plugins",
                      "pyspy,perftop", "--pyspy-rate", "1000", "-o", "split.json",
                      str(TESTS / "split_60_40.py"), "--", "--steps", "60")
    report = json.loads((cwd / "split.json").read_text())
    run = next(r for r in report["run"]["runs"] if r["backend"] == "pyspy")
    truth = re.search(r"python ([\d.]+) s, torch ([\d.]+) s", run["stdout_tail"])
    if proc.returncode != 0 or truth is None:
        return {"split within 5 points": False}
    m = _metrics(report)
    python = 100 * float(truth[1]) / run["wall_s"]
    torch = 100 * float(truth[2]) / run["wall_s"]
    return {"split within 5 points": abs(m["budget.interpreter"] - python) <= 5
            and abs(m["budget.native"] - torch) <= 5}


def sweep(cwd: Path) -> dict[str, bool]:
    """omp_matmul at 1 and 2 OpenMP threads, 3 runs each."""
    _perfstack(cwd, "sweep", "--env", "OMP_NUM_THREADS=1,2", "--repeat", "3", "--warmup", "0",
               "-o", "sweep.json", str(TESTS / "omp_matmul.py"))
    best = json.loads((cwd / "sweep.json").read_text()).get("best") or {}
    return {"2 threads beat 1 beyond noise": best.get("env") == {"OMP_NUM_THREADS": "2"}
            and bool(best.get("significant"))}


def gil(cwd: Path) -> dict[str, bool]:
    """The three GIL workloads, with the free-threaded interpreter beside."""
    ft = subprocess.run([str(ROOT / "scripts/build-free-threaded.sh")], capture_output=True,
                        text=True, check=True).stdout.strip().splitlines()[-1]
    out: dict[str, bool] = {}
    for workload, rule in (("gil_cpu", "gil.bound"), ("gil_io", "gil.io-bound"),
                           ("gil_torch", "gil.releases")):
        _perfstack(cwd, "run", "-q", "--repeat", "1", "--warmup", "0", "--plugins", "gil",
                   "--gil-python", ft, "-o", f"{workload}.json",
                   str(ROOT / "workloads" / f"{workload}.py"))
        report = json.loads((cwd / f"{workload}.json").read_text())
        rules = [f["rule"] for f in report["findings"] if f["rule"].startswith("gil.")]
        out[f"{workload}: {rule}"] = rules == [rule]
        if workload == "gil_cpu":
            out["gil_cpu: free-threaded speed-up > 1.4"] = _metrics(report).get(
                "thread_speedup_free_threaded", 0) > 1.4
    return out


@contextlib.contextmanager
def _busy() -> Iterator[None]:
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"],
                             start_new_session=True) for _ in range(2)]
    try:
        yield
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def drift(cwd: Path) -> dict[str, bool]:
    """Four sessions on one CPU, two of them beside a competing load, as recorded."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    try:
        def session(name: str, script: str) -> None:
            _perfstack(cwd, "run", "--plugins", "resources", "--repeat", "3", "--warmup", "0",
                       "-q", "-o", f"{name}.json", str(TESTS / script), "--", "--steps", "600")

        session("a", "drift_work.py")
        with _busy():
            session("b", "drift_work.py")
            session("c", "drift_work_more.py")
        session("d", "drift_work_more.py")
    finally:
        os.sched_setaffinity(0, before)

    def throughput(new: str) -> str:
        data = json.loads(_perfstack(cwd, "diff", "a.json", f"{new}.json", "--format", "json",
                                     "--force").stdout)
        return str(next(m["verdict"] for m in data["metrics"] if m["name"] == "throughput"))

    return {"busy machine is no regression": throughput("b") not in ("regression",
                                                                      "improvement"),
            "30% more work, busy: regression": throughput("c") == "regression",
            "30% more work, alone: regression": throughput("d") == "regression"}


CASES: dict[str, Callable[[Path], dict[str, bool]]] = {
    "split": split, "sweep": sweep, "gil": gil, "drift": drift}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--only", default=",".join(CASES))
    args = parser.parse_args()
    totals: dict[str, list[bool]] = {}
    for round_ in range(1, args.rounds + 1):
        for name in args.only.split(","):
            with tempfile.TemporaryDirectory() as folder:
                got = CASES[name](Path(folder))
            for verdict, ok in got.items():
                totals.setdefault(verdict, []).append(ok)
            print(f"round {round_} {name}: " + ", ".join(
                f"{k} {'yes' if v else 'NO'}" for k, v in got.items()), flush=True)
    print()
    for verdict, outcomes in totals.items():
        print(f"{sum(outcomes):3d} of {len(outcomes):3d}  {verdict}")


if __name__ == "__main__":
    main()
