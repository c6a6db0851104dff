"""What a default `perfstack run` spends beyond running the workload, and py-spy's cost.

    .venv/bin/python bench/session_cost.py processing [--rounds 3]
        [--workload workloads/tiny_mlp.py]
    .venv/bin/python bench/session_cost.py pyspy [--rounds 6] [--workload 'SCRIPT ARGS']

``processing``: a default session (every available backend) of the workload, timed from the
outside; its report gives each run's wall time and each backend's ``collect_s``. Printed per
round and as medians: the session's wall time, the sum of its runs' wall times, perfstack's
processing (the rest: start-up, environment, spawning, collecting, assembling, writing) as a
share of the runs' time, and each backend's collect time.

``pyspy``: sessions with only the pyspy backend, alternately with its GIL pass in a run of its
own (``--pyspy-gil-run``) and beside the main sampler (the default); the overhead ratio each
report states for py-spy's run, medians of the rounds, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from timing import perfstack_command, spread

ROOT = Path(__file__).resolve().parent.parent


def _session(args: list[str], cwd: Path) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    subprocess.run([perfstack_command(), "run", "-q", "-o", "r.json", *args],
                   cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    report: dict[str, Any] = json.loads((cwd / "r.json").read_text())
    return wall, report


def _workload(text: str) -> list[str]:
    """'script.py ARGS' -> the script's path and '--' ARGS, as perfstack run takes them."""
    import shlex

    script, *args = shlex.split(text)
    return [str(ROOT / script), *(["--", *args] if args else [])]


def processing(rounds: int, workload: str) -> None:
    """Print the processing share of default sessions."""
    totals, runs, shares = [], [], []
    collect: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            wall, report = _session(_workload(workload), Path(tmp))
            in_runs = sum(r["wall_s"] for r in report["run"]["runs"])
            share = (wall - in_runs) / in_runs
            totals.append(wall)
            runs.append(in_runs)
            shares.append(share)
            for b in report["backends"]:
                if b.get("collect_s") is not None:
                    collect.setdefault(b["name"], []).append(b["collect_s"])
            print(f"round {i + 1}: session {wall:.2f} s, its {len(report['run']['runs'])} runs "
                  f"{in_runs:.2f} s, processing {wall - in_runs:.2f} s ({100 * share:.1f}% of "
                  "the runs)")
    print(f"\nmedians of {rounds}: session {statistics.median(totals):.2f} s, runs "
          f"{statistics.median(runs):.2f} s; processing, a share of each round's runs' time "
          f"(min / median / max): {spread([100 * x for x in shares], '.1f', '%')}")
    for name, values in sorted(collect.items(), key=lambda kv: -statistics.median(kv[1])):
        print(f"  collect {name:<14} {1e3 * statistics.median(values):8.1f} ms")


def pyspy(rounds: int, workload: str) -> None:
    """Print py-spy's stated overhead with the GIL pass in its own run and beside."""
    ratios: dict[str, list[float]] = {"own run": [], "beside": []}
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(rounds):
            for label, extra in (("own run", ["--pyspy-gil-run"]), ("beside", [])):
                _, report = _session(["--plugins", "pyspy", *extra, *_workload(workload)],
                                     Path(tmp))
                entry = next(b for b in report["backends"] if b["name"] == "pyspy")
                ratios[label].append(entry["overhead"]["ratio"])
                print(f"round {i + 1}, GIL pass {label}: stated overhead "
                      f"{entry['overhead']['ratio']:.3f}")
    own, beside = (statistics.median(ratios[k]) for k in ("own run", "beside"))
    per_round = [b / o for b, o in zip(ratios["beside"], ratios["own run"], strict=True)]
    print(f"\nmedians of {rounds}: GIL pass in its own run {own:.3f}, beside the main "
          f"sampler {beside:.3f}; beside / own run within each round (min / median / max): "
          f"{spread(per_round, '.3f')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("processing", "pyspy"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workload", default="workloads/tiny_mlp.py",
                        help="the script and its arguments, quoted as one")
    args = parser.parse_args()
    (processing if args.what == "processing" else pyspy)(args.rounds, args.workload)


if __name__ == "__main__":
    main()
