"""Whether the report's figures depend on the sampler running first.

    .venv/bin/python bench/answer_order.py [--rounds 5] [--workload 'workloads/tiny_mlp.py']
        [--plugins pyspy]

The default ``perfstack run`` makes the sampler's run first (its answer after one run of the
workload), then the warm-up and the baseline runs, then the other backends;
``--baseline-first`` makes the warm-up and the baseline first, as every run did before. This
times both orders of the installed ``perfstack run --plugins pyspy`` (one warm-up, three
baseline runs and py-spy's run, the README's workload), side by side, each round's order
reversed from the last, and prints from each report: the baseline's median wall time, its
spread (max - min over median), and py-spy's overhead; then, round by round, the ratio of
the two orders' baseline medians and the difference of their py-spy overheads (min,
median, max). Run it alone on the machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from timing import add_workload, perfstack_command, workload_of

ROOT = Path(__file__).resolve().parent.parent


def _figures(report: dict[str, object]) -> tuple[float, float, float]:
    """(baseline median wall s, baseline spread, the backend's overhead) of one report."""
    runs = report["run"]["runs"]  # type: ignore[index]
    walls = [r["wall_s"] for r in runs if r["role"] == "baseline"]
    [spy] = report["backends"]  # type: ignore[misc]
    median = statistics.median(walls)
    return median, (max(walls) - min(walls)) / median, float(spy["overhead"]["ratio"]) - 1


def _spread(values: list[float], fmt: str) -> str:
    return "  ".join(format(v, fmt) for v in (min(values), statistics.median(values),
                                              max(values)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    add_workload(parser)
    parser.add_argument("--plugins", default="pyspy",
                        help="the sampler whose place in the order changes")
    ns = parser.parse_args()
    script, args = workload_of(ns)
    orders = {"sampler first (default)": [], "--baseline-first": ["--baseline-first"]}
    figures: dict[str, list[tuple[float, float, float]]] = {name: [] for name in orders}
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(ns.rounds):
            for name in (list(orders) if n % 2 == 0 else list(reversed(orders))):
                out = Path(tmp) / "report.json"
                argv = [perfstack_command(), "run", "--plugins", ns.plugins, *orders[name],
                        "-q", "-o", str(out), script, "--", *args]
                proc = subprocess.run(argv, cwd=tmp, capture_output=True, text=True)
                if proc.returncode != 0:
                    raise SystemExit(f"{' '.join(argv)}: exit {proc.returncode}: "
                                     f"{proc.stderr.strip()[-300:]}")
                figures[name].append(_figures(json.loads(out.read_text("utf-8"))))
                out.unlink()
    print(f"{ns.workload}, --plugins {ns.plugins}, {ns.rounds} rounds (min, median, max)")
    for name, rows in figures.items():
        print(f"  {name:<24} baseline median {_spread([r[0] for r in rows], '6.3f')} s   "
              f"spread {_spread([r[1] * 100 for r in rows], '5.1f')} %   "
              f"{ns.plugins} overhead {_spread([r[2] * 100 for r in rows], '+6.1f')} %")
    first, before = (figures[name] for name in orders)
    print("  round by round: baseline median, sampler first / baseline first  "
          f"{_spread([a[0] / b[0] for a, b in zip(first, before, strict=True)], '6.3f')}")
    print(f"  round by round: {ns.plugins} overhead, sampler first - baseline first  "
          f"{_spread([(a[2] - b[2]) * 100 for a, b in zip(first, before, strict=True)], '+6.1f')}"
          " points")


if __name__ == "__main__":
    sys.exit(main())
