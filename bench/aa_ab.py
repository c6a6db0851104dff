"""False positives and false negatives of perfstack's comparisons, on this machine.

    .venv/bin/python bench/aa_ab.py [--aa 20] [--ab 10] [--repeat 7] [--modes ab,sessions]

A/A: the same workload compared with itself (tests/workloads/ab_work.py); any regression or
improvement of a speed metric (wall_time, throughput) is a false positive. A/B: the same with
30% more matrix products in one function (ab_work_b.py); a throughput that is not called a
regression is a false negative. Two modes:

- ``ab``: one ``perfstack ab`` session per comparison (runs interleaved, paired test);
- ``sessions``: two separate ``perfstack run`` sessions per comparison, then ``perfstack
  diff`` (between-session noise and the machine-speed probe).

Run it alone on the machine: a second profiled job on 2 CPUs is exactly the drift measured.
It prints the rates and, per comparison, the changes and the machine's drift.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from timing import perfstack_command

ROOT = Path(__file__).resolve().parent.parent
A = ROOT / "tests/workloads/ab_work.py"
B = ROOT / "tests/workloads/ab_work_b.py"
SPEED = ("wall_time", "throughput")


def _perfstack(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([perfstack_command(), *args], cwd=cwd,
                          capture_output=True, text=True, check=False)


def _compare_ab(cwd: Path, base: Path, new: Path, repeat: int) -> dict[str, Any]:
    proc = _perfstack(cwd, "ab", "--plugins", "resources", "--repeat", str(repeat),
                      "--format", "json", str(base), str(new))
    if proc.returncode not in (0, 1):
        raise SystemExit(f"perfstack ab failed: {proc.stderr[-2000:]}")
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def _compare_sessions(cwd: Path, base: Path, new: Path, repeat: int,
                      n: int) -> dict[str, Any]:
    paths = []
    for side, script in (("a", base), ("b", new)):
        out = cwd / f"{n}-{side}.json"
        proc = _perfstack(cwd, "run", "-q", "--plugins", "resources", "--repeat", str(repeat),
                          "-o", str(out), str(script))
        if proc.returncode != 0:
            raise SystemExit(f"perfstack run failed: {proc.stderr[-2000:]}")
        paths.append(out)
    proc = _perfstack(cwd, "diff", "--format", "json", str(paths[0]), str(paths[1]))
    if proc.returncode != 0:
        raise SystemExit(f"perfstack diff failed: {proc.stderr[-2000:]}")
    data: dict[str, Any] = json.loads(proc.stdout)
    return data


def _speed(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in data["metrics"] if m["name"] in SPEED}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--aa", type=int, default=20, help="A/A comparisons per mode")
    parser.add_argument("--ab", type=int, default=10, help="A/B comparisons per mode")
    parser.add_argument("--repeat", type=int, default=7,
                        help="baseline runs (pairs) per side (default: perfstack ab's, 7)")
    parser.add_argument("--modes", default="ab,sessions")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="perfstack-aa-ab-") as tmp:
        cwd = Path(tmp)
        for mode in args.modes.split(","):
            false_pos = false_neg = 0
            print(f"\nmode {mode}: {args.aa} A/A and {args.ab} A/B comparisons, "
                  f"{args.repeat} runs a side")
            plan = [("A/A", A, A)] * args.aa + [("A/B", A, B)] * args.ab
            for n, (kind, base, new) in enumerate(plan):
                if mode == "ab":
                    data = _compare_ab(cwd, base, new, args.repeat)
                else:
                    data = _compare_sessions(cwd, base, new, args.repeat, n)
                speed = _speed(data)
                flagged = [m["name"] for m in speed.values()
                           if m["verdict"] in ("regression", "improvement")]
                if kind == "A/A" and flagged:
                    false_pos += 1
                if kind == "A/B" and speed["throughput"]["verdict"] != "regression":
                    false_neg += 1
                cells = "  ".join(
                    f"{name} {100 * (m['change'] or 0):+6.1f}% {m['verdict']:<12}"
                    for name, m in sorted(speed.items()))
                drift = data["machine"]["change"]
                drift_text = "  n/a" if drift is None else f"{100 * drift:+5.1f}%"
                print(f"  {kind} {n + 1:2d}: {cells}  machine {drift_text}", flush=True)
            print(f"mode {mode}: false positives {false_pos} of {args.aa} (A/A), "
                  f"false negatives {false_neg} of {args.ab} (A/B, 30% more work)")


if __name__ == "__main__":
    main()
