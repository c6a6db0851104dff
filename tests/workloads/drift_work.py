"""Fixed pure-Python work for the drift and A/B tests (about 0.4 s, no torch: quick to start).

Each step runs ``fixed_part`` and ``grown_part`` equally. ``--more`` (drift_work_more.py for
``perfstack ab``) does 30% more work in all, every bit of it in ``grown_part``, so a comparison
must name that function and nothing else.
"""

import argparse
import time

import perfstack

UNIT = 20_000


def fixed_part(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def grown_part(n: int) -> int:
    total = 0
    for i in range(n):
        total += i * i % 7
    return total


def main(more: bool, steps: int) -> None:
    grown = int(UNIT * 1.6) if more else UNIT  # (1 + 1.6) / (1 + 1) = 1.3x the work
    start = time.perf_counter()
    for _ in range(steps):
        fixed_part(UNIT)
        grown_part(grown)
        perfstack.step()
    perfstack.report_metric("throughput", steps / (time.perf_counter() - start), "steps/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--more", action="store_true")
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args()
    main(args.more, args.steps)
